package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// hold holds a queue, or a group of it ("" the whole queue), for ops.
func (s *bundle) hold(queue, group string) broker.Hold {
	s.t.Helper()
	h, created, err := s.b.Hold(s.ctx, broker.HoldRequest{Queue: queue, Group: group, Reason: "downstream down", Actor: "ops"})
	if err != nil || !created {
		s.t.Fatalf("hold %s/%s: created %v, %v", queue, group, created, err)
	}
	return h
}

func (s *bundle) release(id int64) broker.Hold {
	s.t.Helper()
	h, err := s.b.Release(s.ctx, id, "ops")
	if err != nil {
		s.t.Fatalf("release %d: %v", id, err)
	}
	return h
}

// popsNothing fails the test when any of the pops hands something out.
func (s *bundle) popsNothing(reqs ...broker.PopRequest) {
	s.t.Helper()
	for _, req := range reqs {
		res, err := s.b.Pop(s.ctx, req)
		if err != nil || len(res.Messages) != 0 {
			s.t.Fatalf("pop %+v while held: %d messages, %v", req, len(res.Messages), err)
		}
	}
}

// everyPopForm is each form of a pop of group g of queue q.
func everyPopForm(q, g string) []broker.PopRequest {
	return []broker.PopRequest{
		{Queue: q, Group: g, Batch: 10},
		{Queue: q, Group: g, Partition: "p", Batch: 10},
		{Queue: q, Group: g, Batch: 10, AutoAck: true},
		{Queue: q, Group: g, Batch: 10, Partitions: 3},
		{Queue: q, Group: g, Wait: true, Timeout: time.Millisecond},
		{Namespace: "ns", Group: g, Batch: 10},
	}
}

// A hold of one group: every form of its pops hands nothing out (a
// long-poll ends at its timeout), pushes are stored, and the other
// groups of the queue, the queue-mode group among them, are served.
// Released, the group gets what was held, in order.
func testHoldOfAGroupPopsNothingOthersGoOn(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	if _, err := s.b.ConfigureWith(s.ctx, broker.ConfigureParams{Queue: "q", Labels: broker.Labels{Namespace: ptr("ns")}, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	s.push("q", "p", "a")
	s.pop("q", "g", 1) // g reads q; a is leased
	h := s.hold("q", "g")
	if h.Group != "g" || h.Queue != "q" || h.Kind != broker.HoldManual || h.Actor != "ops" || !h.Since.Equal(s.clock.Now()) {
		t.Fatalf("the hold: %+v", h)
	}
	for _, r := range s.push("q", "p", "b", "c") {
		if r.Status != "queued" {
			t.Fatalf("a push while held: %+v", r)
		}
	}
	s.push("q", "other", "d")
	s.clock.Advance(10 * time.Minute) // a's lease runs out: not handed back while held
	s.popsNothing(everyPopForm("q", "g")...)
	for _, g := range []string{"h", ""} { // another group, and the queue-mode group
		var got []string
		for range 3 {
			ids, res := s.popTxids("q", g, 10)
			got = append(got, ids...)
			for _, m := range res.Messages {
				s.ack(m, broker.AckCompleted, "")
			}
		}
		if slices.Sort(got); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
			t.Fatalf("group %q while g is held: %v", g, got)
		}
	}
	if r := s.release(h.ID); r.ReleasedBy != "ops" || r.Waiting != 4 {
		t.Fatalf("released: %+v, want 4 waiting", r)
	}
	ids, _ := s.popTxids("q", "g", 10)
	if !slices.Equal(ids, []string{"a", "b", "c"}) && !slices.Equal(ids, []string{"d"}) {
		t.Fatalf("g once released: %v, want a b c (or d)", ids)
	}
}

func ptr[T any](v T) *T { return &v }

// A hold of the queue holds every group of it, those that never read it
// included; another queue is served.
func testHoldOfAQueueHoldsEveryGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a")
	s.push("other", "p", "x")
	s.pop("q", "g", 1)
	h := s.hold("q", "")
	if h.Group != "" || h.GroupID != 0 {
		t.Fatalf("a hold of the queue: %+v", h)
	}
	s.clock.Advance(10 * time.Minute)
	s.popsNothing(everyPopForm("q", "g")...)
	s.popsNothing(broker.PopRequest{Queue: "q"}, broker.PopRequest{Queue: "q", Group: "new"})
	if ids, _ := s.popTxids("other", "g", 1); !slices.Equal(ids, []string{"x"}) {
		t.Fatalf("another queue while q is held: %v", ids)
	}
	s.release(h.ID)
	for _, g := range []string{"g", "new", ""} {
		if ids, _ := s.popTxids("q", g, 1); !slices.Equal(ids, []string{"a"}) {
			t.Fatalf("group %q once released: %v", g, ids)
		}
	}
}

