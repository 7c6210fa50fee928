package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A bulk action by filter given the bound of a count acts on exactly the
// dead letters counted: those filed after the count are left alone and
// reported, whatever the clock did in between.
func testBulkByFilterActsOnTheCountedSetOnly(t *testing.T, harness Harness) {
	t.Parallel()
	cases := []struct {
		name   string
		replay bool
		clock  time.Duration // moved between the count and the late failures
	}{
		{"ReplayLaterFailures", true, time.Minute},
		{"DeleteLaterFailures", false, time.Minute},
		{"ReplaySameMillisecond", true, 0},
		{"DeleteClockMovedBack", false, -time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.fill("q", "g", []string{"early"}, 5)
			q := broker.DLQQuery{Queue: "q", Group: "g"}
			counted, err := s.b.CountMatching(s.ctx, q)
			if err != nil || counted.Count != 5 {
				t.Fatalf("count %+v %v, want 5", counted, err)
			}
			s.clock.Advance(tc.clock)
			s.fill("q", "g", []string{"late"}, 3)
			do := s.b.DeleteMatching
			if tc.replay {
				do = s.b.ReplayMatching
			}
			q.Bound = &counted.Bound
			res, err := do(s.ctx, q, "dev")
			if err != nil || res.Done != 5 || res.ArrivedSince != 3 {
				t.Fatalf("result %+v %v, want 5 done and 3 arrived since", res, err)
			}
			if res.Bound == nil || *res.Bound != counted.Bound {
				t.Fatalf("bound used %v, want the count's %v", res.Bound, counted.Bound)
			}
			left := s.dead("q", "g")
			if len(left) != 3 {
				t.Fatalf("%d left, want the 3 late ones", len(left))
			}
			for _, d := range left {
				if d.Partition != "late" {
					t.Fatalf("left %s of partition %s: the action touched a late one instead", d.TransactionID, d.Partition)
				}
			}
			if got := s.stats("q", "g").Depth; got != 3 {
				t.Fatalf("depth counter %d, want 3", got)
			}
			// With the same bound again: nothing left to touch.
			res, err = do(s.ctx, q, "dev")
			if err != nil || res.Done != 0 || res.ArrivedSince != 3 {
				t.Fatalf("again: %+v %v, want nothing done and 3 arrived since", res, err)
			}
		})
	}
}

// Without a bound the action takes one as it starts, and says which.
func testBulkByFilterTakesItsBound(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 3)
	newest := s.dead("q", "g")[0]
	res, err := s.b.DeleteMatching(s.ctx, broker.DLQQuery{Queue: "q"}, "dev")
	if err != nil || res.Done != 3 || res.ArrivedSince != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Bound == nil || !res.Bound.FailedAt.Equal(newest.FailedAt) || res.Bound.ID < newest.ID {
		t.Fatalf("bound %v, want the newest failure %v and an id of at least %d", res.Bound, newest.FailedAt, newest.ID)
	}
	// A count with a bound counts what is at or below it.
	s.fill("q", "g", []string{"later"}, 2)
	c, err := s.b.CountMatching(s.ctx, broker.DLQQuery{Queue: "q", Bound: res.Bound})
	if err != nil || c.Count != 0 {
		t.Fatalf("count at or below the old bound: %+v %v, want 0", c, err)
	}
	// A bound with no id takes the highest there is.
	c, err = s.b.CountMatching(s.ctx, broker.DLQQuery{Queue: "q", Bound: &broker.Bound{FailedAt: s.clock.Now()}})
	if err != nil || c.Count != 2 {
		t.Fatalf("count with no id in the bound: %+v %v, want 2", c, err)
	}
}

