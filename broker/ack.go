package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Ack statuses.
const (
	AckCompleted = "completed"
	AckFailed    = "failed"
	AckRetry     = "retry"
	AckDLQ       = "dlq"
)

// Ack settles one leased message for one group.
type Ack struct {
	TransactionID string
	PartitionID   string // the partition's UUID; may be left out when LeaseID is given
	LeaseID       string // when given, it must be the message's live lease
	Status        string
	Error         string
	Group         string // empty: QueueModeGroup
	// ConsumerVersion is the version of the consumer that acks, as it
	// says (SPEC section 7; "" none): kept with a failed attempt and a
	// dead letter, and with the versions of its error group.
	ConsumerVersion string
}

// AckResult says what an ack did.
type AckResult struct {
	TransactionID string
	Success       bool
	Error         string // why it was refused, when not Success
	DLQ           bool   // the message went to the group's dead letters
	Dropped       bool   // the message ran out of retries and was dropped
	Requeued      bool   // an earlier message of its batch failed: the ack changed nothing, it comes back
	kind          error
}

// Ack applies one acknowledgement in its own transaction. A refused ack
// (unknown message, no live lease, someone else's lease) returns an *Error
// and changes nothing.
//
// It is written marked Concurrent when the store runs such writes beside
// each other now (hot), and unmarked when it comes to what it may not do
// so (acker).
func (b *Broker) Ack(ctx context.Context, a Ack) (AckResult, error) {
	if err := checkConsumerVersion(a.ConsumerVersion); err != nil {
		return AckResult{}, errorf(ErrInvalid, "%s; nothing was done", err)
	}
	b.noteTraffic()
	defer b.noteTraffic()
	var res AckResult
	err := b.updateWith(ctx, b.hot(UpdateOptions{}), func(tx Tx, o UpdateOptions, touched func(string)) error {
		k := newAcker(b, tx, b.now(), touched, o)
		var err error
		if res, err = k.ack(ctx, a); err != nil {
			return err
		}
		if !res.Success {
			return &Error{Kind: res.kind, Message: res.Error}
		}
		return k.finish(ctx)
	})
	return res, err
}

// AckBatch applies acknowledgements in one transaction. Each gets its own
// result: a refused ack changes nothing and does not stop the others.
func (b *Broker) AckBatch(ctx context.Context, group string, acks []Ack) ([]AckResult, error) {
	if len(acks) == 0 {
		return nil, errorf(ErrInvalid, "acknowledgments: at least one is required")
	}
	if len(acks) > MaxAcks {
		return nil, errorf(ErrInvalid, "acknowledgments: at most %d per batch, got %d", MaxAcks, len(acks))
	}
	// A bad version refuses the whole batch, unlike a refused ack: it is
	// the client's mistake in every ack it sends, not a race.
	for i, a := range acks {
		if err := checkConsumerVersion(a.ConsumerVersion); err != nil {
			return nil, errorf(ErrInvalid, "acknowledgments[%d]: %s; nothing was done", i, err)
		}
	}
	b.noteTraffic()
	defer b.noteTraffic()
	// Marked Concurrent or not, as Ack.
	var out []AckResult
	err := b.updateWith(ctx, b.hot(UpdateOptions{}), func(tx Tx, o UpdateOptions, touched func(string)) error {
		k := newAcker(b, tx, b.now(), touched, o)
		out = make([]AckResult, len(acks))
		for i, a := range acks {
			if a.Group == "" {
				a.Group = group
			}
			r, err := k.ack(ctx, a)
			if err != nil {
				return err
			}
			out[i] = r
		}
		return k.finish(ctx)
	})
	return out, err
}

func refuse(txid string, kind error, format string, args ...any) AckResult {
	return AckResult{TransactionID: txid, Error: fmt.Sprintf(format, args...), kind: kind}
}

// deliveryTx is what settling a delivery reads and writes, by an ack
// or by a pop past its lease: the consumer and its partition's
// messages, the attempts and what a failure files (error groups, a
// copy's replay outcome, the job that made it), the holds a circuit
// breaker or a probe sets and the tries it counts, the counts, the
// audit, and the events it raises (raiseTx).
type deliveryTx interface {
	AuditTx
	BreakerTx
	ConsumerTx
	ErrorGroupStateTx
	HistoryTx
	HoldTx
	JobTx
	MessageTx
	PartitionTx
	QueueTx
	ReplayTx
	StatsTx
	SubscriptionTx
	raiseTx
}

