package broker

import (
	"context"
	"time"
)

// Store keeps the broker's state. Package db implements it on SQLite.
type Store interface {
	// Update runs fn in one write transaction: all of it commits or none.
	// Updates are serialised: there is one writer.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction that sees one snapshot.
	View(ctx context.Context, fn func(Tx) error) error
}

type lowPriorityKey struct{}

// LowPriority marks a context's writes as background work (bulk replay
// and delete): the store runs them when no other write is waiting, and
// alone, so that producers and workers are not held up by them.
func LowPriority(ctx context.Context) context.Context {
	return context.WithValue(ctx, lowPriorityKey{}, true)
}

// IsLowPriority reports whether ctx was marked by LowPriority.
func IsLowPriority(ctx context.Context) bool {
	v, _ := ctx.Value(lowPriorityKey{}).(bool)
	return v
}

type ephemeralKey struct{}

// Ephemeral marks a context's writes as ones a power cut may undo without
// breaking a guarantee: a pop's new lease. Were it lost, the messages
// would be delivered again, as when a lease runs out. With
// synchronous=FULL the store need not wait for the disk to commit them
// (a later commit that does wait makes them durable too); everything
// else a pop may write (a new group or subscription, an autoAck) is not
// ephemeral.
func Ephemeral(ctx context.Context) context.Context {
	return context.WithValue(ctx, ephemeralKey{}, true)
}

// IsEphemeral reports whether ctx was marked by Ephemeral.
func IsEphemeral(ctx context.Context) bool {
	v, _ := ctx.Value(ephemeralKey{}).(bool)
	return v
}