// No queue means every queue only when the caller says so.
func testBulkByFilterNeedsAQueueOrAll(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("a", "g", []string{"p"}, 2)
	s.fill("b", "g", []string{"p"}, 2)
	refused := []broker.DLQQuery{
		{},
		{Group: "g"},
		{ErrorContains: "err"},
		{Queue: "a", AllQueues: true},
		{Queue: "a", Bound: &broker.Bound{ID: 1}},
	}
	for _, q := range refused {
		for name, do := range map[string]func() error{
			"count":  func() error { _, err := s.b.CountMatching(s.ctx, q); return err },
			"replay": func() error { _, err := s.b.ReplayMatching(s.ctx, q, "dev"); return err },
			"delete": func() error { _, err := s.b.DeleteMatching(s.ctx, q, "dev"); return err },
		} {
			if err := do(); !errors.Is(err, broker.ErrInvalid) {
				t.Errorf("%s %+v: %v, want ErrInvalid", name, q, err)
			}
		}
	}
	if n := len(s.dead("a", "g")) + len(s.dead("b", "g")); n != 4 {
		t.Fatalf("refused calls changed the dead letters: %d left of 4", n)
	}
	res, err := s.b.DeleteMatching(s.ctx, broker.DLQQuery{Group: "g", AllQueues: true}, "dev")
	if err != nil || res.Done != 4 {
		t.Fatalf("every queue: %+v %v", res, err)
	}
}

// A dead letter filed after a bound was taken is above it on id even once
// the rows with the highest ids are gone and the clock went back: ids are
// never given again (the reviewer's scenario: it got id 3 and was deleted
// with the counted ones).
func testBulkBoundHoldsWhenTheNewestRowsAreGone(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"early"}, 3)
	q := broker.DLQQuery{Queue: "q", Group: "g"}
	c, err := s.b.CountMatching(s.ctx, q)
	if err != nil || c.Count != 3 {
		t.Fatalf("count %+v %v, want 3", c, err)
	}
	newest := s.dead("q", "g")[0]
	if _, err := s.b.DeleteIDs(s.ctx, []string{newest.MessageID()}, "", "dev"); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(-time.Hour)
	s.fill("q", "g", []string{"late"}, 1)
	late := s.dead("q", "g")
	for _, d := range late {
		if d.Partition == "late" && d.ID <= c.Bound.ID {
			t.Errorf("the late dead letter has id %d, at or below the bound's %d", d.ID, c.Bound.ID)
		}
	}
	q.Bound = &c.Bound
	res, err := s.b.DeleteMatching(s.ctx, q, "dev")
	if err != nil || res.Done != 2 || res.ArrivedSince != 1 {
		t.Fatalf("delete %+v %v, want the 2 counted ones left done and the late one arrived since", res, err)
	}
	if left := s.dead("q", "g"); len(left) != 1 || left[0].Partition != "late" {
		t.Fatalf("left %+v, want the late one", left)
	}
}

// A bound given with a failedAt in the future is kept to now, and the
// copies of a replay that fail again are above it on id: a second action
// with the same bound does not replay them again.
func testBulkBoundFromTheFutureKeepsToNow(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 3)
	future := &broker.Bound{FailedAt: s.clock.Now().Add(100 * 365 * 24 * time.Hour), ID: s.dead("q", "g")[0].ID}
	q := broker.DLQQuery{Queue: "q", Group: "g", Bound: future}
	res, err := s.b.ReplayMatching(s.ctx, q, "dev")
	if err != nil || res.Done != 3 {
		t.Fatalf("replay %+v %v, want 3 done", res, err)
	}
	if res.Bound == nil || !res.Bound.FailedAt.Equal(s.clock.Now()) || res.Bound.ID != future.ID {
		t.Fatalf("bound used %v, want now (%s) and #%d", res.Bound, s.clock.Now(), future.ID)
	}
	// The copies fail again at once.
	for range 3 {
		got := s.pop("q", "g", 1)
		if len(got.Messages) != 1 {
			t.Fatalf("pop of a copy: %+v", got)
		}
		s.ack(got.Messages[0], broker.AckDLQ, "again")
	}
	if n := len(s.dead("q", "g")); n != 3 {
		t.Fatalf("%d copies dead-lettered again, want 3", n)
	}
	res, err = s.b.ReplayMatching(s.ctx, q, "dev")
	if err != nil || res.Done != 0 || res.ArrivedSince != 3 {
		t.Fatalf("the same bound again: %+v %v, want nothing done and the 3 copies arrived since", res, err)
	}
}