// ackTx is what acks read and write: a delivery's settling, and the
// dead letters a failure files.
type ackTx interface {
	deliveryTx
	DeadLetterTx
}

// acker applies the acks of one transaction. It keeps each consumer it
// touches in memory and writes it once, at finish, and learns the
// messages of a lease with one query, so that a batch of acks costs a few
// statements rather than a few per ack. Every ack sees what the ones
// before it did, as if each had been written at once.
type acker struct {
	b       *Broker
	tx      ackTx
	now     time.Time
	touched func(string)
	o       UpdateOptions          // of the write: Concurrent stops at what may not run beside others (errPlainWrite)
	states  map[[2]int64]*ackState // by partition and group id
	order   [][2]int64             // in first-touch order: writes are deterministic
	shared  map[string]bool        // the shared leases whose consumers are in states
	// breakers: the tries settled for the circuit breaker, by queue and
	// group (noteTry); written at finish.
	breakers map[[2]int64]*breakerNote
	// filings: the dead letters the acks are to file, in settling
	// order, filed together at finish (fileDeadLetters).
	filings []filing
}

// filing is a dead letter an ack is to file, with what its audit entry
// says.
type filing struct {
	d       DeadLetter
	queue   string
	group   string
	message string // the message's id
	retries int
}

// ackState is one consumer as the acks of the transaction left it.
type ackState struct {
	c     Consumer
	part  Partition
	dirty bool
	// The messages past the cursor up to the end of the lease or of the
	// voided lease, as loaded (seq order), and their index by transaction
	// id; loaded at the first ack that needs them.
	msgs   []Message
	byTx   map[string]int
	loaded bool
	next   int // msgs[:next] are at or behind the cursor (it only moves on)
}

func newAcker(b *Broker, tx ackTx, now time.Time, touched func(string), o UpdateOptions) *acker {
	return &acker{b: b, tx: tx, now: now, touched: touched, o: o, states: map[[2]int64]*ackState{}}
}

// state returns the consumer of a partition and group, loading it.
func (k *acker) state(ctx context.Context, part Partition, groupID int64) (*ackState, error) {
	key := [2]int64{part.ID, groupID}
	if st, ok := k.states[key]; ok {
		return st, nil
	}
	c, err := k.tx.Consumer(ctx, part.ID, groupID)
	if err != nil {
		return nil, err
	}
	return k.add(part, c), nil
}

// add keeps c, just read, as the state of its partition and group.
func (k *acker) add(part Partition, c Consumer) *ackState {
	key := [2]int64{part.ID, c.GroupID}
	st := &ackState{c: c, part: part}
	k.states[key] = st
	k.order = append(k.order, key)
	return st
}

// byLease returns the consumer holding a lease, or ErrNotFound.
func (k *acker) byLease(ctx context.Context, leaseID string) (*ackState, error) {
	for _, key := range k.order {
		if st := k.states[key]; st.c.LeaseID == leaseID {
			return st, nil
		}
	}
	c, err := k.tx.ConsumerByLease(ctx, leaseID)
	if err != nil {
		return nil, err
	}
	if _, ok := k.states[[2]int64{c.PartitionID, c.GroupID}]; ok {
		// An earlier ack of this transaction ended that lease.
		return nil, errorf(ErrNotFound, "lease not found")
	}
	part, err := k.tx.PartitionByID(ctx, c.PartitionID)
	if err != nil {
		return nil, err
	}
	return k.add(part, c), nil // the row just read, not read again
}

