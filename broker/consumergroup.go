package broker

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// AuditGroupDelete is the audit action of DeleteGroup.
const AuditGroupDelete = "group_delete"

// ConsumerGroupTx is what removing a consumer group needs from storage.
type ConsumerGroupTx interface {
	// GroupQueues returns the ids of the queues the group reads (its
	// subscriptions), in id order; none: empty. It reads subscriptions
	// (a small table: one row a queue and group).
	GroupQueues(ctx context.Context, groupID int64) ([]int64, error)
	// Unsubscribe removes the group's subscription to the queue and its
	// consumer (cursor, lease, retry state) in each of the queue's
	// partitions, by the primary keys, and returns how many consumers
	// went and how many of them held a lease live at nowMs. The group
	// itself, its dead letters, counts and history stay.
	Unsubscribe(ctx context.Context, queueID, groupID int64, nowMs int64) (consumers, leases int64, err error)
	// Reposition makes the group's consumers of the queue's partitions
	// (of p.PartitionID alone when not 0) anew at p.Start, as Subscribe
	// makes them: the cursor there, no lease, no retry state; the ones
	// it replaces go (a lease they held ends). It drops the settle marks
	// above the new cursors (completed retention must not delete what the
	// group will read again). It returns the consumers made and how many
	// of those replaced held a lease live at p.NowMs. The subscription
	// stays as it was.
	Reposition(ctx context.Context, p RepositionParams) (consumers, leases int64, err error)
	// SubscriptionStart reads where the group's subscription to the queue
	// starts (Subscribe's start, a group that started after everything
	// pushed: the time it subscribed; SetSubscriptionStart's), by
	// subscriptions' primary key; known is false for a subscription made
	// before it was recorded. No subscription: ErrNotFound.
	SubscriptionStart(ctx context.Context, queueID, groupID int64) (start Start, known bool, err error)
	// SetSubscriptionStart records that the group's subscription to the
	// queue starts at at (subscriptions, by its primary key; none:
	// nothing, no error).
	SetSubscriptionStart(ctx context.Context, queueID, groupID int64, at time.Time) error
}

// RepositionParams says which consumers Reposition makes anew, and where.
type RepositionParams struct {
	QueueID, GroupID int64
	PartitionID      int64 // 0: every partition of the queue
	Start            Start
	NowMs            int64
	// Unread limits it to the consumers never leased since they were
	// made (no pop has handed the group a message of their partition
	// since its cursor there was placed): the others keep their cursors.
	Unread bool
}

// DeleteGroupRequest says which group DeleteGroup removes, from where.
type DeleteGroupRequest struct {
	Group string
	Queue string // "": every queue it reads
	// DeleteDeadLetters deletes its dead letters too (of Queue, or of
	// every queue), by a delete job: restorable, audited. Without it
	// they stay, and can be replayed or deleted as before.
	DeleteDeadLetters bool
	// KeepSubscription keeps the group's subscription and where it starts
	// (Queen's deleteMetadata=false, which keeps a group's subscription
	// metadata): its cursors, leases and retry state go, and it is placed
	// back where its subscription starts, to read again from there
	// whatever its next pop asks. A subscription whose start was not
	// recorded (made before it was) fails it with ErrInvalid, nothing
	// changed.
	KeepSubscription bool
	Actor            string
}

// DeleteGroupResult is what DeleteGroup removed.
type DeleteGroupResult struct {
	Queues     []string // the queues it read, by name
	Partitions int64    // the consumers (a partition each) removed
	Leases     int64    // of them, those that held a live lease
	// DeadLetterJob is the delete job of its dead letters (0: none, they
	// were kept).
	DeadLetterJob int64
}

