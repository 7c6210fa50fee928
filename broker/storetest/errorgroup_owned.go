package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// ownedBundle is a bundle whose broker tells its events to told.
func ownedBundle(t *testing.T, harness Harness) (*bundle, func() []broker.Event) {
	t.Helper()
	s := setup(t, harness)
	var mu sync.Mutex
	var told []broker.Event
	b := broker.New(broker.Config{Store: &retryStore{Store: s.db}, Clock: s.clock, OnEvent: func(e broker.Event) {
		mu.Lock()
		told = append(told, e)
		mu.Unlock()
	}})
	t.Cleanup(b.Close)
	s.b = b
	return s, func() []broker.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]broker.Event(nil), told...)
	}
}

// group returns the one error group of q and g with fingerprint fp.
func (s *bundle) group(fp string) broker.OwnedErrorGroup {
	s.t.Helper()
	g, _, err := s.b.ErrorGroupByKey(s.ctx, "q", "g", fp)
	if err != nil {
		s.t.Fatalf("error group %q: %v", fp, err)
	}
	return g
}

// setState changes the state of q/g's group fp; it fails the test on
// error.
func (s *bundle) setState(c broker.StateChange) broker.OwnedErrorGroup {
	s.t.Helper()
	c.Queue, c.Group = "q", "g"
	if c.Actor == "" {
		c.Actor = "ana"
	}
	gs, err := s.b.SetErrorGroupState(s.ctx, c)
	if err != nil || len(gs) != 1 {
		s.t.Fatalf("set state %+v: %v %v", c, gs, err)
	}
	return gs[0]
}

