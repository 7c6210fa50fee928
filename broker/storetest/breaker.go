package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The circuit breaker (queue options holdAfterFailures and
// holdProbeSeconds, SPEC section 6).

// breakerBundle is a bundle whose broker tells its events (told) and
// whose store says when each write has returned (sig, for waiting pops).
type breakerBundle struct {
	*bundle
	sig  *updateSignal
	mu   sync.Mutex
	told []broker.Event
}

func setupBreaker(t *testing.T, harness Harness, n, probeSeconds int) *breakerBundle {
	t.Helper()
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "l.db"), Options{NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	bb := &breakerBundle{sig: &updateSignal{Store: &retryStore{Store: d}, done: make(chan struct{}, 1)}}
	b := broker.New(broker.Config{Store: bb.sig, Clock: c, Notifier: d.Notifier(), OnEvent: func(e broker.Event) {
		bb.mu.Lock()
		bb.told = append(bb.told, e)
		bb.mu.Unlock()
	}})
	t.Cleanup(b.Close)
	bb.bundle = &bundle{t: t, ctx: ctx, b: b, db: d, clock: c}
	bb.configure("q", map[string]any{"holdAfterFailures": n, "holdProbeSeconds": probeSeconds, "retryLimit": 100, "retryDelay": 0})
	return bb
}

// tryOnce pops one message of q for group g and acks it with status
// (the error "down <txid>" when it fails); it returns the delivery.
func (s *bundle) tryOnce(g, status string) broker.Delivery {
	s.t.Helper()
	res := s.pop("q", g, 1)
	if len(res.Messages) != 1 {
		s.t.Fatalf("pop of %s for a try: %d messages", g, len(res.Messages))
	}
	m := res.Messages[0]
	if status != "" {
		s.ack(m, status, "down "+m.TransactionID)
	}
	return m
}

// streak is the breaker's count of g in q.
func (s *bundle) streak(g string) int64 {
	s.t.Helper()
	br, err := s.b.BreakerOf(s.ctx, "q", g)
	if err != nil {
		s.t.Fatal(err)
	}
	return br.Streak
}

// breakerHolds lists the holds of q/g.
func (s *bundle) holdsOf(g string) []broker.Hold {
	s.t.Helper()
	hs, err := s.b.Holds(s.ctx, broker.HoldFilter{Queue: "q", Group: g})
	if err != nil {
		s.t.Fatal(err)
	}
	return hs
}

// The Nth failed try in a row holds the group, not the N-1th; the hold is
// the breaker's, by lazarus, saying how many and the last error; other
// groups of the queue go on. The count runs across the group's
// partitions.
func testBreakerOpensAtExactlyN(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 3, 30)
	for i := range 4 {
		s.push("q", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i))
	}
	for range 2 {
		s.tryOnce("g", broker.AckFailed)
		s.tryOnce("h", broker.AckFailed) // another group: its own count
	}
	if hs := s.holdsOf(""); len(hs) != 0 || s.streak("g") != 2 {
		t.Fatalf("after 2 failures: holds %+v, streak %d", hs, s.streak("g"))
	}
	last := s.tryOnce("g", broker.AckFailed)
	hs := s.holdsOf("g")
	if len(hs) != 1 {
		t.Fatalf("after 3 failures: holds %+v", hs)
	}
	h := hs[0]
	want := "circuit breaker: 3 failures in a row, last error down " + last.TransactionID
	if h.Kind != broker.HoldBreaker || h.Actor != broker.BrokerActor || h.Reason != want || h.Group != "g" ||
		!h.Since.Equal(s.clock.Now()) || !h.ProbeAt.Equal(s.clock.Now().Add(30*time.Second)) || h.ProbeSeconds != 30 || h.Waiting != 4 {
		t.Fatalf("the breaker's hold: %+v, want reason %q", h, want)
	}
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
	if ids, _ := s.popTxids("q", "h", 1); len(ids) != 1 {
		t.Fatalf("h while g is held: %v", ids)
	}
	if got := s.holdsOf("h"); len(got) != 0 {
		t.Fatalf("h's holds: %+v", got)
	}
}

