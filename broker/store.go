package broker

import (
	"context"
	"time"
)

// Store keeps the broker's state. Any store must keep the contract
// written here and on Tx (STORAGE.md, "Rules for storage code") and pass
// the broker's tests, the suite of broker/storetest, which each store's
// package runs. What is written here is what a store promises; how a
// store keeps it is its own documentation (package db/sqlite: its
// Store.Update and View; package db/postgres: its store.go, and
// docs/postgres.md).
//
// Update and View may be called from any number of goroutines at once.
// Neither nests: a function given to Update must not call Update (it may
// wait for itself forever), and a View inside it would not see its
// writes.
//
// Two obligations belong to the store, not to the function given to
// Update, and hold for every write transaction whatever it did:
//
//   - The ready mark. Every consumer of a partition the transaction
//     added messages to (InsertMessage returning true, InsertMessages
//     true for a message, PushCopies inserting a copy) is marked ready
//     by its commit, in the same transaction; ReadyConsumers finds only
//     consumers marked ready, so one left unmarked with messages past
//     its cursor would never be served. A store may mark more than those
//     (a function of the transaction that was rolled back alone): a mark
//     with nothing behind it costs one look and is cleared by
//     ReadyConsumers. Subscribe and CreatePartition give their new
//     consumers the mark themselves. Where a store runs several Updates
//     in one transaction, a pop after a push in it need not see the
//     push's messages in a partition whose consumers were unmarked: they
//     are marked by the commit, and the pop's wait is woken by the push.
//   - The kept counts: a partition's count of its messages up to a seq
//     it keeps, and a consumer's count of the messages it passed up to a
//     seq it keeps (never past its cursor), which Partitions, Groups and
//     Subscribe read, adding only what lies past them. Whatever removes
//     messages lowers, in its own transaction, the counts that had
//     counted them (RetentionTx.SweepMessages; DeleteQueue removes what
//     holds them), and a consumer's cursor only moves forward (one moved
//     back is counted again from its partition's start). A store may
//     bring the kept seqs forward when it likes, in any write, and may
//     fail to without failing the write: reads are exact either way,
//     what is not brought forward only costs the next reads a little
//     more counting.
type Store interface {
	// Update runs fn in one write transaction: all of fn's writes commit
	// or none do. The Tx is valid only while fn runs, in fn's goroutine.
	//
	// Writers: an Update not marked Concurrent runs alone: no other
	// write commits between its first statement and its commit, and fn
	// sees every write committed before it began. The broker counts on
	// it (a pop reads the ready consumers and writes one back;
	// subscriptions are checked, then created; dead letter ids grow in
	// commit order because writes that file them run alone, or hold the
	// filing lock: FileDeadLetters). Writes
	// marked Concurrent may run beside each other on a ConcurrentStore,
	// and settle their conflicts by the row locks the methods of Tx take
	// in them (those that say so): a consumer is read under its row's
	// lock, a ready consumer locked by another write is skipped, and a
	// push locks its partitions before it draws their seqs, so that seqs
	// of one partition commit in their order. They never run beside an
	// unmarked write.
	//
	// Several Updates in one transaction: a store may run the fns of
	// Updates that wait together one after another in one transaction.
	// A later fn sees the earlier ones' writes (and, through the scope,
	// what they did to memory). An fn that fails is rolled back alone
	// and its Update returns its error; the others commit, which may run
	// the fns before it a second time. An fn that returned nil still
	// fails when what the whole transaction needs fails (the ready mark,
	// the commit): then nothing of it committed, and each Update returns
	// that error. A panic in fn is turned into an error of its own
	// Update.
	//
	// What fn may do: read and write through its Tx, and compute. It
	// must have no effect outside the transaction: a store may run fn
	// more than once (a store with several writers retries a transaction
	// that failed to serialize; one that runs several Updates in one
	// transaction runs them again when one fails), and a run that
	// returned nil may be rolled back after all (above). What fn learns
	// for memory (stats, cache entries, queues to wake) it gathers in
	// variables it resets at its start, and the caller applies them once
	// Update has returned nil; or it registers them on the transaction's
	// scope (Tx.Scope, TxScope.OnEnd), which the store runs once the
	// transaction has ended, in commit order, before the next write
	// transaction begins and before Update returns: that is how the
	// broker keeps its pending counts and lookup cache in step with the
	// commits (updateStats, DeleteQueue, cacheTx, the partition sweep),
	// and how a later fn of the same transaction sees what an earlier one
	// did to memory before it is applied. Emptying the cache this way
	// reaches this process's cache only; a store that other processes
	// write too tells each of them that its cache may be stale
	// (TxScope.SetForeign). Wake-ups (the Notifier's news of queues and
	// jobs) are sent once Update has returned.
	//
	// Context: an Update whose ctx is done before fn starts runs nothing
	// and returns ctx.Err() (also while it waits its turn); once fn has
	// begun, each of its statements first checks ctx, so fn stops at its
	// next statement with ctx.Err() and its writes roll back (a write is
	// not committed for a caller who has gone); a statement already
	// running is not interrupted. Update returns only once the outcome is
	// known.
	//
	// Options (UpdateOptions): a Background write is written alone,
	// when no other write waits; an Ephemeral one may commit without
	// waiting for the disk; Concurrent ones as above.
	//
	// Errors: fn's own error as it returned it (ErrNotFound, ErrConflict
	// and the like come from fn: the store adds none); ErrUnavailable
	// when the database was held by another process past the store's
	// wait, and ErrNoSpace when the disk is full (nothing of fn
	// committed in either, and the same call may succeed later; the
	// store's own errors are marked so when fn wraps them with %w); the
	// store's closed error after it was closed, also for the writes
	// waiting their turn then (db.ErrClosed); ctx.Err() as above; any
	// other failure to begin or commit, wrapped.
	Update(ctx context.Context, o UpdateOptions, fn func(Tx) error) error
	// View runs fn in a read-only transaction on one snapshot: every read
	// of fn sees the store as of one commit, and nothing committed while
	// fn runs. Views run beside each other and beside writes, and
	// neither waits for the other. fn must only read: a write method
	// fails, and so does ReadyConsumers when it finds ready marks to
	// clear. View never runs fn twice, but the rule of Update holds: no
	// effect that a failed View would leave behind.
	//
	// Context: ctx bounds the wait for the transaction to begin; once fn
	// runs, each statement first checks ctx, and one running when ctx
	// ends is interrupted, so a page's timeout stops its queries; View
	// then returns ctx.Err() (wrapped).
	//
	// Errors: fn's own; ErrUnavailable and ErrNoSpace as for Update;
	// after Close, an error that says the store is closed, not
	// necessarily the one Update returns.
	View(ctx context.Context, fn func(Tx) error) error
}

