package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// Writes marked broker.UpdateOptions.Concurrent of two processes (two stores on one
// database) run at once and settle their conflicts by row locks; an
// unmarked write runs alone.

// concurrentSetup makes queue q with partitions p1 and p2, each holding a
// message, read by group g, and returns two stores on the database (two
// processes), the queue's, partitions' and group's ids. Both write as
// processes among others from the start (NeverAlone): a process that
// has not yet counted the other would write alone, correctly, but not
// in the mode these tests are about.
func concurrentSetup(t *testing.T, o Options) (a, b *Store, queueID, p1, p2, groupID int64) {
	t.Helper()
	o.NeverAlone = true
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	open := func() *Store {
		d, err := OpenWith(ctx, dsn, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	a, b = open(), open()
	br := broker.New(broker.Config{Store: a})
	t.Cleanup(br.Close)
	if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p1", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Start: broker.Start{Now: true}}); err != nil { // subscribes g, past that message
		t.Fatal(err)
	}
	for _, p := range []string{"p1", "p2"} {
		if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: p, Payload: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	err := a.View(ctx, func(tx broker.Tx) error {
		q, err := tx.QueueByName(ctx, "q")
		if err != nil {
			return err
		}
		queueID = q.ID
		for _, p := range []struct {
			name string
			id   *int64
		}{{"p1", &p1}, {"p2", &p2}} {
			part, err := tx.PartitionByName(ctx, q.ID, p.name)
			if err != nil {
				return err
			}
			*p.id = part.ID
		}
		groupID, err = tx.GroupID(ctx, "g", false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, b, queueID, p1, p2, groupID
}

// waitForLock waits until a backend of the database waits for a lock
// (wait_event "advisory" for the writer's lock, or a row's: "tuple",
// "transactionid"), polling the condition.
func waitForLock(t *testing.T, d *Store, events ...string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var n int
		err := d.QueryRowUncatalogued(context.Background(), `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND wait_event = ANY(?::text[])`, events).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write waited for a lock (%v)", events)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// holdOpen runs fn in a write of d (marked Concurrent when shared) and,
// once fn has run, returns with the transaction kept open, fn's locks
// held, until release is called (at the latest when the test ends); the
// write's error comes on done once it has ended. A write that fails
// before that fails the test.
func holdOpen(t *testing.T, d *Store, shared bool, fn func(broker.Tx) error) (done <-chan error, release func()) {
	t.Helper()
	ctx := context.Background()
	o := broker.UpdateOptions{Concurrent: shared}
	held, started := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	ended := make(chan error, 1)
	go func() {
		ended <- d.Update(ctx, o, func(tx broker.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			close(started)
			<-held
			return nil
		})
	}()
	select {
	case <-started:
	case err := <-ended:
		t.Fatalf("the write to hold open: %v", err)
	}
	return ended, release
}

// Two pops of one group in two processes, at once: the second is handed
// the other partition's consumer while the first holds its own (FOR
// UPDATE SKIP LOCKED), rather than the same one (no lock) or a wait (a
// lock waited for, or one writer).
func TestPGPopsOfTwoProcessesTakeDifferentConsumersAtOnce(t *testing.T) {
	ctx := context.Background()
	a, b, queueID, p1, p2, groupID := concurrentSetup(t, Options{Sync: SyncNormal})
	now := time.Now()
	var first broker.Consumer
	done, release := holdOpen(t, a, true, func(tx broker.Tx) error {
		cs, _, err := tx.ReadyConsumers(ctx, queueID, groupID, now, 1)
		if err != nil || len(cs) != 1 {
			return errors.Join(err, errors.New("no ready consumer"))
		}
		first = cs[0]
		return nil
	})
	second, err := withTimeout(func(ctx context.Context) ([]broker.Consumer, error) {
		var out []broker.Consumer
		err := b.Update(ctx, broker.UpdateOptions{Concurrent: true}, func(tx broker.Tx) error {
			var err error
			out, _, err = tx.ReadyConsumers(ctx, queueID, groupID, now, 1)
			return err
		})
		return out, err
	})
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("the second pop, while the first held its consumer: %v", err)
	}
	if len(second) != 1 || second[0].PartitionID == first.PartitionID {
		t.Fatalf("second pop got %+v, first held partition %d: want the other partition", second, first.PartitionID)
	}
	if got := map[int64]bool{first.PartitionID: true, second[0].PartitionID: true}; !got[p1] || !got[p2] {
		t.Fatalf("consumers of partitions %d and %d, want %d and %d", first.PartitionID, second[0].PartitionID, p1, p2)
	}
}

// drain pops the one message of concurrentSetup's partition part for
// group g, through a broker on d, and acknowledges it completed.
func drain(t *testing.T, d *Store, part string) {
	t.Helper()
	ctx := context.Background()
	br := broker.New(broker.Config{Store: d})
	defer br.Close()
	res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Partition: part, Group: "g"})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop %s: %+v %v", part, res, err)
	}
	if _, err := br.Ack(ctx, broker.Ack{TransactionID: res.Messages[0].TransactionID, LeaseID: res.LeaseID, Status: broker.AckCompleted, Group: "g"}); err != nil {
		t.Fatal(err)
	}
}

// withTimeout runs fn with a context that ends in 10 s: a write that
// would wait for the one held open fails rather than hangs.
func withTimeout[T any](fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return fn(ctx)
}

// A push to a partition another process is pushing to waits for it, and
// draws its seq after the other's commit: a partition's seqs commit in
// their order, so no pop reads past a seq that commits later.
func TestPGPushesToOnePartitionCommitInSeqOrder(t *testing.T) {
	ctx := context.Background()
	a, b, _, p1, _, _ := concurrentSetup(t, Options{Sync: SyncNormal})
	insert := func(tx broker.Tx, txid string) (int64, error) {
		m := &broker.Message{PartitionID: p1, TransactionID: txid, Payload: []byte(`{}`), CreatedAt: time.Now()}
		if _, err := tx.InsertMessages(ctx, []*broker.Message{m}); err != nil {
			return 0, err
		}
		return m.Seq, nil
	}
	var seqA int64
	doneA, release := holdOpen(t, a, true, func(tx broker.Tx) (err error) {
		seqA, err = insert(tx, "a")
		return err
	})
	var seqB int64
	doneB := make(chan error, 1)
	go func() {
		doneB <- b.Update(ctx, broker.UpdateOptions{Concurrent: true}, func(tx broker.Tx) (err error) {
			seqB, err = insert(tx, "b")
			return err
		})
	}()
	waitForLock(t, a, "tuple", "transactionid") // b's push waits for a's partition
	release()
	if err := errors.Join(<-doneA, <-doneB); err != nil {
		t.Fatal(err)
	}
	if seqB <= seqA {
		t.Fatalf("seq of the push that waited %d, of the one it waited for %d: want it higher", seqB, seqA)
	}
}

// An unmarked write waits for the marked ones running, and runs alone.
func TestPGAnUnmarkedWriteWaitsForTheMarkedOnes(t *testing.T) {
	ctx := context.Background()
	a, b, _, _, _, _ := concurrentSetup(t, Options{Sync: SyncNormal})
	// Each runs a statement: a transaction's BEGIN, and its lock, go with
	// its first.
	look := func(tx broker.Tx) error { _, err := tx.QueueByName(ctx, "q"); return err }
	doneA, release := holdOpen(t, a, true, look)
	ran := make(chan struct{})
	doneB := make(chan error, 1)
	go func() {
		doneB <- b.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			if err := look(tx); err != nil {
				return err
			}
			close(ran)
			return nil
		})
	}()
	waitForLock(t, a, "advisory")
	select {
	case <-ran:
		t.Fatal("the unmarked write ran beside a marked one")
	default:
	}
	release()
	if err := errors.Join(<-doneA, <-doneB); err != nil {
		t.Fatal(err)
	}
}