// What counts: failed and dlq are failures; completed, by an ack, an
// autoAck pop or an ack in a transaction, puts the count back to 0; retry
// and a lease running out count neither way.
func testBreakerCountsFailuresAndCompletions(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 3, 30)
	s.configure("q", map[string]any{"leaseTime": 10})
	for i := range 20 {
		s.push("q", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i))
	}
	step := func(what string, want int64, try func()) {
		t.Helper()
		try()
		if got := s.streak("g"); got != want {
			t.Fatalf("after %s: streak %d, want %d", what, got, want)
		}
	}
	step("a failure", 1, func() { s.tryOnce("g", broker.AckFailed) })
	step("a dlq", 2, func() { s.tryOnce("g", broker.AckDLQ) })
	step("a completion", 0, func() { s.tryOnce("g", broker.AckCompleted) })
	step("two failures", 2, func() { s.tryOnce("g", broker.AckFailed); s.tryOnce("g", broker.AckFailed) })
	step("retries", 2, func() {
		for range 5 {
			s.tryOnce("g", broker.AckRetry)
		}
	})
	step("leases running out", 2, func() {
		for range 5 {
			s.tryOnce("g", "")
			s.clock.Advance(11 * time.Second)
		}
	})
	step("an autoAck pop", 0, func() {
		res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", AutoAck: true})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("autoAck pop: %+v, %v", res, err)
		}
	})
	step("two failures", 2, func() { s.tryOnce("g", broker.AckFailed); s.tryOnce("g", broker.AckFailed) })
	step("a completion in a transaction", 0, func() {
		m := s.tryOnce("g", "")
		out, err := s.b.Transaction(s.ctx, []broker.Operation{{Type: "ack", Ack: broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckCompleted, Group: "g"}}})
		if err != nil || !out[0].Ack.Success {
			t.Fatalf("transaction: %+v, %v", out, err)
		}
	})
	step("two failures and a dlq", 3, func() {
		s.tryOnce("g", broker.AckFailed)
		s.tryOnce("g", broker.AckFailed)
		s.tryOnce("g", broker.AckDLQ)
	})
	if hs := s.holdsOf("g"); len(hs) != 1 || hs[0].Kind != broker.HoldBreaker {
		t.Fatalf("holds: %+v", hs)
	}
}

// A batch of acks counts in its order: failed, failed, completed,
// failed leaves a count of 1.
func testBreakerBatchAcksCountInOrder(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 3, 30)
	var leased []broker.Delivery
	for i := range 4 {
		s.push("q", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i))
	}
	for range 4 {
		leased = append(leased, s.tryOnce("g", ""))
	}
	var acks []broker.Ack
	for i, m := range leased {
		status := broker.AckFailed
		if i == 2 {
			status = broker.AckCompleted
		}
		acks = append(acks, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: status, Error: "down"})
	}
	out, err := s.b.AckBatch(s.ctx, "g", acks)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out {
		if !r.Success {
			t.Fatalf("acks: %+v", out)
		}
	}
	if got := s.streak("g"); got != 1 {
		t.Fatalf("streak %d after failed, failed, completed, failed; want 1", got)
	}
	if hs := s.holdsOf("g"); len(hs) != 0 {
		t.Fatalf("holds: %+v", hs)
	}
}

// The probe: nothing before holdProbeSeconds; then exactly one message,
// whatever the batch asked; nothing more while it is leased; an autoAck
// pop never takes it; a failed probe keeps the hold, and the next one is
// due holdProbeSeconds after the last was handed out.
func testBreakerProbeCadence(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 1, 30)
	s.configure("q", map[string]any{"leaseTime": 5})
	for i := range 5 {
		s.push("q", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i), fmt.Sprintf("n%d", i))
	}
	s.tryOnce("g", broker.AckFailed) // held at t0
	t0 := s.clock.Now()
	s.clock.Advance(29 * time.Second)
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10}, broker.PopRequest{Queue: "q", Group: "g", Batch: 10, Partitions: 3})
	s.clock.Advance(time.Second)
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10, AutoAck: true})
	res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10, Partitions: 3})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("the probe at t0+30s: %d messages, %v", len(res.Messages), err)
	}
	probe := res.Messages[0]
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
	h := s.holdsOf("g")[0]
	if h.Probes != 1 || !h.ProbeInFlight || !h.ProbeAt.Equal(t0.Add(60*time.Second)) {
		t.Fatalf("the hold with its probe out: %+v", h)
	}
	if r := s.ack(probe, broker.AckFailed, "still down"); !r.Success {
		t.Fatalf("the probe's ack: %+v", r)
	}
	h = s.holdsOf("g")[0]
	if h.ProbeInFlight || h.ProbeSeq != 0 || s.streak("g") != 2 {
		t.Fatalf("after a failed probe: %+v, streak %d", h, s.streak("g"))
	}
	s.clock.Advance(29 * time.Second)
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
	s.clock.Advance(time.Second) // t0+60s
	if ids, _ := s.popTxids("q", "g", 10); len(ids) != 1 {
		t.Fatalf("the second probe: %v", ids)
	}
	// Its lease (5 s) runs out, unacked: the next is still due at t0+90s.
	s.clock.Advance(10 * time.Second)
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
	s.clock.Advance(20 * time.Second)
	if ids, _ := s.popTxids("q", "g", 10); len(ids) != 1 {
		t.Fatalf("the third probe: %v", ids)
	}
	if h := s.holdsOf("g")[0]; h.Probes != 3 {
		t.Fatalf("probes %d, want 3", h.Probes)
	}
}

