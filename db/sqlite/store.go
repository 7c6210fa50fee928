package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// foldIdle brings the kept counts up to date when writes have stopped
// with some left to bring (a commit does it at most once a second, so
// the last second's would wait for the next write): a look then counts no
// traffic at all. It writes only when nothing else is.
func (d *Store) foldIdle() {
	d.wmu.Lock()
	// With busy false, no one is writing: the maps hold still.
	if d.busy || d.isClosed || len(d.waiting)+len(d.bulk) > 0 || !d.folds.Pending() || time.Since(d.folds.FoldedAt) < d.folds.Every {
		d.wmu.Unlock()
		return
	}
	d.busy = true
	d.changed.Broadcast()
	d.wmu.Unlock()
	done := make(chan error, 1)
	d.commit([]writeRequest{{ctx: context.Background(), fn: func(broker.Tx) error { return nil }, done: done}})
	if err := <-done; err != nil {
		d.log.Warn("bring the counts up to date", "err", err)
	}
	d.release(true)
}

// foldAtClose brings the kept counts up to date one last time, so that
// after a clean restart no look counts the last second's traffic again.
// Nothing else writes any more.
func (d *Store) foldAtClose() {
	if !d.folds.Pending() {
		return
	}
	d.folds.FoldedAt = time.Time{}
	done := make(chan error, 1)
	d.commit([]writeRequest{{ctx: context.Background(), fn: func(broker.Tx) error { return nil }, done: done}})
	if err := <-done; err != nil {
		d.log.Warn("bring the counts up to date at close", "err", err)
	}
}

// Lead runs fn while this process leads the database's background work
// (bulk jobs, maintenance), until ctx ends: on SQLite, at once, as the
// one process of its file; on PostgreSQL, while it holds a session
// advisory lock on a connection of its own. Of the processes on one
// database, one leads at a time; when the leader dies its connection
// closes, the lock goes with it, and another takes the lead within about
// leadRetry. fn's context ends when the lead is lost (the connection
// broke) or ctx ends; Lead then tries to lead again, and returns once
// ctx has ended and fn has returned.
func (d *Store) Lead(ctx context.Context, fn func(context.Context)) { fn(ctx) }

// Leading reports whether this process leads the background work now
// (Lead): maintenance runs only in the leader. A SQLite store's one
// process always leads.
func (d *Store) Leading() bool { return true }

// ConcurrentWrites is false: SQLite's store has one writer.
func (d *Store) ConcurrentWrites() bool { return false }

// Notifier is nil: SQLite's one process needs only the broker's own.
func (d *Store) Notifier() broker.Notifier { return nil }

// ExecUncatalogued runs one statement on the writing handle, outside
// the broker and outside the statement catalog (every other statement
// of the store's is in it, db/postgres/testdata/statements.sql): for
// tests that set up or read rows no broker method reaches. Their texts
// are the tests' own, so no catalog can hold them; the name says the
// bypass, and no code but tests calls it (db's
// TestUncataloguedIsForTestsOnly).
func (d *Store) ExecUncatalogued(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return d.write.ExecContext(ctx, query, args...)
}

// QueryRowUncatalogued is ExecUncatalogued for a query of one row.
func (d *Store) QueryRowUncatalogued(ctx context.Context, query string, args ...any) *sql.Row {
	return d.write.QueryRowContext(ctx, query, args...)
}
