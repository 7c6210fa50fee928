package storetest

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// logLines is a log handler that sends the message of each record, and
// its task when it names one, to a channel.
type logLines chan string

func (h logLines) Enabled(context.Context, slog.Level) bool { return true }
func (h logLines) Handle(_ context.Context, r slog.Record) error {
	task := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "task" {
			task = a.Value.String()
		}
		return true
	})
	select {
	case h <- r.Message + " " + task:
	default: // full: a test that logs this much has failed already
	}
	return nil
}
func (h logLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logLines) WithGroup(string) slog.Handler      { return h }

// behind is how long a test waits at most for a run of maintenance that
// must come (a fail-safe: the test moves on as soon as it has come).
const behind = time.Minute

// maintained takes one run of maintenance off logs: with an interval of
// 1 ns every task falls behind, and says so.
func (h logLines) maintained(t *testing.T, what string) {
	t.Helper()
	deadline := time.NewTimer(behind)
	defer deadline.Stop()
	for _, task := range broker.MaintenanceTasks {
		select {
		case got := <-h:
			if want := "maintenance falls behind: a task took longer than the interval " + task; got != want {
				t.Fatalf("%s: logged %q, want %q", what, got, want)
			}
		case <-deadline.C:
			t.Fatalf("%s: no maintenance within %s", what, behind)
		}
	}
}

// quiet fails the test if anything was logged.
func (h logLines) quiet(t *testing.T, what string) {
	t.Helper()
	select {
	case m := <-h:
		t.Fatalf("%s: logged %q", what, m)
	default:
	}
}

// runner is a broker's Run in the background, its schedule moved by hand.
type runner struct {
	tick, flush chan time.Time
	stop        context.CancelFunc
	done        chan struct{}
}

// start runs b.Run with cfg (its interval 1 ns) until stopped, at the
// latest when the test ends.
func start(t *testing.T, b *broker.Broker, cfg broker.RunConfig) *runner {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	r := &runner{tick: make(chan time.Time), flush: make(chan time.Time), stop: stop, done: make(chan struct{})}
	cfg.MaintenanceEvery, cfg.MaintainTicks, cfg.FlushTicks = time.Nanosecond, r.tick, r.flush
	go func() {
		defer close(r.done)
		b.Run(ctx, cfg)
	}()
	t.Cleanup(func() { stop(); <-r.done })
	return r
}

// settle returns once the loop has done what it was sent before: it
// takes a flush only between its runs.
func (r *runner) settle() { r.flush <- time.Time{} }

// halt ends the Run and waits for it to return.
func (r *runner) halt() {
	r.stop()
	<-r.done
}

// runSetup opens the store at path (a SQLite file, or a PostgreSQL
// database) and a broker over it, the store itself its Leader, logging
// to the returned channel; an audit entry is past its retention, for the
// audit task to remove.
func runSetup(t *testing.T, harness Harness, path string) (*bundle, logLines) {
	t.Helper()
	ctx := context.Background()
	d, err := harness.Open(ctx, path, Options{NeverAlone: true})
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	logs := make(logLines, 1000)
	s := &bundle{t: t, ctx: ctx, db: d, clock: c, b: broker.New(broker.Config{Store: d, Clock: c, Logger: slog.New(logs)})}
	t.Cleanup(s.b.Close)
	if err := s.b.Record(ctx, "user:a", broker.AuditReplay, "old"); err != nil {
		t.Fatal(err)
	}
	c.Advance(broker.DefaultAuditRetention + time.Hour)
	return s, logs
}

// auditTotals are the audit task's totals.
func auditTotals(b *broker.Broker) broker.TaskTotals {
	tot := b.MaintenanceTotals()
	return tot[slices.IndexFunc(tot, func(t broker.TaskTotals) bool { return t.Task == broker.TaskAudit })]
}

// Run maintains as the process takes the lead (the store's: a SQLite
// file's one process at once, on PostgreSQL once it holds the lock) and
// at each tick, not at a flush of the counts, logs the tasks that fall
// behind, and stops with its context.
func testRunMaintainsOnTakingTheLeadAndAtEachTick(t *testing.T, harness Harness) {
	t.Parallel()
	s, logs := runSetup(t, harness, harness.New(t, "lazarus.db"))
	r := start(t, s.b, broker.RunConfig{})
	logs.maintained(t, "on taking the lead")
	r.tick <- time.Time{}
	logs.maintained(t, "at the first tick")
	r.settle()
	logs.quiet(t, "at a flush")
	r.tick <- time.Time{}
	logs.maintained(t, "at the second tick")
	r.halt()
	if a := auditTotals(s.b); a.Runs != 3 || a.Removed != 1 {
		t.Errorf("the audit task's totals %+v, want 3 runs and the old entry removed", a)
	}
	logs.quiet(t, "after the runs")
}

// handLeader is a Leader the test moves: it leads while set, and then
// runs the lead's function, whose context ends when it is unset.
type handLeader struct {
	mu      sync.Mutex
	leading bool
	changed chan struct{} // closed at the next change
	leads   atomic.Int64  // the lead's function started
}

