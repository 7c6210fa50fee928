package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A queue's windowBuffer (broker.WindowTx) holds back a partition whose
// newest message was pushed less than the window ago. The newest message
// of a partition is the last entry of messages_partition_seq for it, and
// its push time is read from its row: no column is kept for it, so a
// push (of any queue) writes nothing more. The cost is the window's
// queues': for each consumer a pop looks at, one more index probe and
// the row of the newest message (created_at comes after the payload, so
// a large payload's overflow pages are walked, as for a
// delayedProcessing head). A queue without a window never runs these
// statements (broker.readyConsumers).

// ReadyConsumersWindow is ReadyConsumers by readyWindowSQL: a consumer
// whose head is due but whose partition is in its window counts as not
// due (head 2: skipped, left marked ready).
func (t *Tx) ReadyConsumersWindow(ctx context.Context, r broker.WindowRead) ([]broker.Consumer, bool, error) {
	return t.readyConsumers(ctx, readyWindowSQL, r.QueueID, r.GroupID, r.Now, r.Limit, r.Window.Milliseconds())
}

// readyWindowSQL is readyConsumersSQL with the window (?7, in ms): head
// 1 only when the first message past the cursor is due under the delay
// and the partition's newest message is ?7 old or older. Its CASE reads
// the head's row only with a delay (d.delay = 0 comes first).
var readyWindowSQL = PGQuery(`SELECT `+ConsumerCols+`,
			COALESCE((SELECT CASE WHEN (d.delay = 0 OR m.created_at + d.delay <= ?3)
					AND (SELECT n.created_at FROM messages n WHERE n.partition_id = c.partition_id ORDER BY n.seq DESC LIMIT 1) + ?7 <= ?3
				THEN 1 ELSE 2 END FROM messages m
				WHERE m.partition_id = c.partition_id AND m.seq > c.cursor ORDER BY m.seq LIMIT 1), 0)
			FROM (SELECT delayed_processing * 1000 AS delay FROM queues WHERE id = ?1) d, consumers c
			WHERE c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1 AND (c.leased_at, c.partition_id) > (?5, ?6)
			AND (c.lease_id IS NULL OR c.lease_until <= ?3) AND c.available_at <= ?3
			ORDER BY c.leased_at, c.partition_id LIMIT ?4`, `SELECT `+ConsumerCols+`,
			COALESCE((SELECT CASE WHEN (d.delay = 0 OR m.created_at + d.delay <= ?3)
					AND (SELECT n.created_at FROM messages n WHERE n.partition_id = c.partition_id ORDER BY n.seq DESC LIMIT 1) + ?7 <= ?3
				THEN 1 ELSE 2 END FROM messages m
				WHERE m.partition_id = c.partition_id AND m.seq > c.cursor ORDER BY m.seq LIMIT 1), 0)
			FROM (SELECT delayed_processing * 1000 AS delay FROM queues WHERE id = ?1) d, consumers c
			WHERE c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1 AND (c.leased_at, c.partition_id) > (?5, ?6)
			AND (c.lease_id IS NULL OR c.lease_until <= ?3) AND c.available_at <= ?3
			ORDER BY c.leased_at, c.partition_id LIMIT ?4`)

// NextWakeWindow: every ready consumer with a message past its cursor
// wakes at the latest of its retry delay's end, its head's
// delayedProcessing (with a delay only) and its partition's window (its
// newest message's push + ?4 ms); the earliest of those after now. A
// consumer under a live lease wakes when the lease (or a retry delay
// after it) ends, its rows unread, as in NextWake: its partition was out
// of its window when it was leased. Should a push during the lease have
// started the window again, that wake finds nothing, and the next call,
// the lease over, names the window's end.
func (t *Tx) NextWakeWindow(ctx context.Context, r broker.WindowRead) (time.Time, bool, error) {
	var next sql.NullInt64
	err := t.QueryRow(ctx, nextWakeWindowSQL, r.QueueID, r.GroupID, MS(r.Now), r.Window.Milliseconds()).Scan(&next)
	if err != nil || !next.Valid {
		return time.Time{}, false, err
	}
	return FromMS(next.Int64), true, nil
}

// nextWakeWindowSQL is NextWakeWindow's query. PostgreSQL's GREATEST
// for SQLite's MAX (none of their terms is NULL: the consumer has a
// message past its cursor), and an alias for its subquery in FROM.
var nextWakeWindowSQL = PGQuery(`SELECT MIN(w) FROM (SELECT CASE WHEN c.lease_id IS NOT NULL AND c.lease_until > ?3 THEN MAX(c.lease_until, c.available_at)
				ELSE MAX(c.available_at,
					CASE WHEN q.delayed_processing = 0 THEN 0 ELSE (SELECT m.created_at FROM messages m
						WHERE m.partition_id = c.partition_id AND m.seq > c.cursor ORDER BY m.seq LIMIT 1) + q.delayed_processing * 1000 END,
					(SELECT n.created_at FROM messages n WHERE n.partition_id = c.partition_id ORDER BY n.seq DESC LIMIT 1) + ?4) END AS w
			FROM queues q, consumers c WHERE q.id = ?1 AND c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1
			AND (SELECT m.seq FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor LIMIT 1) IS NOT NULL) WHERE w > ?3`,
	`SELECT MIN(w.w) FROM (SELECT CASE WHEN c.lease_id IS NOT NULL AND c.lease_until > ?3 THEN GREATEST(c.lease_until, c.available_at)
				ELSE GREATEST(c.available_at,
					CASE WHEN q.delayed_processing = 0 THEN 0 ELSE (SELECT m.created_at FROM messages m
						WHERE m.partition_id = c.partition_id AND m.seq > c.cursor ORDER BY m.seq LIMIT 1) + q.delayed_processing * 1000 END,
					(SELECT n.created_at FROM messages n WHERE n.partition_id = c.partition_id ORDER BY n.seq DESC LIMIT 1) + ?4) END AS w
			FROM queues q, consumers c WHERE q.id = ?1 AND c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1
			AND (SELECT m.seq FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor LIMIT 1) IS NOT NULL) w WHERE w.w > ?3`)

// LastPush reads the partition's newest message by
// messages_partition_seq, backwards, and its created_at from its row.
func (t *Tx) LastPush(ctx context.Context, partitionID int64) (time.Time, bool, error) {
	var at int64
	err := t.QueryRow(ctx, `SELECT created_at FROM messages WHERE partition_id = ? ORDER BY seq DESC LIMIT 1`, partitionID).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return FromMS(at), true, nil
}