// A long-poll of a held group is woken at the probe's time (no news
// comes then) and gets the probe.
func testBreakerProbeWakesALongPoll(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 1, 30)
	s.push("q", "p", "a", "b")
	s.tryOnce("g", broker.AckFailed)
	s.clock.Advance(30*time.Second - time.Millisecond)
	got := waitingPop(t, s.b, s.sig, "q")
	for s.b.Waiting() == 0 {
		select {
		case ids := <-got:
			t.Fatalf("served before the probe's time: %v", ids)
		case <-time.After(time.Millisecond):
		}
	}
	s.clock.Advance(time.Millisecond)
	wantServed(t, got, []string{"a"}, "the probe came due")
}

// A probe acked completed ends the hold: pops waiting for the group are
// served at once, the release is audited as lazarus's and told, once.
func testBreakerCompletedProbeReleases(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 2, 30)
	s.push("q", "p", "a")
	s.push("q", "r", "b", "c")
	s.tryOnce("g", broker.AckFailed)
	second := s.tryOnce("g", broker.AckFailed)
	hold := s.holdsOf("g")[0]
	s.clock.Advance(30 * time.Second)
	probe := s.tryOnce("g", "")
	got := waitingPop(t, s.b, s.sig, "q") // waits: the probe is out
	if r := s.ack(probe, broker.AckCompleted, ""); !r.Success {
		t.Fatalf("the probe's ack: %+v", r)
	}
	wantServed(t, got, map[string][]string{"a": {"b", "c"}, "b": {"a"}}[probe.TransactionID], "the probe completed")
	if hs := s.holdsOf(""); len(hs) != 0 || s.streak("g") != 0 {
		t.Fatalf("after the probe completed: holds %+v, streak %d", hs, s.streak("g"))
	}
	var audited []string
	for _, a := range append(s.audits(broker.AuditHoldRelease), s.audits(broker.AuditHold)...) {
		audited = append(audited, a.Actor+" "+a.Action+" "+a.Queue+"/"+a.Group+": "+a.Detail)
	}
	want := []string{
		"lazarus hold_release q/g: circuit breaker released: probe " + probe.TransactionID + " completed; 2 messages waiting",
		"lazarus hold q/g: held: circuit breaker: 2 failures in a row, last error down " + second.TransactionID,
	}
	if !slices.Equal(audited, want) {
		t.Fatalf("audit:\n%q\nwant\n%q", audited, want)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.told) != 2 || s.told[0].Kind != broker.EventHoldStarted || s.told[1].Kind != broker.EventHoldReleased ||
		s.told[0].HoldKind != broker.HoldBreaker || s.told[1].HoldKind != broker.HoldBreaker ||
		s.told[0].HoldID != hold.ID || s.told[1].HoldID != hold.ID || s.told[0].Group != "g" || !strings.HasPrefix(s.told[0].Detail, "circuit breaker: 2 failures") {
		t.Fatalf("told: %+v", s.told)
	}
}

