package storetest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// testMaintainAuditRetention: entries older than the retention go, in
// chunks, counted in the report, the totals and one entry of the broker's
// stream; an entry at the bound and younger ones stay.
func testMaintainAuditRetention(t *testing.T, harness Harness) {
	s := setup(t, harness)
	t0 := s.clock.Now()
	const old = 1234 // more than two chunks
	if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i := range old {
			if err := tx.InsertAudit(s.ctx, &broker.AuditEntry{At: t0.Add(time.Duration(i) * time.Millisecond), Actor: "user:a", Action: broker.AuditReplay, Detail: "old"}); err != nil {
				return err
			}
		}
		for _, at := range []time.Time{t0.Add(time.Hour), t0.Add(48 * time.Hour)} { // the bound, and younger
			if err := tx.InsertAudit(s.ctx, &broker.AuditEntry{At: at, Actor: "user:a", Action: broker.AuditReplay, Detail: "young"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(broker.DefaultAuditRetention + time.Hour) // the bound: t0 + 1 h
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Task(broker.TaskAudit)
	if r.Removed != old || r.Chunks != 3 {
		t.Errorf("audit task: removed %d in %d chunks, want %d in 3", r.Removed, r.Chunks, old)
	}
	all, err := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamAll}, broker.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var young, swept int
	for _, e := range all {
		switch {
		case e.Detail == "young":
			young++
		case e.Action == broker.AuditSwept:
			swept++
			if want := "audit: 1,234 entries older than 400 days removed"; e.Detail != want || e.Actor != broker.BrokerActor || !e.Broker || e.Count != old {
				t.Errorf("swept entry %+v, want %q by %s in the broker's stream", e, want, broker.BrokerActor)
			}
		default:
			t.Errorf("entry kept: %+v", e)
		}
	}
	if young != 2 || swept != 1 {
		t.Errorf("kept %d young entries and %d sweep entries, want 2 and 1", young, swept)
	}
	tot := s.b.MaintenanceTotals()
	audit := slices.IndexFunc(tot, func(t broker.TaskTotals) bool { return t.Task == broker.TaskAudit })
	if len(tot) != len(broker.MaintenanceTasks) || audit < 0 || tot[audit].Removed != old || tot[audit].Runs != 1 {
		t.Errorf("totals %+v", tot)
	}
	// A second run finds nothing and writes no entry.
	rep, err = s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskAudit); r.Removed != 0 || r.Chunks != 1 {
		t.Errorf("second run: %+v", r)
	}
	if tot := s.b.MaintenanceTotals(); tot[audit].Removed != old || tot[audit].Runs != 2 {
		t.Errorf("totals after the second run %+v", tot)
	}
}

// testMaintainAuditKeptForEver: with KeepForever nothing goes.
func testMaintainAuditKeptForEver(t *testing.T, harness Harness) {
	s := setup(t, harness)
	b := broker.New(broker.Config{Store: s.db, Clock: s.clock, AuditRetention: broker.KeepForever})
	if err := b.Record(s.ctx, "user:a", broker.AuditReplay, "old"); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(10 * broker.DefaultAuditRetention)
	rep, err := b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskAudit); r.Removed != 0 {
		t.Errorf("removed %d", r.Removed)
	}
	all, err := b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamAll}, broker.Page{Limit: 10})
	if err != nil || len(all) != 1 {
		t.Errorf("audit %v %v, want the entry kept", all, err)
	}
}

