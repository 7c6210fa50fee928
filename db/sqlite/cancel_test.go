package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// A read whose context ends is stopped, even inside a query that would
// never end on its own (View interrupts it), and says why: the context's
// error. The connection then serves the next read as usual.
func TestAReadStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	push(t, b, "p", "a")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := d.View(ctx, func(tx broker.Tx) error {
		var n int64
		return tx.(*sqlcore.Tx).QueryRow(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c`).Scan(&n)
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v, want context.DeadlineExceeded", err)
	}
	// Every connection of the pool still reads (none keeps an interrupt).
	for range 10 {
		if err := d.View(context.Background(), func(tx broker.Tx) error {
			_, err := tx.Queues(context.Background())
			return err
		}); err != nil {
			t.Fatalf("a read after the interrupted one: %v", err)
		}
	}
}

// A write whose context ends before its next statement rolls back: no
// part of it is kept, and the error is the context's.
func TestAWriteStopsAtItsNextStatementWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	push(t, b, "p", "a")
	ctx, cancel := context.WithCancel(context.Background())
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		st := tx.(*sqlcore.Tx)
		if _, err := st.Exec(ctx, `UPDATE queues SET retry_limit = 7`); err != nil {
			return err
		}
		cancel()
		_, err := st.Exec(ctx, `UPDATE queues SET retry_limit = 8`)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a write cancelled between statements: %v, want context.Canceled", err)
	}
	var limit int
	if err := d.read.QueryRow(`SELECT retry_limit FROM queues`).Scan(&limit); err != nil || limit == 7 || limit == 8 {
		t.Fatalf("retry_limit %d (%v): the cancelled write was kept", limit, err)
	}
}

// A read whose function panics still ends its interrupt watcher before
// the connection goes back to the pool: the context ending afterwards
// must not interrupt the connection's next user.
func TestAPanickingReadLeavesNoInterruptBehind(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	d.read.SetMaxOpenConns(1) // the next read gets the same connection
	ctx, cancel := context.WithCancel(context.Background())
	func() {
		defer func() { _ = recover() }()
		_ = d.View(ctx, func(broker.Tx) error { panic("a bug in a page") })
	}()
	cancel()
	err := d.View(context.Background(), func(tx broker.Tx) error {
		var n int64
		return tx.(*sqlcore.Tx).QueryRow(context.Background(), `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) SELECT count(*) FROM c`).Scan(&n)
	})
	if err != nil {
		t.Fatalf("a read after a panicking one whose context then ended: %v", err)
	}
}