// Turning the breaker off (holdAfterFailures 0) leaves its hold until it
// is released or its probe completes (docs/concepts.md): the probe handed
// out after the option went to 0, acked completed, still ends the hold;
// a failed one leaves it, and nothing is counted while the breaker is off.
func testBreakerOffStillEndsItsHoldByTheProbe(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 2, 30)
	s.push("q", "p", "a", "b", "c", "d")
	s.tryOnce("g", broker.AckFailed)
	s.tryOnce("g", broker.AckFailed)
	if hs := s.holdsOf("g"); len(hs) != 1 {
		t.Fatalf("not held after 2 failures: %+v", hs)
	}
	s.configure("q", map[string]any{"holdAfterFailures": 0})
	s.clock.Advance(30 * time.Second)
	probe := s.tryOnce("g", "")
	if r := s.ack(probe, broker.AckFailed, "down"); !r.Success {
		t.Fatalf("the probe's ack: %+v", r)
	}
	if hs := s.holdsOf("g"); len(hs) != 1 || hs[0].ProbeSeq != 0 {
		t.Fatalf("a failed probe with the breaker off: holds %+v, want the hold, its probe over", hs)
	}
	s.clock.Advance(30 * time.Second)
	probe = s.tryOnce("g", "")
	if r := s.ack(probe, broker.AckCompleted, ""); !r.Success {
		t.Fatalf("the probe's ack: %+v", r)
	}
	if hs := s.holdsOf("g"); len(hs) != 0 {
		t.Fatalf("the probe completed with the breaker off: the hold is still there %+v", hs)
	}
	if got := s.audits(broker.AuditHoldRelease); len(got) != 1 || got[0].Actor != broker.BrokerActor {
		t.Fatalf("release audited: %+v", got)
	}
}

// A probe marker whose consumer row is gone (the partition sweep takes a
// partition's consumers with it) is no probe in flight: the held pops go
// on, and the next probe is handed when due.
func testBreakerStaleProbeMarkerIsNoProbeInFlight(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 2, 30)
	s.push("q", "p", "a", "b")
	s.push("q", "r", "c", "d")
	s.tryOnce("g", broker.AckFailed)
	s.tryOnce("g", broker.AckFailed)
	s.clock.Advance(30 * time.Second)
	probe := s.tryOnce("g", "")
	if r := s.ack(probe, broker.AckRetry, "again"); !r.Success { // leaves the marker
		t.Fatalf("the probe's ack: %+v", r)
	}
	hs := s.holdsOf("g")
	if len(hs) != 1 || hs[0].ProbeSeq == 0 {
		t.Fatalf("after a probe acked retry: %+v, want the hold with its marker", hs)
	}
	// What the sweep's DeletePartitionConsumers does to that partition.
	if _, err := s.db.ExecUncatalogued(s.ctx, `DELETE FROM consumers WHERE partition_id = ? AND group_id = ?`, hs[0].ProbePartitionID, hs[0].GroupID); err != nil {
		t.Fatal(err)
	}
	if res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1}); err != nil || len(res.Messages) != 0 {
		t.Fatalf("a held pop before the probe is due: %+v, %v", res, err)
	}
	s.clock.Advance(30 * time.Second)
	res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("the next probe, due, its marker stale: %+v, %v", res, err)
	}
}

// The breaker's reason says only the first line of the last error, its
// control characters removed, and is at most MaxBreakerReason bytes.
func testBreakerReasonIsTheErrorsFirstLineClean(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 2, 30)
	s.push("q", "p", "a", "b")
	s.tryOnce("g", broker.AckFailed)
	m := s.pop("q", "g", 1).Messages[0]
	s.ack(m, broker.AckFailed, "down\x1b[2J\tnow\x07\nat stack line 2\r\nline 3")
	hs := s.holdsOf("g")
	if len(hs) != 1 || hs[0].Reason != "circuit breaker: 2 failures in a row, last error down[2Jnow" {
		t.Fatalf("holds %+v", hs)
	}
	if br := s.streak("g"); br != 2 {
		t.Fatalf("streak %d", br)
	}
	long := setupBreaker(t, harness, 1, 30)
	long.push("q", "p", "a")
	m = long.pop("q", "g", 1).Messages[0]
	long.ack(m, broker.AckFailed, strings.Repeat("é", 300)+"\nmore")
	hs = long.holdsOf("g")
	if len(hs) != 1 || len(hs[0].Reason) > broker.MaxBreakerReason || !strings.HasPrefix(hs[0].Reason, "circuit breaker: 1 failures in a row, last error éé") {
		t.Fatalf("a long error: %d bytes, holds %+v", len(hs[0].Reason), hs)
	}
}