// UpdateOptions say how a write may be scheduled, as a promise the caller
// makes about it; the zero value is an ordinary write. A store may honour
// any of them or none: each only allows the store something.
type UpdateOptions struct {
	// Background marks bulk and maintenance work (replay and delete
	// jobs, the sweeps of Maintain): the store may write it alone, when
	// no other write waits, so that producers and workers are not held
	// up by it.
	Background bool
	// Ephemeral says a power cut may undo the write without breaking a
	// guarantee: a pop's new lease. Were it lost, the messages would be
	// delivered again, as when a lease runs out. The store need not wait
	// for the disk to commit it (a later commit that does wait makes it
	// durable too). Everything else a pop may write (a new group or
	// subscription, an autoAck) is not ephemeral.
	Ephemeral bool
	// Concurrent says every conflict of the write with another so
	// marked is settled by the row locks the methods of Tx take when
	// the transaction is marked (their comments say which): a push, a
	// pop's lease and an ack that neither files a dead letter nor
	// settles a replayed copy. A store with several writers
	// (ConcurrentStore) may run such writes beside each other; every
	// write not so marked runs alone, after those running have
	// committed and before any other begins, as with one writer. The
	// broker marks a write only for a store that says it has several
	// writers now.
	Concurrent bool
}

// ConcurrentStore is a Store that may run writes marked Concurrent
// beside each other (package db/postgres's store, across the processes
// of one database; db/sqlite's has one writer and is not one).
type ConcurrentStore interface {
	Store
	// ConcurrentWrites reports whether the store runs marked writes
	// beside each other now (it may change at any time: a store whose
	// other processes come and go).
	ConcurrentWrites() bool
}

