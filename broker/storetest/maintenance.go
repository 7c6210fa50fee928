package storetest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// setMaintenance turns a scope of maintenance mode on or off.
func (s *bundle) setMaintenance(scope broker.MaintenanceScope, on bool) broker.MaintenanceMode {
	s.t.Helper()
	m, err := s.b.SetMaintenance(s.ctx, scope, on, "ops")
	if err != nil {
		s.t.Fatalf("maintenance %s %v: %v", scope, on, err)
	}
	return m
}

// Either scope of maintenance mode holds every delivery while pushes go
// on being stored; a lease handed out before stays valid and its ack
// works; the push scope counts what was pushed meanwhile. Once off, what
// was held is delivered, each partition in order.
func testMaintenanceHoldsDeliveriesAndKeepsPushes(t *testing.T, harness Harness) {
	t.Parallel()
	for _, scope := range []broker.MaintenanceScope{broker.MaintenancePush, broker.MaintenancePop} {
		t.Run(string(scope), func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.push("q", "p", "a", "b")
			_, leased := s.popTxids("q", "g", 1) // a, leased before
			m := s.setMaintenance(scope, true)
			if !m.Holds() || m.Push.On != (scope == broker.MaintenancePush) || m.Pop.On != (scope == broker.MaintenancePop) {
				t.Fatalf("after turning %s on: %+v", scope, m)
			}
			for _, r := range s.push("q", "p", "c", "d") {
				if r.Status != "queued" {
					t.Fatalf("a push during maintenance: %+v", r)
				}
			}
			s.push("q", "other", "e")
			for _, req := range []broker.PopRequest{
				{Queue: "q", Group: "g", Batch: 10},
				{Queue: "q", Group: "h", Batch: 10},                // a group new to the queue
				{Queue: "q", Group: "g", Batch: 10, AutoAck: true}, // no lease, settled at once
				{Queue: "q", Partition: "other", Group: "g"},
				{Queue: "q", Group: "g", Wait: true, Timeout: time.Millisecond},
			} {
				res, err := s.b.Pop(s.ctx, req)
				if err != nil || len(res.Messages) != 0 {
					t.Fatalf("pop %+v during maintenance: %d messages, %v", req, len(res.Messages), err)
				}
			}
			if r := s.ack(leased.Messages[0], broker.AckCompleted, ""); !r.Success {
				t.Fatalf("the ack of a lease handed out before: %+v", r)
			}
			st, err := s.b.MaintenanceStatus(s.ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			if scope == broker.MaintenancePush {
				want = 3 // c, d, e
			}
			if st.Buffered != want || st.Push.By != map[bool]string{true: "ops", false: ""}[scope == broker.MaintenancePush] {
				t.Fatalf("status: %+v, want %d buffered", st, want)
			}
			if m := s.setMaintenance(scope, false); m.Holds() {
				t.Fatalf("after turning %s off: %+v", scope, m)
			}
			if st, _ := s.b.MaintenanceStatus(s.ctx); st.Buffered != 0 {
				t.Fatalf("buffered once off: %d", st.Buffered)
			}
			var got []string
			for range 4 {
				ids, res := s.popTxids("q", "g", 10)
				got = append(got, ids...)
				for _, m := range res.Messages {
					s.ack(m, broker.AckCompleted, "")
				}
			}
			inP := slices.DeleteFunc(slices.Clone(got), func(id string) bool { return id == "e" })
			if slices.Sort(got); !slices.Equal(got, []string{"b", "c", "d", "e"}) || !slices.Equal(inP, []string{"b", "c", "d"}) {
				t.Fatalf("delivered once off: %v (p's in order %v), want b c d in order and e", got, inP)
			}
		})
	}
}

// Maintenance mode spends no retry and cuts no retry delay short: a
// message failed before it comes back after its delay, with the retries
// it had spent, whether the delay ended during maintenance or not.
func testMaintenanceSpendsNoRetry(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryDelay": 1000, "retryLimit": 5})
	s.push("q", "p", "x")
	_, res := s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckFailed, "down")
	s.setMaintenance(broker.MaintenancePush, true)
	s.setMaintenance(broker.MaintenancePush, false)
	if ids, _ := s.popTxids("q", "g", 1); len(ids) != 0 {
		t.Fatalf("popped %v before the retry delay ended", ids)
	}
	s.setMaintenance(broker.MaintenancePop, true)
	s.clock.Advance(5 * time.Second) // the delay ends, and a lease would have run out
	if ids, _ := s.popTxids("q", "g", 1); len(ids) != 0 {
		t.Fatalf("popped %v during maintenance", ids)
	}
	s.setMaintenance(broker.MaintenancePop, false)
	_, res = s.popTxids("q", "g", 1)
	if len(res.Messages) != 1 || res.Messages[0].RetryCount != 1 {
		t.Fatalf("after maintenance: %+v, want x with 1 retry spent", res.Messages)
	}
}

