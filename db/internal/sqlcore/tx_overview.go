package sqlcore

import (
	"context"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The overview's reads (broker.OverviewTx): one statement each, of every
// queue or of the queues of one page (a JSON list of ids, json_each),
// never one a queue.

// depthThen is a group's depth before ?1 (quarter hours) of the group
// of group_stats g: its last quarter-hour bucket before, one step down
// the key, or its last hour bucket before ?4 (hours) when the quarter
// hours are gone (QuarterRetention), as Series seeds its steps. With no
// bucket before either (none kept: untouched for longer than the hours
// are kept, or new), its depth now when it has no bucket since either
// (nothing moved it since: an untouched queue did not grow), else 0 (it
// came since).
const depthThen = `COALESCE((SELECT b.depth FROM stats_quarter b WHERE b.queue_id = g.queue_id AND b.group_id = g.group_id AND b.quarter < ?1 ORDER BY b.quarter DESC LIMIT 1),
		(SELECT h.depth FROM stats_hour h WHERE h.queue_id = g.queue_id AND h.group_id = g.group_id AND h.hour < ?4 ORDER BY h.hour DESC LIMIT 1),
		CASE WHEN EXISTS (SELECT 1 FROM stats_quarter n WHERE n.queue_id = g.queue_id AND n.group_id = g.group_id AND n.quarter >= ?1) THEN 0 ELSE g.depth END)`

// windowSums are the sums of stats_quarter w of [?1, ?3) and of [?2, ?1).
const windowSums = `SUM(CASE WHEN quarter >= ?1 THEN dead_lettered ELSE 0 END) AS dl, SUM(CASE WHEN quarter >= ?1 THEN completed ELSE 0 END) AS co,
		SUM(CASE WHEN quarter >= ?1 THEN failed ELSE 0 END) AS fa, SUM(CASE WHEN quarter >= ?1 THEN replay_completed ELSE 0 END) AS rc,
		SUM(CASE WHEN quarter >= ?1 THEN replay_failed ELSE 0 END) AS rf,
		SUM(CASE WHEN quarter < ?1 THEN dead_lettered ELSE 0 END) AS dl0, SUM(CASE WHEN quarter < ?1 THEN completed ELSE 0 END) AS co0,
		SUM(CASE WHEN quarter < ?1 THEN failed ELSE 0 END) AS fa0, SUM(CASE WHEN quarter < ?1 THEN replay_completed ELSE 0 END) AS rc0,
		SUM(CASE WHEN quarter < ?1 THEN replay_failed ELSE 0 END) AS rf0`

// QueueTotalsSQL reads every queue with its kept counts: group_stats
// summed per queue (each group's depth then by depthThen: a seek a
// group), and stats_quarter's buckets of the two windows by
// stats_quarter_time, summed per queue. PostgreSQL's sums are numeric,
// cast back.
var QueueTotalsSQL = PGQuery(`SELECT q.id, q.name, q.created_at, COALESCE(s.depth, 0), COALESCE(s.depth_then, 0), COALESCE(s.oldest, 0), COALESCE(s.replayed, 0),
		COALESCE(w.dl, 0), COALESCE(w.co, 0), COALESCE(w.fa, 0), COALESCE(w.rc, 0), COALESCE(w.rf, 0),
		COALESCE(w.dl0, 0), COALESCE(w.co0, 0), COALESCE(w.fa0, 0), COALESCE(w.rc0, 0), COALESCE(w.rf0, 0)
	FROM queues q
	LEFT JOIN (SELECT g.queue_id, SUM(g.depth) AS depth, SUM(g.replayed) AS replayed, MIN(CASE WHEN g.depth > 0 AND g.oldest_at > 0 THEN g.oldest_at END) AS oldest,
		SUM(`+depthThen+`) AS depth_then
		FROM group_stats g GROUP BY g.queue_id) s ON s.queue_id = q.id
	LEFT JOIN (SELECT queue_id, `+windowSums+`
		FROM stats_quarter WHERE quarter >= ?2 AND quarter < ?3 GROUP BY queue_id) w ON w.queue_id = q.id
	ORDER BY q.name`,
	`SELECT q.id, q.name, q.created_at, COALESCE(s.depth, 0)::bigint, COALESCE(s.depth_then, 0)::bigint, COALESCE(s.oldest, 0), COALESCE(s.replayed, 0)::bigint,
		COALESCE(w.dl, 0)::bigint, COALESCE(w.co, 0)::bigint, COALESCE(w.fa, 0)::bigint, COALESCE(w.rc, 0)::bigint, COALESCE(w.rf, 0)::bigint,
		COALESCE(w.dl0, 0)::bigint, COALESCE(w.co0, 0)::bigint, COALESCE(w.fa0, 0)::bigint, COALESCE(w.rc0, 0)::bigint, COALESCE(w.rf0, 0)::bigint
	FROM queues q
	LEFT JOIN (SELECT g.queue_id, SUM(g.depth) AS depth, SUM(g.replayed) AS replayed, MIN(CASE WHEN g.depth > 0 AND g.oldest_at > 0 THEN g.oldest_at END) AS oldest,
		SUM(`+depthThen+`) AS depth_then
		FROM group_stats g GROUP BY g.queue_id) s ON s.queue_id = q.id
	LEFT JOIN (SELECT queue_id, `+windowSums+`
		FROM stats_quarter WHERE quarter >= ?2 AND quarter < ?3 GROUP BY queue_id) w ON w.queue_id = q.id
	ORDER BY q.name`)

// quarters are the quarter-hour units of w: then, 24 h before, to
// (rounded up), and then's hour.
func quarters(then, to time.Time) (thenQ, beforeQ, toQ, thenH int64) {
	thenQ = then.Unix() / 900
	return thenQ, thenQ - 96, (to.Unix() + 899) / 900, then.Unix() / 3600
}

// QueueTotals runs QueueTotalsSQL.
func (t *Tx) QueueTotals(ctx context.Context, w broker.TotalsWindow) ([]broker.QueueTotals, error) {
	thenQ, beforeQ, toQ, thenH := quarters(w.Then, w.To)
	rows, err := t.Query(ctx, QueueTotalsSQL, thenQ, beforeQ, toQ, thenH)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.QueueTotals
	for rows.Next() {
		var q broker.QueueTotals
		var oldest, created int64
		if err := rows.Scan(&q.ID, &q.Name, &created, &q.Depth, &q.DepthThen, &oldest, &q.Replayed,
			&q.Window.DeadLettered, &q.Window.Completed, &q.Window.Failed, &q.Window.ReplayCompleted, &q.Window.ReplayFailed,
			&q.Before.DeadLettered, &q.Before.Completed, &q.Before.Failed, &q.Before.ReplayCompleted, &q.Before.ReplayFailed); err != nil {
			return nil, err
		}
		q.OldestAt, q.CreatedAt = FromMS(oldest), FromMS(created)
		out = append(out, q)
	}
	return out, rows.Err()
}

// StatsOf reads group_stats of the listed queues by its key, joined to
// groups.
func (t *Tx) StatsOf(ctx context.Context, queueIDs []int64) ([]broker.GroupStats, error) {
	rows, err := t.Query(ctx, `SELECT s.queue_id, s.group_id, g.name, s.depth, s.dead_lettered, s.replayed, s.deleted, s.dropped, s.completed, s.failed,
		s.replay_completed, s.replay_failed, s.expired, s.dead_letters_expired, s.oldest_at
		FROM group_stats s JOIN groups g ON g.id = s.group_id WHERE s.queue_id IN (SELECT value FROM json_each(?)) ORDER BY s.queue_id, g.name`, IntsJSON(queueIDs))
	if err != nil {
		return nil, err
	}
	return scanGroupStats(rows)
}

// ReadersOf reads subscriptions of the listed queues by queue, joined to
// groups.
func (t *Tx) ReadersOf(ctx context.Context, queueIDs []int64) (map[int64][]string, error) {
	rows, err := t.Query(ctx, `SELECT s.queue_id, g.name FROM subscriptions s JOIN groups g ON g.id = s.group_id
		WHERE s.queue_id IN (SELECT value FROM json_each(?)) ORDER BY s.queue_id, g.name`, IntsJSON(queueIDs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][]string{}
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, err
		}
		out[id] = append(out[id], name)
	}
	return out, rows.Err()
}