// A fold passes by the partition another process's push holds (it never
// waits, so it takes part in no deadlock), folds the others, and folds
// the one passed by at a later commit.
func TestPGFoldPassesByAPartitionAnotherWriteHolds(t *testing.T) {
	ctx := context.Background()
	a, b, _, p1, p2, _ := concurrentSetup(t, Options{Sync: SyncNormal, FoldEvery: -1})
	br := broker.New(broker.Config{Store: b})
	t.Cleanup(br.Close)
	push := func(part string) {
		t.Helper()
		if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: part, Payload: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	counted := func(id int64) (seq, max int64) {
		t.Helper()
		if err := b.QueryRowUncatalogued(ctx, `SELECT counted_seq, (SELECT MAX(seq) FROM messages WHERE partition_id = ?1) FROM partitions WHERE id = ?1`, id).Scan(&seq, &max); err != nil {
			t.Fatal(err)
		}
		return seq, max
	}
	push("p1") // b notes p1, and folds it at once
	// a holds p1's row, pushing to it.
	doneA, release := holdOpen(t, a, true, func(tx broker.Tx) error {
		_, err := tx.InsertMessages(ctx, []*broker.Message{{PartitionID: p1, TransactionID: "held", Payload: []byte(`{}`), CreatedAt: time.Now()}})
		return err
	})
	b.wmu.Lock()
	b.folds.Unfolded[p1] = struct{}{} // as if b had pushed to it since its last fold
	b.wmu.Unlock()
	if _, err := withTimeout(func(ctx context.Context) (struct{}, error) {
		_, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p2", Payload: []byte(`{}`)}})
		return struct{}{}, err
	}); err != nil {
		t.Fatalf("a push to p2 while p1 is held: %v", err)
	}
	if seq, max := counted(p2); seq != max {
		t.Fatalf("p2 counted to seq %d of %d: want folded", seq, max)
	}
	b.wmu.Lock()
	_, left := b.folds.Unfolded[p1]
	b.wmu.Unlock()
	if !left {
		t.Fatal("p1, held by another write, is no longer noted: its fold was skipped, not done")
	}
	release()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	push("p2")
	if seq, max := counted(p1); seq != max {
		t.Fatalf("p1 counted to seq %d of %d once released: want folded", seq, max)
	}
}

// A consumer saved is sent with the transaction's next round trip: a
// read after it sees it, and one whose update fails at the commit fails
// the whole write, nothing of it committed.
func TestPGASavedConsumerIsSentLaterYetSeenAndChecked(t *testing.T) {
	ctx := context.Background()
	a, _, _, p1, _, groupID := concurrentSetup(t, Options{Sync: SyncNormal})
	read := func() broker.Consumer {
		t.Helper()
		var c broker.Consumer
		if err := a.View(ctx, func(tx broker.Tx) (err error) { c, err = tx.Consumer(ctx, p1, groupID); return err }); err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := read()
	err := a.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		c := before
		c.Cursor = before.Cursor + 1
		if err := tx.SaveConsumer(ctx, &c); err != nil {
			return err
		}
		got, err := tx.Consumer(ctx, p1, groupID)
		if err != nil {
			return err
		}
		if got.Cursor != c.Cursor {
			t.Errorf("read after the save: cursor %d, want %d", got.Cursor, c.Cursor)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Cursor != before.Cursor+1 {
		t.Fatalf("committed cursor %d, want %d", got.Cursor, before.Cursor+1)
	}
	// A lease id PostgreSQL cannot hold (a NUL): the update fails in the
	// commit's round trip, and the message inserted before it is not
	// there either.
	err = a.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		if _, err := tx.InsertMessages(ctx, []*broker.Message{{PartitionID: p1, TransactionID: "not-kept", Payload: []byte(`{}`), CreatedAt: time.Now()}}); err != nil {
			return err
		}
		c := read()
		c.LeaseID, c.LeaseUntil = "bad\x00id", time.Now().Add(time.Minute)
		return tx.SaveConsumer(ctx, &c)
	})
	if err == nil {
		t.Fatal("a write whose kept update failed returned nil")
	}
	var n int
	if err := a.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM messages WHERE transaction_id = 'not-kept'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("messages of the failed write: %d (%v), want none", n, err)
	}
}