// Tx is what the rules need from storage, inside one transaction. Lookups
// that find nothing return ErrNotFound.
type Tx interface {
	UserTx
	SessionTx
	SearchTx
	GroupTx
	JobTx
	RemovedTx
	MaintainTx
	HistoryTx
	PassTx
	RetentionTx
	ExpiryTx
	SpaceTx
	PartitionSweepTx
	ArchiveTx
	ReplayCapTx
	DemoTx

	QueueByName(ctx context.Context, name string) (Queue, error)
	QueueByID(ctx context.Context, id int64) (Queue, error)
	Queues(ctx context.Context) ([]Queue, error)
	CreateQueue(ctx context.Context, q *Queue) error
	// UpdateQueue writes q's options (those kept without being enforced
	// included), namespace and task to the queue with q's ID.
	UpdateQueue(ctx context.Context, q Queue) error
	// DeleteQueue removes a queue and everything of it: partitions,
	// messages, consumers, dead letters (and their rows of the full-text
	// indexes), counts (its error groups and their hourly counts too).
	DeleteQueue(ctx context.Context, id int64) error

	PartitionByName(ctx context.Context, queueID int64, name string) (Partition, error)
	PartitionByID(ctx context.Context, id int64) (Partition, error)
	PartitionByUUID(ctx context.Context, uuid string) (Partition, error)
	Partitions(ctx context.Context, queueID int64) ([]PartitionInfo, error)
	// PartitionList lists a queue's partitions by name, without counting.
	PartitionList(ctx context.Context, queueID int64) ([]Partition, error)
	// CreatePartition stores p and gives every group subscribed to its
	// queue a consumer starting at its beginning.
	CreatePartition(ctx context.Context, p *Partition) error

	// GroupID returns the id of the named group, creating it when create
	// is set (else ErrNotFound).
	GroupID(ctx context.Context, name string, create bool) (int64, error)
	// GroupName returns the name of the group with id (ErrNotFound).
	GroupName(ctx context.Context, id int64) (string, error)
	// Subscribed reports whether the group has read the queue before.
	Subscribed(ctx context.Context, queueID, groupID int64) (bool, error)
	// Subscribe records the group as a reader of the queue and gives it a
	// consumer in every partition, positioned as start says.
	Subscribe(ctx context.Context, queueID, groupID int64, start Start, now time.Time) error
	// Groups lists the groups that read a queue.
	Groups(ctx context.Context, queueID int64, now time.Time) ([]GroupInfo, error)
	// GroupNames lists the names of the groups that read a queue.
	GroupNames(ctx context.Context, queueID int64) ([]string, error)

	// InsertMessage stores m and sets its Seq. When the partition already
	// has m's transactionId, it stores nothing, fills m with the existing
	// message and returns false.
	InsertMessage(ctx context.Context, m *Message) (bool, error)
	MessageBySeq(ctx context.Context, seq int64) (Message, error)
	MessageByTransaction(ctx context.Context, partitionID int64, txid string) (Message, error)
	// MessageSeq returns the seq of the partition's message with the
	// transactionId txid (ErrNotFound when there is none), from the
	// unique index alone: no message row is read.
	MessageSeq(ctx context.Context, partitionID int64, txid string) (int64, error)
	// MessageRange returns the messages of a partition with after < seq <=
	// last, in seq order, without their payloads.
	MessageRange(ctx context.Context, partitionID, after, last int64) ([]Message, error)
	// MessagesAfter returns up to limit messages of a partition with a
	// sequence above after, in order.
	MessagesAfter(ctx context.Context, partitionID, after int64, limit int) ([]Message, error)

	Consumer(ctx context.Context, partitionID, groupID int64) (Consumer, error)
	// ConsumerByLease reads the consumer whose live or ended lease id is
	// leaseID (not a void lease), by the partition and group the id names
	// (NewLeaseID); ErrNotFound when none holds it.
	ConsumerByLease(ctx context.Context, leaseID string) (Consumer, error)
	SaveConsumer(ctx context.Context, c *Consumer) error
	// ReadyConsumers returns up to limit consumers of the group in the queue
	// that have messages past their cursor, no live lease and no retry
	// delay at now, least recently leased first. The first message past a
	// consumer's cursor must also be due: pushed at least the queue's
	// delayedProcessing before now (the store reads the queue's option); a
	// consumer whose first message is not due yet is skipped and stays
	// marked ready.
	ReadyConsumers(ctx context.Context, queueID, groupID int64, now time.Time, limit int) ([]Consumer, error)
	// NextWake returns the earliest time after now at which a consumer of
	// the group with messages waiting becomes ready (a lease running out, a
	// retry delay ending, its first message past the cursor becoming due
	// under the queue's delayedProcessing); ok is false when there is none.
	// A consumer under a live lease wakes when the lease runs out: its first
	// message was due when it was leased (should the queue's delay have been
	// raised since, that wake is early and finds nothing; the next call,
	// after the lease, names the due time).
	NextWake(ctx context.Context, queueID, groupID int64, now time.Time) (t time.Time, ok bool, err error)

	// InsertDeadLetter stores d and sets its ID; in the same transaction
	// it indexes d's error text, and its message's payload unless another
	// group's dead letter of the message has it indexed (the search's
	// full-text indexes). d.Fingerprint is stored as given (the broker
	// computes it, and counts d into its error group with FileErrorGroup).
	// d.TraceID, its message's traceId, is stored with it for the search
	// by traceId (SearchTx.DeadLettersByTrace).
	InsertDeadLetter(ctx context.Context, d *DeadLetter) error
	// TakeReplayOutcome settles the outcome of a copy in a group when it
	// is still to be counted (ExpectReplayOutcomes): ok succeeded, else
	// failed again, at now; it reports whether it was to be counted, and
	// the job that replayed the copy (0: none). Each is counted once: the
	// row of replay_outcomes is kept, settled (the history and the job's
	// failures read it).
	TakeReplayOutcome(ctx context.Context, copySeq, groupID int64, ok bool, now time.Time) (counted bool, jobID int64, err error)
	// DeadLettersOfMessage returns every group's dead letter of a message.
	DeadLettersOfMessage(ctx context.Context, seq int64) ([]DeadLetter, error)
	DeadLetter(ctx context.Context, id int64) (DeadLetter, error)
	// MaxDeadLetterID returns the highest dead letter row id (0 if none).
	// Row ids only grow: the store never gives a dead letter an id it gave
	// before, even once the rows with the highest ids are gone, and a dead
	// letter committed after this call has a higher id (one writer on
	// SQLite; a store with several writers must keep this too, e.g. by
	// taking the id under the lock the bound is read under).
	MaxDeadLetterID(ctx context.Context) (int64, error)
	// NewestFailure returns when the newest dead letter f selects failed
	// (by failedAt, then row id); ok is false when f selects none.
	NewestFailure(ctx context.Context, f Filter) (at time.Time, ok bool, err error)
	// CountDeadLettersAbove counts the dead letters f selects with a row id
	// above b.ID: filed after b was taken (ids only grow), whenever they
	// failed. Those at or below b.ID that failed after b.FailedAt are not
	// counted: they were there when b was taken. Nor are, with exceptJob
	// set, the dead letters of the copies that job replayed (its own
	// copies that failed again did not arrive from elsewhere).
	CountDeadLettersAbove(ctx context.Context, f Filter, b Bound, exceptJob int64) (int64, error)
	// CountDeadLetterMessages counts the messages of the dead letters f
	// selects: a message dead-lettered by several groups counts once.
	CountDeadLetterMessages(ctx context.Context, f Filter) (int64, error)
	// DeadLetterKeys returns the keys of up to limit dead letters f
	// selects, newest first, without the message's CreatedAt (for
	// deletes).
	DeadLetterKeys(ctx context.Context, f Filter, limit int) ([]DeadLetterKey, error)
	// DeadLetterKeysOf returns the keys of every dead letter (in every
	// group) of the messages seqs, in push order (seq, then row id).
	DeadLetterKeysOf(ctx context.Context, seqs []int64) ([]DeadLetterKey, error)
	// PushCopies pushes, in the order of cs, a copy of each message named
	// (same partition and trace id, created at now; its message's payload,
	// or Payload when set: an edited copy) under its TransactionID,
	// unless the partition has that transactionId already; it sets each
	// CopySeq and CopyCreatedAt (the existing message's when there was
	// one) and Inserted. Each copy inserted is recorded in replays (the
	// message it copies, GroupID: the one group that may read it, 0
	// every group; by.Actor, by.JobID, now; edited when Payload is set),
	// and an edited copy's two payloads in replay_edits.
	PushCopies(ctx context.Context, cs []Copy, now time.Time, by ReplayBy) error
	// ExpectReplayOutcomes notes, for (copy seq, group id) pairs, that a
	// replayed copy's outcome in a group is to be counted (TakeReplayOutcome),
	// for the job jobID (0: a single replay), whose replayed count in
	// job_outcomes goes up by the pairs of each group. A pair noted
	// before is left as it was.
	ExpectReplayOutcomes(ctx context.Context, pairs [][2]int64, jobID int64) error
	// DeleteDeadLetters removes dead letters by row id, with their rows of
	// the full-text indexes (a payload's when no dead letter of its
	// message is left). With keep set (a delete), each is first copied
	// whole into removed_dead_letters, restorable until keep.RestoreUntil
	// (RemovedTx); a replay keeps none (replays records it).
	DeleteDeadLetters(ctx context.Context, ids []int64, keep *Removal) error
	// ListDeadLetters returns a page of the dead letters matching f, newest
	// failure first.
	ListDeadLetters(ctx context.Context, f Filter, p Page) ([]DeadLetter, error)
	// ExportDeadLetters returns a page of an export: the dead letters f
	// selects from after (nil: from the start), at most limit of them,
	// and fewer once their payloads and error texts add up to maxBytes
	// (one at least, unless the page is empty), and where the next page
	// starts (nil: this was the last). A filter with no full-text
	// condition comes newest failure first; one with free text or a
	// field filter's words comes in the order of the full-text index
	// (newest row id, then newest seq: see ExportCursor). A page may be
	// empty and not the last. It reads dead_letters, the full-text
	// indexes and the messages, queues, partitions and groups they join,
	// locks nothing.
	ExportDeadLetters(ctx context.Context, f Filter, after *ExportCursor, limit int, maxBytes int64) ([]DeadLetter, *ExportCursor, error)
	CountDeadLetters(ctx context.Context, f Filter) (int64, error)
	// TextMatches counts, up to max, the entries of a full-text index
	// that match (TextMatch's form): of the error texts of the dead
	// letters, or (payloads) of the payloads of the messages with one.
	// It reads the index only and locks nothing.
	TextMatches(ctx context.Context, match string, payloads bool, max int) (int64, error)
	// DeadLetterPosition returns the position (failedAt, row id) of the
	// n-th (from 1) dead letter f selects strictly older than after (nil:
	// from the newest), newest first, reading the filter's index only
	// (f must have no Text, Fields or Floor); ok is false when f selects
	// fewer. It locks nothing.
	DeadLetterPosition(ctx context.Context, f Filter, after *Cursor, n int) (c Cursor, ok bool, err error)
	// DeadLetterWindow reads the window of f's dead letters strictly below
	// above (nil: from the newest) and at or above floor (nil: to the
	// oldest): how many there are and the range of their ids and seqs
	// (an empty window: MinID > MaxID). f must have no Text, Fields,
	// Floor or Window. It reads the filter's index and the rows' seqs,
	// locks nothing.
	DeadLetterWindow(ctx context.Context, f Filter, above, floor *Cursor) (MatchWindow, error)
	// CountDeadLettersUpTo counts the dead letters f selects, stopping at max.
	CountDeadLettersUpTo(ctx context.Context, f Filter, max int) (int64, error)

	// AddStats adds d to the running totals of a queue and group and to
	// the minute, quarter-hour and hour buckets of at, which also record
	// the depth and the oldest dead letter after the change.
	AddStats(ctx context.Context, queueID, groupID int64, d Stats, at time.Time) error
	// Series returns the buckets of [from, to) with the given step (a
	// whole number of minutes; from a multiple of it), per queue and group,
	// oldest first; queueID 0 means every queue. Each group's last bucket
	// before from comes first, so that its depth is known at the start.
	// Steps that are not whole quarter hours read minute buckets, which
	// are kept MinuteRetention only.
	Series(ctx context.Context, queueID int64, from, to time.Time, step time.Duration) ([]Bucket, error)
	Stats(ctx context.Context, queueID int64) ([]GroupStats, error)

	InsertAudit(ctx context.Context, a *AuditEntry) error
	ListAudit(ctx context.Context, f AuditFilter, p Page) ([]AuditEntry, error)
}

