package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// partitionSweep runs maintenance once and returns the partitions task's
// report.
func (s *bundle) partitionSweep() broker.TaskReport {
	s.t.Helper()
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		s.t.Fatalf("maintain: %v", err)
	}
	return rep.Task(broker.TaskPartitions)
}

// partition returns the named partition of queue, read from the store
// (ok false: there is none).
func (s *bundle) partition(queue, name string) (broker.Partition, bool) {
	s.t.Helper()
	var p broker.Partition
	err := s.db.View(s.ctx, func(tx broker.Tx) error {
		q, err := tx.QueueByName(s.ctx, queue)
		if err != nil {
			return err
		}
		p, err = tx.PartitionByName(s.ctx, q.ID, name)
		return err
	})
	if errors.Is(err, broker.ErrNotFound) {
		return broker.Partition{}, false
	}
	if err != nil {
		s.t.Fatalf("partition %s/%s: %v", queue, name, err)
	}
	return p, true
}

// rowsOf counts a table's rows of a partition id.
func (s *bundle) rowsOf(table string, partitionID int64) int {
	s.t.Helper()
	var n int
	if err := s.db.QueryRowUncatalogued(s.ctx, `SELECT COUNT(*) FROM `+table+` WHERE partition_id = ?`, partitionID).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// exec runs a statement on the database directly, for a state no API
// path makes today.
func (s *bundle) exec(stmt string, args ...any) {
	s.t.Helper()
	if _, err := s.db.ExecUncatalogued(s.ctx, stmt, args...); err != nil {
		s.t.Fatalf("%s: %v", stmt, err)
	}
}

// emptied pushes one message to each partition of queue q (retentionSeconds
// 60, read by group a and b) and lets retention take them: the partitions
// are empty and older than PartitionMinAge once it returns.
func emptied(t *testing.T, harness Harness, partitions ...string) *bundle {
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60})
	s.subscribeAll("q", "a", "b")
	for _, p := range partitions {
		s.push("q", p, "m-"+p)
	}
	return s
}

// An empty partition older than an hour goes, with its consumers and
// settle marks; a younger one waits for its hour; the queue page, its
// API description and the overview read the partitions left.
func testEmptyPartitionIsSwept(t *testing.T, harness Harness) {
	t.Parallel()
	s := emptied(t, harness, "p")
	p, _ := s.partition("q", "p")
	// A stray mark of p (retention drops marks with their messages; the
	// rule is that none outlives its partition).
	// Written now, at seq 0: not due, never above a watermark.
	s.exec(`INSERT INTO settle_marks (partition_id, at, seq, queue_id) VALUES (?, ?, 0, ?)`, p.ID, s.clock.Now().UnixMilli(), p.QueueID)
	if n := s.rowsOf("consumers", p.ID); n != 2 {
		t.Fatalf("p has %d consumers, want a's and b's", n)
	}
	s.clock.Advance(2 * time.Minute)
	if r := s.partitionSweep(); r.Removed != 0 {
		t.Fatalf("removed %d partitions 2 minutes old", r.Removed)
	}
	if got := s.kept("q", "p"); len(got) != 0 {
		t.Fatalf("retention left %v", got)
	}
	if _, ok := s.partition("q", "p"); !ok {
		t.Fatal("an empty partition 2 minutes old went")
	}
	s.push("q", "r", "r1")
	s.clock.Advance(broker.PartitionMinAge)
	s.push("q", "r", "r2")   // r is as old as p, but holds r2 (retention takes r1)
	s.push("q", "new", "n1") // made now: young, kept whatever its messages
	r := s.partitionSweep()
	if r.Removed != 1 || r.Chunks != 1 {
		t.Fatalf("report %+v, want 1 partition removed in 1 chunk", r)
	}
	if _, ok := s.partition("q", "p"); ok {
		t.Fatal("p is still there")
	}
	for _, table := range []string{"consumers", "settle_marks"} {
		if n := s.rowsOf(table, p.ID); n != 0 {
			t.Errorf("%d rows of %s left of p", n, table)
		}
	}
	q, err := s.b.Queue(s.ctx, "q")
	if err != nil {
		t.Fatalf("queue page: %v", err)
	}
	var names []string
	for _, p := range q.Partitions {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"new", "r"}) {
		t.Errorf("queue page partitions %v, want new and r", names)
	}
	if lags := map[string]int64{}; true {
		for _, g := range q.Groups {
			lags[g.Name] = g.Lag
		}
		if lags["a"] != 2 || lags["b"] != 2 {
			t.Errorf("lags %v, want a and b 2 (r2 and n1)", lags)
		}
	}
	all, err := s.b.QueuesMatching(s.ctx, broker.QueueFilter{})
	if err != nil || len(all) != 1 || all[0].Name != "q" {
		t.Errorf("overview %+v, %v", all, err)
	}
	if tot := s.b.MaintenanceTotals(); !slices.ContainsFunc(tot, func(t broker.TaskTotals) bool { return t.Task == broker.TaskPartitions && t.Removed == 1 }) {
		t.Errorf("totals %+v do not count the partition", tot)
	}
}

