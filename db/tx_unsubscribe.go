package db

import (
	"context"
	"fmt"
)

// GroupQueues reads the queues of the group's subscriptions (a scan of
// subscriptions, one row a queue and group).
func (t *storeTx) GroupQueues(ctx context.Context, groupID int64) ([]int64, error) {
	rows, err := t.query(ctx, `SELECT queue_id FROM subscriptions WHERE group_id = ? ORDER BY queue_id`, groupID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Unsubscribe deletes the group's consumers of the queue's partitions
// (each by the primary key (partition_id, group_id), the partitions by
// their queue's unique (queue_id, name)), counting first those with a
// live lease, then the subscription by its primary key.
func (t *storeTx) Unsubscribe(ctx context.Context, queueID, groupID int64, nowMs int64) (consumers, leases int64, err error) {
	const of = `FROM consumers WHERE group_id = ?1 AND partition_id IN (SELECT p.id FROM partitions p WHERE p.queue_id = ?2)`
	if err := t.queryRow(ctx, `SELECT COUNT(*) `+of+` AND lease_id IS NOT NULL AND lease_until > ?3`, groupID, queueID, nowMs).Scan(&leases); err != nil {
		return 0, 0, fmt.Errorf("leases: %w", err)
	}
	res, err := t.exec(ctx, `DELETE `+of, groupID, queueID)
	if err != nil {
		return 0, 0, fmt.Errorf("consumers: %w", err)
	}
	if consumers, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	if _, err := t.exec(ctx, `DELETE FROM subscriptions WHERE queue_id = ? AND group_id = ?`, queueID, groupID); err != nil {
		return 0, 0, fmt.Errorf("subscription: %w", err)
	}
	return consumers, leases, nil
}