// Completions of leases handed out before the hold put the count back
// to 0 but leave the hold: only the probe's completion ends it.
func testBreakerInFlightCompletionKeepsTheHold(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 2, 30)
	for i := range 4 {
		s.push("q", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i))
	}
	var leased []broker.Delivery
	for range 3 {
		leased = append(leased, s.tryOnce("g", ""))
	}
	s.ack(leased[0], broker.AckFailed, "down")
	s.ack(leased[1], broker.AckFailed, "down")
	s.ack(leased[2], broker.AckCompleted, "")
	if hs := s.holdsOf("g"); len(hs) != 1 || s.streak("g") != 0 {
		t.Fatalf("after a completion in flight: holds %+v, streak %d", hs, s.streak("g"))
	}
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
}

// A manual hold, of the group or of the queue, lets no probe through.
func testBreakerManualHoldBlocksProbes(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 1, 30)
	s.push("q", "p", "a", "b")
	s.tryOnce("g", broker.AckFailed)
	for _, group := range []string{"g", ""} {
		manual := s.hold("q", group)
		s.clock.Advance(time.Minute)
		s.popsNothing(broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
		s.release(manual.ID)
	}
	if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("the probe once the manual holds were released: %v", ids)
	}
}

// A person's release of the breaker's hold puts the count back to 0: it
// takes N failures again to hold the group.
func testBreakerReleaseByAPersonResetsTheCount(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupBreaker(t, harness, 2, 30)
	s.push("q", "p", "a")
	s.tryOnce("g", broker.AckFailed)
	s.tryOnce("g", broker.AckFailed)
	h := s.holdsOf("g")[0]
	if r := s.release(h.ID); r.Kind != broker.HoldBreaker {
		t.Fatalf("released: %+v", r)
	}
	if got := s.streak("g"); got != 0 {
		t.Fatalf("streak %d after the release", got)
	}
	s.tryOnce("g", broker.AckFailed)
	if hs := s.holdsOf("g"); len(hs) != 0 {
		t.Fatalf("held again after one failure: %+v", hs)
	}
	s.tryOnce("g", broker.AckFailed)
	if hs := s.holdsOf("g"); len(hs) != 1 || hs[0].ID == h.ID {
		t.Fatalf("after two more failures: %+v (the first hold was %d)", hs, h.ID)
	}
}

// breakerCounter counts what the circuit breaker reads and writes in the
// broker's writes: its counts, its holds' probes, and holds read.
type breakerCounter struct {
	broker.Store
	n *atomic.Int64
}

type breakerCountingTx struct {
	broker.Tx
	n *atomic.Int64
}

func (t breakerCountingTx) AddBreakerTries(ctx context.Context, b broker.BreakerTries) (int64, error) {
	t.n.Add(1)
	return t.Tx.AddBreakerTries(ctx, b)
}

func (t breakerCountingTx) ResetBreaker(ctx context.Context, queueID, groupID int64) error {
	t.n.Add(1)
	return t.Tx.ResetBreaker(ctx, queueID, groupID)
}

func (t breakerCountingTx) Breaker(ctx context.Context, queueID, groupID int64) (int64, string, error) {
	t.n.Add(1)
	return t.Tx.Breaker(ctx, queueID, groupID)
}

func (t breakerCountingTx) SaveHoldProbe(ctx context.Context, h broker.Hold) error {
	t.n.Add(1)
	return t.Tx.SaveHoldProbe(ctx, h)
}

func (t breakerCountingTx) HoldsOf(ctx context.Context, queueID, groupID int64) ([]broker.Hold, error) {
	t.n.Add(1)
	return t.Tx.HoldsOf(ctx, queueID, groupID)
}

func (s breakerCounter) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return s.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(breakerCountingTx{tx, s.n}) })
}

