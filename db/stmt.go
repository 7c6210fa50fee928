package db

import (
	"context"
	"database/sql"
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

// rowsIter is a query's rows: database/sql's (*sql.Rows), or the
// driver's for the writer (*rawRows).
type rowsIter interface {
	Next() bool
	Scan(dest ...any) error
	Close() error
	Err() error
}

// rowScanner is a one-row query's answer (*sql.Row, rawRow): Scan says
// sql.ErrNoRows when there is none.
type rowScanner interface {
	Scan(dest ...any) error
}

func (t *storeTx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.pg {
		text, args := pgArgs(query, args)
		return t.conn.ExecContext(ctx, text, args...)
	}
	if t.raw != nil {
		return t.raw.exec(query, args)
	}
	return t.conn.ExecContext(context.Background(), query, args...)
}

func (t *storeTx) query(ctx context.Context, query string, args ...any) (rowsIter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.pg {
		text, args := pgArgs(query, args)
		return t.conn.QueryContext(ctx, text, args...)
	}
	if t.raw != nil {
		return t.raw.query(query, args)
	}
	return t.conn.QueryContext(context.Background(), query, args...)
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
	return out, rows.Err()
}

func (t *storeTx) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	if err := ctx.Err(); err != nil {
		return rawRow{err: err}
	}
	if t.pg {
		text, args := pgArgs(query, args)
		return t.conn.QueryRowContext(ctx, text, args...)
	}
	if t.raw != nil {
		rows, err := t.raw.query(query, args)
		return rawRow{rows: rows, err: err}
	}
	return t.conn.QueryRowContext(context.Background(), query, args...)
}

// insert runs an INSERT and returns how many rows it inserted and the
// last row id it gave (column col): SQLite's changes and last rowid; on
// PostgreSQL, the statement with RETURNING col, the highest returned.
// last means nothing when n is 0.
func (t *storeTx) insert(ctx context.Context, col, query string, args ...any) (n, last int64, err error) {
	if t.pg {
		rows, err := t.query(ctx, query+" RETURNING "+col, args...)
		if err != nil {
			return 0, 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return 0, 0, err
			}
			n, last = n+1, max(last, id)
		}
		return n, last, rows.Err()
	}
	res, err := t.exec(ctx, query, args...)
	if err != nil {
		return 0, 0, err
	}
	if n, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	last, err = res.LastInsertId()
	return n, last, err
}