// Leases handed out before a hold stay valid and their acks work:
// completed moves on, failed sets its retry delay, dlq files the dead
// letter.
func testLeaseInFlightAcksWhileHeld(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryDelay": 1000, "retryLimit": 3})
	s.push("q", "p1", "ok")
	s.push("q", "p2", "retry")
	s.push("q", "p3", "dead")
	var leased []broker.Delivery
	for range 3 {
		res := s.pop("q", "g", 1)
		leased = append(leased, res.Messages...)
	}
	if len(leased) != 3 {
		t.Fatalf("leased %d", len(leased))
	}
	h := s.hold("q", "g")
	for _, d := range leased {
		status := map[string]string{"ok": broker.AckCompleted, "retry": broker.AckFailed, "dead": broker.AckDLQ}[d.TransactionID]
		if r := s.ack(d, status, "down"); !r.Success || r.DLQ != (status == broker.AckDLQ) {
			t.Fatalf("ack %s %s while held: %+v", d.TransactionID, status, r)
		}
	}
	if dl := s.dead("q", "g"); len(dl) != 1 || dl[0].TransactionID != "dead" {
		t.Fatalf("dead letters: %+v", dl)
	}
	s.release(h.ID)
	if ids, _ := s.popTxids("q", "g", 1); len(ids) != 0 {
		t.Fatalf("popped %v within retry's delay", ids)
	}
	s.clock.Advance(time.Second)
	_, res := s.popTxids("q", "g", 1)
	if len(res.Messages) != 1 || res.Messages[0].TransactionID != "retry" || res.Messages[0].RetryCount != 1 {
		t.Fatalf("after the delay: %+v, want retry with 1 retry spent", res.Messages)
	}
}

// A hold spends no retry and cuts no retry delay short: a message failed
// before the hold comes back after its delay with the retries it had
// spent, whether its delay ended while held or after; a lease that ran
// out while held hands its messages back in order, no retry spent.
func testHeldPopSpendsNoRetry(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryDelay": 10000, "retryLimit": 5, "leaseTime": 30})
	s.push("q", "p", "x")
	s.push("q", "r", "y1", "y2")
	_, res := s.popTxids("q", "g", 1)
	if len(res.Messages) != 1 {
		t.Fatal("nothing popped")
	}
	first := res.Messages[0]
	s.ack(first, broker.AckFailed, "down") // its partition waits 10 s
	_, leased := s.popTxids("q", "g", 10)  // the other partition, leased for 30 s
	h := s.hold("q", "g")
	s.clock.Advance(5 * time.Second)
	s.release(h.ID) // half the delay: not cut short
	if ids, _ := s.popTxids("q", "g", 10); len(ids) != 0 {
		t.Fatalf("popped %v before the retry delay ended", ids)
	}
	h = s.hold("q", "g")
	s.clock.Advance(time.Minute) // the delay ends and the lease runs out, held
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
	s.release(h.ID)
	got := map[string]int{}
	var order []string
	for range 2 {
		_, res := s.popTxids("q", "g", 10)
		for _, m := range res.Messages {
			got[m.TransactionID] = m.RetryCount
			order = append(order, m.TransactionID)
		}
	}
	if got[first.TransactionID] != 1 || got["y1"] != 0 || got["y2"] != 0 || len(got) != 3 {
		t.Fatalf("after the holds: retries %v, want x 1, y1 0, y2 0 (leased before: %d)", got, len(leased.Messages))
	}
	if i, j := slices.Index(order, "y1"), slices.Index(order, "y2"); i > j {
		t.Fatalf("order %v", order)
	}
}