// A scope is independent of the other; turning a scope to the state it
// has changes nothing and is not audited; a turn is audited with who and
// what; an unknown scope is refused.
func testMaintenanceScopesAndAudit(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	if m := s.setMaintenance(broker.MaintenancePop, true); !m.Pop.On || m.Push.On || m.Pop.By != "ops" || !m.Pop.Since.Equal(s.clock.Now()) {
		t.Fatalf("pop on: %+v", m)
	}
	s.setMaintenance(broker.MaintenancePop, true) // already: nothing
	s.setMaintenance(broker.MaintenancePush, false)
	if m := s.setMaintenance(broker.MaintenancePush, true); !m.Pop.On || !m.Push.On {
		t.Fatalf("both on: %+v", m)
	}
	if m := s.setMaintenance(broker.MaintenancePop, false); m.Pop.On || !m.Push.On || !m.Holds() {
		t.Fatalf("pop off, push on: %+v", m)
	}
	if _, err := s.b.SetMaintenance(s.ctx, "all", true, "ops"); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("an unknown scope: %v", err)
	}
	entries, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditMaintenance}, broker.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, e := range entries {
		if e.Actor != "ops" {
			t.Errorf("audit entry by %q", e.Actor)
		}
		details = append(details, e.Detail)
	}
	want := []string{ // newest first
		"pop maintenance mode off",
		"push maintenance mode on: pushes are stored, pops deliver nothing until it is off",
		"pop maintenance mode on: pops deliver nothing until it is off",
	}
	if !slices.Equal(details, want) {
		t.Fatalf("audit:\n%q\nwant\n%q", details, want)
	}
}

// updateSignal is a store that says when each Update has returned.
type updateSignal struct {
	broker.Store
	done chan struct{}
}

func (s *updateSignal) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	err := s.Store.Update(ctx, o, fn)
	select {
	case s.done <- struct{}{}:
	default:
	}
	return err
}

// waitingPop starts a pop that waits a minute and returns its result's
// channel once the pop has looked (its first write returned): from then
// on it waits, and only news wakes it before its timeout.
func waitingPop(t *testing.T, b *broker.Broker, sig *updateSignal, queue string) <-chan []string {
	t.Helper()
	select { // what came before
	case <-sig.done:
	default:
	}
	got := make(chan []string, 1)
	go func() {
		res, err := b.Pop(context.Background(), broker.PopRequest{Queue: queue, Group: "g", Batch: 10, Wait: true, Timeout: time.Minute})
		if err != nil {
			t.Error(err)
		}
		var ids []string
		for _, m := range res.Messages {
			ids = append(ids, m.TransactionID)
		}
		got <- ids
	}()
	<-sig.done
	return got
}

// A pop waiting while maintenance mode holds deliveries is served as
// soon as it is turned off (not when its timeout ends).
func testMaintenanceEndServesWaitingPops(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	b, sig := signalled(t, harness, harness.New(t, "l.db"))
	if _, err := b.SetMaintenance(ctx, broker.MaintenancePush, true, "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: "m", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	got := waitingPop(t, b, sig, "q")
	if _, err := b.SetMaintenance(ctx, broker.MaintenancePush, false, "ops"); err != nil {
		t.Fatal(err)
	}
	wantServed(t, got, []string{"m"}, "maintenance mode ended")
}

// Maintenance mode is kept in the database: a store opened again finds
// it, and its pops deliver nothing until it is turned off.
func testMaintenanceSurvivesReopen(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	at := harness.New(t, "l.db")
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	open := func() (*broker.Broker, func()) {
		d, err := harness.Open(ctx, at, Options{NeverAlone: true})
		if err != nil {
			t.Fatal(err)
		}
		b := broker.New(broker.Config{Store: d, Clock: c})
		return b, func() { b.Close(); d.Close() }
	}
	b, closeIt := open()
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: "m", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetMaintenance(ctx, broker.MaintenancePop, true, "ops"); err != nil {
		t.Fatal(err)
	}
	closeIt()
	b, closeIt = open()
	defer closeIt()
	m, err := b.Maintenance(ctx)
	if err != nil || !m.Pop.On || m.Push.On || m.Pop.By != "ops" || !m.Pop.Since.Equal(c.Now()) {
		t.Fatalf("after reopening: %+v, %v", m, err)
	}
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q"}); err != nil || len(res.Messages) != 0 {
		t.Fatalf("pop after reopening: %d messages, %v", len(res.Messages), err)
	}
	if _, err := b.SetMaintenance(ctx, broker.MaintenancePop, false, "ops"); err != nil {
		t.Fatal(err)
	}
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q"}); err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop once off: %d messages, %v", len(res.Messages), err)
	}
}