// PartitionCounts counts partitions by (queue_id, name) of the listed
// queues.
func (t *Tx) PartitionCounts(ctx context.Context, queueIDs []int64) (map[int64]int, error) {
	rows, err := t.Query(ctx, `SELECT queue_id, COUNT(*) FROM partitions WHERE queue_id IN (SELECT value FROM json_each(?)) GROUP BY queue_id`, IntsJSON(queueIDs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = int(n)
	}
	return out, rows.Err()
}

// DepthBuckets reads each listed queue's groups' depth before from
// (depthThen, by group_stats; ?3 only gives PostgreSQL its type) and their quarter-hour buckets of [from,
// to) by the primary key.
func (t *Tx) DepthBuckets(ctx context.Context, queueIDs []int64, from, to time.Time) ([]broker.Bucket, error) {
	thenQ, _, toQ, thenH := quarters(from, to)
	list := IntsJSON(queueIDs)
	var out []broker.Bucket
	seedAt := time.Unix((thenQ-1)*900, 0).UTC()
	rows, err := t.Query(ctx, `SELECT g.queue_id, g.group_id, `+depthThen+` FROM group_stats g WHERE g.queue_id IN (SELECT value FROM json_each(?2)) AND ?3 >= 0`,
		thenQ, list, toQ, thenH)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		b := broker.Bucket{At: seedAt}
		if err := rows.Scan(&b.QueueID, &b.GroupID, &b.Depth); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = t.Query(ctx, `SELECT queue_id, group_id, quarter, depth FROM stats_quarter
		WHERE queue_id IN (SELECT value FROM json_each(?)) AND quarter >= ? AND quarter < ? ORDER BY queue_id, group_id, quarter`, list, thenQ, toQ)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var b broker.Bucket
		var q int64
		if err := rows.Scan(&b.QueueID, &b.GroupID, &q, &b.Depth); err != nil {
			return nil, err
		}
		b.At = time.Unix(q*900, 0).UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

// TopErrorGroupsSQL sums error_groups of the listed queues (?1, by the
// primary key) per queue and fingerprint, and keeps the ?2 biggest of
// each queue.
var TopErrorGroupsSQL = PGQuery(`SELECT queue_id, fingerprint, n FROM (
		SELECT queue_id, fingerprint, n, ROW_NUMBER() OVER (PARTITION BY queue_id ORDER BY n DESC, fingerprint) AS r FROM (
			SELECT queue_id, fingerprint, SUM(dead_letters) AS n FROM error_groups
			WHERE queue_id IN (SELECT value FROM json_each(?1)) AND dead_letters > 0 GROUP BY queue_id, fingerprint) x) y
	WHERE r <= ?2 ORDER BY queue_id, r`,
	`SELECT queue_id, fingerprint, n FROM (
		SELECT queue_id, fingerprint, n, ROW_NUMBER() OVER (PARTITION BY queue_id ORDER BY n DESC, fingerprint) AS r FROM (
			SELECT queue_id, fingerprint, SUM(dead_letters)::bigint AS n FROM error_groups
			WHERE queue_id IN (SELECT value::bigint FROM json_array_elements_text(?1::json) AS value) AND dead_letters > 0 GROUP BY queue_id, fingerprint) x) y
	WHERE r <= ?2 ORDER BY queue_id, r`)

// TopErrorGroupsOf runs TopErrorGroupsSQL.
func (t *Tx) TopErrorGroupsOf(ctx context.Context, queueIDs []int64, limit int) ([]broker.ErrorGroup, error) {
	rows, err := t.Query(ctx, TopErrorGroupsSQL, IntsJSON(queueIDs), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.ErrorGroup
	for rows.Next() {
		var g broker.ErrorGroup
		if err := rows.Scan(&g.QueueID, &g.Fingerprint, &g.DeadLetters); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// QueueNames reads queues' names by their unique index.
func (t *Tx) QueueNames(ctx context.Context) ([]string, error) {
	rows, err := t.Query(ctx, `SELECT name FROM queues ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
