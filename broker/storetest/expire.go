package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// expiryAudit returns the broker's entries of dead letters that expired.
func (s *bundle) expiryAudit() []broker.AuditEntry {
	s.t.Helper()
	es, err := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamBroker, Action: broker.AuditDeadLettersExpired}, broker.Page{Limit: 100})
	if err != nil {
		s.t.Fatal(err)
	}
	return es
}

// maintain runs maintenance once and returns the dead-letter task's report.
func (s *bundle) maintain() broker.TaskReport {
	s.t.Helper()
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		s.t.Fatalf("maintain: %v", err)
	}
	return rep.Task(broker.TaskDeadLetters)
}

// A dead letter expires once it is older than deadLetterRetentionSeconds,
// not a millisecond before; it leaves its group's dead letters (and only
// its group's), counted in depth, dead_letters_expired, the buckets and
// its error group, the full-text index no longer finds it, the broker's
// audit says how many, its page says it expired, when and by which rule,
// and it cannot be restored.
func testDeadLetterExpiresAtItsTime(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("orders", map[string]any{"deadLetterRetentionSeconds": 3600})
	s.pop("orders", "billing", 1) // both groups read from here on
	s.pop("orders", "audit", 1)
	s.push("orders", "p", "m1", "m2")
	t0 := s.clock.Now()
	s.fail("orders", "billing", 1, "zebrafish exploded") // m1 in billing at t0
	s.clock.Advance(10 * time.Minute)
	s.fail("orders", "audit", 1, "quokka timeout")       // m1 in audit at t0+10 min
	s.fail("orders", "billing", 1, "zebrafish exploded") // m2 in billing at t0+10 min
	m1 := s.dead("orders", "audit")[0].MessageID()

	// An hour after the first failure: exactly the retention old, kept.
	s.clock.Advance(50 * time.Minute)
	if r := s.maintain(); r.Removed != 0 {
		t.Fatalf("at the retention's end: %d expired, want 0", r.Removed)
	}
	if n := len(s.dead("orders", "billing")); n != 2 {
		t.Fatalf("billing keeps %d dead letters, want 2", n)
	}
	s.clock.Advance(time.Millisecond)
	at := s.clock.Now()
	if r := s.maintain(); r.Removed != 1 || r.Chunks != 1 {
		t.Fatalf("a millisecond later: %+v, want 1 expired in 1 chunk", r)
	}
	billing := s.dead("orders", "billing")
	if len(billing) != 1 || billing[0].TransactionID != "m2" {
		t.Fatalf("billing keeps %+v, want m2 only", billing)
	}
	if n := len(s.dead("orders", "audit")); n != 1 {
		t.Errorf("audit keeps %d dead letters, want its m1 (filed later)", n)
	}
	st := s.stats("orders", "billing")
	if st.Depth != 1 || st.DeadLettersExpired != 1 || st.Deleted != 0 {
		t.Errorf("billing stats %+v, want depth 1, 1 expired, none deleted", st)
	}
	if st := s.stats("orders", "audit"); st.Depth != 1 || st.DeadLettersExpired != 0 {
		t.Errorf("audit stats %+v", st)
	}
	gs, err := s.b.ErrorGroups(s.ctx, "orders", "billing", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].DeadLetters != 1 {
		t.Errorf("billing's error groups %+v, want one of 1", gs)
	}
	// The buckets of the minute it expired in count it.
	series, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "orders", From: at.Add(-time.Hour), To: at.Add(time.Minute), Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var inBuckets int64
	for _, se := range series {
		for _, p := range se.Points {
			if p.DeadLettersExpired != 0 && (se.Group != "billing" || !p.At.Equal(at.Truncate(time.Minute))) {
				t.Errorf("expiry counted in %s at %s", se.Group, p.At)
			}
			inBuckets += p.DeadLettersExpired
		}
	}
	if inBuckets != 1 {
		t.Errorf("buckets count %d expired, want 1", inBuckets)
	}
	// The error text is no longer found; the payload still is (audit's
	// dead letter of m1 has it).
	if p, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "orders", Text: "zebrafish", WithTotal: true}); err != nil || p.Total != 1 || p.Items[0].TransactionID != "m2" {
		t.Errorf("search of the error text: %+v %v, want m2 only", p.Items, err)
	}
	if p, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "orders", Text: "m1", WithTotal: true}); err != nil || p.Total != 1 || p.Items[0].Group != "audit" {
		t.Errorf("search of m1's payload: %+v %v, want audit's", p.Items, err)
	}
	es := s.expiryAudit()
	if len(es) != 1 {
		t.Fatalf("expiry audit %+v, want one entry", es)
	}
	if e := es[0]; e.Detail != "dead letters: 1 expired in orders / billing, older than 1 hour (deadLetterRetentionSeconds)" ||
		e.Actor != broker.BrokerActor || !e.Broker || e.Queue != "orders" || e.Group != "billing" || e.Count != 1 {
		t.Errorf("expiry audit entry %+v", e)
	}
	// Its page: expired, when, by which rule.
	h := s.history(m1, "billing")
	f, ok := h.Fate(h.GroupID)
	if !ok || f.How != broker.FateExpired || !f.At.Equal(at) || f.Actor != broker.BrokerActor || f.Deletion == nil ||
		f.Deletion.Retention != time.Hour || !f.Deletion.RestoreUntil.IsZero() || !f.Deletion.DeadLetter.FailedAt.Equal(t0) {
		t.Fatalf("fate %+v (deletion %+v), want expired at %s under 1 h, not restorable", f, f.Deletion, at)
	}
	if _, err := s.b.Restore(s.ctx, m1, "billing", "user:a"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("restore of an expired dead letter: %v, want not found", err)
	}
	if len(h.Attempts) != 0 {
		t.Errorf("attempts kept: %+v", h.Attempts)
	}
	// A run with nothing due writes no audit entry.
	if r := s.maintain(); r.Removed != 0 {
		t.Errorf("second run: %+v", r)
	}
	if n := len(s.expiryAudit()); n != 1 {
		t.Errorf("%d audit entries after a run with nothing due, want 1", n)
	}
}