// Two brokers on one PostgreSQL database are two processes: maintenance
// mode turned on by one holds the other's pops at once (its cache knew
// it off), and turned off, it serves the other's pop waiting. Only on
// a store several processes share (Harness.SeveralProcesses).
func testMaintenanceHoldsEveryProcess(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	dsn := harness.New(t, "lazarus")
	a, _ := signalled(t, harness, dsn)
	b, sig := signalled(t, harness, dsn)
	push := func(txid string) {
		t.Helper()
		if _, err := a.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: txid, Payload: []byte(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	pop := func() []string {
		t.Helper()
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10, AutoAck: true})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range res.Messages {
			ids = append(ids, m.TransactionID)
		}
		return ids
	}
	push("first")
	if got := pop(); !slices.Equal(got, []string{"first"}) { // b's cache: maintenance off
		t.Fatalf("b's first pop: %v", got)
	}
	if _, err := a.SetMaintenance(ctx, broker.MaintenancePush, true, "ops"); err != nil {
		t.Fatal(err)
	}
	push("held")
	if got := pop(); len(got) != 0 {
		t.Fatalf("b's pop while a turned maintenance on: %v", got)
	}
	if m, err := b.Maintenance(ctx); err != nil || !m.Push.On {
		t.Fatalf("b reads %+v, %v", m, err)
	}
	got := waitingPop(t, b, sig, "q")
	if _, err := a.SetMaintenance(ctx, broker.MaintenancePush, false, "ops"); err != nil {
		t.Fatal(err)
	}
	wantServed(t, got, []string{"held"}, "the other process turned maintenance mode off")
}

// settingCounter counts the settings the broker's writes read.
type settingCounter struct {
	broker.Store
	n *atomic.Int64
}

type settingCountingTx struct {
	broker.Tx
	n *atomic.Int64
}

func (t settingCountingTx) Setting(ctx context.Context, key string) (string, error) {
	t.n.Add(1)
	return t.Tx.Setting(ctx, key)
}

func (s settingCounter) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return s.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(settingCountingTx{tx, s.n}) })
}

// A pop pays nothing for maintenance mode while it is off: the first one
// reads the setting, the cache keeps "off", and the next ones read no
// setting (until the cache is emptied). While it is on, each pop reads it.
func testMaintenanceOffCostsPopsNoRead(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "l.db"), Options{NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var n atomic.Int64
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	s := &bundle{t: t, ctx: ctx, b: broker.New(broker.Config{Store: settingCounter{d, &n}, Clock: c}), db: d, clock: c}
	s.push("q", "p", "a", "b", "c", "d")
	s.pop("q", "g", 1) // subscribes g: run again as a durable write, reading it again
	if got := n.Load(); got == 0 {
		t.Fatal("the first pop read no setting")
	}
	n.Store(0)
	for range 3 {
		for _, m := range s.pop("q", "g", 1).Messages {
			s.ack(m, broker.AckCompleted, "")
		}
	}
	s.pop("q", "g", 1) // nothing left: an empty pop
	if got := n.Load(); got != 0 {
		t.Fatalf("pops with maintenance mode off read %d settings after the first, want 0", got)
	}
	s.setMaintenance(broker.MaintenancePop, true)
	n.Store(0)
	s.push("q", "p", "e")
	s.pop("q", "g", 1)
	s.pop("q", "g", 1)
	if got := n.Load(); got != 2 {
		t.Fatalf("two pops during maintenance read %d settings, want 2", got)
	}
}

// What the push scope counts is messages: a queue deleted meanwhile takes
// its messages out of the count, and SQLite's placeholder row that keeps
// seqs growing past them is no message.
func testMaintenanceCountsMessagesPushedSince(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "before")
	s.setMaintenance(broker.MaintenancePush, true)
	s.push("q", "p", "a")
	s.push("gone", "p", "b", "c") // the newest messages
	if err := s.b.DeleteQueue(s.ctx, "gone", "ops"); err != nil {
		t.Fatal(err)
	}
	s.push("q", "p", "d")
	st, err := s.b.MaintenanceStatus(s.ctx)
	if err != nil || st.Buffered != 2 {
		t.Fatalf("status: %+v, %v; want 2 buffered (a, d)", st, err)
	}
}
