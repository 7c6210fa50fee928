package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Replay to one group (SPEC 4): the copy goes only to the group that gave
// up on it; the other groups' cursors pass it by.

// settle pops one message of queue q for group (a batch of 1) and acks
// it with status; it returns the message.
func (s *bundle) settle(group, status string) broker.Delivery {
	s.t.Helper()
	res := s.pop("q", group, 1)
	if len(res.Messages) != 1 {
		s.t.Fatalf("pop for %s: %d messages, want 1", group, len(res.Messages))
	}
	if r := s.ack(res.Messages[0], status, "boom in "+group); !r.Success {
		s.t.Fatalf("ack %s for %s: %+v", res.Messages[0].TransactionID, group, r)
	}
	return res.Messages[0]
}

// replayTo replays a message's dead letter of one group to that group
// only.
func (s *bundle) replayTo(messageID, group string) broker.ReplayResult {
	s.t.Helper()
	res, err := s.b.ReplayWith(s.ctx, messageID, broker.ReplayOptions{Actor: "user:test", Mode: broker.ReplayOwnGroup, Group: group})
	if err != nil {
		s.t.Fatalf("replay %s to %s: %v", messageID, group, err)
	}
	return res
}

// lag is a group's lag in queue q, as the queue page shows it.
func (s *bundle) lag(group string) int64 {
	s.t.Helper()
	q, err := s.b.Queue(s.ctx, "q")
	if err != nil {
		s.t.Fatalf("queue: %v", err)
	}
	for _, g := range q.Groups {
		if g.Name == group {
			return g.Lag
		}
	}
	s.t.Fatalf("group %s does not read q", group)
	return 0
}

func deadGroups(dls []broker.DeadLetter) []string {
	var out []string
	for _, d := range dls {
		out = append(out, d.Group+":"+d.TransactionID)
	}
	return out
}

// A message billing gave up on and analytics completed, replayed to
// billing only: billing gets the copy; analytics never does, its cursor
// passes it at its next pop (lag 0 then, no lease, nothing counted as
// completed), and what is pushed behind the copy comes to analytics in
// order.
func testReplayToOwnGroupPassesTheOtherGroupsBy(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "x")
	x := s.settle("billing", broker.AckDLQ)
	s.settle("analytics", broker.AckCompleted)
	rep := s.replayTo(x.ID(), "billing")
	if want := "dlq:" + x.ID() + ":billing"; rep.TransactionID != want {
		t.Fatalf("copy's transactionId %q, want %q", rep.TransactionID, want)
	}
	if got := s.lag("analytics"); got != 1 {
		t.Fatalf("analytics's lag before it pops: %d, want 1 (the copy is past its cursor)", got)
	}
	completed := s.stats("q", "analytics").Completed

	if res := s.pop("q", "analytics", 10); len(res.Messages) != 0 {
		t.Fatalf("analytics popped %v, want nothing: the copy is billing's", res.Messages[0].TransactionID)
	}
	if got := s.lag("analytics"); got != 0 {
		t.Errorf("analytics's lag after its pop: %d, want 0 (its cursor passed the copy)", got)
	}
	q, err := s.b.Queue(s.ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range q.Groups {
		if g.Name == "analytics" && g.Leased != 0 {
			t.Errorf("analytics holds %d leases after passing the copy by", g.Leased)
		}
	}
	if got := s.stats("q", "analytics").Completed; got != completed {
		t.Errorf("analytics's completed went from %d to %d: a copy passed by is not completed", completed, got)
	}

	ids, res := s.popTxids("q", "billing", 10)
	if !slices.Equal(ids, []string{rep.TransactionID}) {
		t.Fatalf("billing popped %v, want its copy", ids)
	}
	s.ack(res.Messages[0], broker.AckCompleted, "")
	if st := s.stats("q", "billing"); st.ReplayCompleted != 1 {
		t.Errorf("billing's replays completed: %d, want 1", st.ReplayCompleted)
	}

	s.push("q", "p", "m1", "m2")
	if ids, _ := s.popTxids("q", "analytics", 10); !slices.Equal(ids, []string{"m1", "m2"}) {
		t.Errorf("analytics popped %v behind the copy, want [m1 m2]", ids)
	}
	if ids, _ := s.popTxids("q", "billing", 10); !slices.Equal(ids, []string{"m1", "m2"}) {
		t.Errorf("billing popped %v behind its copy, want [m1 m2]", ids)
	}
}

