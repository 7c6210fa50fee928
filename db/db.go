// Package db keeps Lazarus's state in SQLite: the schema as numbered
// migrations, connection set-up, and the broker.Store implementation. All
// SQL lives here.
package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3" // the driver, and its error codes

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
	log   *slog.Logger
	// wconn is the connection every write runs on (whichever goroutine
	// writes), held for the life of the DB; the pool's other connection
	// serves migrations, the checkpointer and tools (WriteDB).
	wconn *sql.Conn

	// Writes (see Update): one at a time, by the caller itself when no
	// other write is under way, else queued and committed in groups by
	// the writer goroutine.
	wmu       sync.Mutex
	changed   *sync.Cond // broadcast when busy, waiting or bulk change
	busy      bool       // a goroutine is writing
	waiting   []writeRequest
	bulk      []writeRequest // low-priority writes (broker.LowPriority)
	bulkSince time.Time      // since when the first of bulk has waited
	lastWrite time.Time      // when the last ordinary write ended
	isClosed  bool
	kick      chan struct{} // wakes the writer goroutine (buffered, 1)
	ckpt      chan struct{} // wakes the checkpointer (buffered, 1); nil: none
	ckptNow   chan struct{} // wakes it before checkpointEvery is up: the log grew by checkpointFrames
	wal       *walWatch     // the log's length after each commit (with ckpt)
	walKicked int           // the log's length when ckptNow was last sent
	walLast   int           // the log's length after the last commit
	// catchUpDue asks the writer goroutine for a catch-up (catchUp);
	// catchUpFrom is the log's length before which it is not asked again
	// (a reader held part of the log at the last try). Both are read and
	// written by whoever holds busy; catchUps counts the tries.
	catchUpDue  atomic.Bool
	catchUpFrom int
	catchUps    int
	catchUpHook func() // tests: called as a catch-up starts
	// bgSynced is the log's length the last background checkpoint saw
	// (and synced): a catch-up is asked for only while little was
	// written since (catchUpResidual), so that it never syncs much of the
	// log on the writer's path.
	bgSynced atomic.Int64
	// checkpointing is set while the background checkpoint runs: the
	// writer's catch-up waits for it to end rather than find it busy.
	checkpointing atomic.Bool
	ckptDone      chan struct{}
	stop          chan struct{}
	stopped       chan struct{}

	// Statements kept prepared, per pool.
	raw *rawConn // the writer's connection beneath database/sql

	// sync is the durability asked for; relaxed is set while the writer's
	// connection commits with synchronous=NORMAL for ephemeral writes
	// (broker.Ephemeral) under FULL. Both belong to whoever is writing.
	sync    Sync
	relaxed bool

	// unfolded are the partitions pushed to, and the consumers written,
	// since their counts were last brought up to date (foldCounts), at
	// foldedAt; they belong to whoever is writing.
	unfolded          map[int64]struct{}
	unfoldedConsumers map[[2]int64]struct{}
	foldedAt          time.Time
	foldEvery         time.Duration

	// lock is the open lock file of an exclusive DB (Options.Exclusive),
	// nil otherwise.
	lock *os.File

	// full is set when a write failed for want of space, and cleared by
	// Health once a probe of some size commits.
	full atomic.Bool
}

// foldEvery is how often, at most, a commit brings the counts kept for
// the queue page and API up to date (migration 0010).
const foldEvery = time.Second

// DefaultBusyTimeout is how long a statement waits for a lock that
// another process holds (a backup, the sqlite3 shell) before it gives up
// with broker.ErrUnavailable. Lazarus itself never waits for its own
// locks: it has one writer, and readers in WAL mode do not block it.
const DefaultBusyTimeout = 5 * time.Second

// Options are the settings of Open; the zero value of each field picks
// its default.
type Options struct {
	Sync Sync // default SyncFull
	// BusyTimeout bounds the wait for another process's lock (default
	// DefaultBusyTimeout). A write that waited this long fails with
	// broker.ErrUnavailable, and so does every write that queued up
	// behind it meanwhile: none waits much longer than BusyTimeout.
	BusyTimeout time.Duration
	// AutoCheckpoint chooses how the write-ahead log is copied back into
	// the database (a checkpoint). 0, the default: a background goroutine
	// does it on its own connection shortly after writes, so that no
	// write waits for it (the writer itself checkpoints only past
	// walSafetyPages, should the background fall behind). Positive: the
	// writer checkpoints at commit past that many pages (SQLite's
	// wal_autocheckpoint). Negative: never, for measurements that read the
	// whole log (the log then grows without bound).
	AutoCheckpoint int
	// Logger receives what goes wrong in the background (checkpoints);
	// default slog.Default().
	Logger *slog.Logger
	// FoldEvery is how often, at most, the writer brings the counts kept
	// for the queue page up to date inside a commit (migration 0010).
	// Default 1 s; negative: at every commit, for tests.
	FoldEvery time.Duration
	// Exclusive holds a lock on the database (a flock on <path>.lock,
	// lock.go) for as long as the DB is open, and fails OpenWith with
	// ErrInUse when another exclusive DB holds it: a server's long-polls
	// are woken by its own pushes only, so two servers on one file would
	// each miss the other's. Tools that write beside a running server
	// (lazarus user add) leave it off.
	Exclusive bool
	// KeepAutoVacuum, for measurements only (bench's G4), leaves SQLite's
	// auto_vacuum as the file has it: a new database is made without it
	// and an older one is not converted (tx_space.go); free pages are
	// then reused but never given back.
	KeepAutoVacuum bool

	// onlyCatchUp, for tests, starts no background checkpointer: the
	// writer's catch-up alone copies the log back, deterministically.
	onlyCatchUp bool
}

