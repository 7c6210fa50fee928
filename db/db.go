// Package db keeps Lazarus's state in SQLite: the schema as numbered
// migrations, connection set-up, and the broker.Store implementation. All
// SQL lives here.
package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // the driver

	"github.com/lazarus-dlq/lazarus/broker"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Sync is SQLite's synchronous setting: how hard a commit waits for disk.
type Sync string

// Durability modes. In WAL mode both survive a crash of the process (a
// commit is in the operating system's hands before it is answered); FULL
// also survives a power cut or an OS crash, at the cost of an fsync on
// every commit.
const (
	SyncFull   Sync = "FULL"
	SyncNormal Sync = "NORMAL"
)

// DB is the SQLite database: one connection that writes, a pool that reads.
type DB struct {
	write *sql.DB
	read  *sql.DB
	path  string
}

// Open opens (creating if need be) the database at path and brings its
// schema up to date.
func Open(ctx context.Context, path string, sync Sync) (*DB, error) {
	if sync == "" {
		sync = SyncFull
	}
	if sync != SyncFull && sync != SyncNormal {
		return nil, fmt.Errorf("open: synchronous must be FULL or NORMAL, got %q", sync)
	}
	// Pragmas in the DSN so that every pooled connection gets them.
	params := url.Values{}
	params.Set("_journal_mode", "WAL")
	params.Set("_synchronous", string(sync))
	params.Set("_busy_timeout", "10000")
	params.Set("_foreign_keys", "off")
	params.Set("_cache_size", "-32000") // 32 MB a connection
	wparams := url.Values{}
	for k, v := range params {
		wparams[k] = v
	}
	wparams.Set("_txlock", "immediate")
	write, err := sql.Open("sqlite3", "file:"+path+"?"+wparams.Encode())
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	write.SetMaxOpenConns(1) // one writer
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	params.Set("_query_only", "true")
	read, err := sql.Open("sqlite3", "file:"+path+"?"+params.Encode())
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open: %w", err)
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	d := &DB{write: write, read: read, path: path}
	if err := d.migrate(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close closes both pools.
func (d *DB) Close() error {
	return errors.Join(d.read.Close(), d.write.Close())
}

// Ping checks that the database answers a query.
func (d *DB) Ping(ctx context.Context) error {
	var one int
	return d.read.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// Path is the database file's path.
func (d *DB) Path() string { return d.path }

// migrate applies the embedded migrations not yet recorded, each in its
// own transaction together with its record.
func (d *DB) migrate(ctx context.Context) error {
	if _, err := d.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(files)
	for _, f := range files {
		name := strings.TrimPrefix(f, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a number", name)
		}
		body, err := migrations.ReadFile(f)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if err := d.applyMigration(ctx, version, name, string(body)); err != nil {
			return err
		}
	}
	return nil
}

func (d *DB) applyMigration(ctx context.Context, version int, name, body string) error {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = ?", version).Scan(&n); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", version, name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	return nil
}

// Update runs fn in a write transaction.
func (d *DB) Update(ctx context.Context, fn func(broker.Tx) error) error {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(&storeTx{tx: tx}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// View runs fn in a read transaction on one snapshot.
func (d *DB) View(ctx context.Context, fn func(broker.Tx) error) error {
	tx, err := d.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	return fn(&storeTx{tx: tx})
}

// WriteDB is the writing handle, for tools (benchmarks, fixtures) that
// must go around the broker.
func (d *DB) WriteDB() *sql.DB { return d.write }

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

var _ broker.Store = (*DB)(nil)