// Tx is what the rules need from storage, inside one transaction of
// Store.Update or Store.View. It is valid only while that function runs,
// in its goroutine; its reads see its own writes. It is the sum of the
// per-concern interfaces it embeds: a function of the broker that needs
// only some of them takes those (txsets.go names the combinations).
//
// What holds for every method unless its comment says otherwise:
//
//   - Where it may run: a method that writes (its comment says so, or
//     its name does: Insert, Save, Create, Update, Delete, Set, Touch,
//     Mark, Sweep, Push, Take, Add, File, Subscribe...) runs inside
//     Update only; in View it fails. So does ReadyConsumers, which
//     clears stale ready marks. The others run in either.
//   - Not found: a read of one thing by its key (QueueByName, Consumer,
//     DeadLetter...) returns ErrNotFound, wrapped (test it with
//     errors.Is); a list or count that finds nothing returns an empty
//     (nil) slice or map, or 0, never ErrNotFound; an update or delete by
//     key of a row that is not there writes nothing and returns nil
//     (DeleteToken, SaveJob and UpdateExpiryAudit say ErrNotFound).
//   - Conflict: no method returns ErrConflict or ErrDuplicate. A push
//     whose transactionId its partition has already is answered as such
//     (InsertMessage, InsertMessages, PushCopies), even when another
//     write pushes it beside it; a queue, a partition or a group is a
//     get-or-create that cannot race (CreateQueue, CreatePartition,
//     GroupID: STORAGE.md, rule 3). Other names and keys that must be
//     unique (a user's, a subscription) are checked by the broker before
//     it creates them, in writes that run alone (not marked Concurrent),
//     and an insert that breaks a unique constraint anyway fails with
//     the store's own error.
//   - Locks: a write not marked Concurrent runs alone and a View on its
//     snapshot (Store), so neither needs a lock of a method's. In a
//     write marked Concurrent, Consumer, ConsumerByLease,
//     ConsumersBySharedLease, ReadyConsumers and InsertMessage(s) take
//     the row locks they say, held to the commit. No other method takes
//     a lock of its own, and "locks nothing" in a comment means nothing
//     more than that. Where the broker counts on a write running alone
//     for correctness, the method says so.
//   - Context: ctx is given to every method for the store to honour (see
//     Store.Update and View: each statement checks it first; a read
//     running when it ends is interrupted, and a store may stop a
//     running write statement too).
//   - Arguments: a method takes at most three arguments besides ctx; a
//     new one that needs more takes a params struct (SeqForImport takes
//     an ImportSeq). Those with four or five written before the rule
//     keep them.
//   - Times are kept to the millisecond, and read back in UTC; the zero
//     time is kept as 0 and read back as the zero time.
//   - Order: a list comes in the order its comment says, else in no
//     order to count on. Seqs of messages and ids of dead letters and
//     jobs only grow and are never given twice; the seqs of one
//     partition and the ids of dead letters and jobs in commit order
//     (jobs are written only by unmarked writes, alone, and dead
//     letters by those or under FileDeadLetters' filing lock;
//     the seqs of different partitions drawn by writes marked Concurrent
//     may commit out of order, and so may their creation times). Other
//     row ids (queues, partitions, groups, users, audit entries) grow
//     too, but the highest, once deleted, may be given again.
type Tx interface {
	UserTx
	SessionTx
	LoginTx
	SearchTx
	GroupTx
	ErrorGroupStateTx
	ConsumerGroupTx
	MessageListTx
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
	TraceTx
	WindowTx
	MaintenanceTx
	HoldTx
	BreakerTx
	QueueTx
	PartitionTx
	SubscriptionTx
	MessageTx
	ConsumerTx
	DeadLetterTx
	ReplayTx
	StatsTx
	OverviewTx
	AuditTx
	NotifyTx

	// Scope returns the write transaction's TxScope: a new one for each
	// transaction of Update, the same for every function of Updates run
	// in one transaction, ended by the store (TxScope.End) once the
	// transaction has committed or rolled back, and RollbackTo'd for a
	// function rolled back alone. It reads and writes nothing in the
	// store.
	// nil in a View.
	Scope() *TxScope
}