// An error group's life: acknowledged with an owner, a note and a link;
// a resolve refused while a replayed copy is pending and allowed once it
// succeeded, with its evidence; a new dead letter reopens it, regressed,
// and says so; bad changes are refused and change nothing; each change
// is in its history and the audit.
func testErrorGroupLifecycle(t *testing.T, harness Harness) {
	t.Parallel()
	s, told := ownedBundle(t, harness)
	s.push("q", "p", "a", "b")
	s.fail("q", "g", 2, "card declined")
	const fp = "card declined"

	g := s.group(fp)
	if g.State != broker.GroupOpen || g.Regressed || g.Life.Filed != 2 || g.Day.Filed != 2 || g.Week.Filed != 2 || g.DeadLetters != 2 || g.Owner != "" {
		t.Fatalf("a new group: %+v", g)
	}
	if es := told(); len(es) != 1 || es[0].Kind != broker.EventErrorGroupNew || es[0].Fingerprint != fp || es[0].ErrorGroupID != g.ID {
		t.Fatalf("told %+v, want one error_group.new", es)
	}

	g = s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupAcknowledged, Note: ptr("PSP rejects test cards"), Link: ptr("https://jira.example/PAY-1432")})
	if g.State != broker.GroupAcknowledged || g.Owner != "ana" || g.Note != "PSP rejects test cards" || g.Link != "https://jira.example/PAY-1432" {
		t.Fatalf("acknowledged: %+v", g)
	}

	// Bad changes are refused and change nothing.
	for _, c := range []broker.StateChange{
		{Queue: "q", Group: "g", Fingerprint: fp, State: "fixed", Actor: "ana"},
		{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupOpen, Link: ptr("javascript:alert(1)"), Actor: "ana"},
		{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupOpen, Link: ptr("ftp://x.example/"), Actor: "ana"},
		{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupOpen, Note: ptr(strings.Repeat("n", broker.MaxGroupNote+1)), Actor: "ana"},
		{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupOpen, Note: ptr("bell\a"), Actor: "ana"},
		{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupOpen, Until: s.clock.Now().Add(time.Hour), Actor: "ana"},
		{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupIgnored, Until: s.clock.Now().Add(-time.Hour), Actor: "ana"},
		{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupAcknowledged, Version: ptr("1.8.3"), Actor: "ana"},
	} {
		if _, err := s.b.SetErrorGroupState(s.ctx, c); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", c, err)
		}
	}
	if _, err := s.b.SetErrorGroupState(s.ctx, broker.StateChange{Queue: "q", Group: "g", Fingerprint: "no such", State: broker.GroupOpen, Actor: "ana"}); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("an unknown group: %v, want ErrNotFound", err)
	}
	if after := s.group(fp); after.State != g.State || after.Link != g.Link || after.Note != g.Note {
		t.Fatalf("a refused change changed %+v into %+v", g, after)
	}

	// The fix: one dead letter replayed; its copy pending, a resolve is
	// refused without force.
	dead := s.dead("q", "g")
	if _, err := s.b.Replay(s.ctx, dead[0].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	g = s.group(fp)
	if g.Life.Replayed != 1 || g.Life.Pending() != 1 || g.Day.Replayed != 1 || g.DeadLetters != 1 {
		t.Fatalf("after a replay: %+v", g)
	}
	_, err := s.b.SetErrorGroupState(s.ctx, broker.StateChange{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupResolved, Actor: "ana"})
	if !errors.Is(err, broker.ErrConflict) || !strings.Contains(err.Error(), "1 pending") {
		t.Fatalf("resolve while a copy is pending: %v, want ErrConflict saying 1 pending", err)
	}
	// The copy completes: the evidence is whole.
	_, res := s.popTxids("q", "g", 10)
	for _, m := range res.Messages {
		if broker.IsReplayTransaction(m.TransactionID) {
			s.ack(m, broker.AckCompleted, "")
		}
	}
	g = s.group(fp)
	if g.Life.Succeeded != 1 || g.Life.Pending() != 0 || g.Day.Succeeded != 1 {
		t.Fatalf("after the copy completed: %+v", g)
	}
	g = s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupResolved, Version: ptr("1.8.3")})
	if g.State != broker.GroupResolved || g.Version != "1.8.3" || g.Note != "PSP rejects test cards" || g.Owner != "ana" {
		t.Fatalf("resolved: %+v", g)
	}
	_, hist, err := s.b.ErrorGroup(s.ctx, g.ID)
	if err != nil || len(hist) != 2 || hist[0].To != broker.GroupResolved || hist[0].From != broker.GroupAcknowledged ||
		!strings.Contains(hist[0].Why, "evidence: 1 replayed, 1 succeeded, 0 failed again, 0 pending") || hist[1].To != broker.GroupAcknowledged || hist[1].Actor != "ana" {
		t.Fatalf("history %+v %v", hist, err)
	}

	// It comes back: a new dead letter reopens it, regressed, by itself.
	s.clock.Advance(time.Minute)
	s.push("q", "p", "c")
	s.fail("q", "g", 1, "card declined")
	g = s.group(fp)
	if g.State != broker.GroupOpen || !g.Regressed || g.Life.Filed != 3 || g.Owner != "ana" || g.ChangedBy != broker.ErrorGroupSystemActor {
		t.Fatalf("after a new dead letter in a resolved group: %+v", g)
	}
	es := told()
	if last := es[len(es)-1]; last.Kind != broker.EventErrorGroupRegressed || last.ErrorGroupID != g.ID || !strings.Contains(last.Detail, "new dead letter") {
		t.Fatalf("told %+v, want error_group.regressed last", es)
	}
	var entries int
	for _, a := range s.auditsAll(broker.AuditErrorGroup) {
		if a.Queue == "q" {
			entries++
		}
	}
	if entries != 3 {
		t.Fatalf("%d audit entries of error groups, want 3 (acknowledged, resolved, regressed)", entries)
	}
	// A person's change clears the mark.
	if g = s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupAcknowledged}); g.Regressed {
		t.Fatalf("acknowledged again, still marked regressed: %+v", g)
	}
}

// auditsAll lists the audit entries of an action in every stream.
func (s *bundle) auditsAll(action string) []broker.AuditEntry {
	s.t.Helper()
	es, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: action, Stream: broker.AuditStreamAll}, broker.Page{Limit: 100})
	if err != nil {
		s.t.Fatal(err)
	}
	return es
}