// Open opens (creating if need be) the database at path and brings its
// schema up to date.
func Open(ctx context.Context, path string, sync Sync) (*DB, error) {
	return OpenWith(ctx, path, Options{Sync: sync})
}

// OpenWith is Open with options. It fails, rather than return a database
// that only reads, when the file cannot be written (read-only file or
// directory, disk full): it commits one small write before it returns.
// Its errors say the usual causes in plain words, for the person starting
// the server.
func OpenWith(ctx context.Context, path string, o Options) (*DB, error) {
	if o.Sync == "" {
		o.Sync = SyncFull
	}
	if o.Sync != SyncFull && o.Sync != SyncNormal {
		return nil, fmt.Errorf("open: synchronous must be FULL or NORMAL, got %q", o.Sync)
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.BusyTimeout < time.Millisecond {
		return nil, fmt.Errorf("open: busy timeout must be at least 1ms, got %s", o.BusyTimeout)
	}
	var lock *os.File
	var lockErr error
	if o.Exclusive {
		lock, lockErr = lockFile(path)
		if errors.Is(lockErr, ErrInUse) {
			return nil, fmt.Errorf("database %s: %w", path, lockErr)
		}
	}
	d, err := open(ctx, path, o)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		// When the lock file could not be made either, SQLite's error
		// says best why (a read-only directory, a missing one).
		return nil, openError(path, o.BusyTimeout, unavailable(err))
	}
	if lockErr != nil {
		d.Close()
		return nil, fmt.Errorf("database %s: %w", path, lockErr)
	}
	d.lock = lock
	return d, nil
}

func open(ctx context.Context, path string, o Options) (*DB, error) {
	// Pragmas in the DSN so that every pooled connection gets them.
	params := url.Values{}
	params.Set("_journal_mode", "WAL")
	params.Set("_synchronous", string(o.Sync))
	params.Set("_busy_timeout", strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10))
	params.Set("_foreign_keys", "off")
	params.Set("_cache_size", "-32000") // 32 MB a connection
	// No mutex of the connection's own around each call into SQLite
	// (SQLITE_OPEN_NOMUTEX): database/sql hands a connection to one
	// goroutine at a time, and go-sqlite3's only call from another, on a
	// cancelled context, is sqlite3_interrupt, which SQLite makes safe
	// from any thread. The mutexes were 4 % of a pop+ack's instructions.
	params.Set("_mutex", "no")
	wparams := url.Values{}
	for k, v := range params {
		wparams[k] = v
	}
	wparams.Set("_txlock", "immediate")
	if !o.KeepAutoVacuum {
		if err := createGivingSpaceBack(ctx, path, wparams); err != nil {
			return nil, err
		}
	}
	write, err := sql.Open(DriverName, "file:"+path+"?"+wparams.Encode())
	if err != nil {
		return nil, err
	}
	// Writes run one at a time on one connection held for them (wconn);
	// the second serves migrations at start, background checkpoints and
	// tools.
	write.SetMaxOpenConns(2)
	write.SetMaxIdleConns(2)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, err
	}
	params.Set("_query_only", "true")
	// Each reading connection keeps its statements prepared (go-sqlite3's
	// cache), as View runs them on the connection directly.
	params.Set("_stmt_cache_size", "128")
	read, err := sql.Open(DriverName, "file:"+path+"?"+params.Encode())
	if err != nil {
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	d := &DB{write: write, read: read, path: path, sync: o.Sync, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		unfolded: map[int64]struct{}{}, unfoldedConsumers: map[[2]int64]struct{}{}, foldEvery: max(o.FoldEvery, 0)}
	if o.FoldEvery == 0 {
		d.foldEvery = foldEvery
	}
	d.changed = sync.NewCond(&d.wmu)
	d.log = o.Logger
	if d.log == nil {
		d.log = slog.Default()
	}
	if err := d.migrate(ctx); err != nil {
		errors.Join(read.Close(), write.Close())
		return nil, err
	}
	// Only the process that holds the database (serve) converts it: a
	// command run beside a server (user add) must not hold the writer
	// for the whole copy.
	if !o.KeepAutoVacuum && o.Exclusive {
		if err := d.convertAutoVacuum(ctx); err != nil {
			errors.Join(read.Close(), write.Close())
			return nil, err
		}
	}
	if err := d.checkWritable(ctx); err != nil {
		errors.Join(read.Close(), write.Close())
		return nil, err
	}
	if d.wconn, err = write.Conn(ctx); err != nil {
		errors.Join(read.Close(), write.Close())
		return nil, err
	}
	if o.AutoCheckpoint == 0 {
		d.ckpt, d.ckptNow = make(chan struct{}, 1), make(chan struct{}, 1)
		err = d.wconn.Raw(func(c any) error {
			var err error
			d.wal, err = watchWAL(c.(*sqlite3.SQLiteConn), walSafetyPages)
			return err
		})
	} else {
		_, err = d.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA wal_autocheckpoint=%d", max(o.AutoCheckpoint, 0)))
	}
	if err != nil {
		errors.Join(d.wconn.Close(), read.Close(), write.Close())
		return nil, err
	}
	if d.raw, err = newRawConn(ctx, d.wconn); err != nil {
		errors.Join(d.wconn.Close(), read.Close(), write.Close())
		return nil, err
	}
	go d.writer()
	if d.ckpt != nil && !o.onlyCatchUp {
		d.ckptDone = make(chan struct{})
		go d.checkpointer()
	}
	return d, nil
}