// DeadLetterKey is what a bulk action needs of a dead letter: no payload,
// and of the error only the fingerprint its error group is counted under.
type DeadLetterKey struct {
	ID          int64
	Seq         int64
	QueueID     int64
	PartitionID int64
	GroupID     int64
	CreatedAt   time.Time // the message's
	Fingerprint string    // as stored when it was filed
	Size        int64     // the message's payload in bytes (0 where it was not asked for)
}

// Copy is a replayed copy to push: of message Seq in PartitionID, under
// TransactionID; for GroupID only (ReplayOwnGroup; 0: every group), with
// Payload when it was edited (nil: the message's). PushCopies fills in
// the rest.
type Copy struct {
	Seq           int64
	PartitionID   int64
	TransactionID string
	GroupID       int64
	Payload       []byte
	CopySeq       int64
	CopyCreatedAt time.Time
	Inserted      bool // false: the partition had the copy already
}

// ReplayBy is who replays, and for which job (0: none).
type ReplayBy struct {
	Actor string
	JobID int64
}

// Removal is how dead letters are removed by a delete: by whom, when,
// for which job (0: none), and until when they can be restored.
type Removal struct {
	How          string // RemovedDeleted or RemovedExpired
	At           time.Time
	Actor        string
	JobID        int64
	RestoreUntil time.Time
}

