package sqlcore

import (
	"context"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Dialect is what Tx leaves to its store: the few methods whose SQL
// or whose way of doing differs between SQLite (sqlite.dialect) and
// PostgreSQL (postgres.dialect). Every statement of Tx itself is written
// once, in SQLite's dialect, and reaches the database through the
// transaction's executor.
type Dialect interface {
	// Text is an error text or fingerprint as the store holds it
	// (PostgreSQL: postgres.text; SQLite keeps every byte).
	Text(s string) string
	// HoldsNone reports whether the store can hold no text s, so that a
	// search for it finds nothing.
	HoldsNone(s string) bool

	// InsertMessages is broker.Tx.InsertMessages.
	InsertMessages(ctx context.Context, t *Tx, ms []*broker.Message) ([]bool, error)
	// PushCopies inserts the copies listed in temp.copies_in with
	// InsertCopiesSQL (its one parameter the copies' time), fills in cs
	// and empties temp.copies_in.
	PushCopies(ctx context.Context, t *Tx, cs []broker.Copy, now time.Time) error
	// ExpectOutcomes is broker.Tx.ExpectReplayOutcomes over the pairs
	// as a JSON array.
	ExpectOutcomes(ctx context.Context, t *Tx, jobID int64, list string) error
	// ImportSeq draws a new seq for an imported dead letter
	// (broker.ArchiveTx.SeqForImport).
	ImportSeq(ctx context.Context, t *Tx, now time.Time) (int64, error)
	// KeepSeqFloor keeps seqs growing past seq once the newest messages
	// are gone; newestSeq is the seq it must be kept above, read before
	// they go (0: the store needs none).
	KeepSeqFloor(ctx context.Context, t *Tx, seq, createdAt int64) error
	NewestSeq(ctx context.Context, t *Tx) (int64, error)

	// IndexDeadLetter adds a dead letter just inserted to the full-text
	// indexes; PayloadIndexedInPart is broker.SearchTx's.
	IndexDeadLetter(ctx context.Context, t *Tx, d *broker.DeadLetter) error
	// FileDeadLetters and InsertAudits are broker.Tx's (FileEach and
	// InsertEachAudit do them a row at a time).
	FileDeadLetters(ctx context.Context, t *Tx, ds []*broker.DeadLetter) ([]bool, error)
	InsertAudits(ctx context.Context, t *Tx, as []broker.AuditEntry) error
	PayloadIndexedInPart(payload []byte) bool
	// UnindexDeadLetters removes the dead letters ids (a JSON array,
	// their rows still there) from the full-text indexes, and
	// UnindexQueue a queue's (sqlcore.Tx's unindexDeadLetters and
	// unindexQueue).
	UnindexDeadLetters(ctx context.Context, t *Tx, ids string) error
	UnindexQueue(ctx context.Context, t *Tx, queueID int64) error
	// AwaitTextIndex returns once the full-text indexes hold every
	// change of the dead letters committed before it was called, for a
	// read of them (a store that keeps them in the same transactions as
	// the dead letters returns at once).
	AwaitTextIndex(ctx context.Context, t *Tx) error
	// BlockStmt is the export's statement of a block of dead letters
	// (sqlcore.BlockStmt with the store's head).
	BlockStmt(ph ExportPhase, docids []int64, limit int) Stmt
	// ReadOnce runs fn, a read of many pages that it reads once (a page
	// of an export), so that they do not fill the connection's own cache
	// of pages (SQLite: a small cache for fn, the usual one after it;
	// PostgreSQL keeps none a connection: fn alone).
	ReadOnce(ctx context.Context, t *Tx, fn func() error) error
	// StepSeriesSQL is Series' query of buckets in [?2, ?3) summed by
	// steps of ?4 units, of every group of group_stats of the queue ?1
	// (0: of every queue) at once, from table (one of bucketTables:
	// stats_minute, stats_quarter, stats_hour; "" for another), a
	// constant for each.
	StepSeriesSQL(table string) string

	// Space and GiveBackPages are broker.Tx's Space and GiveBackPages.
	Space(ctx context.Context, t *Tx) (broker.Space, error)
	GiveBackPages(ctx context.Context, t *Tx, pages int) (int64, error)

	// FoldLock returns, of the partitions and consumers a fold is to
	// bring up to date, those it may fold now, and the others as left.
	FoldLock(ctx context.Context, t *Tx, ids []int64, keys [][2]int64) ([]int64, [][2]int64, FoldLeft, error)
}

// Locks is how a write transaction keeps its reads and writes of hot
// rows from those of the writes beside it (broker.Tx: Locks): noLocks
// for a write that runs alone (every write on SQLite, and on PostgreSQL
// every write but those marked broker.UpdateOptions.Concurrent while
// other processes share the database), postgres.rowLocks for the others.
type Locks interface {
	// ForUpdate ends a query of consumers whose rows the write is to
	// hold ("" when it holds none).
	ForUpdate() string
	// LockPartition holds a partition's row before a message is pushed
	// to it, so that its seqs commit in order.
	LockPartition(ctx context.Context, t *Tx, partitionID int64) error
	// ScanWhole reports whether a scan of ready consumers reads all its
	// rows, to lock those due afterwards (LockDue), rather than stop at
	// the count asked for.
	ScanWhole() bool
	// LockDrained returns, of the consumers of group found with nothing
	// past their cursor, those whose ready mark may be cleared.
	LockDrained(ctx context.Context, t *Tx, groupID int64, drained []int64) ([]int64, error)
	// LockDue returns up to want of the consumers found due (in the
	// partitions due, in scan order), as they stand once held.
	LockDue(ctx context.Context, t *Tx, groupID int64, due []broker.Consumer, now time.Time, want int) ([]broker.Consumer, error)
}

// NoLocks are the locks of a write that runs alone: none.
type NoLocks struct{}

func (NoLocks) ForUpdate() string { return "" }

func (NoLocks) LockPartition(context.Context, *Tx, int64) error { return nil }

func (NoLocks) ScanWhole() bool { return false }

func (NoLocks) LockDrained(_ context.Context, _ *Tx, _ int64, drained []int64) ([]int64, error) {
	return drained, nil
}

func (NoLocks) LockDue(_ context.Context, _ *Tx, _ int64, due []broker.Consumer, _ time.Time, want int) ([]broker.Consumer, error) {
	return due[:want], nil
}
