// Package sqlite is Lazarus's SQLite store (Store, opened by package db
// on a file path): one writer with group commit (writer.go), a read
// pool, the checkpointer (checkpoint.go), the lock file of an exclusive
// store (lock*.go), the writer's statements run beneath database/sql
// (raw.go) and the schema as numbered embedded migrations
// (migrations/). It runs the broker.Tx both stores share, sqlcore.Tx
// (db/internal/sqlcore), through an executor and a dialect of its own
// (tx.go).
// How it keeps the contract of broker.Store and broker.Tx is written
// here, not in broker: in Store.Update (group commit, savepoints, BEGIN
// IMMEDIATE), Store.View (WAL readers, interrupts), markReady and the
// folds. The row ids of queues, partitions, groups, users and audit
// entries are rowids: the highest, once deleted, may be given again;
// those of messages, dead letters and jobs are never given twice
// (AUTOINCREMENT, or the placeholder row that keeps seqs growing).
package sqlite

import (
	"database/sql"
	"github.com/lazarus-dlq/lazarus/broker"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Store is the SQLite store: one connection that writes, a pool
// that reads.
type Store struct {
	write *sql.DB
	read  *sql.DB
	path  string
	log   *slog.Logger
	// search is the search file and its indexer (search.go).
	search *searchIndex
	// main is the connection the writes run on (whichever goroutine
	// writes), bg the one the background writes run on (bulk jobs,
	// maintenance: broker.UpdateOptions.Background), both held for the
	// life of the DB; the pool's third connection serves migrations, the
	// checkpointer and tools (WriteDB). cur is the one of the write
	// under way (commitGroup), which belongs to whoever is writing.
	//
	// Why two: only bg has the search file attached. A job's chunk may
	// select its dead letters by text, which reads the search file's
	// indexes in the write; an attached file is locked and unlocked by
	// every transaction of its connection, whatever it reads (2 of a
	// one-write transaction's 8 fcntl calls, and 2.4 % of L1's
	// instructions), which the hot writes on main are spared.
	main, bg lane
	cur      *lane

	// Writes (see Update): one at a time, by the caller itself when no
	// other write is under way, else queued and committed in groups by
	// the writer goroutine.
	wmu       sync.Mutex
	changed   *sync.Cond // broadcast when busy, waiting or bulk change
	busy      bool       // a goroutine is writing
	waiting   []writeRequest
	lateFor   time.Duration  // lateFor, or a test's
	bulk      []writeRequest // low-priority writes (broker.UpdateOptions.Background)
	bulkSince time.Time      // since when the first of bulk has waited
	lastWrite time.Time      // when the last ordinary write ended
	isClosed  bool
	kick      chan struct{} // wakes the writer goroutine (buffered, 1)
	ckpt      chan struct{} // wakes the checkpointer (buffered, 1); nil: none
	ckptNow   chan struct{} // wakes it before checkpointEvery is up: the log grew by checkpointFrames
	ckptEvery time.Duration // Options.CheckpointEvery: checkpointEvery, or negative: by the log's growth only
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

	// sync is the durability asked for (each lane says whether it
	// commits relaxed).
	sync Sync

	// folds are the notes of what the next fold brings up to date; they
	// belong to whoever is writing.
	folds *sqlcore.Folds

	// lock is the open lock file of an exclusive DB (Options.Exclusive),
	// nil otherwise.
	lock *os.File

	// full is set when a write failed for want of space, and cleared by
	// Health once a probe of some size commits.
	full atomic.Bool
}

// Path is the database file's path.
func (d *Store) Path() string { return d.path }

// WriteDB is the writing handle, for tools (benchmarks, fixtures) that
// must go around the broker.
func (d *Store) WriteDB() *sql.DB { return d.write }

var _ broker.Store = (*Store)(nil)

// lane is a connection that writes run on (Store.main, Store.bg).
type lane struct {
	conn *sql.Conn
	raw  *rawConn  // conn beneath database/sql, its statements kept prepared
	wal  *walWatch // the log's length after each of its commits (with ckpt)
	// relaxed is set while it commits with synchronous=NORMAL for
	// ephemeral writes (broker.UpdateOptions.Ephemeral) under FULL
	// (syncFor).
	relaxed bool
}