// A message both groups gave up on, replayed to billing only: billing's
// dead letter is gone, analytics's stays, and analytics passes the copy
// by; replayed to analytics in turn, its copy is analytics's alone.
func testReplayToOwnGroupKeepsTheOtherGroupsDeadLetter(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "x")
	x := s.settle("billing", broker.AckDLQ)
	s.settle("analytics", broker.AckDLQ)
	rep := s.replayTo(x.ID(), "billing")
	if got := deadGroups(s.dead("q", "")); !slices.Equal(got, []string{"analytics:x"}) {
		t.Fatalf("dead letters after the replay to billing: %v, want analytics's only", got)
	}
	if res := s.pop("q", "analytics", 10); len(res.Messages) != 0 {
		t.Fatalf("analytics popped %s, billing's copy", res.Messages[0].TransactionID)
	}
	if got := deadGroups(s.dead("q", "analytics")); !slices.Equal(got, []string{"analytics:x"}) {
		t.Errorf("analytics's dead letters after its pop: %v", got)
	}
	ids, res := s.popTxids("q", "billing", 10)
	if !slices.Equal(ids, []string{rep.TransactionID}) {
		t.Fatalf("billing popped %v, want its copy", ids)
	}
	s.ack(res.Messages[0], broker.AckCompleted, "")

	// analytics's own copy, behind billing's (which analytics passed).
	rep2 := s.replayTo(x.ID(), "analytics")
	if got := s.dead("q", ""); len(got) != 0 {
		t.Errorf("dead letters after both replays: %v", deadGroups(got))
	}
	if ids, _ := s.popTxids("q", "analytics", 10); !slices.Equal(ids, []string{rep2.TransactionID}) {
		t.Errorf("analytics popped %v, want its own copy", ids)
	}
	if res := s.pop("q", "billing", 10); len(res.Messages) != 0 {
		t.Errorf("billing popped %s, analytics's copy", res.Messages[0].TransactionID)
	}
	if got := s.lag("billing"); got != 0 {
		t.Errorf("billing's lag: %d, want 0", got)
	}
}

// replayBetween makes partition p of q hold [m1, copy of x for billing,
// m2] past analytics's cursor, and returns the copy's transactionId.
func (s *bundle) replayBetween() string {
	s.t.Helper()
	s.push("q", "p", "x")
	x := s.settle("billing", broker.AckDLQ)
	s.settle("analytics", broker.AckCompleted)
	s.push("q", "p", "m1")
	rep := s.replayTo(x.ID(), "billing")
	s.push("q", "p", "m2")
	return rep.TransactionID
}

// A batch stops before a copy for another group: analytics's pop of 10
// over [m1, billing's copy, m2] leases m1 alone; once m1 is settled, the
// next pop passes the copy and leases m2. Billing's batch holds all three.
func testReplayToOwnGroupABatchStopsBeforeACopyForAnother(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	copyTx := s.replayBetween()
	ids, res := s.popTxids("q", "analytics", 10)
	if !slices.Equal(ids, []string{"m1"}) {
		t.Fatalf("analytics's first pop of 10: %v, want [m1]", ids)
	}
	// The copy is behind m1: not leased, it is not passed either while
	// m1 is unsettled.
	if r := s.pop("q", "analytics", 10); len(r.Messages) != 0 {
		t.Fatalf("analytics popped %s under a live lease", r.Messages[0].TransactionID)
	}
	s.ack(res.Messages[0], broker.AckCompleted, "")
	if got := s.lag("analytics"); got != 2 {
		t.Errorf("analytics's lag after m1: %d, want 2 (the copy and m2)", got)
	}
	if ids, _ := s.popTxids("q", "analytics", 10); !slices.Equal(ids, []string{"m2"}) {
		t.Fatalf("analytics's second pop: %v, want [m2]", ids)
	}
	if got := s.lag("analytics"); got != 1 {
		t.Errorf("analytics's lag with m2 leased: %d, want 1", got)
	}
	if ids, _ := s.popTxids("q", "billing", 10); !slices.Equal(ids, []string{"m1", copyTx, "m2"}) {
		t.Errorf("billing's pop of 10: %v, want [m1 %s m2]", ids, copyTx)
	}
}

