package sqlcore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// AddStats upserts group_stats (RETURNING the depth after the change and
// the oldest dead letter: read by dead_letters_group in the same
// statement when dead letters come or go), and upserts the minute,
// quarter and hour buckets. A zero at is time.Now(), the wall clock.
func (t *Tx) AddStats(ctx context.Context, queueID, groupID int64, d broker.Stats, at time.Time) error {
	moves := 0
	if d.Depth != 0 || d.DeadLettered != 0 {
		moves = 1
	}
	var depth, oldest int64
	err := t.QueryRow(ctx, addGroupStatsSQL,
		queueID, groupID, d.Depth, d.DeadLettered, d.Replayed, d.Deleted, d.Dropped, d.Completed, d.Failed, d.ReplayCompleted, d.ReplayFailed,
		d.Expired, d.DeadLettersExpired, moves).Scan(&depth, &oldest)
	if err != nil {
		return err
	}
	if at.IsZero() {
		at = time.Now()
	}
	// The buckets of the minute, the quarter hour and the hour of at. A
	// change of no dead letters leaves a bucket's depth and oldest as they
	// are: it may be counts that waited in memory (StatsDelay) and come
	// after writes that moved the depth since their time (another
	// process's, or a write beside others, which takes no waiting
	// counts); the depth now is not the depth of their bucket. A new
	// bucket takes the depth now.
	minute := at.Unix() / 60
	for _, b := range bucketTables {
		if _, err := t.Exec(ctx, b.upsert, queueID, groupID, minute/b.minutes, d.DeadLettered, d.Replayed, d.Deleted, d.Dropped, d.Completed, d.Failed,
			d.ReplayCompleted, d.ReplayFailed, d.Expired, d.DeadLettersExpired, depth, oldest, moves); err != nil {
			return err
		}
	}
	return nil
}

// addGroupStatsSQL is AddStats' upsert of group_stats. The oldest dead
// letter moves only when dead letters come or go (?14 not 0): then it is
// one step down the group's index (dead_letters_group), 0 for none.
//
// On PostgreSQL the step reads the statement's snapshot, taken before
// the upsert waits for the group's row, where a SELECT after the upsert
// would see what committed during that wait. It sees every dead letter
// of the group all the same because a write that adds or removes a
// group's dead letters runs alone (the writer's lock held exclusively)
// or files under the filing lock (db/postgres/filing.go), held from
// before it counts to its commit: no such write commits between this
// statement's snapshot and its row lock. A write beside others that
// came to file or remove dead letters would need the step in a
// statement of its own.
const addGroupStatsSQL = `INSERT INTO group_stats (queue_id, group_id, depth, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed,
			expired, dead_letters_expired, oldest_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, CASE WHEN ?14 <> 0 THEN COALESCE((SELECT d.failed_at FROM dead_letters d WHERE d.queue_id = ?1 AND d.group_id = ?2 ORDER BY d.failed_at, d.id LIMIT 1), 0) ELSE 0 END)
		ON CONFLICT (queue_id, group_id) DO UPDATE SET depth = group_stats.depth + excluded.depth, dead_lettered = group_stats.dead_lettered + excluded.dead_lettered,
		replayed = group_stats.replayed + excluded.replayed, deleted = group_stats.deleted + excluded.deleted, dropped = group_stats.dropped + excluded.dropped,
		completed = group_stats.completed + excluded.completed, failed = group_stats.failed + excluded.failed,
		replay_completed = group_stats.replay_completed + excluded.replay_completed, replay_failed = group_stats.replay_failed + excluded.replay_failed,
		expired = group_stats.expired + excluded.expired, dead_letters_expired = group_stats.dead_letters_expired + excluded.dead_letters_expired,
		oldest_at = CASE WHEN ?14 <> 0 THEN excluded.oldest_at ELSE group_stats.oldest_at END
		RETURNING depth, oldest_at`