// More than a chunk due: each chunk a transaction, all counted, one audit
// entry per queue and group for the run.
func testDeadLettersExpireInChunks(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 60, "retryLimit": 0})
	s.pop("q", "g", 1)
	const n = 1234
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m-%d", i)
	}
	s.push("q", "p", ids[:600]...)
	s.push("q", "p", ids[600:]...)
	for done := 0; done < n; {
		_, res := s.popTxids("q", "g", 100)
		for _, m := range res.Messages {
			s.ack(m, broker.AckDLQ, "boom")
		}
		done += len(res.Messages)
	}
	s.clock.Advance(61 * time.Second)
	r := s.maintain()
	if r.Removed != n || r.Chunks != 3 {
		t.Errorf("report %+v, want %d in 3 chunks", r, n)
	}
	t.Logf("%d dead letters expired in %d chunks, %s", r.Removed, r.Chunks, r.Took)
	if st := s.stats("q", "g"); st.Depth != 0 || st.DeadLettersExpired != n {
		t.Errorf("stats %+v", st)
	}
	if gs, err := s.b.ErrorGroups(s.ctx, "q", "g", "", 10); err != nil || len(gs) != 0 {
		t.Errorf("error groups %+v %v, want none", gs, err)
	}
	es := s.expiryAudit()
	if len(es) != 1 || es[0].Count != n || !strings.HasPrefix(es[0].Detail, "dead letters: 1,234 expired in q / g, older than 1 minute") {
		t.Errorf("audit %+v", es)
	}
	for _, tt := range s.b.MaintenanceTotals() {
		if tt.Task == broker.TaskDeadLetters && tt.Removed != n {
			t.Errorf("totals %+v", tt)
		}
	}
}