// A resolved group regresses when a replayed copy of one of its dead
// letters fails again (here into another error group, so that no filing
// of its own reopens it first); a resolve with copies pending takes
// force, and says so.
func testErrorGroupRegressesWhenACopyFailsAgain(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	s.push("q", "p", "a")
	s.fail("q", "g", 1, "card declined")
	const fp = "card declined"
	dead := s.dead("q", "g")
	if _, err := s.b.Replay(s.ctx, dead[0].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	g := s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupResolved, Force: true})
	if g.State != broker.GroupResolved {
		t.Fatalf("forced resolve: %+v", g)
	}
	_, hist, _ := s.b.ErrorGroup(s.ctx, g.ID)
	if len(hist) != 1 || !strings.Contains(hist[0].Why, "forced") || !strings.Contains(hist[0].Why, "1 pending") {
		t.Fatalf("a forced resolve's history: %+v", hist)
	}
	// The copy fails again, with another error.
	s.fail("q", "g", 1, "gateway timeout")
	g = s.group(fp)
	if g.State != broker.GroupOpen || !g.Regressed || g.Life.FailedAgain != 1 || g.Life.Pending() != 0 || g.Day.FailedAgain != 1 {
		t.Fatalf("after its copy failed again: %+v", g)
	}
	_, hist, _ = s.b.ErrorGroup(s.ctx, g.ID)
	if hist[0].Actor != broker.ErrorGroupSystemActor || !strings.Contains(hist[0].Why, "failed again") {
		t.Fatalf("history %+v", hist)
	}
	// The evidence counts since the state began: the copy that failed
	// again did before it reopened, so a resolve now needs no force.
	if _, err := s.b.SetErrorGroupState(s.ctx, broker.StateChange{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupResolved, Actor: "ana"}); err != nil {
		t.Fatalf("resolve with nothing pending or failed since it reopened: %v", err)
	}
}

// Ignored until a count: it opens by itself once that many more dead
// letters were filed (not regressed); until a time: the maintenance
// opens it once the time has come; for ever: it stays. Ignored groups
// sort last, regressed first.
func testErrorGroupIgnoresEnd(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	s.push("q", "p", "a", "b", "c", "d", "e", "f", "h", "i")
	s.fail("q", "g", 1, "card declined")
	s.fail("q", "g", 1, "gateway timeout")
	s.fail("q", "g", 1, "no such customer")

	g := s.setState(broker.StateChange{Fingerprint: "card declined", State: broker.GroupIgnored, UntilCount: 2})
	if g.UntilFiled != 3 {
		t.Fatalf("ignored until 2 more: %+v", g)
	}
	s.fail("q", "g", 1, "card declined")
	if g = s.group("card declined"); g.State != broker.GroupIgnored {
		t.Fatalf("after 1 of 2 more: %+v", g)
	}
	s.fail("q", "g", 1, "card declined")
	if g = s.group("card declined"); g.State != broker.GroupOpen || g.Regressed || g.UntilFiled != 0 {
		t.Fatalf("after 2 of 2 more: %+v", g)
	}

	s.setState(broker.StateChange{Fingerprint: "gateway timeout", State: broker.GroupIgnored, Until: s.clock.Now().Add(time.Hour)})
	s.setState(broker.StateChange{Fingerprint: "no such customer", State: broker.GroupIgnored})
	list, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Limit: 10})
	if err != nil || len(list) != 3 || list[0].Fingerprint != "card declined" || list[1].State != broker.GroupIgnored || list[2].State != broker.GroupIgnored {
		t.Fatalf("the list, ignored last: %+v %v", list, err)
	}
	s.clock.Advance(59 * time.Minute)
	if err := s.b.CompactStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	if g = s.group("gateway timeout"); g.State != broker.GroupIgnored {
		t.Fatalf("before its time: %+v", g)
	}
	s.clock.Advance(time.Minute)
	if err := s.b.CompactStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	if g = s.group("gateway timeout"); g.State != broker.GroupOpen || g.Regressed || g.ChangedBy != broker.ErrorGroupSystemActor {
		t.Fatalf("at its time, after the maintenance: %+v", g)
	}
	s.fail("q", "g", 1, "no such customer")
	if g = s.group("no such customer"); g.State != broker.GroupIgnored {
		t.Fatalf("ignored for ever, after a new dead letter: %+v", g)
	}
	only, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{State: broker.GroupIgnored, Limit: 10})
	if err != nil || len(only) != 1 || only[0].Fingerprint != "no such customer" {
		t.Fatalf("the ignored only: %+v %v", only, err)
	}
}