// What keeps an empty partition: a message, a dead letter, the record
// of a deleted one, a replay that names it, a consumer's live lease or
// waiting retry. Each case leaves p with only that (made before
// retention empties the partitions, or after), and the partition other
// of the same age with nothing: other goes, p stays.
func testPartitionSweepKeeps(t *testing.T, harness Harness) {
	t.Parallel()
	failOne := func(s *bundle) { s.fail("q", "a", 1, "boom") }
	for _, c := range []struct {
		name          string
		before, after func(s *bundle, p broker.Partition)
	}{
		{"a message", nil, func(s *bundle, p broker.Partition) {
			s.push("q", "p", "late")
		}},
		{"a dead letter", func(s *bundle, p broker.Partition) { failOne(s) }, nil},
		{"the record of a deleted dead letter", func(s *bundle, p broker.Partition) {
			failOne(s)
			if _, err := s.b.DeleteIDs(s.ctx, []string{s.dead("q", "a")[0].MessageID()}, "", "test"); err != nil {
				s.t.Fatal(err)
			}
		}, nil},
		{"a replay", func(s *bundle, p broker.Partition) {
			failOne(s)
			s.replayTo(s.dead("q", "a")[0].MessageID(), "a")
			s.drain("q", "a")
		}, nil},
		{"a live lease", nil, func(s *bundle, p broker.Partition) {
			// No API path leases an empty partition today: the rule guards it.
			s.exec(`UPDATE consumers SET lease_id = 'l-1', lease_until = ? WHERE partition_id = ? AND group_id = (SELECT id FROM groups WHERE name = 'a')`,
				s.clock.Now().Add(time.Minute).UnixMilli(), p.ID)
		}},
		{"a waiting retry", nil, func(s *bundle, p broker.Partition) {
			// Retention clears a retry with its message: the rule guards it.
			s.exec(`UPDATE consumers SET retry_seq = 1, retries = 1 WHERE partition_id = ? AND group_id = (SELECT id FROM groups WHERE name = 'a')`, p.ID)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := emptied(t, harness, "p", "other")
			p, _ := s.partition("q", "p")
			if c.before != nil {
				c.before(s, p)
			}
			s.clock.Advance(2 * time.Minute)
			if r := s.partitionSweep(); r.Removed != 0 {
				t.Fatalf("removed %d partitions 2 minutes old", r.Removed)
			}
			if got := s.kept("q", "p"); len(got) != 0 {
				t.Fatalf("retention left %v in p", got)
			}
			s.clock.Advance(broker.PartitionMinAge)
			if c.after != nil {
				c.after(s, p)
			}
			if r := s.partitionSweep(); r.Removed != 1 {
				t.Errorf("removed %d, want other only", r.Removed)
			}
			if _, ok := s.partition("q", "other"); ok {
				t.Error("other, empty, is still there")
			}
			if _, ok := s.partition("q", "p"); !ok {
				t.Errorf("p went with %s", c.name)
			}
			if n := s.rowsOf("consumers", p.ID); n != 2 {
				t.Errorf("p has %d consumers left, want 2", n)
			}
		})
	}
}

// racingStore runs hook once, right after the first View that looked
// for empty partitions: what a push does between the sweep's View and
// its Update.
type racingStore struct {
	broker.Store
	hook func()
	done bool
}

type racingTx struct {
	broker.Tx
	looked *bool
}

func (t racingTx) EmptyPartitions(ctx context.Context, before, now time.Time, after int64, limit int) ([]int64, int64, error) {
	*t.looked = true
	return t.Tx.EmptyPartitions(ctx, before, now, after, limit)
}

func (r *racingStore) View(ctx context.Context, fn func(broker.Tx) error) error {
	looked := false
	err := r.Store.View(ctx, func(tx broker.Tx) error { return fn(racingTx{tx, &looked}) })
	if looked && !r.done && r.hook != nil {
		r.done = true
		r.hook()
	}
	return err
}

