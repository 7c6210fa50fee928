package sqlcore

import (
	"context"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The maintenance sweeps (broker.Maintain): each deletes at most limit
// rows a call, by an index that starts at the oldest rows, so that a
// chunk's transaction stays short whatever is due.

// bucketSweeps are the tables of time buckets with the index that finds
// their oldest rows: the key of each row and its time unit.
var bucketSweeps = map[broker.BucketTable]struct{ table, unit, key string }{
	broker.BucketMinute:         {"stats_minute", "minute", "queue_id, group_id, minute"},
	broker.BucketQuarter:        {"stats_quarter", "quarter", "queue_id, group_id, quarter"},
	broker.BucketHour:           {"stats_hour", "hour", "queue_id, group_id, hour"},
	broker.BucketErrorGroupHour: {"error_group_hours", "hour", "queue_id, group_id, fingerprint, hour"},
}

// BucketSweepSQL is the chunked delete of one bucket table: the oldest
// limit rows before a unit (by the table's time index: stats_*_time,
// error_group_hours_sweep), each deleted by its primary key.
func BucketSweepSQL(b broker.BucketTable) (string, bool) {
	s, ok := bucketSweeps[b]
	if !ok {
		return "", false
	}
	return `DELETE FROM ` + s.table + ` WHERE (` + s.key + `) IN (SELECT ` + s.key + ` FROM ` + s.table +
		` WHERE ` + s.unit + ` < ?1 ORDER BY ` + s.unit + ` LIMIT ?2)`, true
}

// SweepBuckets deletes up to limit rows of a bucket table whose bucket
// ends at or before before (a bucket is kept while any of it is at or
// after before). Writes that table only (on SQLite error_group_hours'
// triggers keep error_group_days, migration 0042); returns the rows
// deleted.
func (t *Tx) SweepBuckets(ctx context.Context, b broker.BucketTable, before time.Time, limit int) (int64, error) {
	q, ok := BucketSweepSQL(b)
	if !ok {
		return 0, fmt.Errorf("sweep buckets: unknown bucket %d", b)
	}
	unit := before.Unix() / 60 // minutes
	switch b {
	case broker.BucketQuarter:
		unit /= 15
	case broker.BucketHour, broker.BucketErrorGroupHour:
		unit /= 60
	}
	res, err := t.Exec(ctx, q, unit, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// SweepAuditSQL takes the oldest limit entries by id (ids grow with
// time: no index on at) and deletes those of them older than the cut.
const SweepAuditSQL = `DELETE FROM audit WHERE id IN (SELECT id FROM (SELECT id, at FROM audit ORDER BY id LIMIT ?2) x WHERE at < ?1)`

// SweepAudit deletes the audit entries written before before, among the
// limit oldest by id (an entry written while the clock was behind stays
// until those older than it are gone). Writes audit only; returns the
// entries deleted.
func (t *Tx) SweepAudit(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := t.Exec(ctx, SweepAuditSQL, MS(before), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// SweepSessionsSQL deletes up to limit ended sessions. sessions has no
// index on its times: it holds a few sessions per person, so the scan is
// small.
const SweepSessionsSQL = `DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE expires_at <= ?1 OR last_seen_at <= ?2 ORDER BY id LIMIT ?3)`

// SweepSessions deletes up to limit sessions that ended at now or were
// last seen at idleSince or before. Writes sessions only; returns the
// sessions deleted.
func (t *Tx) SweepSessions(ctx context.Context, now, idleSince time.Time, limit int) (int64, error) {
	res, err := t.Exec(ctx, SweepSessionsSQL, MS(now), MS(idleSince), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
