package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// The hand-written decoders of the hot bodies (json_fast.go) against the
// reflective one (decodeReader), their oracle: wherever a fast decoder
// takes a body, the reflective decoder takes it too, with the same
// values; wherever the reflective decoder refuses one, the fast decoder
// gives up (and the handler answers with the reflective decoder's
// error). `go test` runs the seeds below; `go test ./web -run '^$' -fuzz
// FuzzFastPush` explores further.

// trickyBodies are bodies where a hand-written decoder is easily wrong:
// what encoding/json takes in ways of its own (case-folded and escaped
// keys, duplicates, null, U+FFFD for invalid UTF-8) and the syntax it
// refuses.
var trickyBodies = []string{
	``, ` `, `{}`, `[]`, `null`, `{"items":null}`, `{"items":[]}`, `{"items":[null]}`, `{"items":[{}]}`,
	`{"items":[{"queue":"q","payload":1}]}`,
	`{"items":[{"queue":"q","payload":1}]} `,
	`{"items":[{"queue":"q","payload":1}]} {}`,
	`{"items":[{"queue":"q","payload":1}]}x`,
	`{"items":[{"queue":"q","payload":1},]}`,
	`{"items":[{"queue":"q","payload":1}],}`,
	`{"items":[{"queue":"q","payload":1,}]}`,
	` { "items" : [ { "queue" : "q" , "payload" : { "a" : [ 1 , 2 ] } } ] } `,
	`{"items":[{"Queue":"q","payload":1}]}`,
	`{"ITEMS":[{"queue":"q","payload":1}]}`,
	`{"\u0069tems":[{"queue":"q","payload":1}]}`,
	`{"items":[{"queue":"q","queue":"r","payload":1}]}`,
	`{"items":[{"queue":"a","partition":"x","payload":1}],"items":[{"queue":"b","payload":2}]}`,
	`{"items":[{"queue":"q","payload":1,"payload":2}]}`,
	`{"items":[{"queue":null,"payload":1}]}`,
	`{"items":[{"queue":"q","payload":null}]}`,
	`{"items":[{"queue":1,"payload":1}]}`,
	`{"items":[{"queue":"q","payload":1,"extra":1}]}`,
	`{"items":[{"queue":"q","payload":1,"producerSub":"someone"}]}`,
	`{"items":[{"producerSub":{"a":[1,null]},"queue":"q","payload":1}]}`,
	`{"items":[{"queue":"q","payload":1,"producerSub":nul}]}`,
	`{"items":[{"queue":"q","payload":1,"ProducerSub":"x"}]}`,
	`{"items":{"queue":"q"}}`,
	`{"items":[{"queue":"q\u00e9","payload":"\ud800"}]}`,
	`{"items":[{"queue":"q\"x","payload":"a\\b"}]}`,
	"{\"items\":[{\"queue\":\"q\xff\",\"payload\":\"\xff\"}]}",
	"{\"items\":[{\"queue\":\"q\x01\",\"payload\":1}]}",
	"{\"items\":[{\"queue\":\"q\",\"payload\":\"\x1f\"}]}",
	`{"items":[{"queue":"q","payload":"\x"}]}`,
	`{"items":[{"queue":"q","payload":"\u12"}]}`,
	`{"items":[{"queue":"q","payload":"\u12g4"}]}`,
	`{"items":[{"queue":"q","payload":01}]}`,
	`{"items":[{"queue":"q","payload":-}]}`,
	`{"items":[{"queue":"q","payload":1.}]}`,
	`{"items":[{"queue":"q","payload":.5}]}`,
	`{"items":[{"queue":"q","payload":1e}]}`,
	`{"items":[{"queue":"q","payload":-0.5E+12}]}`,
	`{"items":[{"queue":"q","payload":+1}]}`,
	`{"items":[{"queue":"q","payload":tru}]}`,
	`{"items":[{"queue":"q","payload":truex}]}`,
	`{"items":[{"queue":"q","payload":[1,2,]}]}`,
	`{"items":[{"queue":"q","payload":{"a":1,}}]}`,
	`{"items":[{"queue":"q","payload":{"a" 1}}]}`,
	`{"items":[{"queue":"q","payload":{1:1}}]}`,
	`{"items":[{"queue":"q","payload":[` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `]}]}`,
	`{"items":[{"queue":"q","payload":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}]}`,
	"\ufeff{\"items\":[]}",
	"{\"items\":[{\"queue\":\"q\",\"payload\":\"\u2028\"}]}",
	`{"acknowledgments":[{"transactionId":"t","partitionId":"p","leaseId":"l","status":"completed"}]}`,
	`{"consumerGroup":"g","acknowledgments":[],"consumerGroup":"h"}`,
	`{"consumerGroup":"g","acknowledgments":[{"transactionId":"t","error":"e\n\u00e9"}]}`,
	`{"acknowledgments":[{"transactionId":"a","status":"failed"}],"acknowledgments":[{"transactionId":"b"}]}`,
	`{"acknowledgments":[{"transactionId":"t","Status":"failed"}]}`,
	`{"acknowledgments":[{"transactionId":"t","status":null}]}`,
	`{"acknowledgments":[{"transactionId":"t","retry":true}]}`,
	`{"acknowledgments":null}`,
	`{"transactionId":"t","partitionId":"p","leaseId":"l","status":"completed","error":"x","consumerGroup":"g"}`,
	`{"transactionId":"t","transactionId":"u"}`,
	`{"transactionId":"t"} []`,
	`{"transactionId":"t\ud83d\ude00"}`,
	`{"transactionId":"t\ude00\ud83d"}`,
}