// testMaintainSessions: ended sessions (past their max age, or idle) go in
// chunks; live ones stay, and a login no longer sweeps.
func testMaintainSessions(t *testing.T, harness Harness) {
	s := setup(t, harness)
	u, err := s.b.CreateUser(s.ctx, "ann", broker.RoleViewer, "x", "test")
	if err != nil {
		t.Fatal(err)
	}
	now := s.clock.Now()
	const ended = 1100
	if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i := range ended {
			se := broker.Session{UserID: u.ID, Hash: "h" + time.Duration(i).String(), CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(broker.SessionMaxAge), LastSeenAt: now.Add(-time.Hour)}
			if i%2 == 0 { // past its max age, seen just now
				se.CreatedAt, se.ExpiresAt, se.LastSeenAt = now.Add(-broker.SessionMaxAge), now.Add(-time.Hour), now.Add(-time.Minute)
			}
			if err := tx.InsertSession(s.ctx, &se); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	live, err := s.b.CreateSession(s.ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(broker.SessionIdle - time.Hour) // the odd ones: idle 12 h now; the live one: 11 h
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskSessions); r.Removed != ended || r.Chunks != 3 {
		t.Errorf("sessions task %+v, want %d removed in 3 chunks", r, ended)
	}
	if _, err := s.b.SessionUser(s.ctx, live); err != nil {
		t.Errorf("live session: %v", err)
	}
	if r := rep.Task(broker.TaskStats); r.Chunks != 4 {
		t.Errorf("stats task %+v, want a chunk for each of the 4 bucket tables", r)
	}
}

// faultStore wraps a store to make maintenance fail or stop where a test
// says: fail is asked at each call of the Tx methods faultTx overrides
// (the call's name, and its queue when it has one) and may return an
// error for it; committed is called after each commit of a transaction
// that expired dead letters (MarkExpired).
type faultStore struct {
	broker.Store
	fail      func(call string, queueID int64) error
	committed func()
	// rehearse runs each transaction's fn first in a transaction rolled
	// back, as a store that runs fn again does (Update's rule).
	rehearse bool
}

var errRehearsal = errors.New("rehearsal: rolled back")

type faultTx struct {
	broker.Tx
	s       *faultStore
	expired *bool
}

var errInjected = errors.New("injected failure")

func (s *faultStore) check(call string, queueID int64) error {
	if s.fail == nil {
		return nil
	}
	return s.fail(call, queueID)
}

func (t faultTx) MarkExpired(ctx context.Context, keys []broker.DeadLetterKey, retention time.Duration) error {
	if err := t.s.check("MarkExpired", keys[0].QueueID); err != nil {
		return err
	}
	*t.expired = true
	return t.Tx.MarkExpired(ctx, keys, retention)
}

func (t faultTx) MarkSettled(ctx context.Context, queueID int64, now time.Time, slot time.Duration, after int64, limit int) (int64, int64, error) {
	if err := t.s.check("MarkSettled", queueID); err != nil {
		return 0, 0, err
	}
	return t.Tx.MarkSettled(ctx, queueID, now, slot, after, limit)
}

func (t faultTx) SweepBuckets(ctx context.Context, b broker.BucketTable, before time.Time, limit int) (int64, error) {
	if err := t.s.check("SweepBuckets", 0); err != nil {
		return 0, err
	}
	return t.Tx.SweepBuckets(ctx, b, before, limit)
}

func (s *faultStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	expired := false
	if s.rehearse {
		if err := s.Store.Update(ctx, o, func(tx broker.Tx) error {
			if err := fn(faultTx{tx, s, &expired}); err != nil {
				return err
			}
			return errRehearsal
		}); !errors.Is(err, errRehearsal) {
			return err
		}
	}
	err := s.Store.Update(ctx, o, func(tx broker.Tx) error {
		expired = false
		return fn(faultTx{tx, s, &expired})
	})
	if err == nil && expired && s.committed != nil {
		s.committed()
	}
	return err
}

// withFaults puts the broker of s on a faultStore over its database.
func (s *bundle) withFaults() *faultStore {
	fs := &faultStore{Store: s.db}
	s.b = broker.New(broker.Config{Store: fs, Clock: s.clock})
	return fs
}

// deadLettered files n dead letters of queue in group, 100 a pop.
func (s *bundle) deadLettered(queue, group string, n int) {
	s.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", queue, i)
	}
	for len(ids) > 0 {
		k := min(len(ids), 500)
		s.push(queue, "p", ids[:k]...)
		ids = ids[k:]
	}
	for done := 0; done < n; {
		_, res := s.popTxids(queue, group, 100)
		if len(res.Messages) == 0 {
			s.t.Fatalf("deadLettered: %d of %d, nothing to pop", done, n)
		}
		for _, m := range res.Messages {
			s.ack(m, broker.AckDLQ, "boom")
		}
		done += len(res.Messages)
	}
}

