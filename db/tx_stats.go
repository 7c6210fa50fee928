package db

import (
	"context"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

func (t *storeTx) AddStats(ctx context.Context, queueID, groupID int64, d broker.Stats, at time.Time) error {
	var depth, oldest int64
	err := t.tx.QueryRowContext(ctx, `INSERT INTO group_stats (queue_id, group_id, depth, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (queue_id, group_id) DO UPDATE SET depth = depth + excluded.depth, dead_lettered = dead_lettered + excluded.dead_lettered,
		replayed = replayed + excluded.replayed, deleted = deleted + excluded.deleted, dropped = dropped + excluded.dropped,
		completed = completed + excluded.completed, failed = failed + excluded.failed,
		replay_completed = replay_completed + excluded.replay_completed, replay_failed = replay_failed + excluded.replay_failed
		RETURNING depth, oldest_at`,
		queueID, groupID, d.Depth, d.DeadLettered, d.Replayed, d.Deleted, d.Dropped, d.Completed, d.Failed, d.ReplayCompleted, d.ReplayFailed).Scan(&depth, &oldest)
	if err != nil {
		return err
	}
	if d.Depth != 0 || d.DeadLettered != 0 {
		// The oldest dead letter moves only when dead letters come or go:
		// one step down the group's index.
		oldest = 0
		err := t.tx.QueryRowContext(ctx, `SELECT failed_at FROM dead_letters WHERE queue_id = ? AND group_id = ? ORDER BY failed_at, id LIMIT 1`, queueID, groupID).Scan(&oldest)
		if err != nil && err != errNoRows {
			return err
		}
		if _, err := t.tx.ExecContext(ctx, `UPDATE group_stats SET oldest_at = ? WHERE queue_id = ? AND group_id = ?`, oldest, queueID, groupID); err != nil {
			return err
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO stats_minute (queue_id, group_id, minute, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed, depth, oldest_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (queue_id, group_id, minute) DO UPDATE SET dead_lettered = dead_lettered + excluded.dead_lettered,
		replayed = replayed + excluded.replayed, deleted = deleted + excluded.deleted, dropped = dropped + excluded.dropped,
		completed = completed + excluded.completed, failed = failed + excluded.failed,
		replay_completed = replay_completed + excluded.replay_completed, replay_failed = replay_failed + excluded.replay_failed,
		depth = excluded.depth, oldest_at = excluded.oldest_at`,
		queueID, groupID, at.Unix()/60, d.DeadLettered, d.Replayed, d.Deleted, d.Dropped, d.Completed, d.Failed, d.ReplayCompleted, d.ReplayFailed, depth, oldest)
	return err
}

func (t *storeTx) Stats(ctx context.Context, queueID int64) ([]broker.GroupStats, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT s.queue_id, s.group_id, g.name, s.depth, s.dead_lettered, s.replayed, s.deleted, s.dropped, s.completed, s.failed,
		s.replay_completed, s.replay_failed, s.oldest_at
		FROM group_stats s JOIN groups g ON g.id = s.group_id WHERE s.queue_id = ? ORDER BY g.name`, queueID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.GroupStats
	for rows.Next() {
		var s broker.GroupStats
		var oldest int64
		if err := rows.Scan(&s.QueueID, &s.GroupID, &s.Group, &s.Depth, &s.DeadLettered, &s.Replayed, &s.Deleted, &s.Dropped, &s.Completed, &s.Failed,
			&s.ReplayCompleted, &s.ReplayFailed, &oldest); err != nil {
			return nil, err
		}
		s.OldestFailedAt = fromMS(oldest)
		out = append(out, s)
	}
	return out, rows.Err()
}

// bucketCols are a bucket table's counters, as they are selected.
const bucketCols = `b.dead_lettered, b.replayed, b.deleted, b.dropped, b.completed, b.failed, b.replay_completed, b.replay_failed, b.depth, b.oldest_at`

func (t *storeTx) Series(ctx context.Context, queueID int64, from, to time.Time, step time.Duration) ([]broker.Bucket, error) {
	fromMin, toMin := from.Unix()/60, (to.Unix()+59)/60
	// Seeds: each group's last bucket before the range, then the range,
	// from both tables (hours hold what is older than the minutes).
	q := `SELECT * FROM (
		SELECT b.queue_id, b.group_id, MAX(b.hour) * 60 AS minute, ` + bucketCols + ` FROM stats_hour b WHERE b.hour < ?1 / 60 AND (?3 = 0 OR b.queue_id = ?3) GROUP BY b.queue_id, b.group_id
		UNION ALL
		SELECT b.queue_id, b.group_id, MAX(b.minute) AS minute, ` + bucketCols + ` FROM stats_minute b WHERE b.minute < ?1 AND (?3 = 0 OR b.queue_id = ?3) GROUP BY b.queue_id, b.group_id
		UNION ALL
		SELECT b.queue_id, b.group_id, b.hour * 60, ` + bucketCols + ` FROM stats_hour b WHERE b.hour >= ?1 / 60 AND b.hour < (?2 + 59) / 60 AND (?3 = 0 OR b.queue_id = ?3)
		UNION ALL
		SELECT b.queue_id, b.group_id, b.minute, ` + bucketCols + ` FROM stats_minute b WHERE b.minute >= ?1 AND b.minute < ?2 AND (?3 = 0 OR b.queue_id = ?3)
	) x ORDER BY x.queue_id, x.group_id, x.minute`
	rows, err := t.tx.QueryContext(ctx, q, fromMin, toMin, queueID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	queues, groups := map[int64]string{}, map[int64]string{}
	var out []broker.Bucket
	for rows.Next() {
		var b broker.Bucket
		var minute, oldest int64
		if err := rows.Scan(&b.QueueID, &b.GroupID, &minute, &b.DeadLettered, &b.Replayed, &b.Deleted, &b.Dropped, &b.Completed, &b.Failed,
			&b.ReplayCompleted, &b.ReplayFailed, &b.Depth, &oldest); err != nil {
			return nil, err
		}
		b.At, b.OldestAt = time.Unix(minute*60, 0).UTC(), fromMS(oldest)
		queues[b.QueueID], groups[b.GroupID] = "", ""
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := t.names(ctx, `SELECT id, name FROM queues`, queues); err != nil {
		return nil, err
	}
	if err := t.names(ctx, `SELECT id, name FROM groups`, groups); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Queue, out[i].Group = queues[out[i].QueueID], groups[out[i].GroupID]
	}
	return out, nil
}

// names fills m (id to name) for the ids it holds.
func (t *storeTx) names(ctx context.Context, query string, m map[int64]string) error {
	if len(m) == 0 {
		return nil
	}
	rows, err := t.tx.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return err
		}
		if _, ok := m[id]; ok {
			m[id] = name
		}
	}
	return rows.Err()
}

func (t *storeTx) CompactStats(ctx context.Context, minutesBefore, hoursBefore time.Time) error {
	cut := minutesBefore.Unix() / 3600 * 60 // whole hours only
	// The bare depth and oldest_at come from the row of MAX(minute): the
	// hour's last minute.
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO stats_hour (queue_id, group_id, hour, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed, depth, oldest_at)
		SELECT queue_id, group_id, h, dl, rp, de, dr, co, fa, rc, rf, depth, oldest_at FROM (
			SELECT queue_id, group_id, minute / 60 AS h, SUM(dead_lettered) AS dl, SUM(replayed) AS rp, SUM(deleted) AS de, SUM(dropped) AS dr,
				SUM(completed) AS co, SUM(failed) AS fa, SUM(replay_completed) AS rc, SUM(replay_failed) AS rf, MAX(minute) AS last, depth, oldest_at
			FROM stats_minute WHERE minute < ?1 GROUP BY queue_id, group_id, minute / 60)
		WHERE true
		ON CONFLICT (queue_id, group_id, hour) DO UPDATE SET dead_lettered = dead_lettered + excluded.dead_lettered,
		replayed = replayed + excluded.replayed, deleted = deleted + excluded.deleted, dropped = dropped + excluded.dropped,
		completed = completed + excluded.completed, failed = failed + excluded.failed,
		replay_completed = replay_completed + excluded.replay_completed, replay_failed = replay_failed + excluded.replay_failed,
		depth = excluded.depth, oldest_at = excluded.oldest_at`, cut); err != nil {
		return err
	}
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM stats_minute WHERE minute < ?`, cut); err != nil {
		return err
	}
	_, err := t.tx.ExecContext(ctx, `DELETE FROM stats_hour WHERE hour < ?`, hoursBefore.Unix()/3600)
	return err
}

func (t *storeTx) ExpectReplayOutcome(ctx context.Context, copySeq, groupID int64) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO replay_outcomes (copy_seq, group_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, copySeq, groupID)
	return err
}

func (t *storeTx) TakeReplayOutcome(ctx context.Context, copySeq, groupID int64) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM replay_outcomes WHERE copy_seq = ? AND group_id = ?`, copySeq, groupID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
