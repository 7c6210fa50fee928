package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CopyExpired is the outcome of a replayed copy that retentionSeconds
// deleted before a group that was to settle it had (replay_outcomes).
const CopyExpired = 3

// settleSlots is how many settle marks a partition keeps within its
// completed retention at most (one a slot of retention/settleSlots).
const settleSlots = 8

// PartitionCut is a partition and the highest seq a sweep may delete up
// to in it.
type PartitionCut struct {
	PartitionID int64
	UpTo        int64
}

// MessageSweep is one chunk of message retention in a partition
// (RetentionTx.SweepMessages).
type MessageSweep struct {
	PartitionID int64
	UpTo        int64     // delete seqs up to this at most
	Before      time.Time // only messages pushed before it (zero: whenever)
	Settled     bool      // only messages every consumer of the partition has settled
	Limit       int
	Now         time.Time
}

// GroupCount is a count for one consumer group.
type GroupCount struct {
	GroupID int64
	N       int64
}

// SweptMessages is what a chunk of message retention deleted.
type SweptMessages struct {
	QueueID int64
	Removed int64
	Through int64 // the highest seq deleted (0: none)
	// Bound is the highest seq the chunk could delete up to (UpTo less
	// what leases and cursors held): when it deleted fewer than its
	// limit (and had no Before), no message up to Bound is left.
	Bound   int64
	Expired []GroupCount // per group, the deleted messages it had not settled
}

// RetentionTx is what message retention (completedRetentionSeconds,
// retentionSeconds) needs from storage.
type RetentionTx interface {
	// MarkSettled writes a settle mark (now and the partition's settled
	// watermark: the lowest cursor of its consumers) for each of up to
	// limit partitions of the queue with an id above after, whose
	// watermark passed its last mark, written at or before now - slot
	// (or that has none), after deleting their marks above the
	// watermark or made before the queue's newest subscription that may
	// read back (a group subscribed since from the beginning or from a
	// time; one that starts after everything pushed cannot settle behind
	// a mark). It returns the marks written
	// and the highest partition id looked at (0: none left). Writes
	// settle_marks.
	MarkSettled(ctx context.Context, queueID int64, now time.Time, slot time.Duration, after int64, limit int) (marked, last int64, err error)
	// DueSettled returns the partitions of the queue with a settle mark
	// written at or before before, each with its highest such mark's
	// seq. Reads settle_marks only.
	DueSettled(ctx context.Context, queueID int64, before time.Time) ([]PartitionCut, error)
	// ExpiringPartitions returns the partitions of the queue whose
	// oldest message was pushed before before, UpTo that message's seq.
	// Reads partitions and one message a partition.
	ExpiringPartitions(ctx context.Context, queueID int64, before time.Time) ([]PartitionCut, error)
	// DropSettleMarks deletes the partition's settle marks up to seq
	// through, and returns how many.
	DropSettleMarks(ctx context.Context, partitionID, through int64) (int64, error)
	// SweepMessages deletes up to s.Limit of the oldest messages of
	// s.PartitionID with a seq up to s.UpTo, never past the cursor of a
	// consumer holding a live lease at s.Now (with s.Settled: nor past any
	// consumer's cursor), pushed before s.Before when set. It copies
	// each one's payload and push time into its dead letters (kept and
	// deleted) first; moves every consumer whose cursor was below the
	// last seq deleted to it, with what pointed into the range cleared
	// (retry, acks, a lease or void lease ending there), and reports
	// per group how many it had not settled; lowers the kept counts
	// (partitions.messages, consumers.passed) by what they had counted;
	// settles the copies' pending replay outcomes as CopyExpired. A
	// partition that is not there deletes nothing.
	SweepMessages(ctx context.Context, s MessageSweep) (SweptMessages, error)
}

// maintainMessages runs message retention, queue by queue:
//
//   - completedRetentionSeconds: a message every group of its queue has
//     settled (every consumer's cursor of its partition is past it) is
//     deleted no earlier than the retention after its last settlement,
//     and at most the retention + retention/8 + two maintenance
//     intervals after it (settle marks: one a slot of retention/8, the
//     run that writes it and the run that finds it due). A group that has
//     not settled a message keeps it, a group subscribed later included.
//     A new subscription that may read back (subscriptionMode all, or
//     from a time) cancels the marks made before it (the group may read
//     from the beginning and settle between two runs): what they made
//     due waits the retention again from the next run. One that starts
//     after everything pushed (subscriptionMode new) does not.
//   - retentionSeconds: a message pushed longer ago than it is deleted,
//     settled or not, oldest first by seq, but never under a live lease
//     (what a live lease holds is deleted at a run after it ends). A
//     group that had not settled it counts it as expired (Stats.Expired),
//     its cursor moves past it.
//
// Each chunk (maintainChunk messages at most, one partition) is a
// transaction on the low-priority lane, and reads the queue's options
// again: a retention turned off or made longer during a run stops it at
// the next chunk. Finding what is due reads snapshots (View), not the
// writer.
func (b *Broker) maintainMessages(ctx context.Context, r *TaskReport) error {
	var queues []Queue
	if err := b.store.View(ctx, func(tx Tx) (err error) {
		queues, err = tx.Queues(ctx)
		return err
	}); err != nil {
		return err
	}
	// One queue's error does not stop the others (sweepQueues); a
	// cancelled context stops at once.
	return sweepQueues(ctx, queues, func(q Queue) error {
		var errs []error
		if q.Options.CompletedRetentionSeconds > 0 {
			if err := b.completedRetention(ctx, q, r); err != nil {
				errs = append(errs, fmt.Errorf("completed retention: %w", err))
			}
		}
		if q.Options.MessageRetention() > 0 && ctx.Err() == nil {
			if err := b.messageRetention(ctx, q, r); err != nil {
				errs = append(errs, fmt.Errorf("retention: %w", err))
			}
		}
		return errors.Join(errs...)
	})
}