// bySharedLease returns the consumer under a shared lease (a pop of
// several partitions: the id names no partition) whose leased messages
// have transaction id txid, or ErrNotFound; ErrConflict when two of its
// partitions have one (transaction ids are unique in a partition only).
// The lease's consumers are read once a transaction; one an earlier ack
// of it had touched is taken as that ack left it.
func (k *acker) bySharedLease(ctx context.Context, leaseID, txid string) (*ackState, error) {
	if !k.shared[leaseID] {
		cs, err := k.tx.ConsumersBySharedLease(ctx, leaseID)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if _, ok := k.states[[2]int64{c.PartitionID, c.GroupID}]; ok {
				continue
			}
			part, err := k.tx.PartitionByID(ctx, c.PartitionID)
			if err != nil {
				return nil, err
			}
			k.add(part, c)
		}
		if k.shared == nil {
			k.shared = map[string]bool{}
		}
		k.shared[leaseID] = true
	}
	var found *ackState
	for _, key := range k.order {
		st := k.states[key]
		if st.c.LeaseID != leaseID {
			continue
		}
		if err := k.load(ctx, st); err != nil {
			return nil, err
		}
		i, ok := st.byTx[txid]
		if !ok || st.msgs[i].Seq <= st.c.Cursor || st.msgs[i].Seq > st.c.LeaseLast {
			continue
		}
		if found != nil {
			return nil, errorf(ErrConflict, "transactionId %q is a message of two partitions of lease %q: send its partitionId to say which",
				truncate(txid, 64), truncate(leaseID, 64))
		}
		found = st
	}
	if found == nil {
		return nil, errorf(ErrNotFound, "lease not found")
	}
	return found, nil
}

// load reads, once, the messages of the consumer's lease and voided lease
// past its cursor.
func (k *acker) load(ctx context.Context, st *ackState) error {
	if st.loaded {
		return nil
	}
	st.loaded = true
	last := max(st.c.LeaseLast, st.c.VoidLast)
	if last > st.c.Cursor {
		msgs, err := k.tx.MessageRange(ctx, st.part.ID, st.c.Cursor, last)
		if err != nil {
			return err
		}
		st.msgs, st.byTx = msgs, make(map[string]int, len(msgs))
		for i, m := range msgs {
			st.byTx[m.TransactionID] = i
		}
	}
	return nil
}

// message finds a message of the partition by transaction id: among the
// lease's messages when it is one of them, else in the store.
func (k *acker) message(ctx context.Context, st *ackState, txid string) (Message, error) {
	if err := k.load(ctx, st); err != nil {
		return Message{}, err
	}
	if i, ok := st.byTx[txid]; ok {
		return st.msgs[i], nil
	}
	return k.tx.MessageByTransaction(ctx, st.part.ID, txid)
}

// head returns the partition's first message past the cursor.
func (k *acker) head(ctx context.Context, st *ackState) (Message, bool, error) {
	for st.next < len(st.msgs) && st.msgs[st.next].Seq <= st.c.Cursor {
		st.next++
	}
	if st.next < len(st.msgs) {
		return st.msgs[st.next], true, nil
	}
	ms, err := k.tx.MessagesAfter(ctx, st.part.ID, st.c.Cursor, 1)
	if err != nil || len(ms) == 0 {
		return Message{}, false, err
	}
	return ms[0], true, nil
}

// finish files the dead letters of the acks, writes the consumers the
// acks changed, then the circuit breaker's counts. Beside other writes
// (Concurrent), the consumers are locked already, the filing lock is
// taken next and the breakers' rows after it, in every ack: no two
// acks wait for each other in a circle.
func (k *acker) finish(ctx context.Context) error {
	if err := k.fileDeadLetters(ctx); err != nil {
		return err
	}
	for _, key := range k.order {
		if st := k.states[key]; st.dirty {
			if err := k.tx.SaveConsumer(ctx, &st.c); err != nil {
				return fmt.Errorf("ack: save consumer: %w", err)
			}
		}
	}
	return k.finishBreakers(ctx)
}

