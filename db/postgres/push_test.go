package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// A push whose queue and partition the cache holds is one round trip
// for a process alone on its database: BEGIN, the writer's lock, the
// insert, the ready mark and COMMIT (InsertMessagesLate, commit).
// Beside other processes, whose locks it may wait for, its BEGIN and
// insert go first, under its caller's context, and its ready mark with
// the COMMIT: two.
func TestPGAPushIsOneRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name       string
		neverAlone bool
		trips      int64
	}{{"alone", false, 1}, {"beside others", true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, err := OpenWith(ctx, pgtest.Database(t, "db", Prepare), Options{NeverAlone: tc.neverAlone, FoldEvery: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			br := broker.New(broker.Config{Store: d})
			defer br.Close()
			item := func(txid string) broker.PushItem {
				return broker.PushItem{Queue: "q", Partition: "p", TransactionID: txid, Payload: []byte(`{"n":1}`)}
			}
			// The first push makes the queue and partition (and folds
			// the counts: the first commit's fold is due).
			first, err := br.Push(ctx, []broker.PushItem{item("first")})
			if err != nil {
				t.Fatal(err)
			}
			waitAlone(t, d, !tc.neverAlone)
			trips, statements := d.Wire()
			var items []broker.PushItem
			for _, id := range []string{"a", "b", "c", "first", "a"} {
				items = append(items, item(id))
			}
			res, err := br.Push(ctx, items)
			if err != nil {
				t.Fatal(err)
			}
			trips2, statements2 := d.Wire()
			if trips2-trips != tc.trips || statements2-statements != 5 {
				t.Errorf("a push of 5 took %d round trips and %d statements, want %d and 5 (BEGIN, lock, insert, ready mark, COMMIT)", trips2-trips, statements2-statements, tc.trips)
			}
			// Its answer, read once committed: three new, a duplicate
			// of the first push's and one of its own a.
			want := []string{broker.StatusQueued, broker.StatusQueued, broker.StatusQueued, broker.StatusDuplicate, broker.StatusDuplicate}
			for i, r := range res {
				if r.Status != want[i] || r.MessageID == "" {
					t.Errorf("item %d: %s %q, want %s", i, r.Status, r.MessageID, want[i])
				}
			}
			if res[3].MessageID != first[0].MessageID || res[4].MessageID != res[0].MessageID || res[0].MessageID == res[1].MessageID {
				t.Errorf("message ids %q, %q, %q (first push %q): the duplicates must name the messages they duplicate", res[0].MessageID, res[3].MessageID, res[4].MessageID, first[0].MessageID)
			}
			// The ready mark went with it: the group sees the messages.
			pop, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(pop.Messages) != 4 {
				t.Errorf("popped %d messages, want 4", len(pop.Messages))
			}
		})
	}
}

// A push beside other processes that meets, once its partition's row is
// free, a message of its transactionId that another process committed
// while it waited is answered as a duplicate of that message: the
// insert's own statement cannot read it (its snapshot was taken before
// the wait), so it is read by a statement after.
func TestPGAPushThatWaitedForTheSameTransactionIDIsADuplicateOfIt(t *testing.T) {
	ctx := context.Background()
	a, b, _, p1, _, _ := concurrentSetup(t, Options{Sync: SyncNormal})
	held := &broker.Message{PartitionID: p1, TransactionID: "same", Payload: []byte(`{"from":"a"}`), CreatedAt: time.Now()}
	doneA, release := holdOpen(t, a, true, func(tx broker.Tx) error {
		_, err := tx.InsertMessages(ctx, []*broker.Message{held})
		return err
	})
	br := broker.New(broker.Config{Store: b})
	t.Cleanup(br.Close)
	type answer struct {
		res []broker.PushResult
		err error
	}
	pushed := make(chan answer, 1)
	go func() {
		res, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p1", TransactionID: "same", Payload: []byte(`{"from":"b"}`)}})
		pushed <- answer{res, err}
	}()
	waitForLock(t, a, "tuple", "transactionid") // b's push waits for p1's row
	release()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	got := <-pushed
	if got.err != nil {
		t.Fatal(got.err)
	}
	if len(got.res) != 1 || got.res[0].Status != broker.StatusDuplicate {
		t.Fatalf("the push: %+v, want a duplicate", got.res)
	}
	if want := held.ID(); got.res[0].MessageID != want {
		t.Errorf("the duplicate names message %q, want %q (the one committed while it waited)", got.res[0].MessageID, want)
	}
	var n int
	if err := a.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM messages WHERE transaction_id = 'same'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("messages of transactionId same: %d (%v), want 1", n, err)
	}
}

