package sqlcore

import (
	"context"
	"fmt"
	"strings"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The demo's synthetic history (broker.WriteDemoHistory): bucket rows
// written as the live counters and compaction would have left them.

// DemoBlank reports whether nothing has happened on the database yet: no
// bucket in stats_hour (every counted event writes one), no message and
// no dead letter. It reads at most one row of each of those tables, by
// their primary keys, and writes and locks nothing.
func (t *Tx) DemoBlank(ctx context.Context) (bool, error) {
	// A bool reads SQLite's 0 or 1 and PostgreSQL's boolean alike.
	var busy bool
	err := t.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM stats_hour) OR EXISTS (SELECT 1 FROM messages) OR EXISTS (SELECT 1 FROM dead_letters)`).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("demo blank: %w", err)
	}
	return !busy, nil
}

// demoRowsPerInsert is how many bucket rows one INSERT writes: 15
// parameters each, well under SQLite's limit of 32766.
const demoRowsPerInsert = 200

// InsertBuckets writes rows into the bucket table b (stats_minute,
// stats_quarter or stats_hour), each at the bucket its At starts, with
// its counters, depth and oldest_at, for the queue and group the row
// names; and a row of zeros in group_stats for each queue and group that
// has none, so that the charts list it (Series reads the pairs there).
// A bucket that exists already is a conflict: an error, and the caller's
// transaction rolls back; so is a cancelled ctx, checked between chunks
// of rows. It writes those two tables only and reads nothing.
func (t *Tx) InsertBuckets(ctx context.Context, b broker.BucketTable, rows []broker.Bucket) error {
	var bt bucketTable
	switch b {
	case broker.BucketMinute, broker.BucketQuarter, broker.BucketHour:
		bt = bucketTables[b]
	default:
		return fmt.Errorf("insert buckets: unknown bucket table %d", b)
	}
	pairs := map[[2]int64]bool{}
	for len(rows) > 0 {
		n := min(len(rows), demoRowsPerInsert)
		var q strings.Builder
		q.WriteString(`INSERT INTO ` + bt.name + ` (queue_id, group_id, ` + bt.unit + `, dead_lettered, replayed, deleted, dropped, completed, failed,
			replay_completed, replay_failed, expired, dead_letters_expired, depth, oldest_at) VALUES `)
		args := make([]any, 0, n*15)
		for i, r := range rows[:n] {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(bucketValues(t.d, i))
			args = append(args, r.QueueID, r.GroupID, r.At.Unix()/60/bt.minutes, r.DeadLettered, r.Replayed, r.Deleted, r.Dropped, r.Completed, r.Failed,
				r.ReplayCompleted, r.ReplayFailed, r.Expired, r.DeadLettersExpired, r.Depth, MS(r.OldestAt))
			pairs[[2]int64{r.QueueID, r.GroupID}] = true
		}
		// Not kept prepared: a chunk's statement is run a few times, once,
		// at the demo's first start (nor translated: its parameters are
		// written in the store's dialect). No context on SQLite's statement
		// (see exec); the caller's is checked between chunks.
		if err := t.ExecUnprepared(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("insert %s: %w", bt.name, err)
		}
		rows = rows[n:]
	}
	for p := range pairs {
		if _, err := t.Exec(ctx, `INSERT INTO group_stats (queue_id, group_id) VALUES (?, ?) ON CONFLICT (queue_id, group_id) DO NOTHING`, p[0], p[1]); err != nil {
			return fmt.Errorf("group stats: %w", err)
		}
	}
	return nil
}

// bucketValues is the i-th row of parameters of a chunk of
// InsertBuckets, in d's dialect: SQLite's ?, or PostgreSQL's numbered
// $N.
func bucketValues(d Dialect, i int) string {
	var b strings.Builder
	b.WriteByte('(')
	for k := range 15 {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.Param(i*15 + k + 1))
	}
	b.WriteByte(')')
	return b.String()
}
