package storetest

import (
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Every function of the broker's given to Update may run twice, the
// first run rolled back (retryStore, under every test of setup): the
// counts it defers to memory are counted once.
func testRetriedUpdatesCountOnce(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	rs := &retryStore{Store: s.db}
	s.b = broker.New(broker.Config{Store: rs, Clock: s.clock})
	s.configure("q", map[string]any{"retryLimit": 0, "retryDelay": 0})
	s.push("q", "", "a", "b", "c")
	s.drain("q", "g")           // three completed acks, in memory
	s.push("q", "", "d")        // a push: no depth moved, nothing written
	s.fail("q", "g", 1, "boom") // a dead letter writes the waiting counts
	if err := s.b.FlushStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	want := broker.Stats{Completed: 3, DeadLettered: 1, Depth: 1}
	if got := s.stats("q", "g"); got != want {
		t.Fatalf("stats after retried writes: %+v, want %+v", got, want)
	}
	if rs.retried.Load() == 0 {
		t.Fatal("no Update was retried")
	}
}

// A count deferred by one function of a transaction and a change of depth
// by a later one of the same transaction (group commit), a minute later:
// the count is written with its minute's depth, by the later function,
// not left in memory to be written later with the depth after the change.
func testDeferredCountsSeenByTheNextFunctionOfTheTransaction(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0, "retryDelay": 0})
	s.push("q", "p1", "a")
	s.push("q", "p2", "b")
	t0 := s.clock.Now().Truncate(time.Minute)
	_, one := s.popTxids("q", "g", 1)
	_, two := s.popTxids("q", "g", 1)
	s.clock.Advance(59 * time.Second)
	ps := newPairStore(s.db, func() { s.clock.Advance(2 * time.Second) })
	s.b = broker.New(broker.Config{Store: ps, Clock: s.clock})
	ps.hold.Store(true)
	done := make(chan broker.AckResult, 1)
	go func() { done <- s.ack(one.Messages[0], broker.AckCompleted, "") }() // 12:00:59, deferred
	<-ps.held
	s.ack(two.Messages[0], broker.AckDLQ, "bad") // 12:01:01, depth +1, same transaction
	<-done
	if err := s.b.FlushStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	h, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: t0, To: t0.Add(2 * time.Minute), Step: time.Minute})
	if err != nil || len(h) != 1 {
		t.Fatalf("history: %+v %v", h, err)
	}
	type point struct{ completed, dead, depth int64 }
	want := []point{{1, 0, 0}, {0, 1, 1}}
	for i, p := range h[0].Points {
		if got := (point{p.Completed, p.DeadLettered, p.Depth}); got != want[i] {
			t.Errorf("minute %d: %+v, want %+v", i, got, want[i])
		}
	}
}

// A queue deleted by one function of a transaction and pushed to by a
// later one of it: the later one does not take the queue from the lookup
// cache (it is emptied only once the transaction commits), so it makes
// the queue again and its message is there.
func testCacheChangedByAFunctionIsNotReadByTheNextOfTheTransaction(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	ps := newPairStore(s.db, func() {})
	s.b = broker.New(broker.Config{Store: ps, Clock: s.clock})
	s.push("q", "", "a") // the queue and its partition are cached
	ps.hold.Store(true)
	done := make(chan error, 1)
	go func() { done <- s.b.DeleteQueue(s.ctx, "q", "admin") }()
	<-ps.held
	s.push("q", "", "b")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ids, _ := s.popTxids("q", "g", 10)
	if len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("after the queue was deleted and pushed to again: %v, want [b]", ids)
	}
}
