package web

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The hand-written answers (json_write.go) against encoding/json's
// encoding of the views they replace (writeJSON: no HTML escaping, a
// newline after the value): byte for byte the same. The pop's views are
// kept here, as the oracle and the shape.

// encodeView is what writeJSON writes for v.
func encodeView(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode %#v: %v", v, err)
	}
	return buf.Bytes()
}

type popResponse struct {
	Messages       []deliveryView `json:"messages"`
	LeaseID        *string        `json:"leaseId"`
	LeaseExpiresAt timestamp      `json:"leaseExpiresAt"`
}

// deliveryView is one popped message.
type deliveryView struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Queue         string          `json:"queue"`
	LeaseID       *string         `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     timestamp       `json:"createdAt"`
	RetryCount    int             `json:"retryCount"`
	TraceID       *string         `json:"traceId"`
}

func newPopResponse(res broker.PopResult) popResponse {
	out := popResponse{Messages: make([]deliveryView, len(res.Messages)), LeaseID: optional(res.LeaseID), LeaseExpiresAt: timestamp(res.LeaseUntil)}
	for i, d := range res.Messages {
		out.Messages[i] = deliveryView{
			ID:            d.ID(),
			TransactionID: d.TransactionID,
			PartitionID:   d.PartitionUUID,
			Partition:     d.Partition,
			Queue:         d.Queue,
			LeaseID:       optional(d.LeaseID),
			ConsumerGroup: d.Group,
			Data:          d.Payload,
			CreatedAt:     timestamp(d.CreatedAt),
			RetryCount:    d.RetryCount,
			TraceID:       optional(d.TraceID),
		}
	}
	return out
}

// oddStrings are strings encoding/json escapes in its own ways.
var oddStrings = []string{"", "plain", `q"uote`, `back\slash`, "nl\n", "cr\r", "tab\t", "bs\b", "ff\f", "nul\x00", "us\x1f", "del\x7f",
	"<html>&amp;", "é", "😀", "\u2028line\u2029para", "bad\xff", "\xc3", "\xed\xa0\x80", "mixed\"é\x01\u2028\xfe"}

func randomString(rng *rand.Rand) string {
	if rng.IntN(3) == 0 {
		return oddStrings[rng.IntN(len(oddStrings))]
	}
	var b strings.Builder
	for range rng.IntN(8) {
		b.WriteString(oddStrings[rng.IntN(len(oddStrings))])
	}
	return b.String()
}

func randomTime(rng *rand.Rand) time.Time {
	if rng.IntN(4) == 0 {
		return time.Time{}
	}
	return time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(time.FixedZone("x", 3600*rng.IntN(12)))
}

var validPayloads = []string{`1`, `-0.5e+3`, `"x é\n"`, `true`, `null`, `[]`, `{}`, ` { "a" : [ 1 , { "b" : null } ] } `, "{\"s\":\"a b\\\" \\\\ \\t\"}\n", `"\u2028 <&>"`,
	strings.Repeat("[", 1200) + strings.Repeat("]", 1200)}

func FuzzAppendString(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := encodeView(t, s)
		if got := append(appendString(nil, s), '\n'); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, encoding/json %s", s, got, want)
		}
	})
}

func FuzzAppendCompact(f *testing.F) {
	for _, p := range validPayloads {
		f.Add([]byte(p))
	}
	for _, b := range trickyBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := appendCompact(nil, raw)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(json.RawMessage(raw))
		if (err == nil) != ok {
			t.Fatalf("%q: appendCompact ok %v, encoding/json %v", raw, ok, err)
		}
		if ok && !bytes.Equal(append(got, '\n'), buf.Bytes()) {
			t.Fatalf("%q: got %s, encoding/json %s", raw, got, buf.Bytes())
		}
	})
}

// TestAnswersAsEncodingJSON: a push's, a pop's, a batch ack's and an
// ack's answers, written by hand, are encoding/json's of their views.
func TestAnswersAsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		pushes := make([]broker.PushResult, rng.IntN(4))
		for i := range pushes {
			pushes[i] = broker.PushResult{Status: randomString(rng), MessageID: randomString(rng), TransactionID: randomString(rng), PartitionID: randomString(rng), Queue: randomString(rng), Partition: randomString(rng)}
		}
		if got, want := appendPushResults(nil, pushes), encodeView(t, newPushResultViews(pushes)); !bytes.Equal(got, want) {
			t.Fatalf("push:\n got %s\nwant %s", got, want)
		}

		pop := broker.PopResult{LeaseID: randomString(rng), LeaseUntil: randomTime(rng), Messages: make([]broker.Delivery, rng.IntN(4))}
		for i := range pop.Messages {
			pop.Messages[i] = broker.Delivery{
				Message: broker.Message{Seq: rng.Int64N(1 << 40), TransactionID: randomString(rng), Payload: []byte(validPayloads[rng.IntN(len(validPayloads))]), TraceID: randomString(rng), CreatedAt: randomTime(rng)},
				Queue:   randomString(rng), Partition: randomString(rng), PartitionUUID: randomString(rng), LeaseID: randomString(rng), Group: randomString(rng), RetryCount: rng.IntN(100),
			}
		}
		got, err := appendPop(nil, pop)
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeView(t, newPopResponse(pop)); !bytes.Equal(got, want) {
			t.Fatalf("pop:\n got %s\nwant %s", got, want)
		}

		acks := make([]broker.AckResult, rng.IntN(4))
		for i := range acks {
			acks[i] = broker.AckResult{TransactionID: randomString(rng), Success: rng.IntN(2) == 0, Error: randomString(rng), DLQ: rng.IntN(2) == 0, Dropped: rng.IntN(2) == 0, Requeued: rng.IntN(2) == 0}
		}
		views := make([]ackResultView, len(acks))
		for i, r := range acks {
			views[i] = newAckResultView(r)
		}
		if got, want := appendAckResults(nil, acks), encodeView(t, views); !bytes.Equal(got, want) {
			t.Fatalf("ack batch:\n got %s\nwant %s", got, want)
		}

		one := ackResponse{TransactionID: randomString(rng), Status: randomString(rng), ConsumerGroup: randomString(rng), Success: rng.IntN(2) == 0, DLQ: rng.IntN(2) == 0, Dropped: rng.IntN(2) == 0, Requeued: rng.IntN(2) == 0, AcknowledgedAt: timestamp(randomTime(rng))}
		if rng.IntN(2) == 0 {
			one.Error = randomString(rng)
		}
		if got, want := appendAck(nil, one), encodeView(t, one); !bytes.Equal(got, want) {
			t.Fatalf("ack:\n got %s\nwant %s", got, want)
		}
	}
}

// TestPopRefusesAStoredPayloadThatIsNotJSON: as encoding/json did, the
// answer fails (a 500) rather than send invalid JSON.
func TestPopRefusesAStoredPayloadThatIsNotJSON(t *testing.T) {
	for _, p := range []string{`{"a":1`, `1 2`, "\"a\x01\"", strings.Repeat("[", 1200)} {
		res := broker.PopResult{Messages: []broker.Delivery{{Message: broker.Message{Payload: []byte(p)}}}}
		if _, err := appendPop(nil, res); err == nil {
			t.Errorf("%q: written", p)
		}
		if err := json.NewEncoder(&bytes.Buffer{}).Encode(newPopResponse(res)); err == nil {
			t.Errorf("%q: encoding/json wrote it", p)
		}
	}
}