func newHandLeader() *handLeader { return &handLeader{changed: make(chan struct{})} }

func (h *handLeader) set(leading bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading = leading
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *handLeader) state() (bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leading, h.changed
}

func (h *handLeader) Leading() bool { l, _ := h.state(); return l }

func (h *handLeader) Lead(ctx context.Context, fn func(context.Context)) {
	for {
		leading, changed := h.state()
		if !leading {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		lctx, cancel := context.WithCancel(ctx)
		var lost sync.WaitGroup
		lost.Go(func() {
			defer cancel()
			for ch := changed; ; {
				select {
				case <-lctx.Done():
					return
				case <-ch:
					var still bool
					if still, ch = h.state(); !still {
						return
					}
				}
			}
		})
		h.leads.Add(1)
		fn(lctx)
		cancel()
		lost.Wait()
		if ctx.Err() != nil {
			return
		}
	}
}

// A process that does not lead neither maintains nor runs the jobs, at
// start or at a tick; it does both once it takes the lead, and stops
// both when it loses it.
func testRunMaintainsAndRunsJobsOnlyWhileItLeads(t *testing.T, harness Harness) {
	t.Parallel()
	s, logs := runSetup(t, harness, harness.New(t, "lazarus.db"))
	s.fill("q", "g", []string{"p"}, 2)
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &broker.DLQQuery{Queue: "q"}, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	lead := newHandLeader()
	var onLead atomic.Int64
	r := start(t, s.b, broker.RunConfig{Leader: lead, OnLead: func(context.Context) { onLead.Add(1) }})
	r.tick <- time.Time{}
	r.settle()
	logs.quiet(t, "a tick while not leading")
	if a := auditTotals(s.b); a.Runs != 0 || onLead.Load() != 0 {
		t.Fatalf("not leading: the audit task ran %d times, OnLead %d", a.Runs, onLead.Load())
	}
	if v, err := s.b.JobDetail(s.ctx, j.ID); err != nil || v.State != broker.JobRunning || v.Done != 0 {
		t.Fatalf("not leading, the job ran: %+v %v", v.Job, err)
	}

	lead.set(true)
	logs.maintained(t, "on taking the lead")
	wctx, cancel := context.WithTimeout(s.ctx, behind)
	defer cancel()
	if done, err := s.b.WaitJob(wctx, j.ID); err != nil || done.State != broker.JobDone || done.Done != 2 {
		t.Fatalf("leading, the job: %+v %v", done, err)
	}
	r.tick <- time.Time{}
	logs.maintained(t, "a tick while leading")

	lead.set(false)
	r.tick <- time.Time{}
	r.settle()
	logs.quiet(t, "a tick once the lead is lost")
	r.halt()
	if a := auditTotals(s.b); a.Runs != 2 || a.Removed != 1 || onLead.Load() != 1 || lead.leads.Load() != 1 {
		t.Errorf("the audit task's totals %+v, OnLead %d, leads %d: want 2 runs, 1 removed, one lead", a, onLead.Load(), lead.leads.Load())
	}
}

// Of two processes on one PostgreSQL database, only the one that leads
// maintains; when its Run stops, the other takes the lead and maintains
// at once. Only on a store several processes share
// (Harness.SeveralProcesses).
func testRunMaintainsInTheLeaderOfTwoProcessesOnly(t *testing.T, harness Harness) {
	t.Parallel()
	dsn := harness.New(t, "lazarus")
	a, aLogs := runSetup(t, harness, dsn)
	b, bLogs := runSetup(t, harness, dsn)
	ra := start(t, a.b, broker.RunConfig{})
	aLogs.maintained(t, "A on taking the lead")
	if !a.db.Leading() {
		t.Fatal("A maintained without leading")
	}
	rb := start(t, b.b, broker.RunConfig{})
	rb.tick <- time.Time{}
	rb.settle()
	bLogs.quiet(t, "B at a tick while A leads")
	if n := auditTotals(b.b).Runs; n != 0 {
		t.Fatalf("B, not leading, ran the audit task %d times", n)
	}
	ra.tick <- time.Time{}
	aLogs.maintained(t, "A at a tick")

	ra.halt() // A's lock goes with its Run
	if a.db.Leading() {
		t.Fatal("A leads after its Run returned")
	}
	bLogs.maintained(t, "B on taking the lead from A")
	if !b.db.Leading() {
		t.Fatal("B maintained without leading")
	}
	rb.halt()
}

// storedStats reads a queue's only group's counts as written in the
// store (without those waiting in the broker's memory).
func (s *bundle) storedStats(queue string) broker.Stats {
	s.t.Helper()
	var out broker.Stats
	err := s.db.View(s.ctx, func(tx broker.Tx) error {
		q, err := tx.QueueByName(s.ctx, queue)
		if err != nil {
			return err
		}
		gs, err := tx.Stats(s.ctx, q.ID)
		for _, g := range gs {
			out = g.Stats
		}
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// Every process writes the counts waiting in its memory, leading or not:
// at each flush, and the last of them when its Run stops.
func testRunWritesTheCountsAtEachFlushAndTheLastOnesAtItsStop(t *testing.T, harness Harness) {
	t.Parallel()
	s, logs := runSetup(t, harness, harness.New(t, "lazarus.db"))
	s.push("q", "p", "a", "b")
	r := start(t, s.b, broker.RunConfig{Leader: newHandLeader()}) // never leads
	_, res := s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckCompleted, "")
	if got := s.storedStats("q"); got.Completed != 0 {
		t.Fatalf("the completed ack was written at once: %+v", got)
	}
	r.settle() // this flush is taken
	r.settle() // and done before this one is taken
	if got := s.storedStats("q"); got.Completed != 1 {
		t.Fatalf("after a flush: %+v, want 1 completed written", got)
	}
	_, res = s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckCompleted, "")
	r.halt()
	if got := s.storedStats("q"); got.Completed != 2 {
		t.Fatalf("after the stop: %+v, want 2 completed written", got)
	}
	logs.quiet(t, "the flushes")
}

// holdStore holds, once armed, the first job chunk it sees in its
// transaction (at SaveJob, before the commit) until released, and counts
// the Updates in flight.
type holdStore struct {
	broker.Store
	armed    atomic.Bool
	held     chan struct{}
	release  chan struct{}
	inFlight atomic.Int64
}

func (h *holdStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	return h.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(holdTx{tx, h}) })
}