func addSeeds(f *testing.F) {
	for _, b := range trickyBodies {
		f.Add([]byte(b))
	}
}

// agree fails t unless fast, wherever it takes body, took it as the
// reflective decoder does into a fresh T.
func agree[T any](t *testing.T, body []byte, fast func([]byte, *T) bool) (taken bool) {
	t.Helper()
	var got, want T
	werr := decodeReader(bytes.NewReader(body), &want)
	if !fast(body, &got) {
		var zero T
		if !reflect.DeepEqual(got, zero) {
			t.Fatalf("%q: gave up but left %+v", body, got)
		}
		return false
	}
	if werr != nil {
		t.Fatalf("%q: the fast decoder took what encoding/json refuses (%v): %+v", body, werr, got)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: fast %#v, encoding/json %#v", body, got, want)
	}
	return true
}

func FuzzFastPush(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { agree(t, body, fastPush) })
}

func FuzzFastAck(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { agree(t, body, fastAck) })
}

func FuzzFastAckBatch(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { agree(t, body, fastAckBatch) })
}

// TestFastPathTakesWhatClientsSend: the bodies a client's JSON encoder
// makes (any strings, any payload, keys left out) go the fast way, with
// the values encoding/json reads; a string with escapes or bytes past
// ASCII too.
func TestFastPathTakesWhatClientsSend(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		alphabet := []string{"a", "Z", "0", "-", ".", "é", "\"", "\\", "\n", "\x00", "\u2028", "😀", "<", "&", "\xff", " "}
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	payloads := []string{`1`, `-0.5e+3`, `"x\u00e9\n"`, `true`, `false`, `null`, `[]`, `{}`, ` { "a" : [ 1 , { "b" : null } ] } `, `[[[[["deep"]]]]]`, `"é😀"`}
	for range 500 {
		var push pushRequest
		var batch ackBatchRequest
		for range 1 + rng.IntN(5) {
			push.Items = append(push.Items, pushItem{Queue: str(), Partition: str(), TransactionID: str(), TraceID: str(), Payload: json.RawMessage(payloads[rng.IntN(len(payloads))])})
			batch.Acknowledgments = append(batch.Acknowledgments, ackRequest{TransactionID: str(), PartitionID: str(), LeaseID: str(), Status: str(), Error: str(), ConsumerGroup: str()})
		}
		batch.ConsumerGroup = str()
		for _, v := range []any{push, batch, batch.Acknowledgments[0]} {
			body, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var taken bool
			switch v.(type) {
			case pushRequest:
				taken = agree(t, body, fastPush)
			case ackBatchRequest:
				taken = agree(t, body, fastAckBatch)
			case ackRequest:
				taken = agree(t, body, fastAck)
			}
			if !taken {
				t.Fatalf("%s: the fast decoder gave up", body)
			}
		}
	}
}