// A push that arrives between the sweep's look and its delete keeps its
// partition and its message.
func testPushRacingThePartitionSweep(t *testing.T, harness Harness) {
	t.Parallel()
	s := emptied(t, harness, "p", "other")
	rs := &racingStore{Store: s.db}
	s.b = broker.New(broker.Config{Store: rs, Clock: s.clock})
	// Retention first (its own run, the partitions too young yet), so
	// that the race is the partition sweep's alone.
	s.clock.Advance(2 * time.Minute)
	if r := s.sweep(); r.Removed != 2 {
		t.Fatalf("retention removed %d, want 2", r.Removed)
	}
	s.clock.Advance(broker.PartitionMinAge)
	before, _ := s.partition("q", "p")
	rs.hook = func() { s.push("q", "p", "racer") }
	if r := s.partitionSweep(); r.Removed != 1 {
		t.Fatalf("removed %d, want other only", r.Removed)
	}
	if !rs.done {
		t.Fatal("the push did not race the sweep")
	}
	p, ok := s.partition("q", "p")
	if !ok || p.UUID != before.UUID {
		t.Fatalf("p after the race: %+v (%v), want the same partition", p, ok)
	}
	if got := s.kept("q", "p"); !slices.Equal(got, []string{"racer"}) {
		t.Fatalf("p keeps %v, want racer", got)
	}
	for _, g := range []string{"a", "b"} {
		if ids, _ := s.popTxids("q", g, 10); !slices.Equal(ids, []string{"racer"}) {
			t.Errorf("%s got %v, want racer", g, ids)
		}
	}
}

// After the sweep, within the same broker (whose lookup cache had the
// partition by name, UUID and id), a push to the name lands in a new
// partition that exists, with a new UUID, which every group reads from
// its start; an ack naming the old UUID is answered as one naming any
// unknown partition.
func testPartitionSweptThenPushedAgain(t *testing.T, harness Harness) {
	t.Parallel()
	s := emptied(t, harness, "p", "z")
	// The cache learns p by UUID too: a pop and a refused ack by it.
	_, res := s.popTxids("q", "a", 10)
	if len(res.Messages) == 0 {
		t.Fatal("a got nothing")
	}
	var old broker.Delivery
	for _, m := range res.Messages {
		if m.TransactionID == "m-p" {
			old = m
		}
		s.ack(m, broker.AckCompleted, "")
	}
	s.clock.Advance(broker.PartitionMinAge + time.Minute)
	if r := s.partitionSweep(); r.Removed != 2 {
		t.Fatalf("removed %d partitions, want p and z", r.Removed)
	}
	pushed := s.push("q", "p", "again")
	p, ok := s.partition("q", "p")
	if !ok {
		t.Fatal("the push after the sweep made no partition p: it went to the removed one (a stale cache)")
	}
	if p.UUID == old.PartitionUUID || pushed[0].PartitionID != p.UUID {
		t.Errorf("p's UUID %s, pushed to %s, old %s: want a new one, pushed to", p.UUID, pushed[0].PartitionID, old.PartitionUUID)
	}
	if got := s.kept("q", "p"); !slices.Equal(got, []string{"again"}) {
		t.Errorf("p keeps %v, want again", got)
	}
	for _, g := range []string{"a", "b"} {
		if ids, _ := s.popTxids("q", g, 10); !slices.Equal(ids, []string{"again"}) {
			t.Errorf("%s got %v, want again", g, ids)
		}
	}
	// The old UUID: refused as an unknown one is, nothing changed.
	ack := func(uuid string) (broker.AckResult, error) {
		return s.b.Ack(s.ctx, broker.Ack{TransactionID: "m-p", PartitionID: uuid, LeaseID: old.LeaseID, Status: broker.AckCompleted, Group: "a"})
	}
	gotOld, errOld := ack(old.PartitionUUID)
	gotUnknown, errUnknown := ack(broker.NewUUID(s.clock.Now()))
	if gotOld.Success || !errors.Is(errOld, broker.ErrNotFound) || !errors.Is(errUnknown, broker.ErrNotFound) || gotOld.Success != gotUnknown.Success {
		t.Errorf("ack by the old UUID: %+v, %v; by an unknown one: %+v, %v", gotOld, errOld, gotUnknown, errUnknown)
	}
	if st := s.stats("q", "a"); st.Completed != 1 {
		t.Errorf("a completed %d, want the 1 before the sweep", st.Completed)
	}
}

// The sweep deletes PartitionSweepChunk partitions a transaction.
func testPartitionSweepChunks(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60})
	n := 2*broker.PartitionSweepChunk + 1
	items := make([]broker.PushItem, n)
	for i := range items {
		items[i] = broker.PushItem{Queue: "q", Partition: fmt.Sprintf("key-%d", i), TransactionID: "m", Payload: []byte(`{}`)}
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(broker.PartitionMinAge + time.Minute)
	if r := s.partitionSweep(); r.Removed != int64(n) || r.Chunks != 3 {
		t.Fatalf("report %+v, want %d partitions in 3 chunks", r, n)
	}
	if q, err := s.b.Queue(s.ctx, "q"); err != nil || len(q.Partitions) != 0 {
		t.Fatalf("queue page: %d partitions, %v", len(q.Partitions), err)
	}
	if r := s.partitionSweep(); r.Removed != 0 || r.Chunks != 0 {
		t.Errorf("a second run: %+v, want nothing", r)
	}
}

