package db

import (
	"context"
	"database/sql"

	"github.com/lazarus-dlq/lazarus/broker"
)

// DB is a store opened by Open: SQLite's (sqliteStore) on a file path,
// PostgreSQL's (pgStore) on a URL. It is what its callers hold; every
// method is the store's own.
type DB struct {
	store
	sq *sqliteStore // the SQLite store, or nil
	pg *pgStore     // the PostgreSQL store, or nil
}

// store is what each store does for DB.
type store interface {
	broker.Store
	broker.Leader
	broker.ConcurrentStore
	// Path is the database file's path, or the PostgreSQL URL.
	Path() string
	// WriteDB is the writing handle, for tools (benchmarks, fixtures)
	// that must go around the broker.
	WriteDB() *sql.DB
	Ping(ctx context.Context) error
	Health(ctx context.Context) error
	DiskFull() bool
	Notifier() broker.Notifier
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRow(ctx context.Context, query string, args ...any) *sql.Row
	RebuildTextIndex(ctx context.Context) error
	Close() error
}

// Postgres reports whether the store is PostgreSQL's.
func (d *DB) Postgres() bool { return d.pg != nil }

var _ broker.Store = (*DB)(nil)

// A DB leads the broker's background work (broker.Run) through Lead and
// Leading.
var _ broker.Leader = (*DB)(nil)
