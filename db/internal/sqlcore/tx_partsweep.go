package sqlcore

import (
	"context"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The sweep of empty partitions (broker/partsweep.go, migration 0022).

// emptyChecks is the rule of the sweep for the partition of the
// enclosing statement (partitions.id; ?2 the age bound, ?3 now), each
// check one index probe: messages_partition_seq, dead_letters_partition,
// removed_dead_letters_partition, replays_partition, the consumers'
// primary key (partition_id > 0 lets the partial indexes of 0022 be
// used). The retention's placeholder message has partition 0, which no
// partition has.
const emptyChecks = `partitions.created_at < ?2
		AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.partition_id = partitions.id)
		AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.partition_id = partitions.id AND d.partition_id > 0)
		AND NOT EXISTS (SELECT 1 FROM removed_dead_letters r WHERE r.partition_id = partitions.id AND r.partition_id > 0)
		AND NOT EXISTS (SELECT 1 FROM replays c WHERE c.partition_id = partitions.id AND c.partition_id > 0)
		AND NOT EXISTS (SELECT 1 FROM consumers c WHERE c.partition_id = partitions.id
			AND ((c.lease_id IS NOT NULL AND c.lease_until > ?3) OR c.retry_seq > 0))`

const (
	// EmptyPartitionsSQL: a page of the partitions_empty index (kept
	// count 0) above ?1 in id order, each with whether the rule of the
	// sweep (emptyChecks) holds for it now.
	EmptyPartitionsSQL = `SELECT id, ` + emptyChecks + ` FROM partitions WHERE messages = 0 AND id > ?1 ORDER BY id LIMIT ?4`
	// DeleteEmptyPartitionsSQL deletes the partitions of the list for
	// which the rule of the sweep (emptyChecks) holds.
	DeleteEmptyPartitionsSQL = `DELETE FROM partitions WHERE id IN (SELECT value FROM json_each(?1)) AND ` + emptyChecks + `
		RETURNING ` + partitionCols
	DeletePartitionConsumersSQL = `DELETE FROM consumers WHERE partition_id IN (SELECT value FROM json_each(?))`
	DeletePartitionMarksSQL     = `DELETE FROM settle_marks WHERE partition_id IN (SELECT value FROM json_each(?))`
)

// EmptyPartitions reads a page of up to limit partitions, above after in
// id order, whose kept count of messages (partitions.messages) is 0, and
// returns those of them that are empty by the rule of the sweep at now
// (emptyChecks: made before before, no message, dead letter, record of a
// removed one, replay, live lease or retry) and the highest id of the
// page (0: the page was the last, shorter than limit). An empty
// partition's count is 0: whatever removes messages lowers it in its own
// transaction (SweepMessages); a partition pushed to since the last fold
// may be 0 too, which the message check finds not empty. Reads
// partitions by partitions_empty (only those with a count of 0) and one
// index probe a check; locks nothing; none: an empty list.
func (t *Tx) EmptyPartitions(ctx context.Context, before, now time.Time, after int64, limit int) ([]int64, int64, error) {
	rows, err := t.Query(ctx, EmptyPartitionsSQL, after, MS(before), MS(now), limit)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var ids []int64
	var last int64
	n := 0
	for rows.Next() {
		var id int64
		var empty bool
		if err := rows.Scan(&id, &empty); err != nil {
			return nil, 0, err
		}
		n++
		last = id
		if empty {
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if n < limit {
		last = 0
	}
	return ids, last, nil
}

// DeleteEmptyPartitions deletes those of ids that are empty, checked in
// this transaction (emptyChecks): made before before,
// no message, no dead letter, no removed_dead_letters record, no replay
// naming the partition, no consumer with a live lease at now or a retry.
// Their consumers and settle marks go with them. It returns the
// partitions deleted; an id not there or not empty is left alone (no
// error). The db's noted partitions and consumers to fold (d.unfolded,
// d.unfoldedConsumers) may still name a deleted one: the fold's updates
// match no row for it. Writes partitions, consumers and settle_marks
// (each by its key); runs in the writer's transaction.
func (t *Tx) DeleteEmptyPartitions(ctx context.Context, ids []int64, before, now time.Time) ([]broker.Partition, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := t.Query(ctx, DeleteEmptyPartitionsSQL, IntsJSON(ids), MS(before), MS(now))
	if err != nil {
		return nil, err
	}
	var gone []broker.Partition
	for rows.Next() {
		p, err := scanPartition(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		gone = append(gone, p)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(gone) == 0 {
		return nil, nil
	}
	list := make([]int64, len(gone))
	for i, p := range gone {
		list[i] = p.ID
	}
	for _, s := range []string{DeletePartitionConsumersSQL, DeletePartitionMarksSQL} {
		if _, err := t.Exec(ctx, s, IntsJSON(list)); err != nil {
			return nil, err
		}
	}
	return gone, nil
}