// The funnel counts deletes, undoes them on a restore, and counts
// expiry; the 24-hour window forgets what is older, the whole life
// does not; a group outlives its dead letters.
func testErrorGroupFunnelCountsRemovals(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	s.push("q", "p", "a", "b", "c")
	s.fail("q", "g", 3, "card declined")
	const fp = "card declined"
	dead := s.dead("q", "g")
	if _, err := s.b.Delete(s.ctx, dead[0].MessageID(), "g", "dev"); err != nil {
		t.Fatal(err)
	}
	if g := s.group(fp); g.Life.Deleted != 1 || g.Day.Deleted != 1 || g.DeadLetters != 2 {
		t.Fatalf("after a delete: %+v", g)
	}
	if _, err := s.b.Restore(s.ctx, dead[0].MessageID(), "g", "dev"); err != nil {
		t.Fatal(err)
	}
	if g := s.group(fp); g.Life.Deleted != 0 || g.Day.Deleted != 0 || g.DeadLetters != 3 {
		t.Fatalf("after a restore: %+v", g)
	}
	s.clock.Advance(25 * time.Hour)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 3600})
	if _, err := s.b.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	g := s.group(fp)
	if g.Life.Expired != 3 || g.Day.Expired != 3 || g.Day.Filed != 0 || g.Week.Filed != 3 || g.Life.Filed != 3 || g.DeadLetters != 0 {
		t.Fatalf("after expiry a day later: %+v", g)
	}
}

// A group's page lists the consumer versions that filed into it, the
// one last seen first; the list of groups filters by a version: the
// groups it filed into.
func testErrorGroupVersionsAndFilter(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a", "b", "c", "d")
	s.ackVersion("q", "g", broker.AckDLQ, "card declined", "1.8.2")
	s.clock.Advance(time.Minute)
	s.ackVersion("q", "g", broker.AckDLQ, "card declined", "1.8.3")
	s.ackVersion("q", "g", broker.AckDLQ, "gateway timeout", "1.8.2")
	s.ackVersion("q", "g", broker.AckDLQ, "no such customer", "")
	g := s.group("card declined")
	g, _, err := s.b.ErrorGroup(s.ctx, g.ID)
	if err != nil || len(g.Versions) != 2 || g.Versions[0].Version != "1.8.3" || g.Versions[1].Version != "1.8.2" || g.Versions[1].Filed != 1 {
		t.Fatalf("versions of the group: %+v %v", g.Versions, err)
	}
	list, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Version: "1.8.2", Limit: 10})
	var fps []string
	for _, o := range list {
		fps = append(fps, o.Fingerprint)
	}
	if err != nil || strings.Join(fps, ",") != "gateway timeout,card declined" {
		t.Fatalf("groups of 1.8.2: %v %v, want gateway timeout and card declined (newest filed first)", fps, err)
	}
	if none, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Version: "9.9", Limit: 10}); err != nil || len(none) != 0 {
		t.Fatalf("groups of an unknown version: %+v %v", none, err)
	}
}

// Editing what goes with a state (a note, a link) is not a change of
// state: it keeps the evidence's start, so a copy that failed again
// still refuses the resolve; a resolved group's note can be edited while
// copies are pending; an edit that changes nothing writes nothing.
func testErrorGroupEditKeepsTheEvidence(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	s.push("q", "p", "a", "b")
	s.fail("q", "g", 2, "card declined")
	const fp = "card declined"
	s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupAcknowledged})
	dead := s.dead("q", "g")
	if _, err := s.b.Replay(s.ctx, dead[0].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	s.fail("q", "g", 1, "gateway timeout") // the copy fails again, elsewhere
	g := s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupAcknowledged, Note: ptr("looking")})
	if g.Note != "looking" || g.Life.Sub(g.Since).FailedAgain != 1 {
		t.Fatalf("after an edit of the note: %+v", g)
	}
	if _, err := s.b.SetErrorGroupState(s.ctx, broker.StateChange{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupResolved, Actor: "ana"}); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("resolve after an edit, a copy having failed again: %v, want ErrConflict", err)
	}
	// Resolved by force with a copy pending, its note can still change.
	if _, err := s.b.Replay(s.ctx, dead[1].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupResolved, Force: true})
	g = s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupResolved, Note: ptr("fixed in 1.8.3")})
	if g.State != broker.GroupResolved || g.Note != "fixed in 1.8.3" {
		t.Fatalf("a resolved group's note edited: %+v", g)
	}
	_, hist, _ := s.b.ErrorGroup(s.ctx, g.ID)
	s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupResolved, Note: ptr("fixed in 1.8.3")})
	_, again, _ := s.b.ErrorGroup(s.ctx, g.ID)
	if len(again) != len(hist) || hist[0].Why != "note set" || hist[0].From != broker.GroupResolved || hist[0].To != broker.GroupResolved {
		t.Fatalf("history %+v, then %+v: an edit says what it set, one that changes nothing writes nothing", hist, again)
	}
	if _, err := s.b.SetErrorGroupState(s.ctx, broker.StateChange{Queue: "q", Group: "g", Fingerprint: fp, State: broker.GroupIgnored, UntilCount: broker.MaxUntilCount + 1, Actor: "ana"}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("an ignore until too many: %v, want ErrInvalid", err)
	}
}

