package storetest

import (
	"slices"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The lookups the hot paths cache never outlive what they name: a deleted
// queue is created anew by the next push, and changed options apply to
// the very next ack.
func testCachedLookupsFollowChanges(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a")
	s.drain("q", "g") // q, p, g and the subscription are cached now
	if err := s.b.DeleteQueue(s.ctx, "q", "admin"); err != nil {
		t.Fatal(err)
	}
	s.push("q", "p", "b")
	if got := s.drain("q", "g"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after the queue was deleted and pushed again: %v", got)
	}
	info, err := s.b.Queue(s.ctx, "q")
	if err != nil || len(info.Partitions) != 1 || info.Partitions[0].Messages != 1 {
		t.Fatalf("the new queue: %+v %v", info.Partitions, err)
	}

	s.configure("q", map[string]any{"retryLimit": 5, "retryDelay": 0})
	s.push("q", "p", "c")
	_, res := s.popTxids("q", "g", 1)
	s.configure("q", map[string]any{"retryLimit": 0})
	if r := s.ack(res.Messages[0], broker.AckFailed, "x"); !r.DLQ {
		t.Fatalf("retryLimit 0 set before the ack was not applied: %+v", r)
	}
}
