package broker

import (
	"context"
	"fmt"
	"time"
)

// AuditGroupSubscription is the audit action of MoveSubscription.
const AuditGroupSubscription = "group_subscription"

// SubscriptionRequest says where MoveSubscription starts a consumer
// group anew.
type SubscriptionRequest struct {
	Group string
	// At: the group starts with the first message pushed at or after it.
	At    time.Time
	Actor string
}

// SubscriptionResult is what MoveSubscription moved.
type SubscriptionResult struct {
	Queues     []string // the queues whose start moved, by id
	Partitions int64    // the cursors placed again, a partition each
}

// MoveSubscription moves where a consumer group starts reading, in every
// queue it reads, to r.At, in one transaction, audited a queue each:
// Queen's update of a group's subscription timestamp. Queen keeps that
// time and places a group's cursor there in each partition it has not
// consumed from yet; Lazarus places a group's cursors when it first reads
// a queue, so the same effect is to place again, at the first message
// pushed at or after r.At, its cursors in the partitions it has been
// handed no message of since they were placed (Reposition, Unread). The
// partitions it has read from keep their cursors (SeekGroup moves
// those). A later time skips what those partitions hold before it, an
// earlier one reads back what they held already. A group that does not
// exist or reads no queue moves nothing and is no error (Queen's
// rowsUpdated 0); so is the queue-mode group, which in Queen has no
// subscription.
func (b *Broker) MoveSubscription(ctx context.Context, r SubscriptionRequest) (SubscriptionResult, error) {
	if err := checkName("consumer group", r.Group); err != nil {
		return SubscriptionResult{}, err
	}
	if r.At.IsZero() {
		return SubscriptionResult{}, errorf(ErrInvalid, "a subscription needs a time")
	}
	var res SubscriptionResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		res = SubscriptionResult{}
		if r.Group == QueueModeGroup {
			return nil
		}
		now := b.now()
		gid, err := tx.GroupID(ctx, r.Group, false)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("group: %w", err)
		}
		ids, err := tx.GroupQueues(ctx, gid)
		if err != nil {
			return fmt.Errorf("group queues: %w", err)
		}
		at := r.At.UTC().Format(time.RFC3339Nano)
		for _, id := range ids {
			q, err := tx.QueueByID(ctx, id)
			if err != nil {
				return fmt.Errorf("queue: %w", err)
			}
			n, _, err := tx.Reposition(ctx, RepositionParams{QueueID: q.ID, GroupID: gid, Start: Start{From: r.At}, NowMs: now.UnixMilli(), Unread: true})
			if err != nil {
				return fmt.Errorf("reposition: %w", err)
			}
			// Queen keeps the time as the group's subscription's: a delete
			// of its cursors that keeps it (DeleteGroup, KeepSubscription)
			// starts it there.
			if err := tx.SetSubscriptionStart(ctx, q.ID, gid, r.At); err != nil {
				return fmt.Errorf("subscription start: %w", err)
			}
			res.Queues = append(res.Queues, q.Name)
			res.Partitions += n
			touched(q.Name) // a long-poll of the group finds what it reads back
			detail := fmt.Sprintf("consumer group %q of queue %q starts at %s: %d cursors of partitions it had read nothing of placed again", truncate(r.Group, 64), truncate(q.Name, 64), at, n)
			if err := audit(ctx, tx, now, r.Actor, AuditGroupSubscription, q.Name, r.Group, int(n), detail); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}