// A run stopped between chunks (shutdown) leaves an audit that says all
// its committed chunks expired: each chunk writes it in its own
// transaction, the first chunk the run's entry of the group, the later
// ones its count. The next run says the rest in an entry of its own.
func testExpiryAuditSaysEachCommittedChunk(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 60, "retryLimit": 0})
	s.pop("q", "g", 1)
	s.deadLettered("q", "g", 1234)
	fs := s.withFaults()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	chunks := 0
	fs.committed = func() {
		if chunks++; chunks == 2 {
			cancel()
		}
	}
	s.clock.Advance(61 * time.Second)
	rep, err := s.b.Maintain(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("maintain: %v, want cancelled", err)
	}
	if r := rep.Task(broker.TaskDeadLetters); r.Removed != 1000 || r.Chunks != 2 {
		t.Fatalf("stopped run %+v, want 1,000 in 2 chunks", r)
	}
	es := s.expiryAudit()
	if len(es) != 1 || es[0].Count != 1000 || es[0].Queue != "q" || es[0].Group != "g" ||
		es[0].Detail != "dead letters: 1,000 expired in q / g, older than 1 minute (deadLetterRetentionSeconds)" {
		t.Fatalf("audit after the stop %+v, want one entry of 1,000", es)
	}
	if st := s.stats("q", "g"); st.DeadLettersExpired != 1000 || st.Depth != 234 {
		t.Errorf("stats %+v", st)
	}
	if r := s.maintain(); r.Removed != 234 {
		t.Fatalf("next run %+v, want the 234 left", r)
	}
	es = s.expiryAudit()
	if len(es) != 2 || es[0].Count != 234 || es[1].Count != 1000 || !strings.HasPrefix(es[0].Detail, "dead letters: 234 expired in q / g") {
		t.Errorf("audit after the next run %+v, want 234 (new) and 1,000", es)
	}
}

// A chunk's transaction run again (the first time rolled back) writes
// the audit once: the entries are taken as committed, not as the rolled
// back run wrote them. A retention changed during a run starts entries
// of its own, each saying its rule.
func testExpiryAuditWhenAChunkRunsAgain(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 60, "retryLimit": 0})
	s.pop("q", "g", 1)
	s.deadLettered("q", "g", 1234)
	fs := s.withFaults()
	fs.rehearse = true
	chunks := 0
	fs.committed = func() {
		if chunks++; chunks == 1 {
			s.configure("q", map[string]any{"deadLetterRetentionSeconds": 30})
		}
	}
	s.clock.Advance(61 * time.Second)
	if r := s.maintain(); r.Removed != 1234 || r.Chunks != 3 {
		t.Fatalf("run %+v, want 1,234 in 3 chunks", r)
	}
	es := s.expiryAudit()
	if len(es) != 2 || es[0].Count != 734 || es[1].Count != 500 ||
		!strings.HasPrefix(es[0].Detail, "dead letters: 734 expired in q / g, older than 30 seconds") ||
		!strings.HasPrefix(es[1].Detail, "dead letters: 500 expired in q / g, older than 1 minute") {
		t.Errorf("audit %+v, want 500 under 1 minute then 734 under 30 seconds", es)
	}
	if st := s.stats("q", "g"); st.DeadLettersExpired != 1234 || st.Depth != 0 {
		t.Errorf("stats %+v", st)
	}
}

// The run's entry gone between chunks (swept): the next chunk writes a
// new one that says the run's count, and the run goes on.
func testExpiryAuditEntryGoneBetweenChunks(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 60, "retryLimit": 0})
	s.pop("q", "g", 1)
	s.deadLettered("q", "g", 1234)
	fs := s.withFaults()
	chunks := 0
	fs.committed = func() {
		if chunks++; chunks == 1 {
			if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
				_, err := tx.SweepAudit(s.ctx, s.clock.Now().Add(time.Hour), 10000)
				return err
			}); err != nil {
				t.Error(err)
			}
		}
	}
	s.clock.Advance(61 * time.Second)
	if r := s.maintain(); r.Removed != 1234 {
		t.Fatalf("run %+v", r)
	}
	if es := s.expiryAudit(); len(es) != 1 || es[0].Count != 1234 {
		t.Errorf("audit %+v, want one entry of the run's 1,234", es)
	}
}