// A process counts the processes of its database: alone, it writes as
// the one writer; once another has joined, as one among several; alone
// again once the other has gone.
func TestPGAProcessCountsTheProcessesOfItsDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	a := openStore(t, dsn)
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("never %s", what)
			}
			time.Sleep(10 * time.Millisecond) // polling a condition
		}
	}
	until("alone", a.alone.Load)
	b, err := Open(ctx, dsn, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	until("two", func() bool { return !a.alone.Load() && !b.alone.Load() })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	until("alone again", a.alone.Load)
}

// A pop that finds a ready consumer with nothing past its cursor leaves
// its mark when a push to its partition is in flight: the push marks only
// consumers that are not marked, so a mark cleared beside it would not be
// set again, and its message would wait for the next push.
func TestPGAPopLeavesTheMarkOfAPartitionAPushHolds(t *testing.T) {
	ctx := context.Background()
	a, b, queueID, p1, _, groupID := concurrentSetup(t, Options{Sync: SyncNormal})
	// p1's message delivered and acknowledged: its consumer stays marked,
	// with nothing past its cursor.
	drain(t, a, "p1")
	ready := func() (n int) {
		t.Helper()
		if err := a.QueryRowUncatalogued(ctx, `SELECT ready FROM consumers WHERE partition_id = ? AND group_id = ?`, p1, groupID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if ready() != 1 {
		t.Fatal("p1's consumer is not marked before the test")
	}
	// b pushes to p1 and holds its transaction open.
	pushDone, releasePush := holdOpen(t, b, true, func(tx broker.Tx) error {
		_, err := tx.InsertMessages(ctx, []*broker.Message{{PartitionID: p1, TransactionID: "in-flight", Payload: []byte(`{}`), CreatedAt: time.Now()}})
		return err
	})
	// a's pop scans while the push is in flight, and holds its
	// transaction open past the push's commit.
	popDone, releasePop := holdOpen(t, a, true, func(tx broker.Tx) error {
		_, _, err := tx.ReadyConsumers(ctx, queueID, groupID, time.Now(), 1)
		return err
	})
	releasePush()
	if err := <-pushDone; err != nil {
		t.Fatal(err)
	}
	releasePop()
	if err := <-popDone; err != nil {
		t.Fatal(err)
	}
	if ready() != 1 {
		t.Fatal("p1's consumer lost its mark with the pushed message past its cursor")
	}
}

// A pop that finds the only ready consumer held by another write gets
// none, and is told so (busy), so that a pop that waits asks again soon
// rather than wait for news that may not come.
func TestPGAPopPassingByAHeldConsumerIsToldSo(t *testing.T) {
	ctx := context.Background()
	a, b, queueID, _, _, groupID := concurrentSetup(t, Options{Sync: SyncNormal})
	drain(t, a, "p2")
	done, release := holdOpen(t, a, true, func(tx broker.Tx) error {
		cs, _, err := tx.ReadyConsumers(ctx, queueID, groupID, time.Now(), 1)
		if err == nil && len(cs) != 1 {
			err = errors.New("the first pop found no ready consumer")
		}
		return err
	})
	var cs []broker.Consumer
	var busy bool
	if err := b.Update(ctx, broker.UpdateOptions{Concurrent: true}, func(tx broker.Tx) (err error) {
		cs, busy, err = tx.ReadyConsumers(ctx, queueID, groupID, time.Now(), 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 || !busy {
		t.Fatalf("second pop: %d consumers, busy %v; want none, busy", len(cs), busy)
	}
}

// A write whose first statement could not be sent (and BEGIN with it)
// fails, even when its function goes on and its next statement would
// have begun the transaction without it. (pgx closes the connection of a
// batch it could not send, so the next statement fails too: this test
// passes without begin.failed's guard, which covers a failure that
// leaves the connection open. A statement the server refuses aborts the
// transaction there: TestAWriteWhoseStatementFailedIsNotReportedCommitted.)
func TestPGAWriteWhoseFirstStatementFailedFails(t *testing.T) {
	ctx := context.Background()
	a, _, _, p1, _, _ := concurrentSetup(t, Options{Sync: SyncNormal})
	err := a.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		st := tx.(*sqlcore.Tx)
		// An argument pgx cannot encode: nothing reaches the server.
		if _, err := st.Exec(ctx, `SELECT ?::bigint`, make(chan int)); err == nil {
			t.Error("a statement of an argument that cannot be sent succeeded")
		}
		_, err := tx.InsertMessages(ctx, []*broker.Message{{PartitionID: p1, TransactionID: "after-a-failure", Payload: []byte(`{}`), CreatedAt: time.Now()}})
		return err // nil or not: the write must fail
	})
	if err == nil {
		t.Fatal("the write returned nil")
	}
	var n int
	if err := a.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM messages WHERE transaction_id = 'after-a-failure'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("messages of the failed write: %d (%v), want none", n, err)
	}
}