// A pop waiting on a held group is served as soon as the hold is
// released, not when its timeout ends.
func testReleaseServesWaitingLongPolls(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	b, sig := signalled(t, harness, harness.New(t, "l.db"))
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: "m", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	h, _, err := b.Hold(ctx, broker.HoldRequest{Queue: "q", Group: "g", Reason: "down", Actor: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	got := waitingPop(t, b, sig, "q")
	// It waits (held), and is not served before the release.
	for b.Waiting() == 0 {
		select {
		case ids := <-got:
			t.Fatalf("the pop was served while held: %v", ids)
		case <-time.After(time.Millisecond):
		}
	}
	if _, err := b.Release(ctx, h.ID, "ops"); err != nil {
		t.Fatal(err)
	}
	wantServed(t, got, []string{"m"}, "the hold was released")
}

// A second hold of the same (queue, group) is the first one (nothing
// made, nothing audited); holds and releases are audited with who, why
// and what waited, and told once each (Config.OnEvent); a bad request
// changes nothing; a release twice is not found.
func testHoldsAreAuditedToldAndMadeOnce(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "l.db"), Options{NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var mu sync.Mutex
	var told []broker.Event
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	b := broker.New(broker.Config{Store: &retryStore{Store: d}, Clock: c, OnEvent: func(e broker.Event) {
		mu.Lock()
		told = append(told, e)
		mu.Unlock()
	}})
	t.Cleanup(b.Close)
	s := &bundle{t: t, ctx: ctx, b: b, db: d, clock: c}
	s.push("q", "p", "a", "b")
	s.pop("q", "g", 1) // g reads q: a and b wait for it
	first := s.hold("q", "g")
	again, created, err := b.Hold(ctx, broker.HoldRequest{Queue: "q", Group: "g", Reason: "another reason", Actor: "ana"})
	if err != nil || created || again.ID != first.ID || again.Reason != "downstream down" || again.Actor != "ops" {
		t.Fatalf("the second hold: %+v, created %v, %v", again, created, err)
	}
	for _, r := range []broker.HoldRequest{
		{Queue: "nope", Reason: "x", Actor: "ops"},
		{Queue: "q", Reason: "", Actor: "ops"},
		{Queue: "q", Reason: strings.Repeat("x", broker.MaxHoldReason+1), Actor: "ops"},
		{Queue: "q", Group: "bad group!", Reason: "x", Actor: "ops"},
	} {
		want := broker.ErrInvalid
		if r.Queue == "nope" {
			want = broker.ErrNotFound
		}
		if _, _, err := b.Hold(ctx, r); !errors.Is(err, want) {
			t.Fatalf("hold %+v: %v, want %v", r, err, want)
		}
	}
	c.Advance(3*time.Minute + 12*time.Second)
	s.release(first.ID)
	if _, err := b.Release(ctx, first.ID, "ops"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("a release twice: %v", err)
	}
	entries, err := b.Audit(ctx, broker.AuditFilter{}, broker.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Action == broker.AuditHold || e.Action == broker.AuditHoldRelease {
			got = append(got, e.Actor+" "+e.Action+" "+e.Queue+"/"+e.Group+": "+e.Detail)
		}
	}
	want := []string{ // newest first
		"ops hold_release q/g: released after 3m12s; 2 messages waiting",
		"ops hold q/g: held: downstream down",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("audit:\n%q\nwant\n%q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 2 || told[0].Kind != broker.EventHoldStarted || told[1].Kind != broker.EventHoldReleased ||
		told[0].HoldID != first.ID || told[1].Queue != "q" || told[1].Group != "g" {
		t.Fatalf("told: %+v", told)
	}
}

// Holds lists the holds, filtered, with what waits behind each: the
// group's lag, or the queue's groups' summed.
func testHoldsListSaysWhatWaits(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a", "b", "c")
	s.pop("q", "g", 1)
	s.pop("q", "h", 3)
	s.push("other", "p", "x")
	hg := s.hold("q", "g")
	hq := s.hold("q", "")
	ho := s.hold("other", "never-read")
	all, err := s.b.Holds(s.ctx, broker.HoldFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range all {
		got = append(got, h.Queue+"/"+h.Group+" "+h.Reason+" by "+h.Actor)
	}
	if !slices.Equal(got, []string{"q/g downstream down by ops", "q/ downstream down by ops", "other/never-read downstream down by ops"}) {
		t.Fatalf("holds: %q", got)
	}
	if all[0].ID != hg.ID || all[0].Waiting != 3 || all[1].ID != hq.ID || all[1].Waiting != 6 || all[2].ID != ho.ID || all[2].Waiting != 0 {
		t.Fatalf("waiting: %+v", all)
	}
	for f, want := range map[broker.HoldFilter][]int64{
		{Queue: "q"}:               {hg.ID, hq.ID},
		{Queue: "q", Group: "g"}:   {hg.ID},
		{Group: "never-read"}:      {ho.ID},
		{Queue: "unknown"}:         nil,
		{Queue: "q", Group: "zzz"}: nil,
	} {
		hs, err := s.b.Holds(s.ctx, f)
		var ids []int64
		for _, h := range hs {
			ids = append(ids, h.ID)
		}
		if err != nil || !slices.Equal(ids, want) {
			t.Fatalf("holds %+v: %v, %v; want %v", f, ids, err, want)
		}
	}
}

// A hold is kept in the store: a store opened again finds it, and its
// pops deliver nothing until it is released.
func testHoldSurvivesReopen(t *testing.T, harness Harness) {
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
	h, _, err := b.Hold(ctx, broker.HoldRequest{Queue: "q", Group: "g", Reason: "down", Actor: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	closeIt()
	b, closeIt = open()
	defer closeIt()
	hs, err := b.Holds(ctx, broker.HoldFilter{})
	if err != nil || len(hs) != 1 || hs[0].ID != h.ID || hs[0].Reason != "down" || !hs[0].Since.Equal(c.Now()) {
		t.Fatalf("after reopening: %+v, %v", hs, err)
	}
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g"}); err != nil || len(res.Messages) != 0 {
		t.Fatalf("pop after reopening: %d messages, %v", len(res.Messages), err)
	}
	if _, err := b.Release(ctx, h.ID, "ops"); err != nil {
		t.Fatal(err)
	}
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g"}); err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop once released: %d messages, %v", len(res.Messages), err)
	}
}

// A deleted queue takes its holds with it: a queue of the same name made
// again is not held.
func testDeletedQueueTakesItsHolds(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a")
	h := s.hold("q", "g")
	s.hold("q", "")
	if err := s.b.DeleteQueue(s.ctx, "q", "admin"); err != nil {
		t.Fatal(err)
	}
	if hs, err := s.b.Holds(s.ctx, broker.HoldFilter{}); err != nil || len(hs) != 0 {
		t.Fatalf("holds after the queue was deleted: %+v, %v", hs, err)
	}
	if _, err := s.b.Release(s.ctx, h.ID, "ops"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("release of a deleted queue's hold: %v", err)
	}
	s.push("q", "p", "b")
	if ids, _ := s.popTxids("q", "g", 1); !slices.Equal(ids, []string{"b"}) {
		t.Fatalf("the queue made again: %v", ids)
	}
}

// holdCounter counts the HoldsOf reads of the broker's writes.
type holdCounter struct {
	broker.Store
	n *atomic.Int64
}

type holdCountingTx struct {
	broker.Tx
	n *atomic.Int64
}

func (t holdCountingTx) HoldsOf(ctx context.Context, queueID, groupID int64) ([]broker.Hold, error) {
	t.n.Add(1)
	return t.Tx.HoldsOf(ctx, queueID, groupID)
}

func (s holdCounter) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return s.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(holdCountingTx{tx, s.n}) })
}

// A pop of an unheld (queue, group) reads no hold once the cache knows
// it unheld; while it is held each pop reads its holds (one statement),
// and a hold or a release is seen by the next pop.
func testUnheldPopsReadNoHold(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "l.db"), Options{NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var n atomic.Int64
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	s := &bundle{t: t, ctx: ctx, b: broker.New(broker.Config{Store: holdCounter{d, &n}, Clock: c}), db: d, clock: c}
	s.push("q", "p", "a", "b", "c", "d", "e")
	for _, m := range s.pop("q", "g", 1).Messages { // the first pop of g reads its holds
		s.ack(m, broker.AckCompleted, "")
	}
	if n.Load() == 0 {
		t.Fatal("the first pop read no hold")
	}
	n.Store(0)
	for range 3 {
		for _, m := range s.pop("q", "g", 1).Messages {
			s.ack(m, broker.AckCompleted, "")
		}
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("pops of an unheld group read holds %d times after the first, want 0", got)
	}
	h := s.hold("q", "g")
	n.Store(0)
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g"}, broker.PopRequest{Queue: "q", Group: "g"})
	if got := n.Load(); got != 2 {
		t.Fatalf("two held pops read holds %d times, want 2", got)
	}
	s.release(h.ID)
	if ids, _ := s.popTxids("q", "g", 1); len(ids) != 1 {
		t.Fatalf("the pop after the release: %v", ids)
	}
}

// Two brokers on one PostgreSQL database are two processes: a hold made
// by one holds the other's pops at once (its cache knew the group
// unheld), and a release by the other serves the first one's waiting
// pop. Only on a store several processes share.
func testHoldHoldsEveryProcess(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	dsn := harness.New(t, "lazarus")
	a, sigA := signalled(t, harness, dsn)
	b, _ := signalled(t, harness, dsn)
	push := func(txid string) {
		t.Helper()
		if _, err := a.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: txid, Payload: []byte(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	pop := func(br *broker.Broker) []string {
		t.Helper()
		res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10, AutoAck: true})
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
	if got := pop(b); !slices.Equal(got, []string{"first"}) { // b's cache: g unheld
		t.Fatalf("b's first pop: %v", got)
	}
	h, _, err := a.Hold(ctx, broker.HoldRequest{Queue: "q", Group: "g", Reason: "down", Actor: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	push("held")
	if got := pop(b); len(got) != 0 {
		t.Fatalf("b's pop once a held g: %v", got)
	}
	got := waitingPop(t, a, sigA, "q")
	if _, err := b.Release(ctx, h.ID, "ops"); err != nil {
		t.Fatal(err)
	}
	wantServed(t, got, []string{"held"}, "the other process released the hold")
}

// signalled opens a broker on the store at "at" (harness.New's) with the
// store's notifier, whose Updates say when they have returned: a process
// of its own when the store is shared by several.
func signalled(t *testing.T, harness Harness, at string) (*broker.Broker, *updateSignal) {
	t.Helper()
	d, err := harness.Open(context.Background(), at, Options{NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	sig := &updateSignal{Store: d, done: make(chan struct{}, 1)}
	b := broker.New(broker.Config{Store: sig, Notifier: d.Notifier()})
	t.Cleanup(b.Close)
	return b, sig
}

// wantServed waits for a waiting pop's answer (waitingPop), which what
// should have brought, and wants the transactionIds want.
func wantServed(t *testing.T, got <-chan []string, want []string, what string) {
	t.Helper()
	select {
	case ids := <-got:
		if !slices.Equal(ids, want) {
			t.Fatalf("the waiting pop got %v, want %v", ids, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the waiting pop was not served when %s", what)
	}
}