// ack applies a. Refusals come back as results and change nothing; only
// storage failures are errors.
func (k *acker) ack(ctx context.Context, a Ack) (AckResult, error) {
	tx, now := k.tx, k.now
	if a.Group == "" {
		a.Group = QueueModeGroup
	}
	switch a.Status {
	case AckCompleted, AckFailed, AckRetry, AckDLQ:
	default:
		return refuse(a.TransactionID, ErrInvalid, "status must be completed, failed, retry or dlq, got %q", truncate(a.Status, 32)), nil
	}
	if a.TransactionID == "" {
		return refuse(a.TransactionID, ErrInvalid, "transactionId is required"), nil
	}
	errorBytes := 0 // the size of the error as sent, when it is cut
	if len(a.Error) > MaxErrorText {
		errorBytes, a.Error = len(a.Error), truncate(a.Error, MaxErrorText)
	}
	gid, err := tx.GroupID(ctx, a.Group, false)
	if isNotFound(err) {
		return refuse(a.TransactionID, ErrConflict, "consumer group %q has no lease", truncate(a.Group, 64)), nil
	}
	if err != nil {
		return AckResult{}, fmt.Errorf("ack: group: %w", err)
	}
	var st *ackState
	switch {
	case a.PartitionID != "":
		// err is the function's: a shadowed one had left the consumer's
		// ErrNotFound unseen below, and st nil.
		var part Partition
		part, err = tx.PartitionByUUID(ctx, a.PartitionID)
		if isNotFound(err) {
			return refuse(a.TransactionID, ErrNotFound, "partition %q not found", truncate(a.PartitionID, 64)), nil
		}
		if err != nil {
			return AckResult{}, fmt.Errorf("ack: partition: %w", err)
		}
		st, err = k.state(ctx, part, gid)
	case IsSharedLease(a.LeaseID):
		// The lease of a pop of several partitions: the message's
		// transaction id says which of them.
		st, err = k.bySharedLease(ctx, a.LeaseID, a.TransactionID)
		var be *Error
		if errors.As(err, &be) && be.Kind == ErrConflict {
			return refuse(a.TransactionID, ErrConflict, "%s", be.Message), nil
		}
	case a.LeaseID != "":
		st, err = k.byLease(ctx, a.LeaseID)
	default:
		return refuse(a.TransactionID, ErrInvalid, "partitionId or leaseId is required"), nil
	}
	if isNotFound(err) {
		return refuse(a.TransactionID, ErrConflict, "message %q is not leased to consumer group %q", truncate(a.TransactionID, 64), truncate(a.Group, 64)), nil
	}
	if err != nil {
		return AckResult{}, fmt.Errorf("ack: consumer: %w", err)
	}
	m, err := k.message(ctx, st, a.TransactionID)
	if isNotFound(err) {
		return refuse(a.TransactionID, ErrNotFound, "message %q not found in partition %q", truncate(a.TransactionID, 64), st.part.Name), nil
	}
	if err != nil {
		return AckResult{}, fmt.Errorf("ack: message: %w", err)
	}
	c := &st.c
	if c.GroupID != gid {
		return refuse(a.TransactionID, ErrConflict, "lease %q belongs to another consumer group", truncate(a.LeaseID, 64)), nil
	}
	inLease := c.leaseLive(now) && m.Seq > c.Cursor && m.Seq <= c.LeaseLast
	inVoid := c.VoidLeaseID != "" && m.Seq > c.Cursor && m.Seq <= c.VoidLast
	if inVoid && (a.LeaseID == c.VoidLeaseID || (a.LeaseID == "" && !inLease)) {
		// An earlier message of its batch failed: it comes back anyway.
		return AckResult{TransactionID: a.TransactionID, Success: true, Requeued: true}, nil
	}
	if !inLease {
		return refuse(a.TransactionID, ErrConflict, "message %q is not leased to consumer group %q (its lease ran out, or it was already acknowledged)", truncate(a.TransactionID, 64), truncate(a.Group, 64)), nil
	}
	if a.LeaseID != "" && a.LeaseID != c.LeaseID {
		return refuse(a.TransactionID, ErrConflict, "lease %q is not the lease of message %q", truncate(a.LeaseID, 64), truncate(a.TransactionID, 64)), nil
	}
	for _, p := range c.Acks {
		if p.Seq == m.Seq {
			return refuse(a.TransactionID, ErrConflict, "message %q was already acknowledged in this lease", truncate(a.TransactionID, 64)), nil
		}
	}
	q, err := tx.QueueByID(ctx, c.QueueID)
	if err != nil {
		return AckResult{}, fmt.Errorf("ack: queue: %w", err)
	}
	c.Acks = append(c.Acks, LeaseAck{Seq: m.Seq, Status: a.Status, Error: a.Error, ErrorBytes: errorBytes, ConsumerVersion: a.ConsumerVersion})
	st.dirty = true
	s := settler{k: k, st: st, tx: tx, now: now, queue: q, group: a.Group, c: c}
	if err := s.settle(ctx); err != nil {
		return AckResult{}, err
	}
	if s.stats != (Stats{}) {
		if err := tx.AddStats(ctx, q.ID, c.GroupID, s.stats, now); err != nil {
			return AckResult{}, fmt.Errorf("ack: stats: %w", err)
		}
	}
	k.touched(q.Name)
	return AckResult{TransactionID: a.TransactionID, Success: true, DLQ: s.filed[m.Seq], Dropped: s.dropped[m.Seq]}, nil
}

