package storetest

import (
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Groups that start after everything already pushed (subscriptionMode
// new) keep arriving: they cannot settle what was pushed before them, so
// they do not hold back completed retention. (A subscription that may
// read back does: testCompletedRetentionAfterALateGroupSettled.)
func testNewGroupsDoNotHoldBackCompletedRetention(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"completedRetentionSeconds": 3600})
	s.subscribeAll("q", "a")
	s.push("q", "p", "m1", "m2")
	s.drain("q", "a")
	removed := int64(0)
	for i := range 4 { // a new group every 40 minutes, for 2 h 40
		s.clock.Advance(40 * time.Minute)
		res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "late" + string(rune('0'+i)), Batch: 1, Start: broker.Start{Now: true}})
		if err != nil || len(res.Messages) != 0 {
			t.Fatalf("pop of a new group from now: %+v, %v", res, err)
		}
		removed += s.sweep().Removed
	}
	if removed != 2 {
		t.Fatalf("removed %d, want m1 and m2 (settled by a; the groups that came later start after them)", removed)
	}
}