// A chunk that fails after others committed leaves their audit: the
// failure is the run's, the audit still says the 1,000 that went.
func testExpiryAuditSurvivesAFailedChunk(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 60, "retryLimit": 0})
	s.pop("q", "g", 1)
	s.deadLettered("q", "g", 1234)
	fs := s.withFaults()
	calls := 0
	fs.fail = func(call string, _ int64) error {
		if call == "MarkExpired" {
			if calls++; calls == 3 {
				return errInjected
			}
		}
		return nil
	}
	s.clock.Advance(61 * time.Second)
	rep, err := s.b.Maintain(s.ctx)
	if !errors.Is(err, errInjected) {
		t.Fatalf("maintain: %v, want the injected failure", err)
	}
	if r := rep.Task(broker.TaskDeadLetters); r.Removed != 1000 || !errors.Is(r.Err, errInjected) {
		t.Fatalf("report %+v", r)
	}
	if es := s.expiryAudit(); len(es) != 1 || es[0].Count != 1000 {
		t.Fatalf("audit %+v, want one entry of 1,000", es)
	}
}

// A queue that keeps its dead letters (the default) expires none; one
// whose retention is set later expires by the new value.
func testDeadLettersKeptWithoutRetention(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{})
	s.pop("q", "g", 1)
	s.push("q", "p", "a")
	s.fail("q", "g", 1, "boom")
	if d := s.dead("q", "g"); len(d) != 1 || !d[0].ExpiresAt.IsZero() {
		t.Fatalf("dead letters %+v, want one that does not expire", d)
	}
	s.clock.Advance(365 * 24 * time.Hour)
	if r := s.maintain(); r.Removed != 0 {
		t.Fatalf("kept queue: %+v", r)
	}
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 400 * 24 * 3600})
	if r := s.maintain(); r.Removed != 0 {
		t.Fatalf("400 days: %+v", r)
	}
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 300 * 24 * 3600})
	if r := s.maintain(); r.Removed != 1 {
		t.Fatalf("300 days: %+v", r)
	}
}

// Each dead letter read says when it expires: the list, the dead letter,
// its history.
func testDeadLetterSaysWhenItExpires(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 7 * 24 * 3600})
	s.pop("q", "g", 1)
	s.push("q", "p", "a")
	s.fail("q", "g", 1, "boom")
	d := s.dead("q", "g")[0]
	want := d.FailedAt.Add(7 * 24 * time.Hour)
	if !d.ExpiresAt.Equal(want) {
		t.Errorf("list: expires %s, want %s", d.ExpiresAt, want)
	}
	one, err := s.b.DeadLetter(s.ctx, d.MessageID(), "g")
	if err != nil || !one.ExpiresAt.Equal(want) {
		t.Errorf("dead letter: expires %s (%v), want %s", one.ExpiresAt, err, want)
	}
	if h := s.history(d.MessageID(), "g"); len(h.DeadLetters) != 1 || !h.DeadLetters[0].ExpiresAt.Equal(want) {
		t.Errorf("history: %+v", h.DeadLetters)
	}
	tr, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Limit: 10}, 5)
	if err != nil || len(tr.Page.Items) != 1 || !tr.Page.Items[0].ExpiresAt.Equal(want) {
		t.Errorf("triage: %+v %v", tr.Page.Items, err)
	}
}

