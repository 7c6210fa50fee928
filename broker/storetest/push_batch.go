package storetest

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// pushBatchEarlier are the messages there before the batch.
var pushBatchEarlier = []broker.PushItem{
	{Queue: "q", Partition: "a", TransactionID: "e1", Payload: json.RawMessage(`{"earlier":1}`)},
	{Queue: "q", Partition: "b", TransactionID: "e1", Payload: json.RawMessage(`{"earlier":2}`)},
	{Queue: "q", Partition: "a", TransactionID: "e2", Payload: json.RawMessage(`{"earlier":3}`)},
}

// pushBatch is a push with duplicates of earlier messages and of its own
// items, a partition it creates, an id the server makes, and payloads
// whose bytes a store could change (spacing, escapes, non-ASCII text).
func pushBatch() []broker.PushItem {
	return []broker.PushItem{
		{Queue: "q", Partition: "a", TransactionID: "n1", Payload: json.RawMessage(`{"n":1}`)},
		{Queue: "q", Partition: "a", TransactionID: "e1", Payload: json.RawMessage(`{"other":true}`)},
		{Queue: "q", Partition: "b", TransactionID: "n1", Payload: json.RawMessage(" [1, \"é\\u0000\",\t{} ] "), TraceID: "trace-b"},
		{Queue: "q", Partition: "a", TransactionID: "n1", Payload: json.RawMessage(`{"n":"again"}`)},
		{Queue: "q", Partition: "c", TransactionID: "n2", Payload: json.RawMessage(`null`)},
		{Queue: "q", Partition: "b", TransactionID: "e1", Payload: json.RawMessage(`{}`)},
		{Queue: "q", Partition: "a", Payload: json.RawMessage(`"made by the server"`)},
		{Queue: "q", Partition: "c", TransactionID: "n2", Payload: json.RawMessage(`1`)},
		{Queue: "q", Partition: "a", TransactionID: "n3", Payload: json.RawMessage(`{"big":"` + strings.Repeat("x", 5000) + `"}`)},
		{Queue: "r", TransactionID: "n1", Payload: json.RawMessage(`2`)},
	}
}

// storedMessage is a message as read back, in seq order across
// partitions; TransactionID is empty for an id the server made.
type storedMessage struct {
	Partition     string
	TransactionID string
	Payload       string
	TraceID       string
}

// A push of many items stores and answers what pushing them one by one
// does: the same statuses, a duplicate (of an earlier message or of an
// item before it in the call) answered with the message it duplicates,
// seqs growing in the items' order, and the same messages kept, byte for
// byte. Through Push and through a Transaction's push.
func testPushBatchAsOneByOne(t *testing.T, harness Harness) {
	t.Parallel()
	one := setup(t, harness)
	earlier := pushBatchPushEarlier(t, one)
	var want []broker.PushResult
	for _, it := range pushBatch() {
		res, err := one.b.Push(one.ctx, []broker.PushItem{it})
		if err != nil {
			t.Fatalf("push one by one: %v", err)
		}
		want = append(want, res[0])
	}
	wantStored := pushBatchStored(t, one)
	checkPushBatch(t, "one by one", earlier, want, want, wantStored, wantStored)

	for _, via := range []string{"Push", "Transaction"} {
		s := setup(t, harness)
		earlier := pushBatchPushEarlier(t, s)
		var got []broker.PushResult
		switch via {
		case "Push":
			res, err := s.b.Push(s.ctx, pushBatch())
			if err != nil {
				t.Fatalf("%s: %v", via, err)
			}
			got = res
		case "Transaction":
			res, err := s.b.Transaction(s.ctx, []broker.Operation{{Type: "push", Items: pushBatch()}})
			if err != nil {
				t.Fatalf("%s: %v", via, err)
			}
			got = res[0].Push
		}
		checkPushBatch(t, via, earlier, got, want, pushBatchStored(t, s), wantStored)
	}
}

// pushBatchPushEarlier pushes pushBatchEarlier in one call.
func pushBatchPushEarlier(t *testing.T, s *bundle) []broker.PushResult {
	t.Helper()
	res, err := s.b.Push(s.ctx, pushBatchEarlier)
	if err != nil {
		t.Fatalf("push the earlier messages: %v", err)
	}
	return res
}