// settler applies the acks at the head of a lease, in order (SPEC.md
// section 3).
type settler struct {
	k       *acker
	st      *ackState
	tx      ackTx
	now     time.Time
	queue   Queue
	group   string
	c       *Consumer
	stats   Stats
	filed   map[int64]bool
	dropped map[int64]bool
	// ack is the ack being applied at the head of the lease.
	ack LeaseAck
}

func (s *settler) settle(ctx context.Context) error {
	c, o := s.c, s.queue.Options
	for {
		i := -1
		for j, a := range c.Acks {
			if a.Seq > c.Cursor {
				// The head is the first message past the cursor; its seq is
				// the lowest unsettled one of the lease.
				if i < 0 || a.Seq < c.Acks[i].Seq {
					i = j
				}
			}
		}
		if i < 0 {
			break
		}
		head, ok, err := s.k.head(ctx, s.st)
		if err != nil {
			return fmt.Errorf("settle: head: %w", err)
		}
		a := c.Acks[i]
		s.ack = a
		if !ok || head.Seq != a.Seq {
			break // an earlier message of the lease is still unacknowledged
		}
		c.Acks = append(c.Acks[:i], c.Acks[i+1:]...)
		retries := c.retriesOf(a.Seq)
		if a.Status != AckRetry {
			// A try settled: the circuit breaker counts it.
			if err := s.k.noteTry(ctx, s.queue, c.GroupID, s.group, a.Status, a.Error, head); err != nil {
				return err
			}
		}
		switch a.Status {
		case AckCompleted:
			s.stats.Completed++
			if err := s.replayOutcome(ctx, head, true); err != nil {
				return err
			}
			if err := s.forgetAttempts(ctx, a.Seq, retries, true); err != nil {
				return err
			}
			s.advance(a.Seq)
		case AckDLQ:
			if err := s.deadLetter(ctx, head, a.Error, a.ErrorBytes, retries, o.DeadLetterQueue); err != nil {
				return err
			}
			if err := s.forgetAttempts(ctx, a.Seq, retries, !o.DeadLetterQueue); err != nil {
				return err
			}
			s.advance(a.Seq)
		case AckFailed:
			s.stats.Failed++
			if retries < o.RetryLimit {
				// The wait before retry retries+1 (exponential backoff,
				// SPEC.md section 2), kept with the attempt's error and
				// time for the dead letter's history should it come to
				// that: one statement.
				wait := o.RetryWait(retries + 1)
				if err := s.tx.InsertAttempt(ctx, a.Seq, c.GroupID, Attempt{Attempt: retries + 1, At: s.now, Error: a.Error, ErrorBytes: a.ErrorBytes, Wait: wait, WaitKnown: true, ConsumerVersion: a.ConsumerVersion}); err != nil {
					return fmt.Errorf("settle: attempt: %w", err)
				}
				c.RetrySeq, c.Retries = a.Seq, retries+1
				c.AvailableAt = s.now.Add(wait)
				c.voidLease() // it and everything behind it come back
				return nil
			}
			keep := o.DeadLetterQueue && o.DLQAfterMaxRetries
			if err := s.deadLetter(ctx, head, a.Error, a.ErrorBytes, retries, keep); err != nil {
				return err
			}
			if err := s.forgetAttempts(ctx, a.Seq, retries, !keep); err != nil {
				return err
			}
			s.advance(a.Seq)
			if c.Cursor < c.LeaseLast {
				// Its last try failed: as with a try that had retries
				// left, the rest of the batch comes back, but at once
				// (nothing waits for a retry). A worker that stopped at
				// the failure, as the docs say it may, would otherwise
				// hold the partition until the lease ran out.
				c.voidLease()
				return nil
			}
		case AckRetry:
			c.voidLease() // back at once, no retry spent
			return nil
		}
	}
	if c.Cursor >= c.LeaseLast {
		c.clearLease()
	}
	return nil
}