// openError says why the database at path could not be opened: the
// usual causes in a sentence, SQLite's own words after it.
func openError(path string, busy time.Duration, err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("database %s: %w", path, err)
	}
	var why string
	switch errno := se.SystemErrno; {
	case se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked:
		why = fmt.Sprintf("another process holds a lock on it (waited %s)", busy)
	case se.Code == sqlite3.ErrNotADB:
		why = "it is not a SQLite database (or it is encrypted or damaged)"
	case se.Code == sqlite3.ErrReadonly:
		why = "it cannot be written: the file and its directory (for the -wal and -shm files beside it) must be writable"
	case se.Code == sqlite3.ErrFull, errno == syscall.ENOSPC, errno == syscall.EDQUOT, errno == syscall.EFBIG:
		why = "there is no space left to write it (disk full, quota or file size limit)"
	case se.Code == sqlite3.ErrCantOpen, se.Code == sqlite3.ErrPerm, errno == syscall.EACCES, errno == syscall.EROFS:
		why = cantOpen(path)
	}
	if why == "" {
		return fmt.Errorf("database %s: %w", path, err)
	}
	return fmt.Errorf("database %s: %s (%w)", path, why, err)
}

// cantOpen guesses why SQLite could not open or create the file at path.
func cantOpen(path string) string {
	dir := filepath.Dir(path)
	switch st, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("the directory %s does not exist", dir)
	case err != nil:
		return fmt.Sprintf("its directory %s cannot be read", dir)
	case !st.IsDir():
		return fmt.Sprintf("%s is not a directory", dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return "it is a directory"
	}
	if syscall.Access(dir, 2 /* W_OK */) != nil {
		return fmt.Sprintf("the directory %s is not writable (SQLite makes the file, and -wal and -shm files, in it)", dir)
	}
	return "it cannot be opened or created: check the permissions of the file and its directory"
}