// A failed m1 comes back alone, its retry spent; the copy behind it is
// neither delivered nor passed until m1 is settled.
func testReplayToOwnGroupRetryBeforeACopyForAnother(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 2, "retryDelay": 0})
	s.replayBetween()
	_, res := s.popTxids("q", "analytics", 10)
	s.ack(res.Messages[0], broker.AckFailed, "try again")
	ids, res := s.popTxids("q", "analytics", 10)
	if !slices.Equal(ids, []string{"m1"}) || res.Messages[0].RetryCount != 1 {
		t.Fatalf("after the failure: %v (retries %d), want m1 with 1 retry spent", ids, res.Messages[0].RetryCount)
	}
	s.ack(res.Messages[0], broker.AckCompleted, "")
	ids, res = s.popTxids("q", "analytics", 10)
	if !slices.Equal(ids, []string{"m2"}) || res.Messages[0].RetryCount != 0 {
		t.Fatalf("then: %v, want m2 with no retry spent", ids)
	}
}

// autoAck pops the same: m1, then m2, never the copy, and only those two
// are counted as completed.
func testReplayToOwnGroupAutoAck(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.replayBetween()
	before := s.stats("q", "analytics").Completed
	var got [][]string
	for range 3 {
		res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "analytics", Batch: 10, AutoAck: true})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range res.Messages {
			ids = append(ids, m.TransactionID)
		}
		got = append(got, ids)
	}
	if !slices.EqualFunc(got, [][]string{{"m1"}, {"m2"}, nil}, slices.Equal) {
		t.Errorf("autoAck pops: %v, want [m1] [m2] []", got)
	}
	if c := s.stats("q", "analytics").Completed - before; c != 2 {
		t.Errorf("completed by the autoAck pops: %d, want 2", c)
	}
	if got := s.lag("analytics"); got != 0 {
		t.Errorf("analytics's lag: %d, want 0", got)
	}
}

// A pop of a partition named by the consumer passes the copy by too.
func testReplayToOwnGroupNamedPartition(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.replayBetween()
	pop := func() []string {
		res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p", Group: "analytics", Batch: 10, AutoAck: true})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range res.Messages {
			ids = append(ids, m.TransactionID)
		}
		return ids
	}
	if a, b := pop(), pop(); !slices.Equal(a, []string{"m1"}) || !slices.Equal(b, []string{"m2"}) {
		t.Errorf("pops of p: %v then %v, want [m1] then [m2]", a, b)
	}
}

// A pop of any partition does not answer empty when the partition it
// comes to first holds only copies for billing: it passes them and takes
// the next ready partition, also past the consumers one transaction
// tries (maxPassRounds).
func testReplayToOwnGroupTriesTheNextPartition(t *testing.T, harness Harness) {
	t.Parallel()
	for _, n := range []int{1, 3, 12} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			// Partitions c0..cn-1 first (analytics read them longest ago),
			// each with a message billing gave up on and analytics
			// completed, then partition "last".
			var ids []string
			for i := range n {
				p := fmt.Sprintf("c%d", i)
				s.push("q", p, "x"+p)
				res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: p, Group: "billing"})
				if err != nil || len(res.Messages) != 1 {
					t.Fatalf("billing's pop of %s: %+v, %v", p, res, err)
				}
				s.ack(res.Messages[0], broker.AckDLQ, "no")
				ids = append(ids, res.Messages[0].ID())
				if _, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: p, Group: "analytics", AutoAck: true}); err != nil {
					t.Fatal(err)
				}
				s.clock.Advance(time.Millisecond)
			}
			s.push("q", "last", "l0")
			if _, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "last", Group: "analytics", AutoAck: true}); err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				s.replayTo(id, "billing")
			}
			s.push("q", "last", "l1")
			if got, _ := s.popTxids("q", "analytics", 10); !slices.Equal(got, []string{"l1"}) {
				t.Fatalf("analytics's pop of any partition: %v, want [l1]", got)
			}
			if got := s.lag("analytics"); got != 1 {
				t.Errorf("analytics's lag: %d, want 1 (l1 leased; every copy passed)", got)
			}
		})
	}
}

