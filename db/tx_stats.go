package db

import (
	"context"
	"database/sql"
	"sort"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

func (t *storeTx) AddStats(ctx context.Context, queueID, groupID int64, d broker.Stats, at time.Time) error {
	var depth, oldest int64
	err := t.queryRow(ctx, `INSERT INTO group_stats (queue_id, group_id, depth, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed)
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
		err := t.queryRow(ctx, `SELECT failed_at FROM dead_letters WHERE queue_id = ? AND group_id = ? ORDER BY failed_at, id LIMIT 1`, queueID, groupID).Scan(&oldest)
		if err != nil && err != errNoRows {
			return err
		}
		if _, err := t.exec(ctx, `UPDATE group_stats SET oldest_at = ? WHERE queue_id = ? AND group_id = ?`, oldest, queueID, groupID); err != nil {
			return err
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	_, err = t.exec(ctx, `INSERT INTO stats_minute (queue_id, group_id, minute, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed, depth, oldest_at)
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
	rows, err := t.query(ctx, `SELECT s.queue_id, s.group_id, g.name, s.depth, s.dead_lettered, s.replayed, s.deleted, s.dropped, s.completed, s.failed,
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
const bucketCols = `b.dead_lettered, b.replayed, b.deleted, b.dropped, b.completed, b.failed, b.replay_completed, b.replay_failed, 0, b.depth, b.oldest_at`

func (t *storeTx) Series(ctx context.Context, queueID int64, from, to time.Time, step time.Duration) ([]broker.Bucket, error) {
	fromMin, toMin, stepMin := from.Unix()/60, (to.Unix()+59)/60, int64(step/time.Minute)
	var out []broker.Bucket
	scan := func(rows *sql.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var b broker.Bucket
			var minute, last, oldest int64
			if err := rows.Scan(&b.QueueID, &b.GroupID, &minute, &b.DeadLettered, &b.Replayed, &b.Deleted, &b.Dropped, &b.Completed, &b.Failed,
				&b.ReplayCompleted, &b.ReplayFailed, &last, &b.Depth, &oldest); err != nil {
				return err
			}
			b.At, b.OldestAt = time.Unix(minute*60, 0).UTC(), fromMS(oldest)
			out = append(out, b)
		}
		return rows.Err()
	}
	// Seeds: each group's last bucket before the range, found by one step
	// down its key (minutes first; older ones live in the hour table).
	keys, err := t.query(ctx, `SELECT queue_id, group_id FROM group_stats WHERE ?1 = 0 OR queue_id = ?1`, queueID)
	if err != nil {
		return nil, err
	}
	var pairs [][2]int64
	for keys.Next() {
		var p [2]int64
		if err := keys.Scan(&p[0], &p[1]); err != nil {
			keys.Close()
			return nil, err
		}
		pairs = append(pairs, p)
	}
	keys.Close()
	if err := keys.Err(); err != nil {
		return nil, err
	}
	for _, p := range pairs {
		n := len(out)
		rows, err := t.query(ctx, `SELECT b.queue_id, b.group_id, b.minute, `+bucketCols+` FROM stats_minute b
			WHERE b.queue_id = ? AND b.group_id = ? AND b.minute < ? ORDER BY b.minute DESC LIMIT 1`, p[0], p[1], fromMin)
		if err == nil {
			err = scan(rows)
		}
		if err == nil && len(out) == n {
			rows, err = t.query(ctx, `SELECT b.queue_id, b.group_id, b.hour * 60, `+bucketCols+` FROM stats_hour b
				WHERE b.queue_id = ? AND b.group_id = ? AND b.hour < ? / 60 ORDER BY b.hour DESC LIMIT 1`, p[0], p[1], fromMin)
			if err == nil {
				err = scan(rows)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	// The range, summed per step in SQL: depth and oldest_at are those of
	// each step's last bucket (the row of MAX).
	sums := `SUM(b.dead_lettered), SUM(b.replayed), SUM(b.deleted), SUM(b.dropped), SUM(b.completed), SUM(b.failed), SUM(b.replay_completed), SUM(b.replay_failed)`
	for _, q := range []string{
		`SELECT b.queue_id, b.group_id, (b.hour * 60 / ?4) * ?4 AS step, ` + sums + `, MAX(b.hour), b.depth, b.oldest_at FROM stats_hour b
			WHERE b.hour >= ?1 / 60 AND b.hour < (?2 + 59) / 60 AND (?3 = 0 OR b.queue_id = ?3) GROUP BY b.queue_id, b.group_id, step`,
		`SELECT b.queue_id, b.group_id, (b.minute / ?4) * ?4 AS step, ` + sums + `, MAX(b.minute), b.depth, b.oldest_at FROM stats_minute b
			WHERE b.minute >= ?1 AND b.minute < ?2 AND (?3 = 0 OR b.queue_id = ?3) GROUP BY b.queue_id, b.group_id, step`,
	} {
		rows, err := t.query(ctx, q, fromMin, toMin, queueID, stepMin)
		if err != nil {
			return nil, err
		}
		if err := scan(rows); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.QueueID != b.QueueID {
			return a.QueueID < b.QueueID
		}
		if a.GroupID != b.GroupID {
			return a.GroupID < b.GroupID
		}
		return a.At.Before(b.At)
	})
	queues, groups := map[int64]string{}, map[int64]string{}
	for _, b := range out {
		queues[b.QueueID], groups[b.GroupID] = "", ""
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
	rows, err := t.query(ctx, query)
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
	if _, err := t.exec(ctx, `INSERT INTO stats_hour (queue_id, group_id, hour, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed, depth, oldest_at)
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
	if _, err := t.exec(ctx, `DELETE FROM stats_minute WHERE minute < ?`, cut); err != nil {
		return err
	}
	_, err := t.exec(ctx, `DELETE FROM stats_hour WHERE hour < ?`, hoursBefore.Unix()/3600)
	return err
}

func (t *storeTx) TakeReplayOutcome(ctx context.Context, copySeq, groupID int64) (bool, error) {
	res, err := t.exec(ctx, `DELETE FROM replay_outcomes WHERE copy_seq = ? AND group_id = ?`, copySeq, groupID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