// A push in one round trip whose cache another process made stale (the
// partition it names removed, the generation moved, by a process that
// came and went) inserts nothing there: the writer's lock fails the
// round trip (migration 0017), COMMIT included, and the push runs again
// with its cache emptied.
func TestPGAPushInOneRoundTripNeverWritesWithAStaleCache(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	a := openStore(t, dsn)
	brA := broker.New(broker.Config{Store: a})
	t.Cleanup(brA.Close)
	waitAlone(t, a, true)
	// a's cache holds queue r and its partition.
	if _, err := brA.Push(ctx, []broker.PushItem{{Queue: "r", Partition: "x", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	// Another process deletes the queue (its partition and messages go,
	// the generation moves) and leaves.
	b := openStore(t, dsn)
	brB := broker.New(broker.Config{Store: b})
	if err := brB.DeleteQueue(ctx, "r", "test"); err != nil {
		t.Fatal(err)
	}
	brB.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitAlone(t, a, true)
	trips, _ := a.Wire()
	res, err := brA.Push(ctx, []broker.PushItem{{Queue: "r", Partition: "x", TransactionID: "after", Payload: []byte(`2`)}})
	if err != nil {
		t.Fatal(err)
	}
	if trips2, _ := a.Wire(); trips2-trips < 2 {
		t.Errorf("the push took %d round trips: its first should have failed at the lock and run again", trips2-trips)
	}
	if res[0].Status != broker.StatusQueued {
		t.Errorf("the push: %+v, want it queued", res[0])
	}
	var orphans int
	if err := a.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM partitions p WHERE p.id = m.partition_id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d messages in a partition that is gone", orphans)
	}
	pop, err := brA.Pop(ctx, broker.PopRequest{Queue: "r", Group: "g", Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(pop.Messages) != 1 || pop.Messages[0].TransactionID != "after" {
		t.Errorf("popped %+v, want the message pushed after the deletion", pop.Messages)
	}
}

// waitAlone waits until d has counted the processes of its database
// and found itself alone or not (members.go).
func waitAlone(t *testing.T, d *Store, alone bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); d.alone.Load() != alone; {
		if time.Now().After(deadline) {
			t.Fatalf("the process never found itself alone: %v", alone)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// A push of one round trip whose commit folds the counts sends its BEGIN
// with its insert before the fold's savepoint (tail.send): the fold runs
// in the push's transaction, and the partition's kept count holds the
// push's messages once committed. Sent after the insert, the savepoint
// would fail outside a transaction and the fold be skipped.
func TestPGAPushInOneRoundTripFoldsItsCountsInItsTransaction(t *testing.T) {
	ctx := context.Background()
	d, err := OpenWith(ctx, pgtest.Database(t, "db", Prepare), Options{FoldEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	br := broker.New(broker.Config{Store: d})
	defer br.Close()
	waitAlone(t, d, true)
	push := func(n int) {
		t.Helper()
		items := make([]broker.PushItem, n)
		for i := range items {
			items[i] = broker.PushItem{Queue: "q", Partition: "p", Payload: []byte(`{}`)}
		}
		if _, err := br.Push(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	push(1) // makes the queue and partition
	trips, _ := d.Wire()
	push(3)
	if trips2, _ := d.Wire(); trips2-trips < 2 {
		t.Errorf("a push that folds took %d round trips: the fold goes between the insert and COMMIT", trips2-trips)
	}
	var kept, counted, newest int64
	if err := d.QueryRowUncatalogued(ctx, `SELECT p.messages, p.counted_seq, (SELECT MAX(seq) FROM messages m WHERE m.partition_id = p.id) FROM partitions p WHERE p.name = 'p'`).Scan(&kept, &counted, &newest); err != nil {
		t.Fatal(err)
	}
	if kept != 4 || counted != newest {
		t.Errorf("the partition's kept count: %d messages up to seq %d (newest %d), want 4 up to the newest", kept, counted, newest)
	}
}