// QueueTx is what the broker needs of queues: the rows of queues, read,
// created, updated and deleted.
type QueueTx interface {
	// QueueByName reads the queue named name, by its unique name
	// (ErrNotFound).
	QueueByName(ctx context.Context, name string) (Queue, error)
	// QueueByID reads the queue id, by the primary key (ErrNotFound).
	QueueByID(ctx context.Context, id int64) (Queue, error)
	// Queues reads every queue, by name (none: empty).
	Queues(ctx context.Context) ([]Queue, error)
	// CreateQueue writes q as a new queue (its options, kept options,
	// namespace, task and CreatedAt) and sets q.ID; it writes queues
	// only. A get-or-create that cannot race (STORAGE.md rule 3: one
	// statement, whatever writes beside it): when the name is taken,
	// by an earlier write or another writer's, q becomes the queue that
	// has it, as QueueByName reads it. The broker reads QueueByName first
	// (and its cache), so the insert runs only for a queue it did not
	// find.
	CreateQueue(ctx context.Context, q *Queue) error
	// UpdateQueue writes q's options (those kept without being enforced
	// included), namespace and task to the queue with q's ID (its name
	// and CreatedAt stay); a queue that is not there: nothing, no error.
	// It writes queues only, by the primary key.
	UpdateQueue(ctx context.Context, q Queue) error
	// DeleteQueue removes a queue and everything of it: partitions,
	// messages, consumers, dead letters (and their rows of the full-text
	// indexes), counts (its error groups and their hourly counts too),
	// and its copies' replays, edits, outcomes and attempts, its removed
	// dead letters' records and settle marks; a job's copies in it still
	// to settle leave the job's count. When it held the newest message,
	// the placeholder row that keeps seqs growing moves above it. A queue
	// that is not there deletes nothing (no error).
	DeleteQueue(ctx context.Context, id int64) error
}

// PartitionTx is what the broker needs of a queue's partitions.
type PartitionTx interface {
	// PartitionByName reads the queue's partition named name, by the
	// unique (queue, name) (ErrNotFound).
	PartitionByName(ctx context.Context, queueID int64, name string) (Partition, error)
	// PartitionByID reads the partition id, by the primary key
	// (ErrNotFound).
	PartitionByID(ctx context.Context, id int64) (Partition, error)
	// PartitionByUUID reads the partition whose UUID is uuid, by its
	// unique index (ErrNotFound).
	PartitionByUUID(ctx context.Context, uuid string) (Partition, error)
	// Partitions lists a queue's partitions by name, each with its
	// number of messages now: the kept count (Store: the kept counts)
	// and those pushed past it, exact in the transaction's snapshot
	// (none: empty).
	Partitions(ctx context.Context, queueID int64) ([]PartitionInfo, error)
	// PartitionList lists a queue's partitions by name, without counting.
	PartitionList(ctx context.Context, queueID int64) ([]Partition, error)
	// CreatePartition stores p (sets p.ID) and gives every group
	// subscribed to its queue a consumer starting at its beginning
	// (cursor 0, marked ready); it reads subscriptions and writes
	// partitions and consumers. A get-or-create that cannot race (ON
	// CONFLICT (queue_id, name) DO NOTHING): when the name is taken, p
	// becomes the partition that has it (its consumers are that
	// partition's already); a UUID taken is the store's unique-constraint
	// error. A subscription made beside it would not reach the new
	// partition: subscriptions are made only by writes that run alone
	// (not marked Concurrent), never beside a push.
	CreatePartition(ctx context.Context, p *Partition) error
}

// SubscriptionTx is what the broker needs of consumer groups and the
// queues they read.
type SubscriptionTx interface {
	// GroupID returns the id of the named group, creating it when create
	// is set (else ErrNotFound). It reads groups by the unique name, then
	// inserts the group unless another writer made it meanwhile, and
	// then reads that one: a get-or-create that cannot race.
	GroupID(ctx context.Context, name string, create bool) (int64, error)
	// GroupName returns the name of the group with id (ErrNotFound).
	GroupName(ctx context.Context, id int64) (string, error)
	// Subscribed reports whether the group has read the queue before (a
	// probe of subscriptions' primary key; never ErrNotFound).
	Subscribed(ctx context.Context, queueID, groupID int64) (bool, error)
	// Subscribe records the group as a reader of the queue (at now) and
	// gives it a consumer in every partition, positioned as start says
	// (from the beginning, from now: past every message, or from a time:
	// past those pushed before it), marked ready when a message lies past
	// its cursor, with its kept count up to the cursor. It writes
	// subscriptions and consumers and reads partitions and messages. A
	// group subscribed already is the store's primary-key error: the
	// broker asks Subscribed first (one writer). Partitions created later
	// get its consumer from CreatePartition.
	Subscribe(ctx context.Context, queueID, groupID int64, start Start, now time.Time) error
	// Groups lists the groups that read a queue, by name, each with its
	// lag (the messages of the queue's partitions past its cursors, from
	// the kept counts and what lies past them) and the partitions it
	// holds a live lease on at now. None: empty.
	Groups(ctx context.Context, queueID int64, now time.Time) ([]GroupInfo, error)
	// GroupNames lists the names of the groups that read a queue.
	GroupNames(ctx context.Context, queueID int64) ([]string, error)
}