// PartitionInfo is a partition with its size.
type PartitionInfo struct {
	Partition
	Messages int64
}

// GroupInfo is a group reading a queue, with how far behind it is.
type GroupInfo struct {
	ID           int64
	Name         string
	SubscribedAt time.Time
	Lag          int64 // messages pushed but not yet settled by the group
	Leased       int64 // partitions with a live lease
}

// Filter selects dead letters. Zero fields select everything.
type Filter struct {
	QueueID       int64
	GroupID       int64
	PartitionID   int64
	From, To      time.Time // failedAt range, To exclusive
	ErrorContains string
	TransactionID string
	// Fingerprint selects one error group (broker.Fingerprint); it needs
	// QueueID (the groups are a queue's).
	Fingerprint string
	MaxID       int64     // only rows with ID <= MaxID (bulk actions pin their set)
	MaxFailedAt time.Time // only rows that failed at or before it (with MaxID: a Bound)
	// Text is a full-text expression (TextMatch's form): the dead
	// letter's error text or its payload's words hold it.
	Text string
	// Fields are conditions on payload fields, all of which hold.
	Fields []FieldFilter
	// MatchCap: each full-text condition (Text, a field's Words) is met
	// only by its newest MatchCap matches in the index (0: all of them).
	MatchCap int
	// Floor: only rows at or above it (by failedAt, then row id): the
	// window a field filter the index cannot narrow is checked in.
	Floor *Cursor
	// Window, when set, is the window of a search read in order (narrow):
	// only rows strictly below Window.Above (nil: from the newest) and at
	// or above Floor, and each full-text condition is met by the index's
	// matches within the window's ids (error texts) and seqs (payloads),
	// all of them (MatchCap does not apply): complete for the window.
	Window *MatchWindow
	// Cap, for a bulk replay by filter (with its bound): CapBelow only the
	// dead letters below their queue's maxReplays, CapAt only those at
	// it (0: both).
	Cap int
}