// A task's error does not stop the others, nor one queue's the other
// queues of its task: the stats task fails, and so does the third chunk
// of queue a's expiry; b's dead letters still expire, a's first two
// chunks are counted and said in the audit, the tasks after them run,
// each error is reported by its task and counted in the totals, and
// Maintain returns them joined.
func testMaintainGoesOnAfterAnError(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	for _, q := range []string{"a", "b"} {
		s.configure(q, map[string]any{"deadLetterRetentionSeconds": 60, "retryLimit": 0})
		s.pop(q, "g", 1)
	}
	s.deadLettered("a", "g", 1234)
	s.deadLettered("b", "g", 3)
	qa, err := s.b.Queue(s.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	fs := s.withFaults()
	chunksOfA := 0
	fs.fail = func(call string, queueID int64) error {
		switch {
		case call == "SweepBuckets":
			return errInjected
		case call == "MarkExpired" && queueID == qa.ID:
			if chunksOfA++; chunksOfA > 2 {
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
	for _, want := range []string{"maintenance: stats: ", "maintenance: dead_letters: queue a: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	var ran []string
	for _, r := range rep.Tasks {
		ran = append(ran, r.Task)
		if failed := r.Task == broker.TaskStats || r.Task == broker.TaskDeadLetters; failed != (r.Err != nil) {
			t.Errorf("task %s: error %v", r.Task, r.Err)
		}
	}
	if !slices.Equal(ran, broker.MaintenanceTasks) {
		t.Fatalf("tasks run %v, want all of %v", ran, broker.MaintenanceTasks)
	}
	if r := rep.Task(broker.TaskDeadLetters); r.Removed != 1003 || r.Chunks != 3 {
		t.Errorf("dead-letter task %+v, want a's 1,000 and b's 3 in 3 chunks", r)
	}
	if n := len(s.dead("b", "g")); n != 0 {
		t.Errorf("b keeps %d dead letters after a's error, want 0", n)
	}
	if st := s.stats("a", "g"); st.Depth != 234 || st.DeadLettersExpired != 1000 {
		t.Errorf("a's stats %+v, want 234 left, 1,000 expired", st)
	}
	byQueue := map[string]int{}
	for _, e := range s.expiryAudit() {
		byQueue[e.Queue] += e.Count
	}
	if byQueue["a"] != 1000 || byQueue["b"] != 3 || len(byQueue) != 2 {
		t.Errorf("expiry audit says %v, want a 1,000, b 3", byQueue)
	}
	for _, task := range []string{broker.TaskHistory, broker.TaskAudit, broker.TaskSessions} {
		if r := rep.Task(task); r.Chunks == 0 {
			t.Errorf("task %s ran no chunk: %+v", task, r)
		}
	}
	for _, tt := range s.b.MaintenanceTotals() {
		want := int64(0)
		if tt.Task == broker.TaskStats || tt.Task == broker.TaskDeadLetters {
			want = 1
		}
		if tt.Runs != 1 || tt.Errors != want {
			t.Errorf("totals %+v, want 1 run, %d errors", tt, want)
		}
	}
	// Mended, the next run finishes a and fails nothing.
	fs.fail = nil
	rep, err = s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskDeadLetters); r.Removed != 234 || r.Err != nil {
		t.Errorf("second run %+v, want a's 234", r)
	}
}

// A cancelled context stops the run at once: no later queue, no later task.
func testMaintainStopsWhenCancelled(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	for _, q := range []string{"a", "b"} {
		s.configure(q, map[string]any{"deadLetterRetentionSeconds": 60, "retryLimit": 0})
		s.pop(q, "g", 1)
		s.deadLettered(q, "g", 3)
	}
	fs := s.withFaults()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	fs.committed = cancel // after a's chunk
	s.clock.Advance(61 * time.Second)
	rep, err := s.b.Maintain(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("maintain: %v, want cancelled", err)
	}
	if strings.Contains(err.Error(), "queue b") {
		t.Errorf("maintain: %v, want b not tried", err)
	}
	if last := rep.Tasks[len(rep.Tasks)-1]; last.Task != broker.TaskDeadLetters || last.Removed != 3 {
		t.Errorf("last task run %+v, want the dead letters' with a's 3", last)
	}
	if n := len(s.dead("b", "g")); n != 3 {
		t.Errorf("b keeps %d dead letters, want its 3 (not reached)", n)
	}
}

// One queue whose message retention fails does not keep the other
// queues' settled messages: the messages task goes on to them, and says
// which queue failed.
func testMessageRetentionGoesOnAfterAQueueFails(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	for _, q := range []string{"a", "b"} {
		s.configure(q, map[string]any{"completedRetentionSeconds": 60})
		s.subscribeAll(q, "g")
		s.push(q, "p", q+"1", q+"2")
		if got := s.drain(q, "g"); len(got) != 2 {
			t.Fatalf("%s drained %v", q, got)
		}
	}
	qa, err := s.b.Queue(s.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	fs := s.withFaults()
	fs.fail = func(call string, queueID int64) error {
		if call == "MarkSettled" && queueID == qa.ID {
			return errInjected
		}
		return nil
	}
	for range 2 { // the marks, then the messages they let go
		rep, err := s.b.Maintain(s.ctx)
		if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "maintenance: messages: queue a: ") {
			t.Fatalf("maintain: %v, want queue a's injected failure", err)
		}
		if r := rep.Task(broker.TaskMessages); r.Err == nil {
			t.Fatalf("messages task %+v, want its error", r)
		}
		s.clock.Advance(61 * time.Second)
	}
	if got := s.kept("b", "p"); len(got) != 0 {
		t.Errorf("b keeps %v after a's error, want its settled messages gone", got)
	}
	if got := s.kept("a", "p"); len(got) != 2 {
		t.Errorf("a keeps %v, want both (its sweep failed)", got)
	}
}

// optionsRecorder is a store that records the options of every Update,
// and the broker's code that asked for it (the first caller in package
// broker outside service.go's update helpers).
type optionsRecorder struct {
	broker.Store
	mu     sync.Mutex
	writes []recordedWrite
}

type recordedWrite struct {
	o    broker.UpdateOptions
	site string
}

func (s *optionsRecorder) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	site := "?"
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.File, "/broker/") && !strings.HasSuffix(f.File, "_test.go") && !strings.HasSuffix(f.File, "/service.go") {
			site = fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
			break
		}
		if !more {
			break
		}
	}
	s.mu.Lock()
	s.writes = append(s.writes, recordedWrite{o, site})
	s.mu.Unlock()
	return s.Store.Update(ctx, o, fn)
}

// take returns the writes recorded since the last take.
func (s *optionsRecorder) take() []recordedWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.writes
	s.writes = nil
	return w
}

