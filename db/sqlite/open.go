package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	sqlite3 "github.com/mattn/go-sqlite3" // the driver, and its error codes
)

// DefaultBusyTimeout is how long a statement waits for a lock that
// another process holds (a backup, the sqlite3 shell) before it gives up
// with broker.ErrUnavailable. Lazarus itself never waits for its own
// locks: it has one writer, and readers in WAL mode do not block it.
const DefaultBusyTimeout = 5 * time.Second

// Sync is SQLite's synchronous setting: the durability a commit waits
// for.
type Sync string

// Durability modes. In WAL mode both survive a crash of the process (a
// commit is in the operating system's hands before it is answered); FULL
// also survives a power cut or an OS crash, at the cost of an fsync on
// every commit.
const (
	SyncFull   Sync = "FULL"
	SyncNormal Sync = "NORMAL"
)

// Options are the settings of OpenWith; the zero value of each field
// picks its default.
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
	// CheckpointEvery spaces the background checkpoints of AutoCheckpoint
	// 0 (default checkpointEvery, 50 ms; a log grown by checkpointFrames
	// starts one at once). Negative: only by the log's growth, for
	// measurements whose counts must not depend on their speed (bench's
	// L1 under callgrind runs some 50 times slower than natively, where
	// under load the frames, not the timer, start the checkpoints).
	CheckpointEvery time.Duration
	// Logger receives what goes wrong in the background (checkpoints);
	// default slog.Default().
	Logger *slog.Logger
	// FoldEvery is how often, at most, the writer brings the counts kept
	// for the queue page up to date inside a commit (migration 0010).
	// Default 1 s; negative: at every commit, for tests.
	FoldEvery time.Duration
	// Exclusive holds a lock on the database (a flock on <path>.lock,
	// lock.go) for as long as the Store is open, and fails OpenWith with
	// ErrInUse when another exclusive Store holds it: a server's
	// long-polls are woken by its own pushes only, so two servers on one
	// file would each miss the other's. Tools that write beside a running
	// server (lazarus user add) leave it off.
	Exclusive bool
	// KeepAutoVacuum, for measurements only (bench's G4), leaves SQLite's
	// auto_vacuum as the file has it: a new database is made without it
	// and an older one is not converted (space.go); free pages are then
	// reused but never given back.
	KeepAutoVacuum bool
}

// Open opens (creating if need be) the SQLite database at path and
// brings its schema up to date.
func Open(ctx context.Context, path string, sync Sync) (*Store, error) {
	return OpenWith(ctx, path, Options{Sync: sync})
}

// OpenWith is Open with options. It fails, rather than return a database
// that only reads, when the file cannot be written (read-only file or
// directory, disk full): it commits one small write before it returns.
// Its errors say the usual causes in plain words, for the person starting
// the server.
func OpenWith(ctx context.Context, path string, o Options) (*Store, error) {
	return openWith(ctx, path, o, knobs{})
}

// knobs are openWith's settings for tests: onlyCatchUp starts no
// background checkpointer (the writer's catch-up alone copies the log
// back, deterministically); manualIndexer starts no indexer (search.go:
// the test applies the log and merges the search file itself); linger
// and tick, when not 0, are the indexer's in place of searchLinger and
// searchTick.
type knobs struct {
	onlyCatchUp, manualIndexer bool
	linger, tick               time.Duration
}