// MessageTx is what the broker needs of messages: pushes and reads.
type MessageTx interface {
	// InsertMessage stores m and sets its Seq, above every seq given
	// before, and the transaction marks the partition's consumers ready
	// before it commits (Store: the ready mark). When the partition
	// already has m's transactionId, it stores nothing, fills m with the
	// existing message and returns false (one statement, whatever
	// writes beside it: no race). It writes messages, reads them back
	// by (partition, transactionId) on a duplicate. In a write marked
	// Concurrent it first locks the partition's row and holds it to the
	// commit, so that a pop never reads past a seq that commits later
	// (STORAGE.md, push order): the seqs of one partition commit in the
	// order they were drawn.
	InsertMessage(ctx context.Context, m *Message) (bool, error)
	// InsertMessages is InsertMessage for each of ms, in their order,
	// and says for each whether it was inserted: each stored message's
	// Seq is set, above every seq given before and those of the messages
	// before it in ms; the transaction marks the partitions' consumers
	// ready before it commits and notes the partitions for the kept
	// counts (Store: the ready mark, the kept counts). A message whose
	// partition already has its transactionId, or whose transactionId
	// comes earlier in ms for the same partition, is not stored: it is
	// filled with the existing message, as InsertMessage one after the
	// other would fill it. It writes messages and reads back the
	// duplicates by (partition, transactionId); a store that pays a
	// round trip a statement does it in a statement or two, whatever
	// len(ms). Locks as InsertMessage.
	InsertMessages(ctx context.Context, ms []*Message) ([]bool, error)
	// InsertMessagesLate is InsertMessages for a caller that reads its
	// answer only once Update has returned nil: ms' Seqs and
	// inserted[i] (len(ms)) may be set as late as the transaction's
	// commit, and are not to be read inside it (PostgreSQL sends the
	// insert with the COMMIT: a push in one round trip), each message
	// not inserted filled with the existing one. The partitions'
	// consumers may be marked ready whether or not a message was new.
	InsertMessagesLate(ctx context.Context, ms []*Message, inserted []bool) error
	// MessageBySeq reads the message seq, payload included, by the
	// primary key (ErrNotFound). The broker does not use it today (tests
	// do).
	MessageBySeq(ctx context.Context, seq int64) (Message, error)
	// MessageByTransaction reads the partition's message whose
	// transactionId is txid, payload included, by the unique (partition,
	// transactionId) index (ErrNotFound).
	MessageByTransaction(ctx context.Context, partitionID int64, txid string) (Message, error)
	// MessageSeq returns the seq of the partition's message with the
	// transactionId txid (ErrNotFound when there is none), from the
	// unique index alone: no message row is read.
	MessageSeq(ctx context.Context, partitionID int64, txid string) (int64, error)
	// MessageRange returns the messages of a partition with after < seq <=
	// last, in seq order, without their payloads.
	MessageRange(ctx context.Context, partitionID, after, last int64) ([]Message, error)
	// MessagesAfter returns up to limit messages of a partition with a
	// sequence above after, in seq order, payloads included (none:
	// empty).
	MessagesAfter(ctx context.Context, partitionID, after int64, limit int) ([]Message, error)
}

