package sqlcore

import (
	"context"
	"database/sql"
	"errors"
)

// The context: each statement first checks it, so a transaction whose
// caller has gone (a page's timeout, a client that left) stops at its
// next statement with ctx.Err(), and a write then rolls back rather than
// commit for nobody. A statement itself does not watch it through
// database/sql, which starts a goroutine a query to do so (on two cores
// it cost more than the query): how a store stops a read that runs long,
// and how it keeps its statements prepared, is its executor's
// (db/sqlite's writer.go and tx.go, db/postgres's tx.go).

// Rows is a query's rows: database/sql's (*sql.Rows), the driver's
// for the SQLite writer (*rawRows), or pgx's for a PostgreSQL write
// (*postgres.writeRows).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Close() error
	Err() error
}

// Row is a one-row query's answer (*sql.Row, rawRow, postgres.writeRow): Scan
// says sql.ErrNoRows when there is none.
type Row interface {
	Scan(dest ...any) error
}

// Executor is how a transaction reaches its database: each store has
// its own (sqlite.writer, sqlite.reader, postgres.writer, postgres.reader), and
// Tx's statements go through it alone. Its statements are written
// in SQLite's dialect; the PostgreSQL executors run the catalog's text
// of each (db/postgres/catalog.go, generated: postgres.textAndArgs).
// ctx has been checked before each call.
type Executor interface {
	Exec(ctx context.Context, query string, args []any) (sql.Result, error)
	Query(ctx context.Context, query string, args []any) (Rows, error)
	QueryRow(ctx context.Context, query string, args []any) Row
	// Insert runs an INSERT and returns how many rows it inserted and
	// the last row id it gave (column col); last means nothing when n
	// is 0.
	Insert(ctx context.Context, col, query string, args []any) (n, last int64, err error)
	// ExecLater is exec for a write whose answer nobody reads but its
	// error: a store may keep it for its next round trip.
	ExecLater(ctx context.Context, query string, args []any) error
	// QueryStmt and QueryRowStmt run a statement composed of fragments
	// (Stmt), with its arguments: SQLite's executors its text (s.SQL()),
	// PostgreSQL's the text it composes of its fragments' catalogued
	// PostgreSQL texts (db/postgres/statements.go, postgres.compose).
	QueryStmt(ctx context.Context, s *Stmt) (Rows, error)
	QueryRowStmt(ctx context.Context, s *Stmt) Row
}

// ExecLater is Exec for a write whose answer nobody reads but its error
// (SaveConsumer). On SQLite it runs at once. On PostgreSQL, where each
// statement is a round trip, it is kept and sent before the
// transaction's next statement, or with its COMMIT when none follows (a
// pop's and an ack's last write): its error is then that statement's,
// or the commit's, and nothing of the transaction commits. The
// transaction's reads see it all the same: none runs before it is sent.
func (t *Tx) ExecLater(ctx context.Context, query string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.ex.ExecLater(ctx, query, args)
}

func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return t.ex.Exec(ctx, query, args)
}

func (t *Tx) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return t.ex.Query(ctx, query, args)
}

// QueryStmt is Query of a statement composed of fragments (Stmt), with
// its arguments.
func (t *Tx) QueryStmt(ctx context.Context, s *Stmt) (Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.text {
		if err := t.awaitText(ctx); err != nil {
			return nil, err
		}
	}
	return t.ex.QueryStmt(ctx, s)
}

// QueryRowStmt is QueryRow of a statement composed of fragments (Stmt),
// with its arguments.
func (t *Tx) QueryRowStmt(ctx context.Context, s *Stmt) Row {
	if err := ctx.Err(); err != nil {
		return errRow{err: err}
	}
	if s.text {
		if err := t.awaitText(ctx); err != nil {
			return errRow{err: err}
		}
	}
	return t.ex.QueryRowStmt(ctx, s)
}

// QueryIDs runs a query of one integer column and returns its values in
// the order the rows come.
func (t *Tx) QueryIDs(ctx context.Context, query string, args ...any) ([]int64, error) {
	rows, err := t.Query(ctx, query, args...)
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
	// Close's error too: a write's first statement (db/postgres/begin.go) reports
	// its pipeline's there.
	return out, errors.Join(rows.Err(), rows.Close())
}

func (t *Tx) QueryRow(ctx context.Context, query string, args ...any) Row {
	if err := ctx.Err(); err != nil {
		return errRow{err: err}
	}
	return t.ex.QueryRow(ctx, query, args)
}

// Insert runs an INSERT and returns how many rows it inserted and the
// last row id it gave (column col): SQLite's changes and last rowid; on
// PostgreSQL, the statement with RETURNING col, the highest returned.
// last means nothing when n is 0.
func (t *Tx) Insert(ctx context.Context, col, query string, args ...any) (n, last int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	return t.ex.Insert(ctx, col, query, args)
}

// errRow is the answer of a one-row query that could not run: Scan says
// why.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
