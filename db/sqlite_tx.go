package db

import (
	"context"
	"database/sql"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// sqliteDialect is the dialect of SQLite's store: sqlcore.Tx's statements
// run as written.
type sqliteDialect struct{}

// Text keeps every byte.
func (sqliteDialect) Text(s string) string { return s }

// Param is SQLite's ?.
func (sqliteDialect) Param(int) string { return "?" }

// InsertMessages calls InsertMessage for each message: a statement costs
// no round trip here, and the push's statement stays the one measured.
func (sqliteDialect) InsertMessages(ctx context.Context, t *sqlcore.Tx, ms []*broker.Message) ([]bool, error) {
	return t.InsertEach(ctx, ms)
}

// FoldLock folds every row noted: SQLite's one writer holds them all.
func (sqliteDialect) FoldLock(_ context.Context, _ *sqlcore.Tx, ids []int64, keys [][2]int64) ([]int64, [][2]int64, sqlcore.FoldLeft, error) {
	return ids, keys, sqlcore.FoldLeft{}, nil
}

// sqliteWriter is the executor of the writer's transactions: its
// statements run beneath database/sql on the connection held for it,
// kept prepared (rawConn), with no context (see stmt.go).
type sqliteWriter struct {
	raw  *rawConn
	conn *sql.Conn // the same connection, through database/sql
}

func (w sqliteWriter) Exec(_ context.Context, query string, args []any) (sql.Result, error) {
	return w.raw.exec(query, args)
}

func (w sqliteWriter) Query(_ context.Context, query string, args []any) (sqlcore.Rows, error) {
	return w.raw.query(query, args)
}

func (w sqliteWriter) QueryRow(_ context.Context, query string, args []any) sqlcore.Row {
	rows, err := w.raw.query(query, args)
	return rawRow{rows: rows, err: err}
}

func (w sqliteWriter) Insert(ctx context.Context, _ string, query string, args []any) (int64, int64, error) {
	return sqlResultInsert(w.Exec(ctx, query, args))
}

func (w sqliteWriter) ExecLater(ctx context.Context, query string, args []any) error {
	_, err := w.Exec(ctx, query, args)
	return err
}

func (w sqliteWriter) ExecUnprepared(_ context.Context, query string, args []any) error {
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

func (r sqliteReader) Exec(_ context.Context, query string, args []any) (sql.Result, error) {
	return r.conn.ExecContext(context.Background(), query, args...)
}

func (r sqliteReader) Query(_ context.Context, query string, args []any) (sqlcore.Rows, error) {
	return r.conn.QueryContext(context.Background(), query, args...)
}

func (r sqliteReader) QueryRow(_ context.Context, query string, args []any) sqlcore.Row {
	return r.conn.QueryRowContext(context.Background(), query, args...)
}

func (r sqliteReader) Insert(ctx context.Context, _ string, query string, args []any) (int64, int64, error) {
	return sqlResultInsert(r.Exec(ctx, query, args))
}

func (r sqliteReader) ExecLater(ctx context.Context, query string, args []any) error {
	_, err := r.Exec(ctx, query, args)
	return err
}

func (r sqliteReader) ExecUnprepared(ctx context.Context, query string, args []any) error {
	_, err := r.Exec(ctx, query, args)
	return err
}