// A replayed copy that retention removes before its group settled it
// will never have an outcome: it is lost, not pending, so it does not
// block a resolve for ever.
func testErrorGroupCopyLostToRetention(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 3600})
	s.push("q", "p", "a")
	s.fail("q", "g", 1, "card declined")
	const fp = "card declined"
	dead := s.dead("q", "g")
	if _, err := s.b.Replay(s.ctx, dead[0].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	if g := s.group(fp); g.Life.Pending() != 1 {
		t.Fatalf("after the replay: %+v", g)
	}
	s.clock.Advance(3 * time.Hour)
	if _, err := s.b.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	g := s.group(fp)
	if g.Life.Lost != 1 || g.Life.Pending() != 0 {
		t.Fatalf("after retention removed the copy: %+v", g)
	}
	if g = s.setState(broker.StateChange{Fingerprint: fp, State: broker.GroupResolved}); g.State != broker.GroupResolved {
		t.Fatalf("resolve with the copy lost: %+v", g)
	}
}

// The 24 h and 7 d funnels are the sums of the hours in them, whatever
// hour of the day the windows start at (SQLite sums a week from its
// days and the hours at its edge): over 200 hours, dead letters filed
// and deleted at a count that changes from hour to hour, every list
// (with both funnels, DayOnly) and the group's page say the sums of
// the last 24 and 168 hours, the current one with them; so they do
// after the maintenance swept the hours past their retention.
func testErrorGroupWindowsAtEveryHour(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	const fp, hours = "card declined", 200
	var filed, deleted [hours]int64
	sum := func(counts *[hours]int64, now, n int) (total int64) {
		for h := max(0, now-n+1); h <= now; h++ {
			total += counts[h]
		}
		return total
	}
	check := func(step string, now int) {
		t.Helper()
		day := broker.Funnel{Filed: sum(&filed, now, 24), Deleted: sum(&deleted, now, 24)}
		week := broker.Funnel{Filed: sum(&filed, now, 168), Deleted: sum(&deleted, now, 168)}
		list, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Limit: 10})
		if err != nil || len(list) != 1 || list[0].Day != day || list[0].Week != week {
			t.Fatalf("%s, hour %d: list %+v %v, want day %+v, week %+v", step, now, list, err, day, week)
		}
		short, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Limit: 10, DayOnly: true})
		if err != nil || len(short) != 1 || short[0].Day != day || short[0].Week != (broker.Funnel{}) {
			t.Fatalf("%s, hour %d: DayOnly list %+v %v, want day %+v", step, now, short, err, day)
		}
		if g := s.group(fp); g.Day != day || g.Week != week {
			t.Fatalf("%s, hour %d: the group's page says day %+v, week %+v; want %+v, %+v", step, now, g.Day, g.Week, day, week)
		}
	}
	for h := range hours {
		if h > 0 {
			s.clock.Advance(time.Hour)
		}
		n := 1 + h%3
		for i := range n {
			s.push("q", "p", fmt.Sprintf("h%d-%d", h, i))
		}
		s.fail("q", "g", n, fp)
		filed[h] += int64(n)
		if h%5 == 0 {
			dead := s.dead("q", "g")
			if _, err := s.b.Delete(s.ctx, dead[0].MessageID(), "g", "dev"); err != nil {
				t.Fatal(err)
			}
			deleted[h]++
		}
		if h < 30 || h >= hours-30 {
			check("filed", h)
		}
	}
	if _, err := s.b.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	check("swept", hours-1)
}