// The replays row decides, not the text: a producer's own transactionId
// of a copy's shape is delivered to every group.
func testReplayToOwnGroupShapeAloneIsNotACopy(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "x")
	x := s.settle("billing", broker.AckDLQ)
	s.settle("analytics", broker.AckCompleted)
	fake := "dlq:" + x.ID() + ":billing"
	s.push("q", "p", fake)
	for _, g := range []string{"analytics", "billing"} {
		if ids, _ := s.popTxids("q", g, 10); !slices.Equal(ids, []string{fake}) {
			t.Errorf("%s popped %v, want the producer's %s", g, ids, fake)
		}
	}
}

// countingStore counts the replays lookups of the pops.
type countingStore struct {
	broker.Store
	n *atomic.Int64
}

type countingTx struct {
	broker.Tx
	n *atomic.Int64
}

func (t countingTx) CopyGroups(ctx context.Context, seqs []int64) (map[int64]int64, error) {
	t.n.Add(1)
	return t.Tx.CopyGroups(ctx, seqs)
}

func (s countingStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return s.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(countingTx{tx, s.n}) })
}

// A pop of ordinary messages runs no replays query (the common path costs
// what it did); a message of a copy's shape is looked up.
func testPopOfOrdinaryMessagesDoesNotReadReplays(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "l.db"), Options{NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var n atomic.Int64
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	s := &bundle{t: t, ctx: ctx, b: broker.New(broker.Config{Store: countingStore{d, &n}, Clock: c}), db: d, clock: c}
	s.push("q", "p", "a", "b", "dlq:not-a-copy", "c")
	s.push("q", "r", "d")
	for _, g := range []string{"g", "h"} {
		for range 3 {
			res := s.pop("q", g, 10)
			for _, m := range res.Messages {
				s.ack(m, broker.AckCompleted, "")
			}
		}
		if _, err := s.b.Pop(ctx, broker.PopRequest{Queue: "q", Group: g + "-auto", Batch: 10, AutoAck: true}); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("pops of ordinary messages read replays %d times, want 0", got)
	}
	s.push("q", "p", "dlq:0190b5a8-0000-7000-8000-000000000001:g")
	if ids, _ := s.popTxids("q", "g", 10); len(ids) != 1 || n.Load() == 0 {
		t.Errorf("a message of a copy's shape: popped %v, replays read %d times (want 1 message, at least 1 read)", ids, n.Load())
	}
}

// A pop that passes copies at the head still fills its batch from what
// follows them: analytics's pop of 2 over [billing's copy, m1, m2] is
// [m1 m2], also past more copies than a pop reads at a time.
func testReplayToOwnGroupPassingFillsTheBatch(t *testing.T, harness Harness) {
	t.Parallel()
	for _, copies := range []int{1, 150} {
		t.Run(fmt.Sprint(copies), func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			var ids []string
			for i := range copies {
				s.push("q", "p", fmt.Sprint("x", i))
			}
			for range copies {
				ids = append(ids, s.settle("billing", broker.AckDLQ).ID())
				s.settle("analytics", broker.AckCompleted)
			}
			for _, id := range ids {
				s.replayTo(id, "billing")
			}
			s.push("q", "p", "m1", "m2", "m3")
			if got, _ := s.popTxids("q", "analytics", 2); !slices.Equal(got, []string{"m1", "m2"}) {
				t.Fatalf("analytics's pop of 2: %v, want [m1 m2]", got)
			}
			if got := s.lag("analytics"); got != 3 {
				t.Errorf("analytics's lag: %d, want 3 (m1 m2 leased, m3)", got)
			}
		})
	}
}

// delayedProcessing: a copy for another group is passed by once it is
// due, like any message (a pop reads nothing pushed less than the delay
// ago), and what is behind it waits its own delay.
func testReplayToOwnGroupUnderDelayedProcessing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"delayedProcessing": 10})
	s.push("q", "p", "x")
	s.clock.Advance(10 * time.Second)
	x := s.settle("billing", broker.AckDLQ)
	s.settle("analytics", broker.AckCompleted)
	s.replayTo(x.ID(), "billing") // the copy is due at +10s from now
	s.clock.Advance(time.Second)
	s.push("q", "p", "m") // due at +11s
	s.clock.Advance(4 * time.Second)
	if ids, _ := s.popTxids("q", "analytics", 10); len(ids) != 0 || s.lag("analytics") != 2 {
		t.Fatalf("at +5s: analytics popped %v, lag %d; want nothing, lag 2 (the copy is not due, not passed)", ids, s.lag("analytics"))
	}
	s.clock.Advance(5 * time.Second) // +10s: the copy is due, m is not
	if ids, _ := s.popTxids("q", "analytics", 10); len(ids) != 0 || s.lag("analytics") != 1 {
		t.Fatalf("at +10s: analytics popped %v, lag %d; want nothing, lag 1 (the copy passed, m not due)", ids, s.lag("analytics"))
	}
	res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p", Group: "analytics", Batch: 10})
	if err != nil || len(res.Messages) != 0 {
		t.Fatalf("at +10s, a pop of p: %+v, %v", res, err)
	}
	s.clock.Advance(time.Second)
	if ids, _ := s.popTxids("q", "analytics", 10); !slices.Equal(ids, []string{"m"}) {
		t.Fatalf("at +11s: analytics popped %v, want [m]", ids)
	}
}