// ConsumerTx is what the broker needs of consumers, a group's place in a
// partition: leases, cursors and what is ready to be handed out.
type ConsumerTx interface {
	// Consumer reads the group's consumer of a partition: cursor, lease,
	// void lease, retry and acks, by the primary key (ErrNotFound). In a
	// write marked Concurrent it locks the row to the commit (waiting for
	// another write that holds it), so that the row read is the row
	// SaveConsumer writes back; else it locks nothing (one writer).
	Consumer(ctx context.Context, partitionID, groupID int64) (Consumer, error)
	// ConsumerByLease reads the consumer whose live or ended lease id is
	// leaseID (not a void lease), by the partition and group the id names
	// (NewLeaseID); ErrNotFound when none holds it. It locks as Consumer
	// does: in a marked write, the consumer read is locked, and one whose
	// lease another write changed meanwhile is read as it now is.
	ConsumerByLease(ctx context.Context, leaseID string) (Consumer, error)
	// ConsumersBySharedLease reads the consumers whose live or ended lease
	// id is leaseID, a shared one (IsSharedLease: a pop of several
	// partitions), by partition id, through the index of shared lease ids;
	// none: empty. In a write marked Concurrent it locks them as Consumer
	// does, in that order.
	ConsumersBySharedLease(ctx context.Context, leaseID string) ([]Consumer, error)
	// SaveConsumer writes c's cursor, lease, void lease, retry and acks
	// to its row (by partition and group); its ready mark and kept count
	// are the store's (Store). The cursor must not move back (the kept
	// count would count again from the partition's start). A consumer
	// that is not there is not an error: nothing is written, silently.
	SaveConsumer(ctx context.Context, c *Consumer) error
	// ReadyConsumers returns up to limit consumers of the group in the queue
	// that have messages past their cursor, no live lease and no retry
	// delay at now, least recently leased first. The first message past a
	// consumer's cursor must also be due: pushed at least the queue's
	// delayedProcessing before now (the store reads the queue's option); a
	// consumer whose first message is not due yet is skipped and stays
	// marked ready.
	//
	// It reads the ready consumers in that order (the index of those
	// marked ready) and one index probe of messages each, in scans that
	// double in length; it writes: the marked consumers it finds with
	// nothing past their cursor lose their mark, so it runs inside Update
	// only. It looks at ctx between scans. In a write marked
	// Concurrent a consumer it returns or clears is locked to the commit,
	// and one another write holds is skipped, not waited for, so no two
	// pops take the same consumer: those it returns are locked, with a
	// message past the cursor as they stand once locked. A
	// mark is cleared only when its partition is held by no push in
	// flight and a look taken after the lock still finds nothing past the
	// cursor. Else it locks nothing: the broker (limit 1, then
	// SaveConsumer of the one returned) counts on the one writer.
	//
	// busy says that it passed by a ready consumer another write held
	// (only in a write marked Concurrent): that one may still have
	// messages for the group once the other write has ended, with no
	// news to say so, so a pop that waits asks again soon (busyRetry).
	ReadyConsumers(ctx context.Context, queueID, groupID int64, now time.Time, limit int) (cs []Consumer, busy bool, err error)
	// NextWake returns the earliest time after now at which a consumer of
	// the group with messages waiting becomes ready (a lease running out, a
	// retry delay ending, its first message past the cursor becoming due
	// under the queue's delayedProcessing); ok is false when there is none.
	// A consumer under a live lease wakes when the lease runs out: its first
	// message was due when it was leased (should the queue's delay have been
	// raised since, that wake is early and finds nothing; the next call,
	// after the lease, names the due time).
	// It reads queues, the group's ready consumers and one message a
	// consumer; it writes and locks nothing.
	NextWake(ctx context.Context, queueID, groupID int64, now time.Time) (t time.Time, ok bool, err error)
}

// DeadLetterTx is what the broker needs of dead letters: filed, read,
// counted, listed, exported and removed.
type DeadLetterTx interface {
	// InsertDeadLetter stores d and sets its ID, and counts it into its
	// error group (d's queue, group and Fingerprint) in the same
	// transaction: filed, as a new failure (the group's count up one,
	// made at 1 when there is none; first and last failure widened to
	// d.FailedAt; d.Error its sample when that is the newest; one more
	// filed in the hour of d.FailedAt), else as one coming back (a
	// restore, an import: the same without the hourly count). It also
	// indexes d's error text, and its message's payload unless another
	// group's dead letter of the message has it indexed (the search's
	// full-text indexes). d.Fingerprint is stored as given (the broker
	// computes it). d.TraceID, its message's traceId, is stored with it
	// for the search by traceId (SearchTx.DeadLettersByTrace). It writes
	// dead_letters, the search's indexes, error_groups and (filed)
	// error_group_hours (the last two by upserts that cannot race).
	InsertDeadLetter(ctx context.Context, d *DeadLetter, filed bool) error
	// FileDeadLetters files the dead letters of one write's acks, ds,
	// in their order, each as InsertDeadLetter(d, true) files it (the
	// dead letter, its full-text rows, its error group, hour and
	// version), but for one whose message its group has a dead letter
	// of already, which is left as it is: filed[i] says whether ds[i]
	// was filed (and set its ID). It costs a few statements whatever
	// len(ds) on PostgreSQL (two: the payloads to index read, then the
	// rest), the statements InsertDeadLetter would run on SQLite. In a write marked Concurrent
	// it first takes the filing lock, held to the commit: filings beside
	// each other then draw their ids, look at the payload index and
	// write the error groups and the outbox one after the other, so
	// dead letter ids still commit in their order (MaxDeadLetterID), and
	// a write so marked may file; nothing else waits for that lock. It
	// writes what InsertDeadLetter writes.
	FileDeadLetters(ctx context.Context, ds []*DeadLetter) (filed []bool, err error)

	// DeadLettersOfMessage returns every group's dead letter of a
	// message, by row id (by dead_letters' seq; none: empty).
	DeadLettersOfMessage(ctx context.Context, seq int64) ([]DeadLetter, error)
	// DeadLetter reads the dead letter id with its payload (its
	// message's, or its own once retention removed the message) and the
	// names of its queue, partition and group (ErrNotFound).
	DeadLetter(ctx context.Context, id int64) (DeadLetter, error)
	// MaxDeadLetterID returns the highest dead letter row id (0 if none).
	// Row ids only grow: the store never gives a dead letter an id it gave
	// before, even once the rows with the highest ids are gone, and a dead
	// letter committed after this call has a higher id: dead letters are
	// filed by writes not marked Concurrent, which run alone on every
	// store, or by FileDeadLetters under its filing lock, one filing
	// after the other; and a View's snapshot has every one committed
	// before it.
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
	// DeleteDeadLetters removes dead letters by row id, with their rows of
	// the full-text indexes (a payload's when no dead letter of its
	// message is left). With keep set (a delete), each is first copied
	// whole into removed_dead_letters, restorable until keep.RestoreUntil
	// (RemovedTx); a replay keeps none (replays records it).
	DeleteDeadLetters(ctx context.Context, ids []int64, keep *Removal) error
	// ListDeadLetters returns a page of the dead letters matching f, newest
	// failure first (then highest row id), each with its payload and
	// names as DeadLetter reads them (none: empty).
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
	// CountDeadLetters counts every dead letter f selects, reading all
	// of the filter's rows: no bound (the broker answers a queue's, a
	// group's and an error group's count from kept counts, and bounds a
	// search's with CountDeadLettersUpTo; the total of a page filtered
	// otherwise, a bulk action's preview and the replay cap's count come
	// here). It locks nothing.
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
}