// checkPushBatch compares a batch's results and messages with those of
// the items pushed one by one, and checks the batch's seqs and
// duplicates among themselves.
func checkPushBatch(t *testing.T, via string, earlier, got, want []broker.PushResult, stored, wantStored []storedMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d results, want %d", via, len(got), len(want))
	}
	items := pushBatch()
	byKey := map[string]string{} // partition and transactionId: message id
	last := int64(0)
	for _, r := range earlier {
		_, seq, _ := broker.ParseMessageID(r.MessageID)
		byKey[r.PartitionID+"/"+r.TransactionID], last = r.MessageID, max(last, seq)
	}
	for i, r := range got {
		w := want[i]
		if r.Status != w.Status || r.Queue != w.Queue || r.Partition != w.Partition || (items[i].TransactionID != "" && r.TransactionID != w.TransactionID) {
			t.Errorf("%s: item %d: %+v, want as one by one %+v", via, i, r, w)
		}
		_, seq, ok := broker.ParseMessageID(r.MessageID)
		if !ok {
			t.Fatalf("%s: item %d: message id %q", via, i, r.MessageID)
		}
		k := r.PartitionID + "/" + r.TransactionID
		if r.Status == broker.StatusDuplicate {
			if prev := byKey[k]; prev != r.MessageID {
				t.Errorf("%s: item %d is a duplicate answered %s, want the id of the message it duplicates, %q", via, i, r.MessageID, prev)
			}
			continue
		}
		if seq <= last {
			t.Errorf("%s: item %d queued with seq %d, not above the one before, %d", via, i, seq, last)
		}
		last = seq
		byKey[k] = r.MessageID
	}
	if len(stored) != len(wantStored) {
		t.Fatalf("%s: %d messages stored, want %d:\n%+v\nwant\n%+v", via, len(stored), len(wantStored), stored, wantStored)
	}
	for i := range stored {
		if stored[i] != wantStored[i] {
			t.Errorf("%s: message %d by seq: %+v, want %+v", via, i, stored[i], wantStored[i])
		}
	}
}

// pushBatchStored reads every message of the batch's queues, in seq
// order, each payload checked against the first item of its id pushed.
func pushBatchStored(t *testing.T, s *bundle) []storedMessage {
	t.Helper()
	type row struct {
		seq int64
		m   storedMessage
	}
	var rows []row
	err := s.db.View(s.ctx, func(tx broker.Tx) error {
		for _, name := range [][2]string{{"q", "a"}, {"q", "b"}, {"q", "c"}, {"r", broker.DefaultPartition}} {
			q, err := tx.QueueByName(s.ctx, name[0])
			if err != nil {
				return err
			}
			p, err := tx.PartitionByName(s.ctx, q.ID, name[1])
			if err != nil {
				return err
			}
			ms, err := tx.MessagesAfter(s.ctx, p.ID, 0, 100)
			if err != nil {
				return err
			}
			for _, m := range ms {
				txid := m.TransactionID
				if !strings.HasPrefix(txid, "e") && !strings.HasPrefix(txid, "n") {
					txid = ""
				}
				rows = append(rows, row{m.Seq, storedMessage{name[0] + "/" + name[1], txid, string(m.Payload), m.TraceID}})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].seq < rows[j].seq })
	out := make([]storedMessage, len(rows))
	for i, r := range rows {
		out[i] = r.m
		first := pushBatchFirst(r.m)
		if first == nil || !bytes.Equal(first, []byte(r.m.Payload)) {
			t.Errorf("message %+v: payload is not the first pushed of its id, %s", r.m, first)
		}
	}
	return out
}

// pushBatchFirst is the payload of the first item pushed (earlier, then
// the batch) that m is.
func pushBatchFirst(m storedMessage) []byte {
	for _, it := range append(append([]broker.PushItem{}, pushBatchEarlier...), pushBatch()...) {
		p := it.Partition
		if p == "" {
			p = broker.DefaultPartition
		}
		if it.Queue+"/"+p == m.Partition && it.TransactionID == m.TransactionID {
			return it.Payload
		}
	}
	return nil
}
