package db

import (
	"context"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// dialect is what storeTx leaves to its store: the few methods whose SQL
// or whose way of doing differs between SQLite (sqliteDialect) and
// PostgreSQL (pgDialect). Every statement of storeTx itself is written
// once, in SQLite's dialect, and reaches the database through the
// transaction's executor.
type dialect interface {
	// text is an error text or fingerprint as the store holds it
	// (PostgreSQL: pgText; SQLite keeps every byte).
	text(s string) string
	// holdsNone reports whether the store can hold no text s, so that a
	// search for it finds nothing.
	holdsNone(s string) bool
	// param is the n-th parameter (from 1) of a statement written in the
	// store's own dialect (storeTx.execUnprepared).
	param(n int) string

	// insertMessages is broker.Tx.InsertMessages.
	insertMessages(ctx context.Context, t *storeTx, ms []*broker.Message) ([]bool, error)
	// pushCopies inserts the copies listed in temp.copies_in with insert
	// (its one parameter the copies' time), fills in cs and empties
	// temp.copies_in.
	pushCopies(ctx context.Context, t *storeTx, cs []broker.Copy, insert string, now time.Time) error
	// expectOutcomes is broker.Tx.ExpectReplayOutcomes over the pairs
	// as a JSON array.
	expectOutcomes(ctx context.Context, t *storeTx, jobID int64, list string) error
	// importSeq draws a new seq for an imported dead letter
	// (broker.ArchiveTx.SeqForImport).
	importSeq(ctx context.Context, t *storeTx, now time.Time) (int64, error)
	// keepSeqFloor keeps seqs growing past seq once the newest messages
	// are gone; newestSeq is the seq it must be kept above, read before
	// they go (0: the store needs none).
	keepSeqFloor(ctx context.Context, t *storeTx, seq, createdAt int64) error
	newestSeq(ctx context.Context, t *storeTx) (int64, error)

	// indexDeadLetter adds a dead letter just inserted to the full-text
	// indexes; payloadIndexedInPart is broker.SearchTx's.
	indexDeadLetter(ctx context.Context, t *storeTx, d *broker.DeadLetter) error
	payloadIndexedInPart(payload []byte) bool
	// blockQuery is the export's query of a block of dead letters.
	blockQuery(ph exportPhase, docids []int64, limit int) (string, []any)
	// stepSeriesSQL is Series' query of buckets summed by steps of ?5
	// units (u), from table.
	stepSeriesSQL(u, table string) string

	// space and giveBackPages are broker.Tx's Space and GiveBackPages.
	space(ctx context.Context, t *storeTx) (broker.Space, error)
	giveBackPages(ctx context.Context, t *storeTx, pages int) (int64, error)

	// foldLock returns, of the partitions and consumers a fold is to
	// bring up to date, those it may fold now, and the others as left.
	foldLock(ctx context.Context, t *storeTx, ids []int64, keys [][2]int64) ([]int64, [][2]int64, foldLeft, error)
}

// locks is how a write transaction keeps its reads and writes of hot
// rows from those of the writes beside it (broker.Tx: Locks): noLocks
// for a write that runs alone (every write on SQLite, and on PostgreSQL
// every write but those marked broker.UpdateOptions.Concurrent while
// other processes share the database), pgRowLocks for the others.
type locks interface {
	// forUpdate ends a query of consumers whose rows the write is to
	// hold ("" when it holds none).
	forUpdate() string
	// lockPartition holds a partition's row before a message is pushed
	// to it, so that its seqs commit in order.
	lockPartition(ctx context.Context, t *storeTx, partitionID int64) error
	// scanWhole reports whether a scan of ready consumers reads all its
	// rows, to lock those due afterwards (lockDue), rather than stop at
	// the count asked for.
	scanWhole() bool
	// lockDrained returns, of the consumers of group found with nothing
	// past their cursor, those whose ready mark may be cleared.
	lockDrained(ctx context.Context, t *storeTx, groupID int64, drained []int64) ([]int64, error)
	// lockDue returns up to want of the consumers found due (in the
	// partitions due, in scan order), as they stand once held.
	lockDue(ctx context.Context, t *storeTx, groupID int64, due []broker.Consumer, now time.Time, want int) ([]broker.Consumer, error)
}

// noLocks are the locks of a write that runs alone: none.
type noLocks struct{}

func (noLocks) forUpdate() string { return "" }

func (noLocks) lockPartition(context.Context, *storeTx, int64) error { return nil }

func (noLocks) scanWhole() bool { return false }

func (noLocks) lockDrained(_ context.Context, _ *storeTx, _ int64, drained []int64) ([]int64, error) {
	return drained, nil
}

func (noLocks) lockDue(_ context.Context, _ *storeTx, _ int64, due []broker.Consumer, _ time.Time, want int) ([]broker.Consumer, error) {
	return due[:want], nil
}
