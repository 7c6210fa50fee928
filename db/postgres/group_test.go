package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// noteTransactions has the database note, in table test_txids, the
// top-level transaction id of every statement that inserts messages
// (txid_current is the top-level transaction's also in a savepoint):
// how many transactions the pushes committed in, counted by PostgreSQL.
func noteTransactions(t *testing.T, d *Store) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []string{
		`CREATE TABLE test_txids (txid BIGINT NOT NULL)`,
		`CREATE FUNCTION test_note_txid() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO test_txids VALUES (txid_current()); RETURN NULL; END $$`,
		`CREATE TRIGGER test_note_txid AFTER INSERT ON messages FOR EACH STATEMENT EXECUTE FUNCTION test_note_txid()`,
	} {
		if _, err := d.ExecUncatalogued(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// transactions is how many inserts of messages test_txids holds, and in
// how many transactions they committed.
func transactions(t *testing.T, d *Store) (inserts, txs int) {
	t.Helper()
	if err := d.QueryRowUncatalogued(context.Background(), `SELECT COUNT(*), COUNT(DISTINCT txid) FROM test_txids`).Scan(&inserts, &txs); err != nil {
		t.Fatal(err)
	}
	return inserts, txs
}

// queuedUntil waits until n Updates are queued behind the write under
// way in d.
func queuedUntil(t *testing.T, d *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		d.qmu.Lock()
		k := len(d.waiting)
		d.qmu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Updates queued, want %d", k, n)
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
}

// Pushes that queue on one process while its write transaction runs
// commit together in the next (group commit): n pushes, counted by
// PostgreSQL, in one transaction, not n.
func TestPGGroupCommitJoinsTheWritesThatQueued(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	d := openStore(t, dsn)
	for deadline := time.Now().Add(20 * time.Second); !d.alone.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("never counted alone")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	br := broker.New(broker.Config{Store: d})
	t.Cleanup(br.Close)
	if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	noteTransactions(t, d)
	// A write held open; the pushes queue behind it.
	done, release := holdOpen(t, d, false, func(tx broker.Tx) error {
		_, err := tx.QueueByName(ctx, "q")
		return err
	})
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", Payload: fmt.Appendf(nil, `{"i":%d}`, i)}})
		})
	}
	queuedUntil(t, d, n)
	release()
	wg.Wait()
	if err := errors.Join(append(errs, <-done)...); err != nil {
		t.Fatal(err)
	}
	inserts, txs := transactions(t, d)
	if inserts != n || txs != 1 {
		t.Fatalf("%d pushes queued together: %d inserts in %d transactions, want %d in 1", n, inserts, txs, n)
	}
	var msgs int
	if err := d.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM messages`).Scan(&msgs); err != nil || msgs != n+1 {
		t.Fatalf("messages: %d (%v), want %d", msgs, err, n+1)
	}
}

// In a group, an Update that fails is rolled back alone and the others
// commit: one whose fn fails after it wrote, and one whose write kept
// for the next round trip fails there (in the next member's first
// round trip, which then runs again, or in the COMMIT's, which is then
// sent again). As db/sqlite's TestGroupCommitKeepsEachUpdateAllOrNothing.
func TestPGGroupCommitKeepsEachUpdateAllOrNothing(t *testing.T) {
	ctx := context.Background()
	d, _, _, p1, _, groupID := concurrentSetup(t, Options{Sync: SyncNormal})
	noteTransactions(t, d)
	insert := func(tx broker.Tx, txid string) error {
		_, err := tx.InsertMessages(ctx, []*broker.Message{{PartitionID: p1, TransactionID: txid, Payload: []byte(`{}`), CreatedAt: time.Now()}})
		return err
	}
	var consumer broker.Consumer
	if err := d.View(ctx, func(tx broker.Tx) (err error) { consumer, err = tx.Consumer(ctx, p1, groupID); return err }); err != nil {
		t.Fatal(err)
	}
	// badLater inserts, then keeps a consumer update PostgreSQL refuses
	// (a NUL in its lease id) for the next round trip.
	badLater := func(txid string) func(broker.Tx) error {
		return func(tx broker.Tx) error {
			if err := insert(tx, txid); err != nil {
				return err
			}
			c := consumer
			c.LeaseID, c.LeaseUntil = "bad\x00id", time.Now().Add(time.Minute)
			return tx.SaveConsumer(ctx, &c)
		}
	}
	refused := errors.New("refused")
	writes := []struct {
		txid string
		fn   func(broker.Tx) error
		ok   bool
	}{
		{"a", func(tx broker.Tx) error { return insert(tx, "a") }, true},
		{"fails", func(tx broker.Tx) error {
			if err := insert(tx, "fails"); err != nil {
				return err
			}
			return refused
		}, false},
		{"later1", badLater("later1"), false},
		{"b", func(tx broker.Tx) error { return insert(tx, "b") }, true},
		{"later2", badLater("later2"), false}, // the last: fails in the COMMIT's round trip
	}
	// The unmarked write held open holds the writer's lock exclusively:
	// the others queue behind it, in this order, and join its
	// transaction.
	done, release := holdOpen(t, d, false, func(tx broker.Tx) error { return insert(tx, "first") })
	errs := make([]chan error, len(writes))
	for i, w := range writes {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- d.Update(ctx, broker.UpdateOptions{}, w.fn) }()
		queuedUntil(t, d, i+1)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, w := range writes {
		err := <-errs[i]
		if w.ok != (err == nil) {
			t.Errorf("write %s: %v, want ok %v", w.txid, err, w.ok)
		}
		if w.txid == "fails" && !errors.Is(err, refused) {
			t.Errorf("write %s: %v, want its own error", w.txid, err)
		}
	}
	for _, w := range append(writes, struct {
		txid string
		fn   func(broker.Tx) error
		ok   bool
	}{txid: "first", ok: true}) {
		var n int
		if err := d.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM messages WHERE transaction_id = ?`, w.txid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[w.ok]; n != want {
			t.Errorf("messages of write %s: %d, want %d", w.txid, n, want)
		}
	}
	var lease *string
	if err := d.QueryRowUncatalogued(ctx, `SELECT lease_id FROM consumers WHERE partition_id = ? AND group_id = ?`, p1, groupID).Scan(&lease); err != nil {
		t.Fatal(err)
	}
	if lease != nil && *lease != "" {
		t.Errorf("the consumer's lease: %q, want the refused updates rolled back", *lease)
	}
	if inserts, txs := transactions(t, d); inserts != 3 || txs != 1 {
		t.Fatalf("committed inserts %d in %d transactions, want 3 in 1", inserts, txs)
	}
}