// openWith is OpenWith with k.
func openWith(ctx context.Context, path string, o Options, k knobs) (*Store, error) {
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
	d, err := open(ctx, path, o, k)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		var dmg *searchDamaged
		if errors.As(err, &dmg) {
			return nil, err // the search file's, not the database's
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
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 && o.Exclusive {
		d.log.Warn("the database file may be read by other users of this machine (its -wal and -shm files take its permissions): make it the service user's alone",
			"db", path, "mode", fmt.Sprintf("%#o", st.Mode().Perm()), "fix", "chmod 600 "+path+" "+path+"-wal "+path+"-shm "+path+lockSuffix+" "+searchPath(path)+" "+searchPath(path)+"-wal "+searchPath(path)+"-shm")
	}
	return d, nil
}

// connCacheKiB is the cache of pages each connection keeps (KiB: 32 MB);
// readOnceCacheKiB the smaller one of a read of pages read once
// (dialect.ReadOnce: an export).
const (
	connCacheKiB     = 32000
	readOnceCacheKiB = 2000
)

// throughSmallCache runs fn with the page cache of schema ("main." or ""
// for the connection's own) at readOnceCacheKiB, and at connCacheKiB
// again after, also when ctx ended (the connection is kept): lowering
// the size drops the pages cached beyond it, so pages fn touches once
// never fill more than the small cache. exec runs a statement on the
// connection.
func throughSmallCache(ctx context.Context, exec func(context.Context, string) error, schema string, fn func() error) error {
	if err := exec(ctx, "PRAGMA "+schema+"cache_size = -"+strconv.Itoa(readOnceCacheKiB)); err != nil {
		return err
	}
	err := fn()
	return errors.Join(err, exec(context.WithoutCancel(ctx), "PRAGMA "+schema+"cache_size = -"+strconv.Itoa(connCacheKiB)))
}

// readConns is the size of the pool of reading connections (View's).
const readConns = 8

// ReadStmtCache is how many statements each reading connection keeps
// prepared (go-sqlite3's _stmt_cache_size); the writer keeps up to
// maxStatements of its own (rawConn).
const ReadStmtCache = 128

func open(ctx context.Context, path string, o Options, k knobs) (*Store, error) {
	// Pragmas in the DSN so that every pooled connection gets them.
	params := url.Values{}
	params.Set("_journal_mode", "WAL")
	params.Set("_synchronous", string(o.Sync))
	params.Set("_busy_timeout", strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10))
	params.Set("_foreign_keys", "off")
	params.Set("_cache_size", "-"+strconv.Itoa(connCacheKiB))
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
	createPrivate(path)
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	for attempt := 0; ; attempt++ {
		// The search file first: every connection of the store attaches it.
		search, err := openSearchFile(ctx, path, o, log)
		var dmg *searchDamaged
		if errors.As(err, &dmg) {
			return nil, err // a tool's, beside the server: said as it is
		}
		if err != nil {
			// The store's own file's error says best why a file or
			// directory cannot be written, when that is why.
			if werr := probeWritable(ctx, path, wparams); werr != nil {
				return nil, werr
			}
			return nil, err
		}
		d, err := openStore(ctx, path, o, k, search, log, params, wparams)
		if err == nil {
			return d, nil
		}
		// Damage of the search file found past its first pages, as the
		// store checked or rebuilt it (prepare), and confirmed by the
		// search file's own check (not the store's file's): set aside
		// and built anew by a second try, by the server only.
		again := attempt == 0 && o.Exclusive && search.damage(ctx, err, true)
		search.close()
		if !again {
			return nil, err
		}
	}
}