// completedRetention writes the queue's settle marks, then deletes the
// messages of the marks that are due.
func (b *Broker) completedRetention(ctx context.Context, q Queue, r *TaskReport) error {
	keep := time.Duration(q.Options.CompletedRetentionSeconds) * time.Second
	slot := keep / settleSlots
	var after int64
	for {
		var last int64
		if err := b.store.Update(ctx, background, func(tx Tx) (err error) {
			_, last, err = tx.MarkSettled(ctx, q.ID, b.now(), slot, after, maintainChunk)
			return err
		}); err != nil {
			return err
		}
		r.Chunks++
		if last == 0 {
			break
		}
		after = last
	}
	var due []PartitionCut
	if err := b.store.View(ctx, func(tx Tx) (err error) {
		due, err = tx.DueSettled(ctx, q.ID, b.now().Add(-keep))
		return err
	}); err != nil {
		return err
	}
	// A chunk goes on while the queue's completed retention, read again
	// in its transaction, is on and no longer than the run's: the marks
	// due under the run's are due under a shorter one too; a longer one
	// (or off) waits for the next run to find what is due under it.
	rule := func(o Options, _ time.Time, _ *MessageSweep) bool {
		cur := o.CompletedRetentionSeconds
		return cur > 0 && cur <= q.Options.CompletedRetentionSeconds
	}
	for _, c := range due {
		bound, stopped, err := b.sweepPartition(ctx, r, q.ID, MessageSweep{PartitionID: c.PartitionID, UpTo: c.UpTo, Settled: true, Limit: maintainChunk}, rule)
		if err != nil {
			return err
		}
		if stopped {
			// The option is off or longer (or the queue gone): the
			// other partitions wait for the next run, their marks too
			// (none of this one's is known to be done).
			return nil
		}
		// The marks whose messages are all gone go; one above what the
		// lowest cursor allowed (a group subscribed since) stays, due,
		// for a later run.
		if err := b.store.Update(ctx, background, func(tx Tx) error {
			_, err := tx.DropSettleMarks(ctx, c.PartitionID, bound)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// messageRetention deletes the queue's messages pushed more than its
// retentionSeconds (or a shorter maxWaitTimeSeconds: MessageRetention)
// ago.
func (b *Broker) messageRetention(ctx context.Context, q Queue, r *TaskReport) error {
	keep := time.Duration(q.Options.MessageRetention()) * time.Second
	before := b.now().Add(-keep)
	var due []PartitionCut
	if err := b.store.View(ctx, func(tx Tx) (err error) {
		due, err = tx.ExpiringPartitions(ctx, q.ID, before)
		return err
	}); err != nil {
		return err
	}
	// Each chunk takes the queue's retentionSeconds as its transaction
	// reads it: off or longer than the run's stops the queue's sweep (the
	// next run finds what is due under it), a shorter one moves the cut.
	rule := func(o Options, now time.Time, s *MessageSweep) bool {
		if keep := o.MessageRetention(); keep <= 0 || keep > q.Options.MessageRetention() {
			return false
		}
		s.Before = now.Add(-time.Duration(o.MessageRetention()) * time.Second)
		return true
	}
	for _, c := range due {
		_, stopped, err := b.sweepPartition(ctx, r, q.ID, MessageSweep{PartitionID: c.PartitionID, UpTo: maxSeq, Before: before, Limit: maintainChunk}, rule)
		if err != nil {
			return err
		}
		if stopped { // off or longer (or the queue gone): nothing more this run
			return nil
		}
	}
	return nil
}

// maxSeq is a seq above every message's.
const maxSeq = int64(1) << 62

// sweepPartition runs s a chunk a transaction until a chunk deletes less
// than its limit, counting what expired unread into the groups' stats in
// the chunk's transaction, and returns the last chunk's Bound. Each chunk
// first reads the queue's options again (they may have changed since
// the run began, or the queue gone): rule says whether the chunk still
// runs, and may adjust it to them. A chunk that rule stops (or whose
// queue is gone) deletes nothing and ends the sweep with Bound 0,
// reported stopped (true): the caller then sweeps no other partition of
// the queue in this run.
func (b *Broker) sweepPartition(ctx context.Context, r *TaskReport, queueID int64, s MessageSweep, rule func(o Options, now time.Time, s *MessageSweep) bool) (int64, bool, error) {
	for {
		var out SweptMessages
		var stopped bool
		err := b.store.Update(ctx, background, func(tx Tx) (err error) {
			out, stopped = SweptMessages{}, false
			now := b.now()
			cur, err := tx.QueueByID(ctx, queueID)
			if isNotFound(err) {
				stopped = true
				return nil
			}
			if err != nil {
				return err
			}
			chunk := s
			chunk.Now = now
			if !rule(cur.Options, now, &chunk) {
				stopped = true
				return nil
			}
			if out, err = tx.SweepMessages(ctx, chunk); err != nil {
				return err
			}
			for _, e := range out.Expired {
				if e.N == 0 {
					continue
				}
				if err := tx.AddStats(ctx, out.QueueID, e.GroupID, Stats{Expired: e.N}, now); err != nil {
					return fmt.Errorf("count expired: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return 0, false, err
		}
		if stopped {
			return 0, true, nil
		}
		r.Chunks++
		r.Removed += out.Removed
		if out.Removed < int64(s.Limit) {
			return out.Bound, false, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
	}
}