// DeleteGroup removes a consumer group from a queue, or from every queue
// it reads, in one transaction: its subscription, and in each partition
// its cursor, its lease (a worker holding it gets "lease not found" on
// its ack) and its retry state. The group that pops again later starts
// over, as its subscription mode says; with r.KeepSubscription its
// subscription stays, and it reads again from where that starts. Its dead letters stay unless
// r.DeleteDeadLetters: then a delete job (restorable) removes them, and
// the result names it. A group (or queue) that does not exist, or one
// that reads nothing, removes nothing and is no error.
func (b *Broker) DeleteGroup(ctx context.Context, r DeleteGroupRequest) (DeleteGroupResult, error) {
	if err := checkName("consumer group", r.Group); err != nil {
		return DeleteGroupResult{}, err
	}
	if r.Queue != "" {
		if err := checkName("queue", r.Queue); err != nil {
			return DeleteGroupResult{}, err
		}
	}
	var res DeleteGroupResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		res = DeleteGroupResult{}
		now := b.now()
		gid, err := tx.GroupID(ctx, r.Group, false)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("group: %w", err)
		}
		var queues []Queue
		if r.Queue != "" {
			q, err := tx.QueueByName(ctx, r.Queue)
			if isNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			queues = append(queues, q)
		} else {
			ids, err := tx.GroupQueues(ctx, gid)
			if err != nil {
				return fmt.Errorf("group queues: %w", err)
			}
			for _, id := range ids {
				q, err := tx.QueueByID(ctx, id)
				if err != nil {
					return fmt.Errorf("queue: %w", err)
				}
				queues = append(queues, q)
			}
		}
		for _, q := range queues {
			subscribed, err := tx.Subscribed(ctx, q.ID, gid)
			if err != nil {
				return fmt.Errorf("subscribed: %w", err)
			}
			if !subscribed {
				continue
			}
			dead := map[bool]string{true: "deleted by a job", false: "kept"}[r.DeleteDeadLetters]
			var n, leases int64
			var detail string
			if r.KeepSubscription {
				start, known, err := tx.SubscriptionStart(ctx, q.ID, gid)
				if err != nil {
					return fmt.Errorf("subscription start: %w", err)
				}
				if !known {
					return errorf(ErrInvalid, "deleteMetadata=false keeps where consumer group %q's subscription starts, and Lazarus did not record it for queue %q "+
						"(the group subscribed before this version): send deleteMetadata=true, which removes the subscription too, "+
						"or set its start first (POST /api/v1/consumer-groups/:group/subscription); nothing was changed", truncate(r.Group, 64), truncate(q.Name, 64))
				}
				if n, leases, err = tx.Reposition(ctx, RepositionParams{QueueID: q.ID, GroupID: gid, Start: start, NowMs: now.UnixMilli()}); err != nil {
					return fmt.Errorf("reposition: %w", err)
				}
				where := "the beginning"
				if !start.From.IsZero() {
					where = start.From.UTC().Format(time.RFC3339Nano)
				}
				detail = fmt.Sprintf("consumer group %q's cursors of queue %q removed and placed back where its subscription starts (%s), the subscription kept: %d cursors, %d live leases ended; its dead letters %s",
					truncate(r.Group, 64), truncate(q.Name, 64), where, n, leases, dead)
			} else {
				if n, leases, err = tx.Unsubscribe(ctx, q.ID, gid, now.UnixMilli()); err != nil {
					return fmt.Errorf("unsubscribe: %w", err)
				}
				detail = fmt.Sprintf("consumer group %q removed from queue %q: %d cursors, %d live leases ended; its dead letters %s", truncate(r.Group, 64),
					truncate(q.Name, 64), n, leases, dead)
			}
			res.Queues = append(res.Queues, q.Name)
			res.Partitions += n
			res.Leases += leases
			touched(q.Name)
			if err := audit(ctx, tx, now, r.Actor, AuditGroupDelete, q.Name, r.Group, int(n), detail); err != nil {
				return err
			}
		}
		if len(res.Queues) == 0 {
			return nil
		}
		// The cache holds the subscriptions it has met.
		return b.invalidateCache(tx)
	})
	if err != nil || !r.DeleteDeadLetters {
		return res, err
	}
	q := DLQQuery{Queue: r.Queue, Group: r.Group, AllQueues: r.Queue == ""}
	if n, err := b.countGroupDeadLetters(ctx, q); err != nil || n == 0 {
		return res, err
	}
	j, err := b.StartJob(ctx, JobRequest{Kind: JobDelete, Query: &q, Actor: r.Actor})
	if err != nil {
		return res, fmt.Errorf("consumer group %s removed (%s), but its dead letters were not: %w", r.Group, strings.Join(res.Queues, ", "), err)
	}
	res.DeadLetterJob = j.ID
	return res, nil
}

// countGroupDeadLetters counts the dead letters q selects.
func (b *Broker) countGroupDeadLetters(ctx context.Context, q DLQQuery) (int64, error) {
	q.Limit, q.WithTotal = 1, true
	page, err := b.DeadLetters(ctx, q)
	if isNotFound(err) {
		return 0, nil
	}
	return page.Total, err
}
