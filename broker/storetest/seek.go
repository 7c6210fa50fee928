package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A group seeking back behind messages that every group had settled (and
// that completed retention had marked so) reads them again: they are not
// deleted under it, and its lag counts them.
func testCompletedRetentionKeepsWhatASeekReadsAgain(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"completedRetentionSeconds": 3600})
	s.subscribeAll("q", "g")
	s.push("q", "p", "a", "b", "c")
	if got := s.drain("q", "g"); len(got) != 3 {
		t.Fatalf("drained %v", got)
	}
	s.sweep() // marks a, b, c settled
	res, err := s.b.SeekGroup(s.ctx, broker.SeekRequest{Group: "g", Queue: "q", At: time.Unix(0, 0), Actor: "test"})
	if err != nil || res.Partitions != 1 {
		t.Fatalf("seek %+v %v", res, err)
	}
	s.clock.Advance(3600 * time.Second)
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d that g reads again", r.Removed)
	}
	if n, lags := s.counts("q", "p"); n != 3 || lags["g"] != 3 {
		t.Fatalf("queue page: %d messages, lags %v; want 3, g 3", n, lags)
	}
	if got := s.drain("q", "g"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("read again %v", got)
	}
}
