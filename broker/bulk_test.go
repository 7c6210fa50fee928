package broker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A bulk action by filter given the bound of a count acts on exactly the
// dead letters counted: those filed after the count are left alone and
// reported, whatever the clock did in between.
func TestBulkByFilterActsOnTheCountedSetOnly(t *testing.T) {
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
			s := setup(t)
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
func TestBulkByFilterTakesItsBound(t *testing.T) {
	t.Parallel()
	s := setup(t)
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
func TestBulkByFilterNeedsAQueueOrAll(t *testing.T) {
	t.Parallel()
	s := setup(t)
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