type holdTx struct {
	broker.Tx
	h *holdStore
}

func (t holdTx) SaveJob(ctx context.Context, j *broker.Job) error {
	if t.h.armed.CompareAndSwap(true, false) {
		close(t.h.held)
		<-t.h.release
	}
	return t.Tx.SaveJob(ctx, j)
}

// heldLeader holds its Lead, once the store's has returned (the jobs
// have stopped), until leave is closed.
type heldLeader struct {
	broker.Leader
	returned, leave chan struct{}
}

func (l *heldLeader) Lead(ctx context.Context, fn func(context.Context)) {
	l.Leader.Lead(ctx, fn)
	close(l.returned)
	<-l.leave
}

// A Run stopped while a job's chunk is in flight returns only once the
// chunk has committed or rolled back; the job is left running with the
// progress of what committed, and the next Run finishes it: every dead
// letter replayed exactly once.
func testRunStoppedInAJobsChunkLeavesItToTheNextRun(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "lazarus.db"), Options{NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	hold := &holdStore{Store: d, held: make(chan struct{}), release: make(chan struct{})}
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	logs := make(logLines, 1000)
	s := &bundle{t: t, ctx: ctx, db: d, clock: c, b: broker.New(broker.Config{Store: hold, Clock: c, Logger: slog.New(logs)})}
	t.Cleanup(s.b.Close)
	s.fill("q", "g", []string{"p"}, 300) // two chunks
	dead := s.dead("q", "g")
	lead := &heldLeader{Leader: d, returned: make(chan struct{}), leave: make(chan struct{})}
	r := start(t, s.b, broker.RunConfig{Leader: lead})
	logs.maintained(t, "on taking the lead") // the schedule waits for its next tick
	hold.armed.Store(true)
	j, err := s.b.StartJob(ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.held:
	case <-time.After(behind):
		t.Fatalf("no chunk of the job within %s", behind)
	}
	r.stop()
	close(hold.release)
	<-lead.returned // the jobs have stopped
	// Run waits for its lead, its schedule still going: the last counts
	// are written once the jobs have stopped.
	select {
	case r.flush <- time.Time{}:
	case <-r.done:
		t.Fatal("Run returned before its lead did")
	}
	close(lead.leave)
	<-r.done
	if n := hold.inFlight.Load(); n != 0 {
		t.Fatalf("Run returned with %d writes in flight", n)
	}
	mid, err := s.b.JobDetail(ctx, j.ID)
	if err != nil || mid.State != broker.JobRunning || (mid.Done != 0 && mid.Done != 250) {
		t.Fatalf("after the stop %+v %v, want running with its first chunk done or not", mid.Job, err)
	}
	t.Logf("the chunk in flight at the stop: %d done", mid.Done)

	logs.quiet(t, "the stop")
	start(t, s.b, broker.RunConfig{Leader: d})
	wctx, cancel := context.WithTimeout(ctx, behind)
	defer cancel()
	if done, err := s.b.WaitJob(wctx, j.ID); err != nil || done.State != broker.JobDone || done.Done != 300 {
		t.Fatalf("the next Run: %+v %v", done, err)
	}
	copies := map[string]int{}
	for {
		res := s.pop("q", "reader", 1000)
		if len(res.Messages) == 0 {
			break
		}
		for _, m := range res.Messages {
			copies[m.TransactionID]++
			s.ack(m, broker.AckCompleted, "")
		}
	}
	for _, dl := range dead {
		if n := copies[broker.ReplayPrefix+dl.MessageID()]; n != 1 {
			t.Fatalf("message %s has %d copies", dl.MessageID(), n)
		}
	}
}
