package db

import (
	"context"
	"database/sql"
	"sync"
)

// maxStatements caps the statements kept prepared: the queries of the
// broker are few, but dead-letter filters combine into more.
const maxStatements = 512

// stmtCache keeps statements prepared, so that a hot query is parsed once,
// not at every call.
type stmtCache struct {
	prep preparer
	mu   sync.Mutex
	m    map[string]*sql.Stmt
}

// preparer is a pool (*sql.DB) or one connection (*sql.Conn).
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

func newStmtCache(p preparer) *stmtCache {
	return &stmtCache{prep: p, m: map[string]*sql.Stmt{}}
}

// get returns the prepared statement of query, or nil when it cannot be
// kept (the cache is full, or preparing failed: the caller then runs the
// query as it is and sees the error there).
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st
	}
	if len(c.m) >= maxStatements {
		return nil
	}
	st, err := c.prep.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.m[query] = st
	return st
}

// close closes every kept statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// Statements run on the transaction's connection with no context:
// database/sql watches a cancellable context with a goroutine per query,
// which on two cores costs more than the query. A write cannot be
// cancelled halfway anyway (the writer answers each caller only once the
// outcome is known), and a read is bounded work. The writer's statements
// are kept prepared here; the readers' by go-sqlite3 (_stmt_cache_size).

func (t *storeTx) exec(_ context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.stmts.get(context.Background(), query); st != nil {
		return st.ExecContext(context.Background(), args...)
	}
	return t.conn.ExecContext(context.Background(), query, args...)
}

func (t *storeTx) query(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.stmts.get(context.Background(), query); st != nil {
		return st.QueryContext(context.Background(), args...)
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

func (t *storeTx) queryRow(_ context.Context, query string, args ...any) *sql.Row {
	if st := t.stmts.get(context.Background(), query); st != nil {
		return st.QueryRowContext(context.Background(), args...)
	}
	return t.conn.QueryRowContext(context.Background(), query, args...)
}
