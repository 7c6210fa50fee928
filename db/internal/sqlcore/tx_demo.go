package sqlcore

import (
	"context"
	"fmt"

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

// demoRowsPerCheck is how many bucket rows InsertBuckets writes between
// two looks at its ctx.
const demoRowsPerCheck = 200

// InsertBuckets writes rows into the bucket table b (stats_minute,
// stats_quarter or stats_hour), each at the bucket its At starts, with
// its counters, depth and oldest_at, for the queue and group the row
// names; and a row of zeros in group_stats for each queue and group that
// has none, so that the charts list it (Series reads the pairs there).
// A bucket that exists already is a conflict: an error, and the caller's
// transaction rolls back; so is a cancelled ctx, checked between chunks
// of rows. It writes those two tables only and reads nothing.
//
// Each row is one run of the table's catalogued insert (bucketTable),
// kept prepared: a write whose answer nobody reads (ExecLater), which
// PostgreSQL's store sends in one round trip with the next statement.
func (t *Tx) InsertBuckets(ctx context.Context, b broker.BucketTable, rows []broker.Bucket) error {
	// b picks its table among bucketTables (a range, which the catalog's
	// generator reads each statement of, where an index would hide them).
	for i, bt := range bucketTables {
		if broker.BucketTable(i) != b {
			continue
		}
		pairs := map[[2]int64]bool{}
		for i, r := range rows {
			if i%demoRowsPerCheck == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if err := t.ExecLater(ctx, bt.insert, r.QueueID, r.GroupID, r.At.Unix()/60/bt.minutes, r.DeadLettered, r.Replayed, r.Deleted, r.Dropped, r.Completed, r.Failed,
				r.ReplayCompleted, r.ReplayFailed, r.Expired, r.DeadLettersExpired, r.Depth, MS(r.OldestAt)); err != nil {
				return fmt.Errorf("insert %s: %w", bt.name, err)
			}
			pairs[[2]int64{r.QueueID, r.GroupID}] = true
		}
		for p := range pairs {
			if _, err := t.Exec(ctx, `INSERT INTO group_stats (queue_id, group_id) VALUES (?, ?) ON CONFLICT (queue_id, group_id) DO NOTHING`, p[0], p[1]); err != nil {
				return fmt.Errorf("insert %s, group stats: %w", bt.name, err)
			}
		}
		return nil
	}
	return fmt.Errorf("insert buckets: unknown bucket table %d", b)
}