// A replay counts messages, and so does its confirmation: a message that
// two groups dead-lettered is two dead letters but one replay, and it
// leaves both groups' dead letters, also those the filter does not select.
func testBulkReplayCountsMessages(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a", "b")
	for _, g := range []string{"g1", "g2"} {
		for range 2 {
			res := s.pop("q", g, 1)
			if len(res.Messages) != 1 {
				t.Fatalf("pop: %+v", res)
			}
			s.ack(res.Messages[0], broker.AckDLQ, "x")
			s.clock.Advance(time.Second)
		}
	}
	q := broker.DLQQuery{Queue: "q"}
	c, err := s.b.CountMatching(s.ctx, q)
	if err != nil || c.Count != 4 || c.Messages != 2 {
		t.Fatalf("count %+v %v, want 4 dead letters of 2 messages", c, err)
	}
	one := broker.DLQQuery{Queue: "q", Group: "g1"}
	if c1, err := s.b.CountMatching(s.ctx, one); err != nil || c1.Count != 2 || c1.Messages != 2 {
		t.Fatalf("count of g1 %+v %v, want 2 of 2", c1, err)
	}
	withBound := q
	withBound.Bound = &c.Bound
	if cb, err := s.b.CountMatching(s.ctx, withBound); err != nil || cb.Count != 4 || cb.Messages != 2 {
		t.Fatalf("count at or below the bound %+v %v, want 4 of 2", cb, err)
	}
	newest := s.dead("q", "g2")[0]
	byTx := broker.DLQQuery{Queue: "q", TransactionID: newest.TransactionID}
	if ct, err := s.b.CountMatching(s.ctx, byTx); err != nil || ct.Count != 2 || ct.Messages != 1 {
		t.Fatalf("count of %s %+v %v, want 2 of 1", newest.TransactionID, ct, err)
	}
	// Replaying it by a filter of g1 removes its dead letter in g2 too.
	byTx.Group = "g1"
	res, err := s.b.ReplayMatching(s.ctx, byTx, "dev")
	if err != nil || res.Done != 1 {
		t.Fatalf("replay of %s in g1: %+v %v, want 1 done", newest.TransactionID, res, err)
	}
	if left := s.dead("q", "g2"); len(left) != 1 || left[0].TransactionID == newest.TransactionID {
		t.Fatalf("g2 after the replay in g1: %+v, want only the other message", left)
	}
	// The rest of what was counted: one message, two dead letters.
	res, err = s.b.ReplayMatching(s.ctx, withBound, "dev")
	if err != nil || res.Done != 1 || res.ArrivedSince != 0 {
		t.Fatalf("replay %+v %v, want the other message", res, err)
	}
	if n := len(s.dead("q", "g1")) + len(s.dead("q", "g2")); n != 0 {
		t.Fatalf("%d dead letters left, want none", n)
	}
}

// ArrivedSince counts the dead letters filed after the bound was taken:
// not the older ones that a bound given with an earlier failedAt leaves
// out.
func testBulkArrivedSinceCountsOnlyLaterDeadLetters(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 5)
	dead := s.dead("q", "g") // newest first
	q := broker.DLQQuery{Queue: "q", Group: "g", Bound: &broker.Bound{FailedAt: dead[2].FailedAt}}
	res, err := s.b.DeleteMatching(s.ctx, q, "dev")
	if err != nil || res.Done != 3 || res.ArrivedSince != 0 {
		t.Fatalf("delete up to the third newest: %+v %v, want 3 done and none arrived since", res, err)
	}
	if n := len(s.dead("q", "g")); n != 2 {
		t.Fatalf("%d left, want the 2 newer ones", n)
	}
	s.fill("q", "g", []string{"late"}, 2)
	q.Bound = res.Bound
	res, err = s.b.DeleteMatching(s.ctx, q, "dev")
	if err != nil || res.Done != 0 || res.ArrivedSince != 2 {
		t.Fatalf("the same bound again: %+v %v, want nothing done and the 2 late ones arrived since", res, err)
	}
}
