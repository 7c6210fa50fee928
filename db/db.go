// Package db keeps Lazarus's state in SQLite: the schema as numbered
// migrations, connection set-up, and the broker.Store implementation. All
// SQL lives here. How each store keeps the contract of broker.Store and
// broker.Tx is written here, not there: SQLite's in DB.Update (group
// commit, savepoints, BEGIN IMMEDIATE), DB.View (WAL readers,
// interrupts), markReady and foldCounts; PostgreSQL's in pg.go. On
// SQLite, the row ids of queues, partitions, groups, users and audit
// entries are rowids: the highest, once deleted, may be given again;
// those of messages, dead letters and jobs are never given twice
// (AUTOINCREMENT, or the placeholder row that keeps seqs growing).
package db

import (
	"database/sql"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

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

// DB is the SQLite database: one connection that writes, a pool that
// reads. Opened on a PostgreSQL URL, it is the PostgreSQL store instead
// (pg, pg.go), and the SQLite fields are unused.
type DB struct {
	pg *pgStore

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
	bulk      []writeRequest // low-priority writes (broker.UpdateOptions.Background)
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
	// (broker.UpdateOptions.Ephemeral) under FULL. Both belong to whoever is writing.
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

	// leading is set while this process leads the background work (Lead).
	leading atomic.Bool
}

// Path is the database file's path.
func (d *DB) Path() string { return d.path }

// WriteDB is the writing handle, for tools (benchmarks, fixtures) that
// must go around the broker.
func (d *DB) WriteDB() *sql.DB {
	if d.pg != nil {
		return d.pg.db
	}
	return d.write
}

// Postgres reports whether the store is PostgreSQL's.
func (d *DB) Postgres() bool { return d.pg != nil }

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