// checkWritable commits a write that changes nothing but still reaches the
// disk (a page of the write-ahead log), so that a read-only file or
// directory, or a full disk, is found at start rather than by the first
// request.
func (d *DB) checkWritable(ctx context.Context) error {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write check: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE schema_migrations SET applied_at = applied_at
		WHERE version = (SELECT MAX(version) FROM schema_migrations)`); err != nil {
		return fmt.Errorf("write check: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write check: %w", err)
	}
	return nil
}

// unavailable marks SQLite's busy and locked errors (another process held
// a lock past the busy timeout) as broker.ErrUnavailable, and its errors
// of a full disk as broker.ErrNoSpace, keeping the cause for the log.
func unavailable(err error) error {
	if err == nil || errors.Is(err, broker.ErrUnavailable) || errors.Is(err, broker.ErrNoSpace) {
		return err
	}
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) {
		return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
	}
	if isNoSpace(err) {
		return fmt.Errorf("%w: %w", broker.ErrNoSpace, err)
	}
	return err
}

// isNoSpace reports whether err is SQLite's error of a full disk: SQLITE_FULL,
// or an I/O error whose cause is no space left, a quota or a file size
// limit (SQLite says SQLITE_IOERR_WRITE for EFBIG, SQLITE_IOERR_SHMSIZE
// when the -shm file cannot grow).
func isNoSpace(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.SystemErrno {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return true
	}
	return se.Code == sqlite3.ErrFull
}

// isBusy reports whether err is SQLite's busy or locked error, or
// broker.ErrUnavailable.
func isBusy(err error) bool { return errors.Is(unavailable(err), broker.ErrUnavailable) }

// Close closes both pools.
func (d *DB) Close() error {
	d.wmu.Lock()
	if d.isClosed {
		d.wmu.Unlock()
		return nil
	}
	d.isClosed = true
	close(d.stop)
	d.wmu.Unlock()
	<-d.stopped
	d.foldAtClose()
	if d.ckptDone != nil {
		<-d.ckptDone
	}
	d.raw.close()
	err := errors.Join(d.wconn.Close(), d.read.Close(), d.write.Close())
	if d.wal != nil {
		d.wal.free() // its connection is closed: SQLite no longer calls the hook
	}
	if d.lock != nil {
		// Last: the lock is held until SQLite has let go of the file.
		err = errors.Join(err, d.lock.Close())
	}
	return err
}

// foldIdle brings the kept counts up to date when writes have stopped
// with some left to bring (a commit does it at most once a second, so
// the last second's would wait for the next write): a look then counts no
// traffic at all. It writes only when nothing else is.
func (d *DB) foldIdle() {
	d.wmu.Lock()
	// With busy false, no one is writing: the maps hold still.
	if d.busy || d.isClosed || len(d.waiting)+len(d.bulk) > 0 || len(d.unfolded)+len(d.unfoldedConsumers) == 0 || time.Since(d.foldedAt) < d.foldEvery {
		d.wmu.Unlock()
		return
	}
	d.busy = true
	d.changed.Broadcast()
	d.wmu.Unlock()
	done := make(chan error, 1)
	d.commit([]writeRequest{{ctx: context.Background(), fn: func(broker.Tx) error { return nil }, done: done}})
	if err := <-done; err != nil {
		d.log.Warn("bring the counts up to date", "err", err)
	}
	d.release(true)
}

// foldAtClose brings the kept counts up to date one last time, so that
// after a clean restart no look counts the last second's traffic again.
// Nothing else writes any more.
func (d *DB) foldAtClose() {
	if len(d.unfolded)+len(d.unfoldedConsumers) == 0 {
		return
	}
	d.foldedAt = time.Time{}
	done := make(chan error, 1)
	d.commit([]writeRequest{{ctx: context.Background(), fn: func(broker.Tx) error { return nil }, done: done}})
	if err := <-done; err != nil {
		d.log.Warn("bring the counts up to date at close", "err", err)
	}
}

// Ping checks that the database answers a query.
func (d *DB) Ping(ctx context.Context) error {
	var one int
	return d.read.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// spaceProbeBytes is what Health writes to see whether the disk has room
// again: as much as a few pushes, so that one small write squeezed into
// the last free page does not pass for space come back.
const spaceProbeBytes = 256 << 10

// Health checks that the database answers a query and, once a write has
// failed for want of space, whether it can be written again: it commits
// spaceProbeBytes into the settings and then removes them. It fails with
// broker.ErrNoSpace while that does not commit, and clears the state
// when it does, so that a health check (or a scrape of the metrics) sees
// the space come back without waiting for traffic. Only Health clears
// it: a small write that still fits is no sign of space.
func (d *DB) Health(ctx context.Context) error {
	if err := d.Ping(ctx); err != nil {
		return err
	}
	if !d.full.Load() {
		return nil
	}
	probe := func(stmt string, args ...any) func(broker.Tx) error {
		return func(tx broker.Tx) error {
			st, ok := tx.(*storeTx)
			if !ok {
				return errors.New("health: not a db transaction")
			}
			_, err := st.exec(ctx, stmt, args...)
			return err
		}
	}
	if err := d.Update(ctx, probe(`INSERT INTO settings (key, value) VALUES ('space_probe', printf('%.*c', ?, 'x'))
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, spaceProbeBytes)); err != nil {
		return fmt.Errorf("health: write probe: %w", err)
	}
	if err := d.Update(ctx, probe(`DELETE FROM settings WHERE key = 'space_probe'`)); err != nil {
		return fmt.Errorf("health: remove probe: %w", err)
	}
	if d.full.Swap(false) {
		d.log.Info("writes go on: there is space for the database again")
	}
	return nil
}

// DiskFull reports whether a write failed for want of space, and Health
// has not found space again since.
func (d *DB) DiskFull() bool { return d.full.Load() }

// Path is the database file's path.
func (d *DB) Path() string { return d.path }

// migrationVersion is the number a migration's file name starts with.
func migrationVersion(file string) (int, error) {
	return strconv.Atoi(strings.SplitN(strings.TrimPrefix(file, "migrations/"), "_", 2)[0])
}

