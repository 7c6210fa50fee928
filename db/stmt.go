package db

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
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

// pgLater is a write kept by execLater: its PostgreSQL text and
// arguments.
type pgLater struct {
	text string
	args []any
}

// execLater is exec for a write whose answer nobody reads but its error
// (SaveConsumer). On SQLite it runs at once. On PostgreSQL, where each
// statement is a round trip, it is kept and sent before the
// transaction's next statement, or with its COMMIT when none follows (a
// pop's and an ack's last write): its error is then that statement's,
// or the commit's, and nothing of the transaction commits. The
// transaction's reads see it all the same: none runs before it is sent.
func (t *storeTx) execLater(ctx context.Context, query string, args ...any) error {
	if t.begin == nil { // SQLite's, or a View's
		_, err := t.exec(ctx, query, args...)
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	text, args, err := pgArgs(query, args)
	if err != nil {
		return err
	}
	t.later = append(t.later, pgLater{text, args})
	return nil
}

// sendLater sends the writes execLater kept, in one round trip (after
// BEGIN, if it is still to be sent).
func (t *storeTx) sendLater(ctx context.Context) error {
	if len(t.later) == 0 {
		return nil
	}
	if err := t.pgBegun(ctx); err != nil {
		return err
	}
	later := t.later
	t.later = nil
	return pgPipeline(ctx, t.begin.pgc, func(b *pgx.Batch) {
		for _, l := range later {
			b.Queue(l.text, l.args...)
		}
	}, func(r pgx.BatchResults, n int) error {
		for range n {
			if _, err := r.Exec(); err != nil {
				return err
			}
		}
		return nil
	})
}

// pgStatement readies the transaction for its next statement on
// PostgreSQL: the writes kept are sent first, and first says the
// statement is to carry the transaction's BEGIN (pg_begin.go).
func (t *storeTx) pgStatement(ctx context.Context) (first bool, err error) {
	if len(t.later) > 0 {
		return false, t.sendLater(ctx)
	}
	return t.pgFirst()
}

func (t *storeTx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.pg {
		first, err := t.pgStatement(ctx)
		if err != nil {
			return nil, err
		}
		text, args, err := pgArgs(query, args)
		if err != nil {
			return nil, err
		}
		switch {
		case first:
			return t.pgExecFirst(ctx, text, args)
		case t.begin != nil:
			return t.pgExec(ctx, text, args)
		}
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
		first, err := t.pgStatement(ctx)
		if err != nil {
			return nil, err
		}
		text, args, err := pgArgs(query, args)
		if err != nil {
			return nil, err
		}
		switch {
		case first:
			return t.pgQueryFirst(ctx, text, args)
		case t.begin != nil:
			return t.pgQuery(ctx, text, args)
		}
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
	// Close's error too: a write's first statement (pg_begin.go) reports
	// its pipeline's there.
	return out, errors.Join(rows.Err(), rows.Close())
}

func (t *storeTx) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	if err := ctx.Err(); err != nil {
		return rawRow{err: err}
	}
	if t.pg {
		first, err := t.pgStatement(ctx)
		if err != nil {
			return rawRow{err: err}
		}
		text, args, err := pgArgs(query, args)
		if err != nil {
			return rawRow{err: err}
		}
		switch {
		case first:
			rows, err := t.pgQueryFirst(ctx, text, args)
			return pgRow{rows: rows, err: err}
		case t.begin != nil:
			rows, err := t.pgQuery(ctx, text, args)
			return pgRow{rows: rows, err: err}
		}
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
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, 0, err
			}
			n, last = n+1, max(last, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return 0, 0, err
		}
		return n, last, nil
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
