package db

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/db/postgres"
	"github.com/lazarus-dlq/lazarus/db/sqlite"
)

// DB is a store opened by Open: SQLite's (sqlite.Store) on a file path,
// PostgreSQL's (postgres.Store) on a URL. It is what its callers hold;
// every method is the store's own (Store); View, Update and the other
// storage methods are broker.Store's, documented there (go doc
// ./broker Store.Update).
type DB struct {
	Store
}

// Store is what each store (sqlite.Store, postgres.Store) does, and so
// what a DB does: the broker's storage (broker.Store: View, Update and
// the rest), the leadership of the broker's background work
// (broker.Leader), the concurrent writes of a store shared by several
// processes (broker.ConcurrentStore), and the tools' ways around the
// broker below.
type Store interface {
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
	// ExecUncatalogued and QueryRowUncatalogued run a statement of a
	// test's own, outside the broker and the statement catalog (see
	// sqlite.Store.ExecUncatalogued): tests only.
	ExecUncatalogued(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowUncatalogued(ctx context.Context, query string, args ...any) *sql.Row
	RebuildTextIndex(ctx context.Context) error
	Close() error
}

// Postgres reports whether the store is PostgreSQL's.
func (d *DB) Postgres() bool {
	_, ok := d.Store.(*postgres.Store)
	return ok
}

// TextIndexFunc is what reports the state of the full-text indexes the
// store keeps apart from its database (sqlite.Store.TextIndex: the search
// file), for the metrics; nil on PostgreSQL, which keeps them in its
// tables.
func (d *DB) TextIndexFunc() func(context.Context) (broker.TextIndexState, error) {
	if s, ok := d.Store.(*sqlite.Store); ok {
		return s.TextIndex
	}
	return nil
}

var _ broker.Store = (*DB)(nil)

// A DB leads the broker's background work (broker.Run) through Lead and
// Leading.
var _ broker.Leader = (*DB)(nil)

var (
	_ Store = (*sqlite.Store)(nil)
	_ Store = (*postgres.Store)(nil)
)

// Sync is the durability a commit waits for (SQLite's synchronous
// setting; on PostgreSQL, synchronous_commit on or off).
type Sync string

// Durability modes. In WAL mode both survive a crash of the process (a
// commit is in the operating system's hands before it is answered); FULL
// also survives a power cut or an OS crash, at the cost of an fsync on
// every commit.
const (
	SyncFull   Sync = "FULL"
	SyncNormal Sync = "NORMAL"
)

// Options are the settings of OpenWith, for whichever store it opens;
// the zero value of each field picks its default. OpenWith hands each
// store the fields it reads (sqlite.Options, postgres.Options) and no
// other: a field of the other store's is ignored.
type Options struct {
	Sync Sync // both stores; default SyncFull
	// Logger (both stores) receives what goes wrong in the background;
	// default slog.Default().
	Logger *slog.Logger
	// FoldEvery (both stores) is how often, at most, a write brings the
	// counts kept for the queue page up to date. Default 1 s; negative:
	// at every commit, for tests.
	FoldEvery time.Duration

	// BusyTimeout (SQLite) bounds the wait for another process's lock
	// (sqlite.Options.BusyTimeout; default DefaultBusyTimeout).
	BusyTimeout time.Duration
	// AutoCheckpoint (SQLite) chooses how the write-ahead log is copied
	// back into the database (sqlite.Options.AutoCheckpoint).
	AutoCheckpoint int
	// CheckpointEvery (SQLite) spaces the background checkpoints
	// (sqlite.Options.CheckpointEvery; negative: by the log's growth
	// only, for measurements).
	CheckpointEvery time.Duration
	// Exclusive (SQLite) holds a lock on the database file for as long as
	// the DB is open, and fails OpenWith with ErrInUse when another
	// exclusive DB holds it (sqlite.Options.Exclusive).
	Exclusive bool
	// KeepAutoVacuum (SQLite), for measurements only, leaves auto_vacuum
	// as the file has it (sqlite.Options.KeepAutoVacuum).
	KeepAutoVacuum bool

	// NeverAlone (PostgreSQL) makes the process write as one among
	// several even when it is alone on the database, for tests
	// (postgres.Options.NeverAlone).
	NeverAlone bool
	// Ungrouped (PostgreSQL), for measurements only, runs each write in a
	// transaction of its own, without group commit
	// (postgres.Options.Ungrouped).
	Ungrouped bool
	// Wait (PostgreSQL) is how long Open tries again while the server
	// cannot be reached (postgres.Options.Wait); 0: one try.
	Wait time.Duration
}

// sqlite is what the SQLite store reads of o.
func (o Options) sqlite() sqlite.Options {
	return sqlite.Options{Sync: sqlite.Sync(o.Sync), Logger: o.Logger, FoldEvery: o.FoldEvery,
		BusyTimeout: o.BusyTimeout, AutoCheckpoint: o.AutoCheckpoint, CheckpointEvery: o.CheckpointEvery, Exclusive: o.Exclusive, KeepAutoVacuum: o.KeepAutoVacuum}
}

// postgres is what the PostgreSQL store reads of o.
func (o Options) postgres() postgres.Options {
	return postgres.Options{Sync: postgres.Sync(o.Sync), Logger: o.Logger, FoldEvery: o.FoldEvery,
		NeverAlone: o.NeverAlone, Ungrouped: o.Ungrouped, Wait: o.Wait}
}

// DefaultBusyTimeout is how long a statement waits for a lock that
// another process holds (a backup, the sqlite3 shell) before it gives up
// with broker.ErrUnavailable (sqlite.DefaultBusyTimeout).
const DefaultBusyTimeout = sqlite.DefaultBusyTimeout

// DriverName is the database/sql driver every connection of a SQLite
// store is opened with (sqlite.DriverName).
const DriverName = sqlite.DriverName

// ErrClosed is the error of an Update after Close.
var ErrClosed = sqlcore.ErrClosed

// ErrInUse is the error of an exclusive OpenWith on a SQLite database
// another exclusive store holds (sqlite.ErrInUse).
var ErrInUse = sqlite.ErrInUse

// Open opens (creating if need be) the database at path and brings its
// schema up to date.
func Open(ctx context.Context, path string, sync Sync) (*DB, error) {
	return OpenWith(ctx, path, Options{Sync: sync})
}

// OpenWith is Open with options: the PostgreSQL store when path is a
// PostgreSQL URL or key=value string (IsPostgres), else the SQLite
// store of the file at path. It fails, rather than return a database
// that only reads, when the database cannot be written. Its errors say
// the usual causes in plain words, for the person starting the server.
func OpenWith(ctx context.Context, path string, o Options) (*DB, error) {
	if err := CheckName(path); err != nil {
		return nil, err
	}
	if IsPostgres(path) {
		p, err := postgres.OpenWith(ctx, path, o.postgres())
		if err != nil {
			return nil, err
		}
		return &DB{Store: p}, nil
	}
	s, err := sqlite.OpenWith(ctx, path, o.sqlite())
	if err != nil {
		return nil, err
	}
	return &DB{Store: s}, nil
}

// IsPostgres reports whether a --db value names a PostgreSQL database
// (postgres.IsPostgres).
func IsPostgres(dsn string) bool { return postgres.IsPostgres(dsn) }

// CheckName refuses a --db value that looks like a mistyped libpq
// key=value string (postgres.CheckName).
func CheckName(dsn string) error { return postgres.CheckName(dsn) }

// Describe is a --db value as logs and errors may show it: a file's path
// as it is, a PostgreSQL URL without its password or parameters
// (postgres.Describe).
func Describe(dsn string) string { return postgres.Describe(dsn) }

// Prepare brings the schema of the PostgreSQL database at dsn up to date
// and closes it again: for a template that tests copy (internal/pgtest).
func Prepare(dsn string) error { return postgres.Prepare(dsn) }

// QPSG is sqlite.QPSG: it sets (on 0 or 1) or reads (on -1) the query
// planner stability guarantee of a connection; the bench gives its
// references ours with it.
func QPSG(c *sqlite3.SQLiteConn, on int) int { return sqlite.QPSG(c, on) }

// HasMutex is sqlite.HasMutex: whether a connection takes a mutex of its
// own around each call into SQLite (-1 if unknown).
func HasMutex(c *sqlite3.SQLiteConn) int { return sqlite.HasMutex(c) }

// Reprepares is sqlite.Reprepares: how many times SQLite has prepared a
// statement again since it was first prepared (-1 if unknown).
func Reprepares(s *sqlite3.SQLiteStmt) int { return sqlite.Reprepares(s) }

// StmtCacheSize is sqlite.StmtCacheSize: how many statements a connection
// keeps prepared in go-sqlite3's statement cache (-1 if unknown).
func StmtCacheSize(c *sqlite3.SQLiteConn) int { return sqlite.StmtCacheSize(c) }

// ReadStmtCache is sqlite.ReadStmtCache: the statements each reading
// connection of a SQLite store keeps prepared.
const ReadStmtCache = sqlite.ReadStmtCache