// ReplayTx is what the broker needs to replay dead letters: the copies
// pushed and the outcomes counted.
type ReplayTx interface {
	// TakeReplayOutcome settles the outcome of a copy in a group when it
	// is still to be counted (ExpectReplayOutcomes): ok succeeded, else
	// failed again, at now; it reports whether it was to be counted, the
	// job that replayed the copy (0: none), and the error group
	// (error_group_states.id) whose funnel counts it (0: none). Each is counted once: the
	// row of replay_outcomes is kept, settled (the history and the job's
	// failures read it).
	TakeReplayOutcome(ctx context.Context, copySeq, groupID int64, ok bool, now time.Time) (counted bool, jobID, errorGroup int64, err error)

	// PushCopies pushes, in the order of cs, a copy of each message named
	// (same partition and trace id, created at now; its message's payload,
	// or Payload when set: an edited copy) under its TransactionID,
	// unless the partition has that transactionId already; it sets each
	// CopySeq and CopyCreatedAt (the existing message's when there was
	// one) and Inserted. Each copy inserted is recorded in replays (the
	// message it copies, GroupID: the one group that may read it, 0
	// every group; by.Actor, by.JobID, now; edited when Payload is set),
	// and an edited copy's two payloads in replay_edits. The partitions
	// of the copies inserted have their consumers marked ready (Store).
	// Order: each copy inserted has a seq above those of the copies
	// before it in cs, whatever mix of edited and plain copies cs holds
	// (the broker gives all copies of a call the same Payload).
	PushCopies(ctx context.Context, cs []Copy, now time.Time, by ReplayBy) error
	// ExpectReplayOutcomes notes, for (copy seq, group id, error group)
	// triples, that a replayed copy's outcome in a group is to be counted
	// (TakeReplayOutcome), in the funnel of the error group (the
	// error_group_states.id of the dead letter replayed; 0: none),
	// for the job jobID (0: a single replay), whose replayed count in
	// job_outcomes goes up by the pairs of each group it notes. A pair
	// noted before (by this job or another, pending or settled) is left
	// as it was and not counted again, however it is listed: alone,
	// beside new pairs, or twice in one list. The broker lists a pair
	// again when one job meets a dead letter of a (message, group) again
	// while its earlier copy there has not settled: the dead letter came
	// back in between (an import) and the job's ids name the message
	// again (the same id in other letter case). It writes replay_outcomes
	// (an insert that leaves a pair noted before as it was) and
	// job_outcomes (an upsert a group).
	ExpectReplayOutcomes(ctx context.Context, pairs [][3]int64, jobID int64) error
}