// The states of several fingerprints come in one read, by fingerprint
// and then consumer group, the absent and empty ones left out and a
// repeated one read once; the dead-letter list's Triage carries the same
// states for its error groups.
func testErrorGroupStatesOfSeveral(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	s.push("q", "p", "a", "b", "c")
	s.fail("q", "g", 1, "timeout")
	s.fail("q", "g", 1, "refused")
	s.fail("q", "g", 1, "declined")
	s.fail("q", "h", 1, "timeout")
	s.fail("q", "h", 1, "refused")
	s.setState(broker.StateChange{Fingerprint: "timeout", State: broker.GroupAcknowledged})

	fps := []string{"declined", "absent", "", "timeout", "refused", "timeout"}
	type seen struct{ group, state string }
	summary := func(m map[string][]broker.OwnedErrorGroup) map[string][]seen {
		out := map[string][]seen{}
		for fp, gs := range m {
			for _, g := range gs {
				if g.Fingerprint != fp || g.Queue != "q" {
					t.Fatalf("%q holds %+v", fp, g)
				}
				out[fp] = append(out[fp], seen{g.Group, string(g.State)})
			}
		}
		return out
	}
	all, err := s.b.ErrorGroupStatesOf(s.ctx, "q", "", fps)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]seen{
		"declined": {{"g", "open"}},
		"timeout":  {{"g", "acknowledged"}, {"h", "open"}},
		"refused":  {{"g", "open"}, {"h", "open"}},
	}
	if got := summary(all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("every consumer group's: %v, want %v", got, want)
	}
	ofH, err := s.b.ErrorGroupStatesOf(s.ctx, "q", "h", fps)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(ofH), map[string][]seen{"timeout": {{"h", "open"}}, "refused": {{"h", "open"}}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("h's: %v, want %v", got, want)
	}
	if m, err := s.b.ErrorGroupStatesOf(s.ctx, "nope", "", fps); err != nil || len(m) != 0 {
		t.Fatalf("an unknown queue: %v, %v", m, err)
	}
	if m, err := s.b.ErrorGroupStatesOf(s.ctx, "q", "nope", fps); err != nil || len(m) != 0 {
		t.Fatalf("an unknown consumer group: %v, %v", m, err)
	}

	for _, group := range []string{"", "g"} {
		tr, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Group: group, Limit: 10}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, g := range tr.ErrorGroups {
			listed = append(listed, g.Fingerprint)
		}
		direct, err := s.b.ErrorGroupStatesOf(s.ctx, "q", group, listed)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) != 3 || fmt.Sprint(summary(tr.Owned)) != fmt.Sprint(summary(direct)) {
			t.Fatalf("Triage of %q: groups %v, states %v, want %v", group, listed, summary(tr.Owned), summary(direct))
		}
	}
}

// A fingerprint that is the error of more consumer groups than a page
// shows (MaxErrorGroups) gives the lowest ids' of them, alone or beside
// others; one of twice as many fills the one read's limit, and the
// fingerprint after it is still read.
func testErrorGroupStatesOfManyGroups(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := ownedBundle(t, harness)
	s.push("q", "p", "a", "b")
	groups := make([]string, 2*broker.MaxErrorGroups)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%03d", i)
		s.fail("q", groups[i], 1, "everywhere")
	}
	for _, g := range groups[:broker.MaxErrorGroups+1] {
		s.fail("q", g, 1, "many")
	}
	last := groups[broker.MaxErrorGroups+1]
	s.fail("q", last, 1, "once")
	for _, fps := range [][]string{{"everywhere"}, {"everywhere", "once"}, {"many"}, {"many", "once"}} {
		m, err := s.b.ErrorGroupStatesOf(s.ctx, "q", "", fps)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range m[fps[0]] {
			got = append(got, g.Group)
		}
		if want := groups[:broker.MaxErrorGroups]; !slices.Equal(got, want) {
			t.Fatalf("%v: %s's groups %v, want %v", fps, fps[0], got, want)
		}
		if len(fps) == 2 && (len(m["once"]) != 1 || m["once"][0].Group != last) {
			t.Fatalf("%v: once's %+v", fps, m["once"])
		}
	}
}
