package storetest

import (
	"maps"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// openCounts checks that ErrorGroupCounts, which the SQLite store keeps
// as groups change (migration 0041), says what the groups themselves
// say: each queue's open and regressed groups.
func (s *bundle) openCounts(step string) {
	s.t.Helper()
	groups, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Limit: broker.MaxErrorGroups})
	if err != nil {
		s.t.Fatalf("%s: list the groups: %v", step, err)
	}
	want := map[string][2]int64{}
	for _, g := range groups {
		if g.State != broker.GroupOpen {
			continue
		}
		n := want[g.Queue]
		n[0]++
		if g.Regressed {
			n[1]++
		}
		want[g.Queue] = n
	}
	counts, err := s.b.ErrorGroupCounts(s.ctx)
	if err != nil {
		s.t.Fatalf("%s: counts: %v", step, err)
	}
	got := map[string][2]int64{}
	for _, c := range counts {
		got[c.Queue] = [2]int64{c.Open, c.Regressed}
	}
	if !maps.Equal(got, want) {
		s.t.Fatalf("%s: open and regressed groups by queue %v, the groups say %v", step, got, want)
	}
}

// The open and regressed error groups counted for each queue follow
// every change: groups made, acknowledged, resolved, regressed by a new
// dead letter, ignored and opened again by a count or by the
// maintenance, acknowledged, and deleted with their queue.
func testErrorGroupCountsFollowEveryChange(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	s.push("q", "p", "a", "b", "c", "d", "e", "f", "h", "i", "j", "k")
	s.push("r", "p", "a", "b")
	s.openCounts("nothing filed")
	s.fail("q", "g", 2, "card declined")
	s.fail("q", "g", 1, "gateway timeout")
	s.fail("q", "g", 1, "no such customer")
	s.fail("r", "g", 1, "card declined")
	s.openCounts("three groups of q, one of r")

	s.setState(broker.StateChange{Fingerprint: "card declined", State: broker.GroupAcknowledged})
	s.openCounts("one acknowledged")
	s.setState(broker.StateChange{Fingerprint: "card declined", State: broker.GroupResolved, Force: true})
	s.openCounts("one resolved")
	s.fail("q", "g", 1, "card declined")
	if g := s.group("card declined"); g.State != broker.GroupOpen || !g.Regressed {
		t.Fatalf("a new dead letter in a resolved group: %+v", g)
	}
	s.openCounts("one regressed")
	s.setState(broker.StateChange{Fingerprint: "card declined", State: broker.GroupAcknowledged})
	s.openCounts("the regressed group acknowledged (its mark cleared)")

	s.setState(broker.StateChange{Fingerprint: "gateway timeout", State: broker.GroupIgnored, UntilCount: 1})
	s.setState(broker.StateChange{Fingerprint: "no such customer", State: broker.GroupIgnored, Until: s.clock.Now().Add(time.Hour)})
	s.openCounts("two ignored")
	s.fail("q", "g", 1, "gateway timeout")
	s.openCounts("an ignore ended by a count")
	s.clock.Advance(time.Hour)
	if err := s.b.CompactStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	if g := s.group("no such customer"); g.State != broker.GroupOpen {
		t.Fatalf("an ignore past its time, after the maintenance: %+v", g)
	}
	s.openCounts("an ignore ended by the maintenance")

	// r, the newest queue, deleted with its open group and made again:
	// SQLite may give it the same id, which must not count the old
	// queue's groups.
	if err := s.b.DeleteQueue(s.ctx, "r", "ana"); err != nil {
		t.Fatal(err)
	}
	s.openCounts("r deleted")
	s.push("r", "p", "again")
	s.fail("r", "g", 1, "gateway timeout")
	s.openCounts("r made again")
}
