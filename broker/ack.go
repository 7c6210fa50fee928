package broker

import (
	"context"
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
func (b *Broker) Ack(ctx context.Context, a Ack) (AckResult, error) {
	var res AckResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		var err error
		res, err = b.ack(ctx, tx, b.now(), a, touched)
		if err != nil {
			return err
		}
		if !res.Success {
			return &Error{Kind: res.kind, Message: res.Error}
		}
		return nil
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
	var out []AckResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		out = make([]AckResult, len(acks))
		for i, a := range acks {
			if a.Group == "" {
				a.Group = group
			}
			r, err := b.ack(ctx, tx, now, a, touched)
			if err != nil {
				return err
			}
			out[i] = r
		}
		return nil
	})
	return out, err
}

func refuse(txid string, kind error, format string, args ...any) AckResult {
	return AckResult{TransactionID: txid, Error: fmt.Sprintf(format, args...), kind: kind}
}

// ack applies a inside tx. Refusals come back as results; only storage
// failures are errors.
func (b *Broker) ack(ctx context.Context, tx Tx, now time.Time, a Ack, touched func(string)) (AckResult, error) {
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
	if len(a.Error) > MaxErrorText {
		a.Error = truncate(a.Error, MaxErrorText)
	}
	gid, err := tx.GroupID(ctx, a.Group, false)
	if isNotFound(err) {
		return refuse(a.TransactionID, ErrConflict, "consumer group %q has no lease", truncate(a.Group, 64)), nil
	}
	if err != nil {
		return AckResult{}, fmt.Errorf("ack: group: %w", err)
	}
	var c Consumer
	var part Partition
	switch {
	case a.PartitionID != "":
		part, err = tx.PartitionByUUID(ctx, a.PartitionID)
		if isNotFound(err) {
			return refuse(a.TransactionID, ErrNotFound, "partition %q not found", truncate(a.PartitionID, 64)), nil
		}
		if err != nil {
			return AckResult{}, fmt.Errorf("ack: partition: %w", err)
		}
		c, err = tx.Consumer(ctx, part.ID, gid)
	case a.LeaseID != "":
		c, err = tx.ConsumerByLease(ctx, a.LeaseID)
		if err == nil {
			part, err = tx.PartitionByID(ctx, c.PartitionID)
		}
	default:
		return refuse(a.TransactionID, ErrInvalid, "partitionId or leaseId is required"), nil
	}
	if isNotFound(err) {
		return refuse(a.TransactionID, ErrConflict, "message %q is not leased to consumer group %q", truncate(a.TransactionID, 64), truncate(a.Group, 64)), nil
	}
	if err != nil {
		return AckResult{}, fmt.Errorf("ack: consumer: %w", err)
	}
	m, err := tx.MessageByTransaction(ctx, part.ID, a.TransactionID)
	if isNotFound(err) {
		return refuse(a.TransactionID, ErrNotFound, "message %q not found in partition %q", truncate(a.TransactionID, 64), part.Name), nil
	}
	if err != nil {
		return AckResult{}, fmt.Errorf("ack: message: %w", err)
	}
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
	c.Acks = append(c.Acks, LeaseAck{Seq: m.Seq, Status: a.Status, Error: a.Error})
	s := settler{tx: tx, now: now, queue: q, group: a.Group, c: &c}
	if err := s.settle(ctx); err != nil {
		return AckResult{}, err
	}
	if err := tx.SaveConsumer(ctx, &c); err != nil {
		return AckResult{}, fmt.Errorf("ack: save consumer: %w", err)
	}
	if s.stats != (Stats{}) {
		if err := tx.AddStats(ctx, q.ID, c.GroupID, s.stats, now); err != nil {
			return AckResult{}, fmt.Errorf("ack: stats: %w", err)
		}
	}
	touched(q.Name)
	return AckResult{TransactionID: a.TransactionID, Success: true, DLQ: s.filed[m.Seq], Dropped: s.dropped[m.Seq]}, nil
}

