package db

import (
	"context"
	"database/sql"
	"errors"
)

// maxStatements caps the statements the writer keeps prepared: the
// queries of the broker are few, but dead-letter filters combine into
// more.
const maxStatements = 512

// The context: each statement first checks it, so a transaction whose
// caller has gone (a page's timeout, a client that left) stops at its
// next statement with ctx.Err(), and a write then rolls back rather than
// commit for nobody. A statement itself does not watch it through
// database/sql, which starts a goroutine a query to do so (on two cores
// it cost more than the query); a read that runs long is interrupted by
// View's one watcher a transaction (watchCancel). The writer's statements
// run beneath database/sql, kept prepared (rawConn); the readers' are
// kept by go-sqlite3 (_stmt_cache_size).

// rowsIter is a query's rows: database/sql's (*sql.Rows), the driver's
// for the SQLite writer (*rawRows), or pgx's for a PostgreSQL write
// (*pgRows).
type rowsIter interface {
	Next() bool
	Scan(dest ...any) error
	Close() error
	Err() error
}

// rowScanner is a one-row query's answer (*sql.Row, rawRow, pgRow): Scan
// says sql.ErrNoRows when there is none.
type rowScanner interface {
	Scan(dest ...any) error
}

// executor is how a transaction reaches its database: each store has
// its own (sqliteWriter, sqliteReader, pgWriter, pgReader), and
// storeTx's statements go through it alone. Its statements are written
// in SQLite's dialect; the PostgreSQL executors translate them (pgArgs).
// ctx has been checked before each call.
type executor interface {
	exec(ctx context.Context, query string, args []any) (sql.Result, error)
	query(ctx context.Context, query string, args []any) (rowsIter, error)
	queryRow(ctx context.Context, query string, args []any) rowScanner
	// insert runs an INSERT and returns how many rows it inserted and
	// the last row id it gave (column col); last means nothing when n
	// is 0.
	insert(ctx context.Context, col, query string, args []any) (n, last int64, err error)
	// execLater is exec for a write whose answer nobody reads but its
	// error: a store may keep it for its next round trip.
	execLater(ctx context.Context, query string, args []any) error
	// execUnprepared runs a statement written in the store's own
	// dialect (its parameters the store's: dialect.param), neither kept
	// prepared nor translated.
	execUnprepared(ctx context.Context, query string, args []any) error
}

// execLater is exec for a write whose answer nobody reads but its error
// (SaveConsumer). On SQLite it runs at once. On PostgreSQL, where each
// statement is a round trip, it is kept and sent before the
// transaction's next statement, or with its COMMIT when none follows (a
// pop's and an ack's last write): its error is then that statement's,
// or the commit's, and nothing of the transaction commits. The
// transaction's reads see it all the same: none runs before it is sent.
func (t *storeTx) execLater(ctx context.Context, query string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.ex.execLater(ctx, query, args)
}

func (t *storeTx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return t.ex.exec(ctx, query, args)
}

func (t *storeTx) query(ctx context.Context, query string, args ...any) (rowsIter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return t.ex.query(ctx, query, args)
}

// queryIDs runs a query of one integer column and returns its values in
// the order the rows come.
func (t *storeTx) queryIDs(ctx context.Context, query string, args ...any) ([]int64, error) {
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	// Close's error too: a write's first statement (pg_begin.go) reports
	// its pipeline's there.
	return out, errors.Join(rows.Err(), rows.Close())
}

func (t *storeTx) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	if err := ctx.Err(); err != nil {
		return rawRow{err: err}
	}
	return t.ex.queryRow(ctx, query, args)
}

// insert runs an INSERT and returns how many rows it inserted and the
// last row id it gave (column col): SQLite's changes and last rowid; on
// PostgreSQL, the statement with RETURNING col, the highest returned.
// last means nothing when n is 0.
func (t *storeTx) insert(ctx context.Context, col, query string, args ...any) (n, last int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	return t.ex.insert(ctx, col, query, args)
}

// execUnprepared runs a statement in the store's own dialect, neither
// kept prepared nor translated (executor.execUnprepared).
func (t *storeTx) execUnprepared(ctx context.Context, query string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.ex.execUnprepared(ctx, query, args)
}

// sqlResultInsert is insert over exec, for SQLite's executors: the
// statement's changes and last rowid.
func sqlResultInsert(res sql.Result, err error) (n, last int64, _ error) {
	if err != nil {
		return 0, 0, err
	}
	if n, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	last, err = res.LastInsertId()
	return n, last, err
}
