package sqlcore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// GroupQueues reads the queues of the group's subscriptions (a scan of
// subscriptions, one row a queue and group).
func (t *Tx) GroupQueues(ctx context.Context, groupID int64) ([]int64, error) {
	return t.QueryIDs(ctx, `SELECT queue_id FROM subscriptions WHERE group_id = ? ORDER BY queue_id`, groupID)
}

// Unsubscribe deletes the group's consumers of the queue's partitions
// (each by the primary key (partition_id, group_id), the partitions by
// their queue's unique (queue_id, name)), counting first those with a
// live lease, then the subscription by its primary key.
func (t *Tx) Unsubscribe(ctx context.Context, queueID, groupID int64, nowMs int64) (consumers, leases int64, err error) {
	const of = `FROM consumers WHERE group_id = ?1 AND partition_id IN (SELECT p.id FROM partitions p WHERE p.queue_id = ?2)`
	if err := t.QueryRow(ctx, `SELECT COUNT(*) `+of+` AND lease_id IS NOT NULL AND lease_until > ?3`, groupID, queueID, nowMs).Scan(&leases); err != nil {
		return 0, 0, fmt.Errorf("leases: %w", err)
	}
	res, err := t.Exec(ctx, `DELETE `+of, groupID, queueID)
	if err != nil {
		return 0, 0, fmt.Errorf("consumers: %w", err)
	}
	if consumers, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	if _, err := t.Exec(ctx, `DELETE FROM subscriptions WHERE queue_id = ? AND group_id = ?`, queueID, groupID); err != nil {
		return 0, 0, fmt.Errorf("subscription: %w", err)
	}
	return consumers, leases, nil
}

// Reposition deletes the group's consumers of the queue's partitions (of
// partitionID alone when not 0), each by the primary key, counting first
// those with a live lease at nowMs, and makes them anew at start as
// Subscribe does (insertConsumers: cursor, ready mark, kept count; no
// lease, no retry state). Then it deletes the queue's settle marks above
// the group's new cursor in its partition (by settle_marks_due, a few a
// partition): they no longer say that every group settled up to them.
// The subscription stays. It returns the consumers made. With p.Unread
// only the consumers never leased (leased_at 0) are deleted, and made
// anew where the group has none left.
func (t *Tx) Reposition(ctx context.Context, p broker.RepositionParams) (consumers, leases int64, err error) {
	of, args := `FROM consumers WHERE group_id = ?1 AND partition_id IN (SELECT p.id FROM partitions p WHERE p.queue_id = ?2)`, []any{p.GroupID, p.QueueID}
	if p.PartitionID != 0 {
		of, args = `FROM consumers WHERE group_id = ?1 AND partition_id = ?2`, []any{p.GroupID, p.PartitionID}
	}
	if p.Unread {
		of += ` AND leased_at = 0`
	}
	if err := t.QueryRow(ctx, `SELECT COUNT(*) `+of+` AND lease_id IS NOT NULL AND lease_until > ?3`, append(args, p.NowMs)...).Scan(&leases); err != nil {
		return 0, 0, fmt.Errorf("leases: %w", err)
	}
	if _, err := t.Exec(ctx, `DELETE `+of, args...); err != nil {
		return 0, 0, fmt.Errorf("consumers: %w", err)
	}
	if err := t.insertConsumers(ctx, p.QueueID, p.GroupID, p.PartitionID, p.Start, p.Unread); err != nil {
		return 0, 0, fmt.Errorf("make consumers: %w", err)
	}
	if err := t.QueryRow(ctx, `SELECT COUNT(*) `+of, args...).Scan(&consumers); err != nil {
		return 0, 0, fmt.Errorf("count: %w", err)
	}
	if _, err := t.Exec(ctx, `DELETE FROM settle_marks WHERE queue_id = ?1
		AND seq > COALESCE((SELECT c.cursor FROM consumers c WHERE c.partition_id = settle_marks.partition_id AND c.group_id = ?2), seq)`, p.QueueID, p.GroupID); err != nil {
		return 0, 0, fmt.Errorf("settle marks: %w", err)
	}
	return consumers, leases, nil
}

// SubscriptionStart reads subscriptions by its primary key.
func (t *Tx) SubscriptionStart(ctx context.Context, queueID, groupID int64) (broker.Start, bool, error) {
	var at sql.NullInt64
	err := t.QueryRow(ctx, `SELECT starts_at FROM subscriptions WHERE queue_id = ? AND group_id = ?`, queueID, groupID).Scan(&at)
	if err != nil || !at.Valid {
		return broker.Start{}, false, notFound(err, "subscription")
	}
	if at.Int64 <= 0 {
		return broker.Start{}, true, nil // the beginning
	}
	return broker.Start{From: FromMS(at.Int64)}, true, nil
}

// SetSubscriptionStart writes subscriptions by its primary key.
func (t *Tx) SetSubscriptionStart(ctx context.Context, queueID, groupID int64, at time.Time) error {
	_, err := t.Exec(ctx, `UPDATE subscriptions SET starts_at = ? WHERE queue_id = ? AND group_id = ?`, MS(at), queueID, groupID)
	return err
}