// settler applies the acks at the head of a lease, in order (SPEC.md
// section 3).
type settler struct {
	tx      Tx
	now     time.Time
	queue   Queue
	group   string
	c       *Consumer
	stats   Stats
	filed   map[int64]bool
	dropped map[int64]bool
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
		head, err := s.tx.MessagesAfter(ctx, c.PartitionID, c.Cursor, 1)
		if err != nil {
			return fmt.Errorf("settle: head: %w", err)
		}
		a := c.Acks[i]
		if len(head) == 0 || head[0].Seq != a.Seq {
			break // an earlier message of the lease is still unacknowledged
		}
		c.Acks = append(c.Acks[:i], c.Acks[i+1:]...)
		retries := c.retriesOf(a.Seq)
		switch a.Status {
		case AckCompleted:
			s.stats.Completed++
			if err := s.replayOutcome(ctx, head[0], true); err != nil {
				return err
			}
			s.advance(a.Seq)
		case AckDLQ:
			if err := s.deadLetter(ctx, head[0], a.Error, retries, o.DeadLetterQueue); err != nil {
				return err
			}
			s.advance(a.Seq)
		case AckFailed:
			s.stats.Failed++
			if retries < o.RetryLimit {
				c.RetrySeq, c.Retries = a.Seq, retries+1
				c.AvailableAt = s.now.Add(time.Duration(o.RetryDelay) * time.Millisecond)
				c.voidLease() // it and everything behind it come back
				return nil
			}
			if err := s.deadLetter(ctx, head[0], a.Error, retries, o.DeadLetterQueue && o.DLQAfterMaxRetries); err != nil {
				return err
			}
			s.advance(a.Seq)
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
// worked.
func (s *settler) replayOutcome(ctx context.Context, m Message, ok bool) error {
	if !IsReplayTransaction(m.TransactionID) {
		return nil
	}
	counted, err := s.tx.TakeReplayOutcome(ctx, m.Seq, s.c.GroupID)
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

func (s *settler) advance(seq int64) {
	s.c.Cursor = seq
	s.c.RetrySeq, s.c.Retries = 0, 0
}

// deadLetter files m into the group's dead letters, or drops it when keep
// is false.
func (s *settler) deadLetter(ctx context.Context, m Message, errText string, retries int, keep bool) error {
	if err := s.replayOutcome(ctx, m, false); err != nil {
		return err
	}
	if !keep {
		s.stats.Dropped++
		if s.dropped == nil {
			s.dropped = map[int64]bool{}
		}
		s.dropped[m.Seq] = true
		return nil
	}
	d := DeadLetter{Seq: m.Seq, QueueID: s.queue.ID, PartitionID: m.PartitionID, GroupID: s.c.GroupID, Error: errText, RetryCount: retries, FailedAt: s.now}
	if err := s.tx.InsertDeadLetter(ctx, &d); err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	if err := s.tx.AddErrorCount(ctx, s.queue.ID, s.c.GroupID, ErrorLine(errText), 1); err != nil {
		return fmt.Errorf("error counts: %w", err)
	}
	s.stats.DeadLettered++
	s.stats.Depth++
	if s.filed == nil {
		s.filed = map[int64]bool{}
	}
	s.filed[m.Seq] = true
	return audit(ctx, s.tx, s.now, "group:"+s.group, AuditDeadLetter, s.queue.Name, s.group, 1,
		fmt.Sprintf("message %s (transactionId %s) after %d retries", m.ID(), truncate(m.TransactionID, 64), retries))
}

// ExtendLease moves a live lease's end to seconds from now.
func (b *Broker) ExtendLease(ctx context.Context, leaseID string, seconds int) (time.Time, error) {
	if seconds < 1 || seconds > 7*24*3600 {
		return time.Time{}, errorf(ErrInvalid, "seconds must be between 1 and %d", 7*24*3600)
	}
	var until time.Time
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		now := b.now()
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