// openStore is open once the search file is open (search nil: none, to
// find why the store's file cannot be opened).
func openStore(ctx context.Context, path string, o Options, k knobs, search *searchIndex, log *slog.Logger, params, wparams url.Values) (*Store, error) {
	if !o.KeepAutoVacuum {
		if err := createGivingSpaceBack(ctx, path, wparams); err != nil {
			return nil, err
		}
	}
	write, err := sql.Open(DriverName, "file:"+path+"?"+wparams.Encode())
	if err != nil {
		return nil, err
	}
	// Writes run one at a time, on one of two connections held for them
	// (Store.main, Store.bg); the third serves migrations at start,
	// background checkpoints and tools.
	write.SetMaxOpenConns(3)
	write.SetMaxIdleConns(3)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, err
	}
	params.Set("_query_only", "true")
	// Each reading connection keeps its statements prepared (go-sqlite3's
	// cache), as View runs them on the connection directly.
	params.Set("_stmt_cache_size", strconv.Itoa(ReadStmtCache))
	read, err := sql.Open(DriverName, "file:"+path+"?"+params.Encode())
	if err != nil {
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	d := &Store{write: write, read: read, path: path, sync: o.Sync, search: search, lateFor: lateFor, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	d.changed = sync.NewCond(&d.wmu)
	d.log = log
	d.folds = sqlcore.NewFolds(o.FoldEvery, d.log)
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
	if err := search.checkAttached(ctx, write, read); err != nil {
		errors.Join(read.Close(), write.Close())
		return nil, err
	}
	if err := search.prepare(ctx); err != nil {
		errors.Join(read.Close(), write.Close())
		return nil, err
	}
	if o.AutoCheckpoint == 0 {
		d.ckpt, d.ckptNow = make(chan struct{}, 1), make(chan struct{}, 1)
		d.ckptEvery = cmp.Or(o.CheckpointEvery, checkpointEvery)
	}
	unopened := func(err error) (*Store, error) {
		errors.Join(d.main.close(), d.bg.close(), read.Close(), write.Close())
		d.main.free() // the pool has closed their connections
		d.bg.free()
		return nil, err
	}
	for _, l := range []*lane{&d.main, &d.bg} {
		if err = d.openLane(ctx, l, o); err != nil {
			return unopened(err)
		}
	}
	// The ordinary writes never read the search file (lane).
	if search != nil {
		if _, err := d.main.conn.ExecContext(ctx, `DETACH DATABASE search`); err != nil {
			return unopened(fmt.Errorf("search file: detach it from the writer: %w", err))
		}
	}
	d.cur = &d.main
	go d.writer()
	if search != nil && !k.manualIndexer {
		search.linger, search.tick = cmp.Or(k.linger, searchLinger), cmp.Or(k.tick, searchTick)
		search.start()
	}
	if d.ckpt != nil && !k.onlyCatchUp {
		d.ckptDone = make(chan struct{})
		go d.checkpointer()
	}
	return d, nil
}

// createPrivate makes the database file, when it is not there yet, for
// its owner alone (0600): SQLite would make it 0644 (less the umask),
// and it gives the -wal and -shm files beside it the database file's
// own permissions. Whatever fails here, SQLite's open says better.
func createPrivate(path string) {
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	}
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

// probeWritable opens the store's file alone (go-sqlite3's own driver:
// no search file attached) and commits checkWritable's write, for the
// error that says why the file cannot be written; nil when it can, or
// when the file has no schema yet to write to.
func probeWritable(ctx context.Context, path string, wparams url.Values) error {
	db, err := sql.Open("sqlite3", "file:"+path+"?"+wparams.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'schema_migrations'`).Scan(&tables); err != nil {
		return err
	}
	if tables == 0 {
		return nil
	}
	return writeCheck(ctx, db)
}

// checkWritable commits a write that changes nothing but still reaches the
// disk (a page of the write-ahead log), so that a read-only file or
// directory, or a full disk, is found at start rather than by the first
// request.
func (d *Store) checkWritable(ctx context.Context) error { return writeCheck(ctx, d.write) }

// writeCheck is checkWritable on db.
func writeCheck(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
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

// Close closes both pools.
func (d *Store) Close() error {
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
	// The last connection of a file to close checkpoints its log and
	// removes it, unless it has the file read-only. The store's
	// connections have the search file attached read-only, the indexer's
	// the store's: the indexer lets go of the store's file first, and
	// closes the search file last.
	d.search.halt()
	d.search.detachStore()
	err := errors.Join(d.main.close(), d.bg.close(), d.read.Close(), d.write.Close(), d.search.close())
	d.main.free() // the pool has closed their connections
	d.bg.free()
	if d.lock != nil {
		// Last: the lock is held until SQLite has let go of the file.
		err = errors.Join(err, d.lock.Close())
	}
	return err
}

// openLane takes a connection of the write pool for writes to run on,
// held until Close: its log hook (the background checkpointer's, or
// SQLite's own at o.AutoCheckpoint) and its statements kept prepared.
func (d *Store) openLane(ctx context.Context, l *lane, o Options) error {
	conn, err := d.write.Conn(ctx)
	if err != nil {
		return err
	}
	l.conn = conn
	if o.AutoCheckpoint == 0 {
		err = conn.Raw(func(c any) error {
			var err error
			l.wal, err = watchWAL(c.(*sqlite3.SQLiteConn), walSafetyPages)
			return err
		})
	} else {
		_, err = conn.ExecContext(ctx, fmt.Sprintf("PRAGMA wal_autocheckpoint=%d", max(o.AutoCheckpoint, 0)))
	}
	if err == nil {
		l.raw, err = newRawConn(ctx, conn)
	}
	if err != nil {
		return errors.Join(err, l.close())
	}
	return nil
}

// close closes the lane's statements and gives its connection back to
// the write pool, which closes it as the pool closes; its log hook is
// freed after that (free). A lane not opened has nothing.
func (l *lane) close() error {
	if l.conn == nil {
		return nil
	}
	if l.raw != nil {
		l.raw.close()
	}
	err := l.conn.Close()
	l.conn, l.raw = nil, nil
	return err
}

// free releases the lane's log hook, once the write pool is closed (and
// with it the lane's connection: SQLite no longer calls the hook).
func (l *lane) free() {
	if l.wal != nil {
		l.wal.free()
		l.wal = nil
	}
}