// bucketTable is one table of time-bucketed counters.
type bucketTable struct {
	name, unit string // the table and its time column
	minutes    int64  // the bucket's length
	upsert     string // adds counters; sets depth and oldest_at when ?16 is not 0, or the bucket is new
	insert     string // a new bucket, whole (InsertBuckets)
}

func newBucketTable(name, unit string, minutes int64) bucketTable {
	return bucketTable{name: name, unit: unit, minutes: minutes,
		upsert: `INSERT INTO ` + name + ` (queue_id, group_id, ` + unit + `, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed,
			expired, dead_letters_expired, depth, oldest_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (queue_id, group_id, ` + unit + `) DO UPDATE SET dead_lettered = ` + name + `.dead_lettered + excluded.dead_lettered,
		replayed = ` + name + `.replayed + excluded.replayed, deleted = ` + name + `.deleted + excluded.deleted, dropped = ` + name + `.dropped + excluded.dropped,
		completed = ` + name + `.completed + excluded.completed, failed = ` + name + `.failed + excluded.failed,
		replay_completed = ` + name + `.replay_completed + excluded.replay_completed, replay_failed = ` + name + `.replay_failed + excluded.replay_failed,
		expired = ` + name + `.expired + excluded.expired, dead_letters_expired = ` + name + `.dead_letters_expired + excluded.dead_letters_expired,
		depth = CASE WHEN ?16 <> 0 THEN excluded.depth ELSE ` + name + `.depth END,
		oldest_at = CASE WHEN ?16 <> 0 THEN excluded.oldest_at ELSE ` + name + `.oldest_at END`,
		insert: `INSERT INTO ` + name + ` (queue_id, group_id, ` + unit + `, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed,
			expired, dead_letters_expired, depth, oldest_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`}
}

// bucketTables, finest first.
var bucketTables = []bucketTable{
	newBucketTable("stats_minute", "minute", 1),
	newBucketTable("stats_quarter", "quarter", 15),
	newBucketTable("stats_hour", "hour", 60),
}

// bucketsFor picks the coarsest table whose buckets divide step.
func bucketsFor(step time.Duration) bucketTable {
	stepMin := int64(step / time.Minute)
	for i := len(bucketTables) - 1; i > 0; i-- {
		if stepMin%bucketTables[i].minutes == 0 {
			return bucketTables[i]
		}
	}
	return bucketTables[0]
}

// Stats reads group_stats by the queue, joined to groups, by name.
func (t *Tx) Stats(ctx context.Context, queueID int64) ([]broker.GroupStats, error) {
	rows, err := t.Query(ctx, `SELECT s.queue_id, s.group_id, g.name, s.depth, s.dead_lettered, s.replayed, s.deleted, s.dropped, s.completed, s.failed,
		s.replay_completed, s.replay_failed, s.expired, s.dead_letters_expired, s.oldest_at
		FROM group_stats s JOIN groups g ON g.id = s.group_id WHERE s.queue_id = ? ORDER BY g.name`, queueID)
	if err != nil {
		return nil, err
	}
	return scanGroupStats(rows)
}

// scanGroupStats reads rows of group_stats joined to groups' names, as
// Stats and StatsOf select them.
func scanGroupStats(rows Rows) ([]broker.GroupStats, error) {
	defer rows.Close()
	var out []broker.GroupStats
	for rows.Next() {
		var s broker.GroupStats
		var oldest int64
		if err := rows.Scan(&s.QueueID, &s.GroupID, &s.Group, &s.Depth, &s.DeadLettered, &s.Replayed, &s.Deleted, &s.Dropped, &s.Completed, &s.Failed,
			&s.ReplayCompleted, &s.ReplayFailed, &s.Expired, &s.DeadLettersExpired, &oldest); err != nil {
			return nil, err
		}
		s.OldestFailedAt = FromMS(oldest)
		out = append(out, s)
	}
	return out, rows.Err()
}

// bucketCols are a bucket table's counters, as they are selected.
const bucketCols = `b.dead_lettered, b.replayed, b.deleted, b.dropped, b.completed, b.failed, b.replay_completed, b.replay_failed, b.expired, b.dead_letters_expired, 0, b.depth, b.oldest_at`