// A queue with the breaker off costs its acks no statement of the
// breaker's: completed, failed, dlq, an autoAck pop and an ack in a
// transaction. With it on, a completed ack costs one.
func testBreakerOffCostsAcksNoStatement(t *testing.T, harness Harness) {
	t.Parallel()
	var n atomic.Int64
	s := countedBundle(t, harness, func(d broker.Store) broker.Store { return breakerCounter{d, &n} })
	s.configure("q", map[string]any{"retryLimit": 100, "retryDelay": 0})
	for i := range 10 {
		s.push("q", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i))
	}
	s.tryOnce("g", broker.AckCompleted) // the first pop reads g's holds: the cache knows it unheld
	n.Store(0)
	for _, status := range []string{broker.AckCompleted, broker.AckFailed, broker.AckDLQ, broker.AckRetry} {
		s.tryOnce("g", status)
	}
	if _, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", AutoAck: true}); err != nil {
		t.Fatal(err)
	}
	m := s.tryOnce("g", "")
	if _, err := s.b.Transaction(s.ctx, []broker.Operation{{Type: "ack", Ack: broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckCompleted, Group: "g"}}}); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("acks of a queue with the breaker off: %d statements of the breaker's, want 0", got)
	}
	s.configure("q", map[string]any{"holdAfterFailures": 5})
	s.tryOnce("g", broker.AckCompleted) // reads g's holds once more (the cache was emptied)
	n.Store(0)
	s.tryOnce("g", broker.AckCompleted)
	if got := n.Load(); got != 1 {
		t.Fatalf("a completed ack with the breaker on: %d statements of the breaker's, want 1", got)
	}
}

// countedBundle is a bundle on a new store whose broker writes through
// wrap(the store): a counter of what the writes do.
func countedBundle(t *testing.T, harness Harness, wrap func(broker.Store) broker.Store) *bundle {
	t.Helper()
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "l.db"), Options{NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	return &bundle{t: t, ctx: ctx, b: broker.New(broker.Config{Store: wrap(d), Clock: c}), db: d, clock: c}
}

// plainCounter counts the broker's writes that are neither ephemeral
// nor background: the ordinary (on PostgreSQL exclusive) ones.
type plainCounter struct {
	broker.Store
	n *atomic.Int64
}

func (s plainCounter) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	if !o.Ephemeral && !o.Background {
		s.n.Add(1)
	}
	return s.Store.Update(ctx, o, fn)
}

// A probe that is due while nothing of the group is ready (its only
// partition waits out a retry delay) leaves the held pops light: none
// becomes an ordinary write; once a message is ready, the probe is
// handed (in one).
func testBreakerProbeDueWithNothingReadyWritesNothing(t *testing.T, harness Harness) {
	t.Parallel()
	var n atomic.Int64
	s := countedBundle(t, harness, func(d broker.Store) broker.Store { return plainCounter{d, &n} })
	s.configure("q", map[string]any{"holdAfterFailures": 2, "holdProbeSeconds": 30, "retryLimit": 100, "retryDelay": 0})
	s.push("q", "p", "a", "b")
	s.tryOnce("g", broker.AckFailed)
	s.configure("q", map[string]any{"retryDelay": 60000})
	s.tryOnce("g", broker.AckFailed) // held; p waits a minute
	if hs := s.holdsOf("g"); len(hs) != 1 {
		t.Fatalf("not held: %+v", hs)
	}
	s.clock.Advance(30 * time.Second) // the probe is due; nothing is ready
	n.Store(0)
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g"}, broker.PopRequest{Queue: "q", Group: "g", Partition: "p"})
	if got := n.Load(); got != 0 {
		t.Fatalf("two held pops with the probe due and nothing ready made %d ordinary writes, want 0", got)
	}
	s.clock.Advance(30 * time.Second) // p is ready again
	if res := s.pop("q", "g", 10); len(res.Messages) != 1 {
		t.Fatalf("the probe, once a message is ready: %+v", res)
	}
}

// Two processes on one store count one streak: failures acked in either
// hold the group at N in both.
func testBreakerAcrossProcesses(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	dsn := harness.New(t, "lazarus")
	a, _ := signalled(t, harness, dsn)
	b, _ := signalled(t, harness, dsn)
	opts := map[string]json.RawMessage{"holdAfterFailures": json.RawMessage(`2`), "retryLimit": json.RawMessage(`100`), "retryDelay": json.RawMessage(`0`)}
	if _, err := a.Configure(ctx, "q", opts, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "x", Payload: []byte(`1`)},
		{Queue: "q", Partition: "r", TransactionID: "y", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	fail := func(br *broker.Broker) {
		t.Helper()
		res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g"})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop: %+v, %v", res, err)
		}
		m := res.Messages[0]
		if _, err := br.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckFailed, Error: "down", Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	fail(a)
	fail(b)
	for i, br := range []*broker.Broker{a, b} {
		if res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10}); err != nil || len(res.Messages) != 0 {
			t.Fatalf("process %d's pop after 2 failures in two processes: %d messages, %v", i, len(res.Messages), err)
		}
	}
}