// "N expire within 24 h" counts exactly the dead letters the next 24 h
// expire, per queue and per group, and the list's filter it links to
// (failedAt before FailedTo) selects exactly those: a day later they are
// the ones gone.
func testExpiringWithinADay(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 48 * 3600})
	s.pop("q", "a", 1)
	s.pop("q", "b", 1)
	// a fails one every 10 h: a0 at t0, a1 at t0+10 h, a2, a3; b one at
	// t0+40 h (b1).
	for i := range 4 {
		s.push("q", "p", fmt.Sprintf("a%d", i))
		s.fail("q", "a", 1, "boom")
		s.clock.Advance(10 * time.Hour)
	}
	s.drain("q", "b")
	s.push("q", "p", "b1")
	s.drain("q", "a")
	s.fail("q", "b", 1, "boom")
	now := s.clock.Now() // t0 + 40 h
	tr, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Limit: 10}, 5)
	if err != nil {
		t.Fatal(err)
	}
	e := tr.Expiring
	if e == nil || e.Count != 2 || e.More || !e.Before.Equal(now.Add(24*time.Hour)) || !e.FailedTo.Equal(now.Add(-24*time.Hour)) {
		t.Fatalf("expiring %+v, want 2 (a0 at t0, a1 at t0+10 h) before %s", e, now.Add(24*time.Hour))
	}
	tr, err = s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Group: "b", Limit: 10}, 5)
	if err != nil || tr.Expiring == nil || tr.Expiring.Count != 0 {
		t.Fatalf("group b: %+v %v, want 0", tr.Expiring, err)
	}
	// The link's filter: exactly those.
	p, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", To: e.FailedTo, Limit: 100, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, d := range p.Items {
		listed = append(listed, d.TransactionID)
		if !d.ExpiresAt.Before(e.Before) {
			t.Errorf("%s listed, expires %s", d.TransactionID, d.ExpiresAt)
		}
	}
	if strings.Join(listed, ",") != "a1,a0" || p.Total != 2 {
		t.Fatalf("linked list %v (total %d), want a1,a0", listed, p.Total)
	}
	// 24 h later exactly those have expired.
	s.clock.Advance(24 * time.Hour)
	if r := s.maintain(); r.Removed != 2 {
		t.Errorf("a day later %d expired, want 2", r.Removed)
	}
	var left []string
	for _, d := range s.dead("q", "") {
		left = append(left, d.TransactionID)
	}
	if strings.Join(left, ",") != "b1,a3,a2" {
		t.Errorf("left %v, want b1,a3,a2", left)
	}
	// A queue that keeps its dead letters says nothing of expiry.
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 0})
	if tr, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Limit: 10}, 5); err != nil || tr.Expiring != nil {
		t.Errorf("kept queue: %+v %v", tr.Expiring, err)
	}
}

// The count stops at ExpiringCap: past it the list says "more than".
// (The dead letters are written straight to the store: only the count's
// index is read.)
func testExpiringCountIsCapped(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"deadLetterRetentionSeconds": 3600})
	qu, err := s.b.Queue(s.ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	old := s.clock.Now().Add(-30 * time.Minute) // expires within 24 h
	if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i := range broker.ExpiringCap + 1 {
			if err := tx.InsertDeadLetter(s.ctx, &broker.DeadLetter{Seq: int64(i + 1), QueueID: qu.ID, PartitionID: 1, GroupID: 1, Error: "e",
				FailedAt: old.Add(time.Duration(i) * time.Millisecond), Fingerprint: "f"}, true); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tr, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Limit: 1}, 1)
	took := time.Since(start)
	if err != nil || tr.Expiring == nil || tr.Expiring.Count != broker.ExpiringCap || !tr.Expiring.More {
		t.Fatalf("expiring %+v %v, want more than %d", tr.Expiring, err, broker.ExpiringCap)
	}
	t.Logf("triage with a capped expiring count: %s", took)
}

// A dead letter whose message retention removed first expires the same
// way, and its page still says what became of it (the record keeps the
// message's push time).
func testDeadLetterExpiresAfterItsMessageWent(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"completedRetentionSeconds": 60, "deadLetterRetentionSeconds": 3600})
	s.pop("q", "g", 1)
	s.push("q", "p", "m1")
	s.fail("q", "g", 1, "boom")
	id := s.dead("q", "g")[0].MessageID()
	var messages int64
	for range 20 { // a minute a run: the message goes well before the hour
		s.clock.Advance(time.Minute)
		rep, err := s.b.Maintain(s.ctx)
		if err != nil {
			t.Fatal(err)
		}
		messages += rep.Task(broker.TaskMessages).Removed
	}
	if messages == 0 {
		t.Fatal("the message sweep removed nothing: the case needs the message gone")
	}
	if d := s.dead("q", "g"); len(d) != 1 || string(d[0].Payload) != `{"tx":"m1"}` {
		t.Fatalf("dead letter after its message went: %+v", d)
	}
	s.clock.Advance(time.Hour)
	if r := s.maintain(); r.Removed != 1 {
		t.Fatalf("expiry: %+v", r)
	}
	h := s.history(id, "g")
	if f, ok := h.Fate(h.GroupID); !ok || f.How != broker.FateExpired || f.Deletion.Retention != time.Hour || h.Message.ID() != id {
		t.Fatalf("history %+v", h)
	}
}
