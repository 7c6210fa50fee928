package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// delayedProcessing: a message is delivered no earlier than the delay after
// its push, nothing behind it in its partition comes first, and other
// partitions are not held up by it.
func testDelayedProcessingHoldsAMessageAndWhatIsBehindIt(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"delayedProcessing": 10})
	s.push("q", "p", "a")
	s.clock.Advance(4 * time.Second)
	s.push("q", "p", "b")
	s.push("q", "other", "c")

	want := func(step string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %v, want %v", step, got, want)
		}
	}
	for _, g := range []string{"g", "h"} {
		ids, _ := s.popTxids("q", g, 10)
		want("at +4s, group "+g, ids)
	}
	s.clock.Advance(6*time.Second - time.Millisecond)
	ids, _ := s.popTxids("q", "g", 10)
	want("at +9.999s", ids)

	s.clock.Advance(time.Millisecond) // +10s: a is due, b (pushed at +4s) is not
	ids, res := s.popTxids("q", "g", 10)
	want("at +10s", ids, "a")
	s.ack(res.Messages[0], broker.AckCompleted, "")
	ids, _ = s.popTxids("q", "g", 10)
	want("at +10s after the ack", ids)

	// A partition named by the pop waits the same way.
	r, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10})
	if err != nil || len(r.Messages) != 0 {
		t.Fatalf("pop of p at +10s: %+v, %v", r, err)
	}
	s.clock.Advance(4 * time.Second) // +14s: b and c are due
	r, err = s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10})
	if err != nil || len(r.Messages) != 1 || r.Messages[0].TransactionID != "b" {
		t.Fatalf("pop of p at +14s: %+v, %v", r, err)
	}
	ids, _ = s.popTxids("q", "g", 10)
	want("at +14s, the other partition", ids, "c")
	// The other group gets a and b in order, in one batch, and c.
	first, _ := s.popTxids("q", "h", 10)
	second, _ := s.popTxids("q", "h", 10)
	got := [][]string{first, second}
	if !slices.EqualFunc(got, [][]string{{"a", "b"}, {"c"}}, slices.Equal) && !slices.EqualFunc(got, [][]string{{"c"}, {"a", "b"}}, slices.Equal) {
		t.Fatalf("group h at +14s: got %v", got)
	}
}

// A failed message comes back after its retry delay, not after
// delayedProcessing again: the delay counts from the push.
func testDelayedProcessingCountsFromThePush(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"delayedProcessing": 5, "retryDelay": 1000})
	s.push("q", "", "a")
	s.clock.Advance(5 * time.Second)
	_, res := s.popTxids("q", "g", 1)
	if len(res.Messages) != 1 {
		t.Fatalf("pop at +5s: %+v", res)
	}
	s.ack(res.Messages[0], broker.AckFailed, "boom")
	s.clock.Advance(time.Second)
	if ids, _ := s.popTxids("q", "g", 1); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("pop after the retry delay: %v", ids)
	}
}

// A long-poll on a queue whose only message is not due yet wakes when it
// becomes due: it neither answers empty at its timeout nor before the
// delay. Real time (a delay of one second): the pop's timer is the wall
// clock's.
func testDelayedProcessingWakesALongPoll(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	b := broker.New(broker.Config{Store: s.db}) // the system clock
	t.Cleanup(b.Close)
	if _, err := b.Configure(s.ctx, "q", map[string]json.RawMessage{"delayedProcessing": json.RawMessage("1")}, "test"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.Push(s.ctx, []broker.PushItem{{Queue: "q", TransactionID: "a", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", Wait: true, Timeout: 30 * time.Second})
	took := time.Since(start)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("long-poll: %+v, %v after %v", res, err, took)
	}
	if took < time.Second-5*time.Millisecond || took > 20*time.Second {
		t.Fatalf("long-poll answered after %v, want about 1s", took)
	}
}