// sweepCounter counts the sweep's snapshots (Views that read candidates)
// and its write transactions (Updates that delete partitions).
type sweepCounter struct {
	broker.Store
	views, writes int
}

type sweepCounterTx struct {
	broker.Tx
	read, wrote *bool
}

func (t sweepCounterTx) EmptyPartitions(ctx context.Context, before, now time.Time, after int64, limit int) ([]int64, int64, error) {
	*t.read = true
	return t.Tx.EmptyPartitions(ctx, before, now, after, limit)
}

func (t sweepCounterTx) DeleteEmptyPartitions(ctx context.Context, ids []int64, before, now time.Time) ([]broker.Partition, error) {
	*t.wrote = true
	return t.Tx.DeleteEmptyPartitions(ctx, ids, before, now)
}

func (c *sweepCounter) View(ctx context.Context, fn func(broker.Tx) error) error {
	var read, wrote bool
	err := c.Store.View(ctx, func(tx broker.Tx) error { return fn(sweepCounterTx{tx, &read, &wrote}) })
	if read {
		c.views++
	}
	return err
}

func (c *sweepCounter) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	var read, wrote bool
	err := c.Store.Update(ctx, o, func(tx broker.Tx) error {
		wrote = false
		return fn(sweepCounterTx{tx, &read, &wrote})
	})
	if wrote {
		c.writes++
	}
	return err
}

// An empty partition that a dead letter keeps (kept for ever by default)
// stays a candidate for good: the sweep passes over it in its snapshots,
// a page of PartitionSweepScan a snapshot, and gives the writer only the
// partitions it can delete. With every 100th of the partitions settled
// (empty) and the others holding a dead letter each, one run deletes the
// empty ones in one write transaction; the next writes nothing.
func testPartitionSweepPassesOverKeptPartitions(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60})
	s.subscribeAll("q", "a")
	n := broker.PartitionSweepScan + 10
	items := make([]broker.PushItem, n)
	for i := range items {
		items[i] = broker.PushItem{Queue: "q", Partition: fmt.Sprintf("key-%04d", i), TransactionID: "m", Payload: []byte(`{}`)}
	}
	for len(items) > 0 {
		k := min(len(items), 500)
		if _, err := s.b.Push(s.ctx, items[:k]); err != nil {
			t.Fatal(err)
		}
		items = items[k:]
	}
	var acks []broker.Ack
	ack := func() {
		if _, err := s.b.AckBatch(s.ctx, "a", acks); err != nil {
			t.Fatal(err)
		}
		acks = acks[:0]
	}
	empty := map[string]bool{}
	for i := range n {
		_, res := s.popTxids("q", "a", 1)
		if len(res.Messages) != 1 {
			t.Fatalf("pop: %+v", res)
		}
		m := res.Messages[0]
		a := broker.Ack{TransactionID: m.TransactionID, LeaseID: m.LeaseID, Status: broker.AckDLQ, Error: "boom", Group: "a"}
		if i%101 == 50 {
			empty[m.Partition] = true
			a.Status, a.Error = broker.AckCompleted, ""
		}
		if acks = append(acks, a); len(acks) == 100 {
			ack()
		}
	}
	if len(acks) > 0 {
		ack()
	}
	if len(empty) != 10 {
		t.Fatalf("%d partitions settled, want 10", len(empty))
	}
	// Retention takes every message (the partitions too young to go).
	s.clock.Advance(2 * time.Minute)
	if r := s.sweep(); r.Removed != int64(n) {
		t.Fatalf("retention removed %d, want %d", r.Removed, n)
	}
	s.clock.Advance(broker.PartitionMinAge)
	sc := &sweepCounter{Store: s.db}
	s.b = broker.New(broker.Config{Store: sc, Clock: s.clock})
	if r := s.partitionSweep(); r.Removed != 10 || r.Chunks != 1 {
		t.Fatalf("report %+v, want 10 partitions removed in 1 chunk", r)
	}
	if sc.views != 2 || sc.writes != 1 {
		t.Errorf("%d snapshots and %d writes, want 2 (%d candidates, %d a page) and 1", sc.views, sc.writes, n, broker.PartitionSweepScan)
	}
	q, err := s.b.Queue(s.ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Partitions) != n-10 {
		t.Errorf("%d partitions left, want %d", len(q.Partitions), n-10)
	}
	for _, p := range q.Partitions {
		if empty[p.Name] {
			t.Errorf("%s, empty, is still there", p.Name)
		}
	}
	sc.views, sc.writes = 0, 0
	if r := s.partitionSweep(); r.Removed != 0 || r.Chunks != 0 {
		t.Errorf("the next run: %+v, want nothing", r)
	}
	if sc.writes != 0 {
		t.Errorf("the next run wrote %d times over partitions that dead letters keep", sc.writes)
	}
}