// replayOutcome counts how a replayed copy ended, in a group that had
// dead-lettered the original: only there does it say whether the fix
// worked (settleCopy).
func (s *settler) replayOutcome(ctx context.Context, m Message, ok bool) error {
	if s.k.o.Concurrent && IsReplayTransaction(m.TransactionID) {
		return errPlainWrite // its job's row is read, then written
	}
	counted, err := settleCopy(ctx, s.tx, m, s.c.GroupID, ok, s.now, s.k.touched, s.k.b.raiser(ctx, s.tx))
	if err != nil || !counted {
		return err
	}
	if ok {
		s.stats.ReplayCompleted++
	} else {
		s.stats.ReplayFailed++
	}
	return nil
}

// forgetAttempts deletes the failed attempts of a message the group has
// settled without a dead letter (completed, or dropped): they tell
// nothing then. A dead letter keeps them, its history. A message that
// never failed (retries 0) has none, and costs no statement.
func (s *settler) forgetAttempts(ctx context.Context, seq int64, retries int, settled bool) error {
	if !settled || retries == 0 {
		return nil
	}
	if err := s.tx.DeleteAttempts(ctx, seq, s.c.GroupID); err != nil {
		return fmt.Errorf("settle: attempts: %w", err)
	}
	return nil
}

func (s *settler) advance(seq int64) {
	s.c.Cursor = seq
	s.c.RetrySeq, s.c.Retries = 0, 0
}

// deadLetter files m into the group's dead letters, or drops it when keep
// is false. errBytes is the error's size as sent when errText was cut,
// else 0.
func (s *settler) deadLetter(ctx context.Context, m Message, errText string, errBytes, retries int, keep bool) error {
	if !keep {
		if err := s.replayOutcome(ctx, m, false); err != nil {
			return err
		}
		s.stats.Dropped++
		if s.dropped == nil {
			s.dropped = map[int64]bool{}
		}
		s.dropped[m.Seq] = true
		return nil
	}
	copied := IsReplayTransaction(m.TransactionID)
	if copied && s.k.o.Concurrent {
		return errPlainWrite // its job's row is read, then written
	}
	// Filed with the others of the transaction, at finish
	// (fileDeadLetters): the message is in the group's dead letters, as
	// the answer says, whether it is filed now or was before (a group
	// that reads a message again, its cursor moved back by SeekGroup,
	// and gives up on it again keeps the dead letter it has).
	d := DeadLetter{Seq: m.Seq, QueueID: s.queue.ID, PartitionID: m.PartitionID, GroupID: s.c.GroupID, Error: errText, ErrorBytes: errBytes, RetryCount: retries, FailedAt: s.now, TransactionID: m.TransactionID, TraceID: m.TraceID}
	d.Fingerprint = Fingerprint(errText)
	d.ConsumerVersion = s.ack.ConsumerVersion
	s.k.filings = append(s.k.filings, filing{d: d, queue: s.queue.Name, group: s.group, message: m.ID(), retries: retries})
	if s.filed == nil {
		s.filed = map[int64]bool{}
	}
	s.filed[m.Seq] = true
	if !copied {
		return nil // no outcome to settle (replayOutcome)
	}
	// A replayed copy's outcome is settled after its filing (a job that
	// pauses itself on it counts this copy's error among those its
	// failures share), in settling order: it and those before it are
	// filed now.
	if err := s.k.fileDeadLetters(ctx); err != nil {
		return err
	}
	return s.replayOutcome(ctx, m, false)
}

