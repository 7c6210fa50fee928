package broker

import (
	"context"
	"fmt"
	"time"
)

// AuditGroupSeek is the audit action of SeekGroup.
const AuditGroupSeek = "group_seek"

// SeekRequest says where SeekGroup moves a consumer group's cursors.
type SeekRequest struct {
	Group, Queue string
	Partition    string // "": every partition of the queue
	// ToEnd moves past every message pushed so far; otherwise the group
	// reads again from the first message pushed at or after At.
	ToEnd bool
	At    time.Time
	Actor string
}

// SeekResult is what SeekGroup moved.
type SeekResult struct {
	Partitions int64 // the cursors moved, a partition each
	Leases     int64 // of them, those that held a live lease (ended)
}

// SeekGroup moves a consumer group's cursor in each partition of a queue
// (or in one partition) to the end, or to just before the first message
// pushed at or after r.At, in one transaction, audited (Queen's seek).
// Behind its cursor, a group reads again what it had settled: completed
// messages, and those it dead-lettered (their dead letters stay; failing
// one again keeps the one it has: see settler.deadLetter). Its leases
// there end (a worker's ack gets a 409) and its retry state goes: every
// message starts over with its retries. A group that does not read the
// queue, or a queue or group that does not exist, moves nothing and is
// no error, as in Queen; a partition that does not exist is ErrNotFound.
func (b *Broker) SeekGroup(ctx context.Context, r SeekRequest) (SeekResult, error) {
	if err := checkName("consumer group", r.Group); err != nil {
		return SeekResult{}, err
	}
	if err := checkName("queue", r.Queue); err != nil {
		return SeekResult{}, err
	}
	if r.Partition != "" {
		if err := checkName("partition", r.Partition); err != nil {
			return SeekResult{}, err
		}
	}
	start := Start{Now: r.ToEnd}
	if !r.ToEnd {
		if r.At.IsZero() {
			return SeekResult{}, errorf(ErrInvalid, "a seek needs a time or the end")
		}
		start.From = r.At
	}
	var res SeekResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		res = SeekResult{}
		now := b.now()
		q, err := tx.QueueByName(ctx, r.Queue)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var pid int64
		if r.Partition != "" {
			p, err := tx.PartitionByName(ctx, q.ID, r.Partition)
			if isNotFound(err) {
				return errorf(ErrNotFound, "partition %q of queue %q not found", truncate(r.Partition, 64), truncate(r.Queue, 64))
			}
			if err != nil {
				return err
			}
			pid = p.ID
		}
		gid, err := tx.GroupID(ctx, r.Group, false)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("group: %w", err)
		}
		if subscribed, err := tx.Subscribed(ctx, q.ID, gid); err != nil || !subscribed {
			return err
		}
		n, leases, err := tx.Reposition(ctx, RepositionParams{QueueID: q.ID, GroupID: gid, PartitionID: pid, Start: start, NowMs: now.UnixMilli()})
		if err != nil {
			return fmt.Errorf("reposition: %w", err)
		}
		res = SeekResult{Partitions: n, Leases: leases}
		touched(q.Name) // a long-poll of the group finds what it reads again
		where := "to the end"
		if !r.ToEnd {
			where = "to " + r.At.UTC().Format(time.RFC3339Nano)
		}
		if r.Partition != "" {
			where += fmt.Sprintf(" in partition %q", truncate(r.Partition, 64))
		}
		detail := fmt.Sprintf("consumer group %q of queue %q moved %s: %d cursors, %d live leases ended", truncate(r.Group, 64), truncate(q.Name, 64), where, n, leases)
		return audit(ctx, tx, now, r.Actor, AuditGroupSeek, q.Name, r.Group, int(n), detail)
	})
	return res, err
}