// TestFastPathGivesUpOnTrickyBodies: each tricky body that the fast
// decoders take is taken as encoding/json takes it, and those they must
// leave to encoding/json (duplicates, null, case-folded keys) they leave.
func TestFastPathGivesUpOnTrickyBodies(t *testing.T) {
	taken := map[string]bool{}
	for _, b := range trickyBodies {
		if agree(t, []byte(b), fastPush) || agree(t, []byte(b), fastAckBatch) || agree(t, []byte(b), fastAck) {
			taken[b] = true
		}
	}
	for _, b := range []string{
		`{"items":[{"queue":"a","partition":"x","payload":1}],"items":[{"queue":"b","payload":2}]}`,
		`{"items":[{"queue":null,"payload":1}]}`,
		`{"items":[{"Queue":"q","payload":1}]}`,
		`{"\u0069tems":[{"queue":"q","payload":1}]}`,
		`{"acknowledgments":[{"transactionId":"a","status":"failed"}],"acknowledgments":[{"transactionId":"b"}]}`,
	} {
		if taken[b] {
			t.Errorf("%s: taken by the fast decoder", b)
		}
	}
	for _, b := range []string{
		` { "items" : [ { "queue" : "q" , "payload" : { "a" : [ 1 , 2 ] } } ] } `,
		`{"items":[{"queue":"q\u00e9","payload":"\ud800"}]}`,
		"{\"items\":[{\"queue\":\"q\xff\",\"payload\":\"\xff\"}]}",
		`{"items":[{"queue":"q","payload":-0.5E+12}]}`,
		`{"consumerGroup":"g","acknowledgments":[{"transactionId":"t","error":"e\n\u00e9"}]}`,
		`{"transactionId":"t\ude00\ud83d"}`,
		`{"items":[{"queue":"q","payload":1,"producerSub":"someone"}]}`,
		`{"items":[{"producerSub":{"a":[1,null]},"queue":"q","payload":1}]}`,
	} {
		if !taken[b] {
			t.Errorf("%s: not taken by the fast decoder", b)
		}
	}
}

// TestFastDecodersShareRepeatedStrings: a batch's queue and partition (a
// push), and its lease, partition and status (an ack batch) are
// allocated once, not once an item.
func TestFastDecodersShareRepeatedStrings(t *testing.T) {
	var push pushRequest
	for range 10 {
		push.Items = append(push.Items, pushItem{Queue: "orders", Partition: "p1", Payload: json.RawMessage(`{"n":1}`)})
	}
	var batch ackBatchRequest
	for i := range 100 {
		batch.Acknowledgments = append(batch.Acknowledgments, ackRequest{TransactionID: fmt.Sprint("tx", i), PartitionID: "0194f0a0-partition", LeaseID: "lease-of-the-batch", Status: "completed"})
	}
	pushBody, _ := json.Marshal(push)
	batchBody, _ := json.Marshal(batch)
	// The request, the items' slice, the first item's queue and partition.
	if n := testing.AllocsPerRun(20, func() { fastPush(pushBody, &pushRequest{}) }); n > 4 {
		t.Errorf("push of 10 items: %v allocations", n)
	}
	// The request, the acks' slice, each ack's transaction id, the first's lease,
	// partition and status.
	if n := testing.AllocsPerRun(20, func() { fastAckBatch(batchBody, &ackBatchRequest{}) }); n > 105 {
		t.Errorf("batch of 100 acks: %v allocations", n)
	}
}
