package db

import (
	"context"
	"database/sql"

	"github.com/lazarus-dlq/lazarus/broker"
)

// sqliteDialect is the dialect of SQLite's store: storeTx's statements
// run as written.
type sqliteDialect struct{}

// text keeps every byte.
func (sqliteDialect) text(s string) string { return s }

// param is SQLite's ?.
func (sqliteDialect) param(int) string { return "?" }

// insertMessages calls InsertMessage for each message: a statement costs
// no round trip here, and the push's statement stays the one measured.
func (sqliteDialect) insertMessages(ctx context.Context, t *storeTx, ms []*broker.Message) ([]bool, error) {
	return t.insertEach(ctx, ms)
}

// foldLock folds every row noted: SQLite's one writer holds them all.
func (sqliteDialect) foldLock(_ context.Context, _ *storeTx, ids []int64, keys [][2]int64) ([]int64, [][2]int64, foldLeft, error) {
	return ids, keys, foldLeft{}, nil
}

// sqliteWriter is the executor of the writer's transactions: its
// statements run beneath database/sql on the connection held for it,
// kept prepared (rawConn), with no context (see stmt.go).
type sqliteWriter struct {
	raw  *rawConn
	conn *sql.Conn // the same connection, through database/sql
}

func (w sqliteWriter) exec(_ context.Context, query string, args []any) (sql.Result, error) {
	return w.raw.exec(query, args)
}

func (w sqliteWriter) query(_ context.Context, query string, args []any) (rowsIter, error) {
	return w.raw.query(query, args)
}

func (w sqliteWriter) queryRow(_ context.Context, query string, args []any) rowScanner {
	rows, err := w.raw.query(query, args)
	return rawRow{rows: rows, err: err}
}

func (w sqliteWriter) insert(ctx context.Context, _ string, query string, args []any) (int64, int64, error) {
	return sqlResultInsert(w.exec(ctx, query, args))
}

func (w sqliteWriter) execLater(ctx context.Context, query string, args []any) error {
	_, err := w.exec(ctx, query, args)
	return err
}

func (w sqliteWriter) execUnprepared(_ context.Context, query string, args []any) error {
	_, err := w.conn.ExecContext(context.Background(), query, args...)
	return err
}

// sqliteReader is the executor of a read transaction (View) on a
// connection of the read pool, whose statements go-sqlite3 keeps
// prepared. No context reaches them: View's one watcher interrupts a
// read that runs long (watchCancel).
type sqliteReader struct {
	conn *sql.Conn
}

func (r sqliteReader) exec(_ context.Context, query string, args []any) (sql.Result, error) {
	return r.conn.ExecContext(context.Background(), query, args...)
}

func (r sqliteReader) query(_ context.Context, query string, args []any) (rowsIter, error) {
	return r.conn.QueryContext(context.Background(), query, args...)
}

func (r sqliteReader) queryRow(_ context.Context, query string, args []any) rowScanner {
	return r.conn.QueryRowContext(context.Background(), query, args...)
}

func (r sqliteReader) insert(ctx context.Context, _ string, query string, args []any) (int64, int64, error) {
	return sqlResultInsert(r.exec(ctx, query, args))
}

func (r sqliteReader) execLater(ctx context.Context, query string, args []any) error {
	_, err := r.exec(ctx, query, args)
	return err
}

func (r sqliteReader) execUnprepared(ctx context.Context, query string, args []any) error {
	_, err := r.exec(ctx, query, args)
	return err
}