// schemaMigrationsSQL makes the table of the migrations applied.
const schemaMigrationsSQL = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`

// migrate applies the embedded migrations not yet recorded, each in its
// own transaction together with its record. A database that a newer
// Lazarus has migrated is refused.
func (d *DB) migrate(ctx context.Context) error {
	if _, err := d.write.ExecContext(ctx, schemaMigrationsSQL); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(files)
	// A database migrated by a newer Lazarus is refused: this one would
	// not keep what the newer migrations added (the ready marks of 0009,
	// say), and could leave messages that no pop would find.
	var newest sql.NullInt64
	if err := d.write.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	known := 0
	if len(files) > 0 {
		known, _ = migrationVersion(files[len(files)-1])
	}
	if newest.Valid && newest.Int64 > int64(known) {
		return fmt.Errorf("migrate: the database has schema version %d, from a newer Lazarus; this one knows up to %d: run that version or a later one", newest.Int64, known)
	}
	applied := false
	for _, f := range files {
		name := strings.TrimPrefix(f, "migrations/")
		version, err := migrationVersion(f)
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a number", name)
		}
		body, err := migrations.ReadFile(f)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		done, err := d.applyMigration(ctx, version, name, string(body))
		if err != nil {
			return err
		}
		applied = applied || done
	}
	if applied {
		// A migration that rewrites a table (0013 copies dead_letters)
		// leaves a write-ahead log about that size, which the background
		// checkpoints (PASSIVE) would copy back but never shrink: give the
		// space back before serving. Nothing else uses the file yet.
		var busy, logPages, done int
		if err := d.write.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &done); err != nil || busy != 0 {
			d.log.Warn("truncate the write-ahead log after migrating", "err", err, "busy", busy != 0)
		}
	}
	return nil
}

func (d *DB) applyMigration(ctx context.Context, version int, name, body string) (bool, error) {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = ?", version).Scan(&n); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if n > 0 {
		return false, nil // applied before
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", version, name, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	return true, nil
}

// ErrClosed is the error of an Update after Close.
var ErrClosed = errors.New("database closed")

// bulkGrace is how long background writes hold back for other writes
// after any write: enough for a caller that was just answered to send its
// next one.
const bulkGrace = time.Millisecond

// bulkMaxWait bounds how long a background write waits for a quiet
// moment: then it goes ahead of the writes that queue up, so that a bulk
// action under steady traffic still moves (a chunk every bulkMaxWait at
// least), and ordinary writes wait at most one chunk.
const bulkMaxWait = 10 * time.Millisecond

// maxGroup caps how many Updates share one transaction.
const maxGroup = 256

type writeRequest struct {
	ctx  context.Context
	fn   func(broker.Tx) error
	done chan error
}

// Update runs fn in a write transaction: all of fn commits or none of it.
//
// There is one writer at a time. When nothing else is being written, the
// caller writes itself, with no hand-over to another goroutine. Updates
// that arrive meanwhile queue up and are committed together by the writer
// goroutine, each inside a savepoint of one transaction (group commit):
// one fsync for many callers, so that synchronous=FULL costs little under
// load. An fn that fails is rolled back to its savepoint and does not
// affect the others; Update returns once its group has committed.
//
// Low-priority writes (broker.LowPriority: bulk replay and delete) run
// alone, only when no other write waits and none ended within bulkGrace.
func (d *DB) Update(ctx context.Context, fn func(broker.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := writeRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	low := broker.IsLowPriority(ctx)
	d.wmu.Lock()
	switch {
	case d.isClosed:
		d.wmu.Unlock()
		return ErrClosed
	case !low && !d.busy && len(d.waiting) == 0 && !d.bulkOverdue() && !d.catchUpDue.Load():
		d.busy = true
		d.changed.Broadcast()
		d.wmu.Unlock()
		d.commit([]writeRequest{req})
		d.release(false)
	case low:
		if len(d.bulk) == 0 {
			d.bulkSince = time.Now()
		}
		d.bulk = append(d.bulk, req)
		d.changed.Broadcast()
		d.wmu.Unlock()
		d.wake()
	default:
		d.waiting = append(d.waiting, req)
		d.changed.Broadcast()
		d.wmu.Unlock()
		d.wake()
	}
	// Once queued, wait for the outcome even if ctx ends: only then is it
	// known whether fn committed (commit skips a request whose ctx ended
	// before its turn).
	err := unavailable(<-req.done)
	if errors.Is(err, broker.ErrNoSpace) && !d.full.Swap(true) {
		d.log.Warn("writes fail: no space left for the database; they go on once space is freed", "err", err)
	}
	return err
}

// bulkOverdue reports whether a background write has waited bulkMaxWait.
// d.wmu is held.
func (d *DB) bulkOverdue() bool {
	return len(d.bulk) > 0 && time.Since(d.bulkSince) >= bulkMaxWait
}

// wake tells the writer goroutine that there is work.
func (d *DB) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// release ends a turn at writing and hands queued work to the writer
// goroutine. Only ordinary writes hold background ones back (bulkGrace):
// a bulk action's chunks follow one another at once when nothing else
// writes.
func (d *DB) release(low bool) {
	d.wmu.Lock()
	d.busy = false
	if !low {
		d.lastWrite = time.Now()
	}
	more := len(d.waiting) > 0 || len(d.bulk) > 0 || d.catchUpDue.Load()
	d.changed.Broadcast()
	d.wmu.Unlock()
	if more {
		d.wake()
	}
}

// writer is the goroutine that commits what queued up while another write
// was under way, in groups, and the low-priority writes.
func (d *DB) writer() {
	defer close(d.stopped)
	var grace *time.Timer
	var graceC <-chan time.Time
	var foldC <-chan time.Time
	if d.foldEvery > 0 {
		t := time.NewTicker(d.foldEvery)
		defer t.Stop()
		foldC = t.C
	}
	for {
		select {
		case <-d.kick:
		case <-graceC:
			graceC = nil
		case <-foldC:
			d.foldIdle()
		case <-d.stop:
			d.drain()
			return
		}
		for {
			d.wmu.Lock()
			if d.busy {
				// A caller is writing; it wakes us when it is done.
				d.wmu.Unlock()
				break
			}
			if d.catchUpDue.Swap(false) {
				d.busy = true
				d.changed.Broadcast()
				d.wmu.Unlock()
				d.catchUp()
				d.release(true)
				continue
			}
			if n := len(d.waiting); n > 0 && !d.bulkOverdue() {
				n = min(n, maxGroup)
				group := append([]writeRequest(nil), d.waiting[:n]...)
				d.waiting = append(d.waiting[:0], d.waiting[n:]...)
				d.busy = true
				d.changed.Broadcast()
				d.wmu.Unlock()
				d.commit(group)
				d.release(false)
				continue
			}
			if len(d.bulk) > 0 {
				wait := bulkGrace - time.Since(d.lastWrite)
				if d.bulkOverdue() {
					wait = 0
				}
				if wait > 0 {
					wait = min(wait, bulkMaxWait-time.Since(d.bulkSince))
					d.wmu.Unlock()
					if grace == nil {
						grace = time.NewTimer(wait)
					} else {
						grace.Reset(wait)
					}
					graceC = grace.C
					break
				}
				r := d.bulk[0]
				d.bulk = append(d.bulk[:0], d.bulk[1:]...)
				d.bulkSince = time.Now()
				d.busy = true
				d.changed.Broadcast()
				d.wmu.Unlock()
				d.commit([]writeRequest{r})
				d.release(true)
				continue
			}
			d.wmu.Unlock()
			break
		}
	}
}

// drain, at Close, waits for the write under way and refuses what is
// queued.
func (d *DB) drain() {
	d.wmu.Lock()
	for d.busy {
		d.changed.Wait()
	}
	queued := append(d.waiting, d.bulk...)
	d.waiting, d.bulk = nil, nil
	d.wmu.Unlock()
	for _, r := range queued {
		r.done <- ErrClosed
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
	err := d.syncFor(group)
	if err == nil {
		err = d.exec("BEGIN IMMEDIATE")
	}
	if err != nil {
		err = fmt.Errorf("begin: %w", err)
		for i := range errs {
			errs[i] = err
		}
		answer()
		if isBusy(err) {
			// The writes that queued up while BEGIN waited out the busy
			// timeout have waited as long as this group: answer them now
			// rather than make each wait out a timeout of its own.
			d.refuseWaiting(err)
		}
		return
	}
	st := &storeTx{conn: d.wconn, raw: d.raw}
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
			errs[i], broken = savepoint(d.exec, func() error { return run(r.fn, st) })
			if broken != nil {
				// The transaction can no longer be trusted: nothing of the
				// group commits.
				d.rollback()
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
		d.rollback()
		answer()
		return
	}
	// What has to fail the group's good writes too: nothing of it commits.
	failAll := func(err error) {
		d.rollback()
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	if err := st.markReady(context.Background()); err != nil {
		failAll(fmt.Errorf("mark consumers ready: %w", err))
		answer()
		return
	}
	folded, broken := d.foldCounts(st)
	if broken != nil {
		failAll(broken)
		answer()
		return
	}
	if err := d.exec("COMMIT"); err != nil {
		// SQLite may leave the transaction open when COMMIT fails.
		failAll(fmt.Errorf("commit: %w", err))
	} else {
		if folded {
			clear(d.unfolded)
			clear(d.unfoldedConsumers)
			d.foldedAt = time.Now()
		}
		if d.ckpt != nil {
			select {
			case d.ckpt <- struct{}{}:
			default:
			}
			d.kickByFrames(d.wal.frames())
		}
	}
	answer()
}

// catchUpFrames is the log's length at which the writer, between two
// transactions, copies back what the background checkpoint could not.
//
// Why: SQLite starts the log over only when a write begins with all of
// it copied back, and a background checkpoint, running beside a writer
// that commits every few tens of microseconds, never ends with all of it
// copied: each finds new frames behind it. Under steady writes the log
// grew to 25,000 frames (100 MB) and stayed long; SQLite places each new
// frame, and finds each page's newest, by walking a hash chain as long as
// that page's frames in the log (a fifth of a pop+ack's instructions).
// The writer's own checkpoint, when the background one has done the bulk
// of the copying, copies only what came since and cannot be overtaken:
// the next write starts the log over.
const catchUpFrames = 2 * checkpointFrames

// catchUpResidual is the most frames a catch-up copies and syncs beyond
// what the background checkpoint did.
const catchUpResidual = 256

// catchUp checkpoints on the writer's connection, outside any
// transaction, in the writer goroutine between two groups (never in a
// caller's Update: the caller whose commit made it due has its answer):
// the writes queued meanwhile wait for the copy of the last frames and its
// two fsyncs. When a reader holds part of the log (the checkpoint could
// not copy it all), the next try waits until the log has grown by
// checkpointFrames more, or started over: a reader that stays would
// otherwise make every commit try again in vain.
func (d *DB) catchUp() {
	d.catchUps++
	if d.catchUpHook != nil {
		d.catchUpHook()
	}
	var busy, log, copied int
	err := d.raw.queryRowScan("PRAGMA wal_checkpoint(PASSIVE)", &busy, &log, &copied)
	if err != nil && !isBusy(err) {
		d.log.Warn("checkpoint", "err", err)
	}
	if err != nil || busy != 0 || copied < log {
		d.catchUpFrom = max(log, d.walLast) + checkpointFrames
	}
}

// foldCounts notes the partitions the transaction pushed to and the
// consumers it wrote and, when the counts were last brought up to date
// foldEvery ago or more, brings those of every partition and consumer
// noted since up to date, just before the commit (migration 0010). The
// counts are made from the rows, so a write rolled back counts nothing,
// and a partition or consumer left unfolded (a crash forgets which) is
// only read a little slower: a read counts what lies past its kept seq.
// The fold has a savepoint of its own: should it fail, the group commits
// without it and the next commit a second later tries again. broken is
// the error that must fail the whole group: the transaction is no longer
// to be trusted.
func (d *DB) foldCounts(st *storeTx) (folded bool, broken error) {
	for id := range st.pushedTo {
		d.unfolded[id] = struct{}{}
	}
	for k := range st.saved {
		d.unfoldedConsumers[k] = struct{}{}
	}
	if len(d.unfolded)+len(d.unfoldedConsumers) == 0 || time.Since(d.foldedAt) < d.foldEvery {
		return false, nil
	}
	err, broken := savepoint(d.exec, func() error { return d.fold(st) })
	if broken != nil {
		return false, fmt.Errorf("count messages: %w", broken)
	}
	if err != nil {
		d.log.Warn("bring the counts of the queue page up to date", "err", err)
		d.foldedAt = time.Now()
		return false, nil
	}
	return true, nil
}

// fold brings the counts of the noted partitions and consumers up to
// date from their rows. It relies on two rules: whatever removes a
// partition's messages lowers, in its own transaction, the counts that
// had counted them (retention's SweepMessages: partitions.messages by
// the removed seqs up to counted_seq, each consumer's passed by those up
// to its passed_seq; removed seqs above them are simply never counted),
// and a consumer's cursor only moves forward (one that moved back is
// counted again from its partition's start; retention moves cursors
// forward only).
func (d *DB) fold(st *storeTx) error {
	ctx := context.Background()
	if len(d.unfolded) > 0 {
		ids := make([]int64, 0, len(d.unfolded))
		for id := range d.unfolded {
			ids = append(ids, id)
		}
		// SET reads the row as it was: both use the old counted_seq.
		if _, err := st.exec(ctx, `UPDATE partitions SET
			messages = messages + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = partitions.id AND m.seq > partitions.counted_seq),
			counted_seq = COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = partitions.id), counted_seq)
			WHERE id IN (SELECT value FROM json_each(?))`, intsJSON(ids)); err != nil {
			return err
		}
	}
	if len(d.unfoldedConsumers) == 0 {
		return nil
	}
	keys := make([][2]int64, 0, len(d.unfoldedConsumers))
	for k := range d.unfoldedConsumers {
		keys = append(keys, k)
	}
	list, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	_, err = st.exec(ctx, `UPDATE consumers SET
		passed = CASE WHEN consumers.cursor > consumers.passed_seq
			THEN passed + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq > consumers.passed_seq AND m.seq <= consumers.cursor)
			ELSE (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq <= consumers.cursor) END,
		passed_seq = cursor
		FROM json_each(?) j WHERE consumers.partition_id = j.value ->> 0 AND consumers.group_id = j.value ->> 1 AND consumers.cursor <> consumers.passed_seq`, string(list))
	return err
}

// syncFor sets how hard the group's commit waits for the disk. Under
// synchronous=FULL, a group of ephemeral writes only (a pop's lease)
// commits as under NORMAL: in WAL mode that is consistent after a power
// cut, it may only lose the group, and the next commit that waits for
// the disk makes it durable as well (the log is written in order). A
// group with any other write gets FULL back before it begins.
func (d *DB) syncFor(group []writeRequest) error {
	if d.sync != SyncFull {
		return nil
	}
	relax := true
	for _, r := range group {
		relax = relax && broker.IsEphemeral(r.ctx)
	}
	if relax == d.relaxed {
		return nil
	}
	if relax {
		// Should NORMAL not take, the group commits under FULL: slower,
		// never less safe.
		if err := d.exec("PRAGMA synchronous=NORMAL"); err != nil {
			d.log.Warn("synchronous=NORMAL for a lease", "err", err)
			return nil
		}
		d.relaxed = true
		return nil
	}
	if err := d.exec("PRAGMA synchronous=FULL"); err != nil {
		return fmt.Errorf("synchronous: %w", err)
	}
	d.relaxed = false
	return nil
}

// walSafetyPages is the log size at which the writer checkpoints at
// commit (as SQLite does by default at 1000) when the background
// checkpointer has fallen behind.
const walSafetyPages = 8000

// checkpointEvery spaces the background checkpoints: each copies what the
// writes since the last one added to the log...
const checkpointEvery = 50 * time.Millisecond

// ...unless the log has grown by checkpointFrames since: then the next
// one starts at once. A log kept short is cheaper to write (SQLite finds
// each page's newest frame, and places each new one, by walking a hash
// chain as long as that page's frames in the log: 5 % of a pop+ack's CPU
// at 50 ms) and each checkpoint's copy and fsync stay small, which is
// what a producer beside a bulk job or a retention sweep waits for.
const checkpointFrames = 1000

// kickByFrames, after a commit that left the log n frames long, starts
// the next background checkpoint at once when the log has grown by
// checkpointFrames since it last did, and asks for the writer's catch-up
// past catchUpFrames (unless the background checkpoint is running, or a
// reader held the log at the last try and it has not grown enough since).
func (d *DB) kickByFrames(n int) {
	if n < d.walLast { // a checkpoint copied it all and the log started over
		d.walKicked, d.catchUpFrom = 0, 0
		d.bgSynced.Store(0)
	}
	d.walLast = n
	// With a background checkpointer, only the few frames written since
	// its last run are left to the writer: its two fsyncs then sync little
	// (at NORMAL the log is synced at checkpoints only, and syncing a bulk
	// job's 7,000 frames on the writer's path held a producer's push for
	// 40 ms); a bulk job's log waits for the job to end.
	small := d.ckptDone == nil || int64(n)-d.bgSynced.Load() <= catchUpResidual
	if n >= catchUpFrames && n >= d.catchUpFrom && small && !d.checkpointing.Load() {
		d.catchUpDue.Store(true)
	}
	if n-d.walKicked < checkpointFrames {
		return
	}
	d.walKicked = n
	select {
	case d.ckptNow <- struct{}{}:
	default:
	}
}

// checkpointer copies the write-ahead log back into the database after
// writes, on the write pool's other connection, concurrently with the
// writer (a PASSIVE checkpoint never blocks it): the fsync and the copy
// stay off every write's path. Once all of the log is copied and no
// reader needs it, the next write starts the log over.
func (d *DB) checkpointer() {
	defer close(d.ckptDone)
	for {
		select {
		case <-d.ckpt:
		case <-d.ckptNow:
		case <-d.stop:
			return
		}
		d.checkpointing.Store(true)
		var busy, log, copied int
		err := d.write.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &copied)
		if err == nil && busy == 0 {
			d.bgSynced.Store(int64(log)) // a checkpoint syncs the log before it copies
		}
		d.checkpointing.Store(false)
		if err != nil && !isBusy(err) {
			d.log.Warn("checkpoint", "err", err)
		}
		select {
		case <-time.After(checkpointEvery):
		case <-d.ckptNow:
		case <-d.stop:
			return
		}
	}
}

// refuseWaiting answers err to every write waiting to be taken, without
// running it.
func (d *DB) refuseWaiting(err error) {
	d.wmu.Lock()
	queued := d.waiting
	d.waiting = nil
	d.wmu.Unlock()
	for _, r := range queued {
		r.done <- err
	}
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

// exec runs a statement of the writer's own (BEGIN, COMMIT, savepoints)
// on its connection, kept prepared: parsing them took a tenth of a
// one-message transaction.
func (d *DB) exec(stmt string) error {
	_, err := d.raw.exec(stmt, nil)
	return err
}

// rollback ends the writer's transaction, if SQLite has not already.
func (d *DB) rollback() {
	if d.wconn.Raw(func(c any) error {
		if sc, ok := c.(*sqlite3.SQLiteConn); ok && sc.AutoCommit() {
			return errNoTx
		}
		return nil
	}) == nil {
		_ = d.exec("ROLLBACK")
	}
}

var errNoTx = errors.New("no transaction")

// savepoint runs fn inside a savepoint, rolling back to it when fn fails.
// broken is set when the savepoint itself could not be handled.
func savepoint(exec func(string) error, fn func() error) (err, broken error) {
	if err := exec("SAVEPOINT w"); err != nil {
		return fmt.Errorf("savepoint: %w", err), nil
	}
	if err := fn(); err != nil {
		if rerr := exec("ROLLBACK TO w"); rerr != nil {
			return err, fmt.Errorf("rollback to savepoint: %w", rerr)
		}
		if rerr := exec("RELEASE w"); rerr != nil {
			return err, fmt.Errorf("release savepoint: %w", rerr)
		}
		return err, nil
	}
	if err := exec("RELEASE w"); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return nil, nil
}

// View runs fn in a read transaction on one snapshot.
func (d *DB) View(ctx context.Context, fn func(broker.Tx) error) error {
	// A connection of the read pool, its transaction begun and ended by
	// hand: on a database/sql transaction, every query would start a
	// goroutine to watch the transaction's context. A read is bounded
	// work; it is not cancelled halfway.
	conn, err := d.read.Conn(ctx)
	if err != nil {
		return unavailable(fmt.Errorf("begin: %w", err))
	}
	defer conn.Close()
	bg := context.Background()
	if _, err := conn.ExecContext(bg, "BEGIN"); err != nil {
		return unavailable(fmt.Errorf("begin: %w", err))
	}
	defer func() {
		if _, err := conn.ExecContext(bg, "ROLLBACK"); err != nil {
			// A connection left inside its transaction would serve an old
			// snapshot to the next reader: the pool drops it instead.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	return unavailable(fn(&storeTx{conn: conn}))
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