// Passing copies by is a write a power cut may undo (Ephemeral): a pop
// that only passes commits as an ephemeral write, and were it lost, the
// next pop passes the same copies again.
func testReplayToOwnGroupPassingIsEphemeral(t *testing.T, harness Harness) {
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "l.db"), Options{SyncFull: true, NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st := &recordingStore{Store: d}
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	s := &bundle{t: t, ctx: ctx, b: broker.New(broker.Config{Store: st, Clock: c}), db: d, clock: c}
	s.push("q", "p", "x")
	x := s.settle("billing", broker.AckDLQ)
	s.settle("analytics", broker.AckCompleted)
	s.replayTo(x.ID(), "billing")
	const row = `SELECT c.cursor, c.passed, c.passed_seq, c.ready FROM consumers c JOIN groups g ON g.id = c.group_id WHERE g.name = 'analytics'`
	var before [4]int64
	if err := d.QueryRowUncatalogued(ctx, row).Scan(&before[0], &before[1], &before[2], &before[3]); err != nil {
		t.Fatal(err)
	}
	st.take()
	if res := s.pop("q", "analytics", 10); len(res.Messages) != 0 {
		t.Fatalf("analytics popped %s", res.Messages[0].TransactionID)
	}
	if w := st.take(); len(w) != 1 || !w[0].ephemeral || !w[0].committed {
		t.Errorf("the pop that passes the copy: writes %+v, want one ephemeral write", w)
	}
	if s.lag("analytics") != 0 {
		t.Fatalf("lag after the pass: %d", s.lag("analytics"))
	}
	// The pass lost: the consumer as it was before it.
	if _, err := d.ExecUncatalogued(ctx, `UPDATE consumers SET cursor = ?, passed = ?, passed_seq = ?, ready = ?
		WHERE group_id = (SELECT id FROM groups WHERE name = 'analytics')`, before[0], before[1], before[2], before[3]); err != nil {
		t.Fatal(err)
	}
	if s.lag("analytics") != 1 {
		t.Fatalf("lag with the pass lost: %d, want 1", s.lag("analytics"))
	}
	if res := s.pop("q", "analytics", 10); len(res.Messages) != 0 {
		t.Fatalf("analytics popped %s after the pass was lost", res.Messages[0].TransactionID)
	}
	if s.lag("analytics") != 0 {
		t.Errorf("lag after passing again: %d, want 0", s.lag("analytics"))
	}
}

// More copies at the head than one transaction passes (passBudget): the
// pop goes on in another transaction and still hands out what follows.
func testReplayToOwnGroupPastTheBudget(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	const n = 1100
	for i := 0; i < n; i += 100 {
		txids := make([]string, 100)
		for j := range txids {
			txids[j] = fmt.Sprint("x", i+j)
		}
		s.push("q", "p", txids...)
	}
	var ids []string
	for len(ids) < n {
		res := s.pop("q", "billing", 100)
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "no"}
			ids = append(ids, m.ID())
		}
		if _, err := s.b.AckBatch(s.ctx, "billing", acks); err != nil {
			t.Fatal(err)
		}
	}
	for range n / 100 {
		if _, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "analytics", Batch: 100, AutoAck: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		s.replayTo(id, "billing")
	}
	s.push("q", "p", "m")
	if got, _ := s.popTxids("q", "analytics", 1); !slices.Equal(got, []string{"m"}) {
		t.Fatalf("analytics's pop behind %d copies for billing: %v, want [m]", n, got)
	}
}
