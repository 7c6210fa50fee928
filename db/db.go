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
	"sync"
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

	// The writer goroutine takes Updates from writes and commits them in
	// groups (see writer).
	writes   chan writeRequest
	stop     chan struct{}
	stopped  chan struct{}
	closeMu  sync.Mutex
	isClosed bool
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
	d := &DB{write: write, read: read, path: path, writes: make(chan writeRequest), stop: make(chan struct{}), stopped: make(chan struct{})}
	if err := d.migrate(ctx); err != nil {
		errors.Join(read.Close(), write.Close())
		return nil, err
	}
	go d.writer()
	return d, nil
}

// Close closes both pools.
func (d *DB) Close() error {
	d.closeMu.Lock()
	if d.isClosed {
		d.closeMu.Unlock()
		return nil
	}
	d.isClosed = true
	close(d.stop)
	d.closeMu.Unlock()
	<-d.stopped
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

// ErrClosed is the error of an Update after Close.
var ErrClosed = errors.New("database closed")

// maxGroup caps how many Updates share one transaction.
const maxGroup = 256

type writeRequest struct {
	ctx  context.Context
	fn   func(broker.Tx) error
	done chan error
}

// Update runs fn in a write transaction: all of fn commits or none of it.
//
// Updates that arrive while another is being written are committed
// together, each inside a savepoint of one transaction (group commit): one
// fsync for many callers, so that synchronous=FULL costs little under
// load. An fn that fails is rolled back to its savepoint and does not
// affect the others; Update returns once its group has committed.
func (d *DB) Update(ctx context.Context, fn func(broker.Tx) error) error {
	req := writeRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case d.writes <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-d.stop:
		return ErrClosed
	}
	// Once taken, wait for the outcome even if ctx ends: only then is it
	// known whether fn committed.
	return <-req.done
}

// writer is the one goroutine that writes. It takes a request, gathers
// those already waiting, and commits them in one transaction.
func (d *DB) writer() {
	defer close(d.stopped)
	for {
		var group []writeRequest
		select {
		case r := <-d.writes:
			group = append(group, r)
		case <-d.stop:
			return
		}
	gather:
		for len(group) < maxGroup {
			select {
			case r := <-d.writes:
				group = append(group, r)
			default:
				break gather
			}
		}
		d.commit(group)
	}
}

// commit runs a group of requests in one transaction and answers each.
func (d *DB) commit(group []writeRequest) {
	errs := make([]error, len(group))
	answer := func() {
		for i, r := range group {
			r.done <- errs[i]
		}
	}
	tx, err := d.write.BeginTx(context.Background(), nil)
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("begin: %w", err)
		}
		answer()
		return
	}
	st := &storeTx{tx: tx}
	ok := 0
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if len(group) == 1 {
			errs[i] = run(r.fn, st)
		} else {
			var broken error
			errs[i], broken = savepoint(r.ctx, tx, func() error { return run(r.fn, st) })
			if broken != nil {
				// The transaction can no longer be trusted: nothing of the
				// group commits.
				_ = tx.Rollback()
				for j := range errs {
					errs[j] = broken
				}
				answer()
				return
			}
		}
		if errs[i] == nil {
			ok++
		}
	}
	if ok == 0 {
		_ = tx.Rollback()
		answer()
		return
	}
	if err := tx.Commit(); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("commit: %w", err)
			}
		}
	}
	answer()
}

// run calls fn, turning a panic into an error: a bug in one request must
// not take the writer down with it.
func run(fn func(broker.Tx) error, tx broker.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in a write: %v", p)
		}
	}()
	return fn(tx)
}

// savepoint runs fn inside a savepoint of tx, rolling back to it when fn
// fails. broken is set when the savepoint itself could not be handled.
func savepoint(ctx context.Context, tx *sql.Tx, fn func() error) (err, broken error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
		return fmt.Errorf("savepoint: %w", err), nil
	}
	if err := fn(); err != nil {
		if _, rerr := tx.Exec("ROLLBACK TO w"); rerr != nil {
			return err, fmt.Errorf("rollback to savepoint: %w", rerr)
		}
		if _, rerr := tx.Exec("RELEASE w"); rerr != nil {
			return err, fmt.Errorf("release savepoint: %w", rerr)
		}
		return err, nil
	}
	if _, err := tx.Exec("RELEASE w"); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return nil, nil
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