// Series reads the coarsest bucket table whose buckets divide step
// (bucketsFor), by its key, and sums the buckets into steps.
func (t *Tx) Series(ctx context.Context, queueID int64, from, to time.Time, step time.Duration) ([]broker.Bucket, error) {
	// One table, the coarsest whose buckets divide the step: a bounded
	// number of rows per group and step, read by index, summed here.
	bt := bucketsFor(step)
	fromU, toU := from.Unix()/60/bt.minutes, (to.Unix()/60+bt.minutes-1)/bt.minutes
	stepU := int64(step/time.Minute) / bt.minutes
	var out []broker.Bucket
	vals := make([]any, 16)
	scan := func(rows Rows, minutes int64, into func(b broker.Bucket, unit int64)) error {
		defer rows.Close()
		for rows.Next() {
			var b broker.Bucket
			var unit, last, oldest int64
			if err := scanInts(rows, vals, &b.QueueID, &b.GroupID, &unit, &b.DeadLettered, &b.Replayed, &b.Deleted, &b.Dropped, &b.Completed, &b.Failed,
				&b.ReplayCompleted, &b.ReplayFailed, &b.Expired, &b.DeadLettersExpired, &last, &b.Depth, &oldest); err != nil {
				return err
			}
			b.At, b.OldestAt = time.Unix(unit*minutes*60, 0).UTC(), FromMS(oldest)
			into(b, unit)
		}
		return rows.Err()
	}
	seed := func(b broker.Bucket, _ int64) { out = append(out, b) }
	// Seeds: each group's last bucket before the range (in the hour
	// table for the groups the finer one has none of: older buckets live
	// there only), for every group at once: one statement a table,
	// whatever the number of queues and groups (a key lookup a group).
	hours := bucketTables[len(bucketTables)-1]
	rows, err := t.Query(ctx, seedSQL(bt.name, bt.unit), queueID, fromU)
	if err == nil {
		err = scan(rows, bt.minutes, seed)
	}
	if err != nil {
		return nil, err
	}
	if bt.name != hours.name {
		seeded := map[[2]int64]bool{}
		for _, b := range out {
			seeded[[2]int64{b.QueueID, b.GroupID}] = true
		}
		rows, err := t.Query(ctx, seedSQL(hours.name, hours.unit), queueID, from.Unix()/3600)
		if err == nil {
			err = scan(rows, hours.minutes, func(b broker.Bucket, u int64) {
				if !seeded[[2]int64{b.QueueID, b.GroupID}] {
					seed(b, u)
				}
			})
		}
		if err != nil {
			return nil, err
		}
	}
	// The range, summed per step: depth and oldest_at are those of each
	// step's last bucket.
	type key struct{ q, g, step int64 }
	type acc struct {
		b    broker.Bucket
		last int64
	}
	steps := map[key]*acc{}
	add := func(b broker.Bucket, unit int64) {
		k := key{b.QueueID, b.GroupID, fromU + (unit-fromU)/stepU*stepU}
		a, ok := steps[k]
		if !ok {
			a = &acc{b: broker.Bucket{QueueID: b.QueueID, GroupID: b.GroupID, At: time.Unix(k.step*bt.minutes*60, 0).UTC()}, last: -1}
			steps[k] = a
		}
		a.b.Stats = broker.Stats{
			DeadLettered: a.b.DeadLettered + b.DeadLettered, Replayed: a.b.Replayed + b.Replayed, Deleted: a.b.Deleted + b.Deleted,
			Dropped: a.b.Dropped + b.Dropped, Completed: a.b.Completed + b.Completed, Failed: a.b.Failed + b.Failed,
			ReplayCompleted: a.b.ReplayCompleted + b.ReplayCompleted, ReplayFailed: a.b.ReplayFailed + b.ReplayFailed, Depth: a.b.Depth,
			Expired: a.b.Expired + b.Expired, DeadLettersExpired: a.b.DeadLettersExpired + b.DeadLettersExpired,
		}
		if unit > a.last {
			a.last, a.b.Depth, a.b.OldestAt = unit, b.Depth, b.OldestAt
		}
	}
	// Group by group along the primary key (each group of group_stats,
	// its range of the table): contiguous rows, where the time index
	// would cost a lookup of each row; one statement for every group. A
	// step of several buckets (30 d by 4 h) is summed by the store over
	// that range, each step's depth and oldest_at from its last bucket.
	u := `b.` + bt.unit
	ranged := `SELECT b.queue_id, b.group_id, ` + u + `, ` + bucketCols + ` FROM group_stats p
		JOIN ` + bt.name + ` b ON b.queue_id = p.queue_id AND b.group_id = p.group_id AND ` + u + ` >= ?2 AND ` + u + ` < ?3
		WHERE ?1 = 0 OR p.queue_id = ?1`
	args := []any{queueID, fromU, toU}
	if stepU > 1 {
		ranged = t.d.StepSeriesSQL(bt.name)
		args = append(args, stepU)
	}
	rows, err = t.Query(ctx, ranged, args...)
	if err == nil {
		err = scan(rows, bt.minutes, add)
	}
	if err != nil {
		return nil, err
	}
	for _, a := range steps {
		out = append(out, a.b)
	}
	slices.SortFunc(out, func(a, b broker.Bucket) int {
		return cmp.Or(cmp.Compare(a.QueueID, b.QueueID), cmp.Compare(a.GroupID, b.GroupID), a.At.Compare(b.At))
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

// scanInts scans a row of integers into dst, through vals (one per
// column): database/sql converts into *any without reflection, which for
// the thousands of rows of a chart is most of the time it takes.
func scanInts(rows Rows, vals []any, dst ...*int64) error {
	ptrs := make([]any, len(dst))
	for i := range vals[:len(dst)] {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return err
	}
	for i, d := range dst {
		switch v := vals[i].(type) {
		case int64:
			*d = v
		case nil:
			*d = 0
		default:
			return fmt.Errorf("column %d: %T, want an integer", i, v)
		}
	}
	return nil
}

// seedSQL is Series' statement of each group's last bucket of table
// (whose time column is unit) before ?2, of the queue ?1 (0: every
// queue's): a lookup of the latest key below ?2 a group of group_stats.
func seedSQL(table, unit string) string {
	return `SELECT b.queue_id, b.group_id, b.` + unit + `, ` + bucketCols + ` FROM group_stats p
		JOIN ` + table + ` b ON b.queue_id = p.queue_id AND b.group_id = p.group_id
			AND b.` + unit + ` = (SELECT MAX(x.` + unit + `) FROM ` + table + ` x WHERE x.queue_id = p.queue_id AND x.group_id = p.group_id AND x.` + unit + ` < ?2)
		WHERE ?1 = 0 OR p.queue_id = ?1`
}

// names fills m (id to name) for the ids it holds.
func (t *Tx) names(ctx context.Context, query string, m map[int64]string) error {
	if len(m) == 0 {
		return nil
	}
	rows, err := t.Query(ctx, query)
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

// TakeReplayOutcome settles the pending row of replay_outcomes by its
// key (UPDATE ... WHERE outcome = 0 RETURNING job_id, error_group): a
// row settled already, or none, is not counted.
func (t *Tx) TakeReplayOutcome(ctx context.Context, copySeq, groupID int64, ok bool, now time.Time) (bool, int64, int64, error) {
	outcome := 2
	if ok {
		outcome = 1
	}
	var jobID, errorGroup int64
	err := t.QueryRow(ctx, `UPDATE replay_outcomes SET outcome = ?, settled_at = ? WHERE copy_seq = ? AND group_id = ? AND outcome = 0 RETURNING job_id, error_group`,
		outcome, MS(now), copySeq, groupID).Scan(&jobID, &errorGroup)
	if errors.Is(err, errNoRows) {
		return false, 0, 0, nil
	}
	return err == nil, jobID, errorGroup, err
}