// testMaintenanceWritesAreBackground: every write of Maintain is marked
// Background (the store writes it alone, when no other write waits), and
// so is every write of CompactStats and SweepHistory, with the tasks given
// something to remove: dead letters and messages past their retention
// (completed retention too, which takes two runs: marks, then deletes),
// audit entries past the audit retention.
func testMaintenanceWritesAreBackground(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("dl", map[string]any{"deadLetterRetentionSeconds": 60, "retryLimit": 0})
	s.pop("dl", "g", 1)
	s.deadLettered("dl", "g", 3)
	s.configure("rt", map[string]any{"retentionSeconds": 60})
	s.push("rt", "p", "m1", "m2")
	s.configure("cr", map[string]any{"completedRetentionSeconds": 60})
	s.push("cr", "p", "c1", "c2")
	if got := s.drain("cr", "g"); len(got) != 2 {
		t.Fatalf("drained %v", got)
	}
	if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		return tx.InsertAudit(s.ctx, &broker.AuditEntry{At: s.clock.Now(), Actor: "user:a", Action: broker.AuditReplay, Detail: "old"})
	}); err != nil {
		t.Fatal(err)
	}
	rec := &optionsRecorder{Store: s.db}
	s.b = broker.New(broker.Config{Store: rec, Clock: s.clock})
	s.clock.Advance(broker.DefaultAuditRetention + time.Hour)
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []string{broker.TaskDeadLetters, broker.TaskMessages, broker.TaskAudit} {
		if r := rep.Task(task); r.Removed == 0 {
			t.Errorf("task %s removed nothing: %+v", task, r)
		}
	}
	s.clock.Advance(time.Hour)
	rep, err = s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskMessages); r.Removed != 2 {
		t.Errorf("second run: messages task %+v, want the 2 completed removed", r)
	}
	check := func(what string, min int) {
		t.Helper()
		writes := rec.take()
		if len(writes) < min {
			t.Errorf("%s: %d writes, want at least %d", what, len(writes), min)
		}
		for _, w := range writes {
			if !w.o.Background {
				t.Errorf("%s: a write at %s has options %+v, not Background", what, w.site, w.o)
			}
		}
	}
	check("Maintain", len(broker.MaintenanceTasks))
	if err := s.b.CompactStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	check("CompactStats", 1)
	if err := s.b.SweepHistory(s.ctx); err != nil {
		t.Fatal(err)
	}
	check("SweepHistory", 1)
}