// ExportCursor is where an export goes on. A filter with no full-text
// condition is exported newest failure first, from After on (strictly
// older). One with free text or a field filter's words is exported in
// the order of a full-text index, which hands its matches over in docid
// order without sorting them: Phase 0 walks the error texts' index
// (docid = row id, newest first), then, for free text, Phase 1 the
// payloads' (docid = seq, newest first; rows whose error text matched,
// exported in phase 0, left out). The index is read a block of docids
// at a time: Pending are the docids read and not exported yet, newest
// first, Below the lowest read (the next block's are below it; 0: from
// the newest), Skip the sorted ids of the block's dead letters to leave
// out (phase 1). The store reads and writes it; the broker only hands
// it back.
type ExportCursor struct {
	After   *Cursor
	Phase   int
	Below   int64
	Pending []int64
	Skip    []int64
}

// MatchWindow is a search window: its top, how many rows of the other
// filters it holds, and the range of their ids and seqs.
type MatchWindow struct {
	Above          *Cursor
	Rows           int
	MinID, MaxID   int64
	MinSeq, MaxSeq int64
}

// simple reports whether f selects by queue and group only, which the
// maintained counts answer.
func (f Filter) simple() bool {
	return f.QueueID != 0 && f.PartitionID == 0 && f.From.IsZero() && f.To.IsZero() && f.ErrorContains == "" && f.TransactionID == "" && f.Fingerprint == "" && f.MaxID == 0 && f.MaxFailedAt.IsZero() &&
		f.Text == "" && len(f.Fields) == 0 && f.Floor == nil && f.Cap == 0
}

// Page is a keyset or offset page. With After set, rows strictly older than
// After (by failedAt, then id) come; else Offset rows are skipped.
type Page struct {
	Limit  int
	Offset int
	After  *Cursor
}

// Cursor is a keyset position in a newest-first list.
type Cursor struct {
	At time.Time
	ID int64
}

// ErrorCount is the first line of an error text and how many dead letters
// carry it.
type ErrorCount struct {
	Error string
	Count int64
}

// AuditFilter selects audit entries.
type AuditFilter struct {
	Action string
	Actor  string
	Queue  string
	// Except are actions left out, whatever Action says: those the
	// viewer may not see.
	Except []string
	// Stream: AuditStreamPeople (the default: people's actions; an
	// Action alone picks its stream), AuditStreamBroker (the broker's own
	// entries), or AuditStreamAll.
	Stream string
	JobID  int64 // only the entries of this job
}

// Audit streams.
const (
	AuditStreamPeople = ""
	AuditStreamBroker = "broker"
	AuditStreamAll    = "all"
)