// StatsTx is what the broker needs of the counts kept per queue and group:
// the running totals and the time buckets.
type StatsTx interface {
	// AddStats adds d to the running totals of a queue and group and to
	// the minute, quarter-hour and hour buckets of at, which also record
	// the depth and the oldest dead letter after the change when d moves
	// the depth or files dead letters, or the bucket is new (counts alone,
	// which may have waited in memory since at, leave a bucket's depth as
	// at had it). It writes
	// group_stats (made when there is none) and the three bucket tables,
	// one upsert each, and reads the group's oldest dead letter when d
	// moves the depth or files dead letters. A zero at is the wall
	// clock's now (time.Now, not the broker's Clock).
	AddStats(ctx context.Context, queueID, groupID int64, d Stats, at time.Time) error
	// Series returns the buckets of [from, to) with the given step (a
	// whole number of minutes; from a multiple of it), per queue and group,
	// oldest first; queueID 0 means every queue. Each group's last bucket
	// before from comes first, so that its depth is known at the start.
	// Steps that are not whole quarter hours read minute buckets, which
	// are kept MinuteRetention only.
	Series(ctx context.Context, queueID int64, from, to time.Time, step time.Duration) ([]Bucket, error)
	// Stats reads the running totals of a queue's groups (group_stats,
	// kept by AddStats: never counted), by group name (none: empty).
	// Counts still waiting in the broker's memory (StatsDelay) are not
	// in them.
	Stats(ctx context.Context, queueID int64) ([]GroupStats, error)
}

// AuditTx is what the broker needs of the audit log.
type AuditTx interface {
	// InsertAudit writes a as a new audit entry and sets a.ID (writes
	// audit only).
	InsertAudit(ctx context.Context, a *AuditEntry) error
	// InsertAudits writes as as new audit entries, in their order, ids
	// growing in it, without setting their IDs: in a few statements
	// whatever len(as) (PostgreSQL: one, which may go with the next
	// round trip; SQLite: InsertAudit's, one an entry).
	InsertAudits(ctx context.Context, as []AuditEntry) error
	// ListAudit reads a page of the audit entries f selects, newest
	// first by id: after p.After.ID when set, else skipping p.Offset
	// (none: empty). Only After.ID of the cursor is read.
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

// Copy is a replayed copy to push: of message Seq, to the end of
// PartitionID (its message's partition, or a replay's destination), under
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
	QueueID int64
	// QueueIDs, when not nil, are the only queues whose dead letters are
	// selected: those of a principal's queue scope (DLQQuery.Scope). An
	// empty list selects nothing.
	QueueIDs      []int64
	GroupID       int64
	PartitionID   int64
	From, To      time.Time // failedAt range, To exclusive
	ErrorContains string
	TransactionID string
	// Fingerprint selects one error group (broker.Fingerprint); it needs
	// QueueID (the groups are a queue's).
	Fingerprint string
	// ConsumerVersion selects the dead letters filed by that version
	// (DeadLetter.ConsumerVersion).
	ConsumerVersion string
	MaxID           int64     // only rows with ID <= MaxID (bulk actions pin their set)
	MaxFailedAt     time.Time // only rows that failed at or before it (with MaxID: a Bound)
	// ErrorWords is a full-text expression (TextMatch's form) of words
	// every error text holding ErrorContains holds (ErrorWords): when
	// set, the error texts' index names the candidates, and
	// ErrorContains is checked on them exactly. Only a list sets it
	// (narrow).
	ErrorWords string
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
// out (phase 1). Settled: a page before waited for the full-text
// indexes to hold every dead letter filed before it (SQLite's search
// file), which the later pages of a bounded export need not do again.
// The store reads and writes it; the broker only hands it back.
type ExportCursor struct {
	After   *Cursor
	Phase   int
	Below   int64
	Pending []int64
	Skip    []int64
	Settled bool
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
	return f.QueueID != 0 && f.PartitionID == 0 && f.From.IsZero() && f.To.IsZero() && f.ErrorContains == "" && f.TransactionID == "" && f.Fingerprint == "" && f.ConsumerVersion == "" && f.MaxID == 0 && f.MaxFailedAt.IsZero() &&
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
	// Scope is the queues the viewer may see: an entry naming a queue
	// out of it is as if absent; entries that name none (logins, users)
	// stay. The broker filters (stores ignore it).
	Scope QueueScope
}

// Audit streams.
const (
	AuditStreamPeople = ""
	AuditStreamBroker = "broker"
	AuditStreamAll    = "all"
)