// fileDeadLetters files the dead letters the acks have settled so far
// (filings), in one call to the store (FileDeadLetters), and does what
// each filing does beside it: its error group's funnel counts it, a new
// error group is told, an ended resolve or ignore opens the group again
// (fileIntoErrorGroup's, once a group for all its filings), the group's
// depth and count of dead letters go up, and each is audited. One whose
// message the group had in its dead letters already is none of these.
func (k *acker) fileDeadLetters(ctx context.Context) error {
	if len(k.filings) == 0 {
		return nil
	}
	fs := k.filings
	k.filings = nil
	ds := make([]*DeadLetter, len(fs))
	for i := range fs {
		ds[i] = &fs[i].d
	}
	filed, err := k.tx.FileDeadLetters(ctx, ds)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	type groupFiled struct {
		first *filing // the first filed into it, which tells of a new group
		n     int64
	}
	groups := map[ErrorGroupKey]*groupFiled{}
	var order []ErrorGroupKey
	depth := map[[2]int64]int64{}
	var depthOrder [][2]int64
	audits := make([]AuditEntry, 0, len(fs))
	for i := range fs {
		if !filed[i] {
			continue
		}
		f := &fs[i]
		key := ErrorGroupKey{QueueID: f.d.QueueID, GroupID: f.d.GroupID, Fingerprint: f.d.Fingerprint}
		g := groups[key]
		if g == nil {
			g = &groupFiled{first: f}
			groups[key] = g
			order = append(order, key)
		}
		g.n++
		qg := [2]int64{f.d.QueueID, f.d.GroupID}
		if depth[qg] == 0 {
			depthOrder = append(depthOrder, qg)
		}
		depth[qg]++
		audits = append(audits, AuditEntry{At: k.now, Actor: "group:" + f.group, Action: AuditDeadLetter, Queue: f.queue, Group: f.group, Count: 1, Broker: true,
			Detail: fmt.Sprintf("message %s (transactionId %s) after %d retries", f.message, truncate(f.d.TransactionID, 64), f.retries)})
	}
	raise := k.b.raiser(ctx, k.tx)
	for _, key := range order {
		g := groups[key]
		m, err := k.tx.AddErrorGroupFunnel(ctx, key, Funnel{Filed: g.n}, k.now)
		if err != nil {
			return fmt.Errorf("error group: %w", err)
		}
		if m.Filed == g.n && m.State == GroupOpen {
			// The group's first filings are these.
			if err := raise(Event{Kind: EventErrorGroupNew, Queue: g.first.queue, Group: g.first.group, ErrorGroupID: m.ID, Fingerprint: key.Fingerprint,
				Detail: cutRunes(g.first.d.Error, NotifySampleChars), At: k.now}); err != nil {
				return fmt.Errorf("error group: %w", err)
			}
		}
		if err := reopenIfEnded(ctx, k.tx, m, k.now, "a new dead letter was filed after it was resolved", raise); err != nil {
			return fmt.Errorf("error group: %w", err)
		}
	}
	for _, qg := range depthOrder {
		n := depth[qg]
		if err := k.tx.AddStats(ctx, qg[0], qg[1], Stats{DeadLettered: n, Depth: n}, k.now); err != nil {
			return fmt.Errorf("ack: stats: %w", err)
		}
	}
	if len(audits) == 0 {
		return nil
	}
	if err := k.tx.InsertAudits(ctx, audits); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// ExtendLease moves a live lease's end to seconds from now. A shared
// lease (a pop of several partitions) is extended in every partition still
// under it, as Queen's renew of its lease id does: the one its messages
// were all settled in, or a failure voided, is not leased again; one that
// ran out stays ended.
func (b *Broker) ExtendLease(ctx context.Context, leaseID string, seconds int) (time.Time, error) {
	if seconds < 1 || seconds > 7*24*3600 {
		return time.Time{}, errorf(ErrInvalid, "seconds must be between 1 and %d", 7*24*3600)
	}
	var until time.Time
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		now := b.now()
		if IsSharedLease(leaseID) {
			cs, err := tx.ConsumersBySharedLease(ctx, leaseID)
			if err != nil {
				return fmt.Errorf("extend: %w", err)
			}
			until = now.Add(time.Duration(seconds) * time.Second)
			live := 0
			for i := range cs {
				if !cs[i].leaseLive(now) {
					continue
				}
				live++
				cs[i].LeaseUntil = until
				if err := tx.SaveConsumer(ctx, &cs[i]); err != nil {
					return fmt.Errorf("extend: %w", err)
				}
			}
			if live == 0 {
				return errorf(ErrNotFound, "lease %q not found or already ended", truncate(leaseID, 64))
			}
			return nil
		}
		c, err := tx.ConsumerByLease(ctx, leaseID)
		if isNotFound(err) || (err == nil && !c.leaseLive(now)) {
			return errorf(ErrNotFound, "lease %q not found or already ended", truncate(leaseID, 64))
		}
		if err != nil {
			return fmt.Errorf("extend: %w", err)
		}
		c.LeaseUntil = now.Add(time.Duration(seconds) * time.Second)
		until = c.LeaseUntil
		return tx.SaveConsumer(ctx, &c)
	})
	return until, err
}
