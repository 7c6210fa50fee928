package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The demo's week of history: on a new demo database, the charts and
// sparklines would otherwise start flat. The history goes into the time
// buckets only, as the live counters and compaction would have left them;
// the running totals (group_stats: the queue page's counts and /metrics'
// counters), messages, dead letters and error groups are not touched, and
// a mark in the settings says which range is generated.

// AuditDemoHistory is the action of the audit entry that says a synthetic
// history was written.
const AuditDemoHistory = "demo_history"

// demoHistoryKey is the setting that marks a synthetic history.
const demoHistoryKey = "demo_history"

// DemoTx is the storage the synthetic history needs.
type DemoTx interface {
	// DemoBlank reports whether nothing has happened on the database yet:
	// no time bucket, no message, no dead letter. It reads at most a row
	// of each and writes and locks nothing.
	DemoBlank(ctx context.Context) (bool, error)
	// InsertBuckets writes rows into the bucket table b (minute, quarter
	// or hour), each at the bucket its At starts, and gives each queue and
	// group a row of zero running totals if it has none (the charts list
	// the groups that have one). A bucket that exists already is an
	// error. It writes those tables only and reads nothing.
	InsertBuckets(ctx context.Context, b BucketTable, rows []Bucket) error
}

// QueueGroup names a queue and a consumer group.
type QueueGroup struct{ Queue, Group string }

// DemoMinute is one minute of a synthetic history: its counters, and the
// dead letters waiting at its end (Stats.Depth) with the time the oldest
// of them failed (zero when none waits).
type DemoMinute struct {
	Stats
	OldestAt time.Time
}

// DemoHistoryFunc makes a synthetic history of the minutes of [from,
// until) for each of the groups, in their order: one DemoMinute a minute,
// starting with no dead letter waiting and ending with the depth and the
// oldest dead letter each group has at until (end, in the groups' order).
// It is called inside a write transaction, perhaps more than once: it
// must depend on its arguments only.
type DemoHistoryFunc func(from, until time.Time, end []GroupStats) [][]DemoMinute

// DemoHistory is the mark of a synthetic history: the range it covers.
// The zero DemoHistory: none.
type DemoHistory struct {
	From  time.Time `json:"from"`
	Until time.Time `json:"until"`
}

// Reaches reports whether a range that ends after from shows some of the
// synthetic history.
func (h DemoHistory) Reaches(from time.Time) bool {
	return !h.Until.IsZero() && from.Before(h.Until)
}

// DemoHistory returns the mark of the database's synthetic history, or
// the zero DemoHistory when it has none.
func (b *Broker) DemoHistory(ctx context.Context) (DemoHistory, error) {
	var h DemoHistory
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		h, err = demoHistoryOf(ctx, tx)
		return err
	})
	return h, err
}

func demoHistoryOf(ctx context.Context, tx UserTx) (DemoHistory, error) {
	v, err := tx.Setting(ctx, demoHistoryKey)
	if isNotFound(err) {
		return DemoHistory{}, nil
	}
	if err != nil {
		return DemoHistory{}, err
	}
	var h DemoHistory
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		return DemoHistory{}, fmt.Errorf("demo history mark: %w", err)
	}
	return h, nil
}

// WriteDemoHistory writes a synthetic history of span (whole minutes)
// before now, made by gen, for groups (their queues must exist; the
// groups are created when missing), in one transaction with its mark and
// an audit entry by actor. It writes nothing, and returns the zero
// DemoHistory, when the database has a mark already or anything has
// happened on it (a bucket, a message, a dead letter): a synthetic
// history only ever goes into a database that has none of its own. The
// minutes go into the bucket tables as compaction would have left them:
// minutes for MinuteRetention, quarter hours for QuarterRetention, hours
// for the whole span. A history that does not add up (a depth that does
// not follow from the counts, or does not end at the group's real one) is
// refused with ErrInvalid.
func (b *Broker) WriteDemoHistory(ctx context.Context, groups []QueueGroup, span time.Duration, gen DemoHistoryFunc, actor string) (DemoHistory, error) {
	if span < time.Minute || span%time.Minute != 0 || span > HourRetention {
		return DemoHistory{}, errorf(ErrInvalid, "a demo history spans whole minutes, up to %s", DurationWords(HourRetention))
	}
	var mark DemoHistory
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		mark = DemoHistory{}
		if h, err := demoHistoryOf(ctx, tx); err != nil || !h.Until.IsZero() {
			return err
		}
		blank, err := tx.DemoBlank(ctx)
		if err != nil || !blank {
			return err
		}
		now := b.now()
		until := now.Truncate(time.Minute)
		from := until.Add(-span)
		ids := make([][2]int64, len(groups))
		end := make([]GroupStats, len(groups))
		for i, g := range groups {
			q, err := queueNamed(ctx, tx, g.Queue)
			if err != nil {
				return err
			}
			gid, err := tx.GroupID(ctx, g.Group, true)
			if err != nil {
				return fmt.Errorf("group %s: %w", g.Group, err)
			}
			ids[i] = [2]int64{q.ID, gid}
			gs, err := b.stats(ctx, tx, q.ID)
			if err != nil {
				return err
			}
			end[i] = GroupStats{QueueID: q.ID, GroupID: gid, Group: g.Group}
			for _, s := range gs {
				if s.GroupID == gid {
					end[i] = s
				}
			}
		}
		minutes := gen(from, until, end)
		if len(minutes) != len(groups) {
			return errorf(ErrInvalid, "demo history: %d series for %d groups", len(minutes), len(groups))
		}
		n := int(span / time.Minute)
		var rows [3][]Bucket
		for i, ms := range minutes {
			if err := checkDemoSeries(ms, n, from, end[i]); err != nil {
				return errorf(ErrInvalid, "demo history of %s/%s: %v", groups[i].Queue, groups[i].Group, err)
			}
			for t, r := range rollUp(ms, ids[i], from, now) {
				rows[t] = append(rows[t], r...)
			}
		}
		for t, rs := range rows {
			if err := tx.InsertBuckets(ctx, BucketTable(t), rs); err != nil {
				return err
			}
		}
		mark = DemoHistory{From: from, Until: until}
		raw, err := json.Marshal(mark)
		if err != nil {
			return err
		}
		if err := tx.SetSetting(ctx, demoHistoryKey, string(raw)); err != nil {
			return err
		}
		return audit(ctx, tx, now, actor, AuditDemoHistory, "", "", len(groups),
			fmt.Sprintf("synthetic demo history written for the charts: %s before %s UTC, %d queue and group pairs; no message, dead letter or running total (/metrics) was added",
				DurationWords(span), until.Format("2006-01-02 15:04"), len(groups)))
	})
	if err != nil {
		return DemoHistory{}, fmt.Errorf("demo history: %w", err)
	}
	return mark, nil
}

// checkDemoSeries checks that a synthetic series adds up: n minutes, no
// negative count, each depth the one before plus the dead letters filed
// less those replayed, deleted or expired (from none), a time for the
// oldest exactly while some wait, and the end at the group's real depth
// and oldest dead letter.
func checkDemoSeries(ms []DemoMinute, n int, from time.Time, end GroupStats) error {
	if len(ms) != n {
		return fmt.Errorf("%d minutes, want %d", len(ms), n)
	}
	var depth int64
	for k, m := range ms {
		s := m.Stats
		for _, v := range []int64{s.DeadLettered, s.Replayed, s.Deleted, s.Dropped, s.Completed, s.Failed, s.ReplayCompleted, s.ReplayFailed, s.Expired, s.DeadLettersExpired} {
			if v < 0 {
				return fmt.Errorf("minute %d: a negative count", k)
			}
		}
		depth += s.DeadLettered - s.Replayed - s.Deleted - s.DeadLettersExpired
		if s.Depth != depth || depth < 0 {
			return fmt.Errorf("minute %d: depth %d, the counts make %d", k, s.Depth, depth)
		}
		endOf := from.Add(time.Duration(k+1) * time.Minute)
		if (depth > 0) != !m.OldestAt.IsZero() || m.OldestAt.After(endOf) || (!m.OldestAt.IsZero() && m.OldestAt.Before(from)) {
			return fmt.Errorf("minute %d: oldest dead letter at %s with %d waiting", k, m.OldestAt.Format(time.RFC3339), depth)
		}
	}
	last := ms[len(ms)-1]
	if last.Depth != end.Depth || (end.Depth > 0 && !last.OldestAt.Equal(end.OldestFailedAt)) {
		return fmt.Errorf("ends at depth %d, the group has %d", last.Depth, end.Depth)
	}
	return nil
}

// rollUp turns a group's minutes (from from) into the rows of the minute,
// quarter and hour tables that would be left at now: minutes and quarters
// within their retention, hours all; each with the sum of its minutes'
// counters and the depth and oldest of its last. A bucket with no count
// is left out, as the live counters write none (its depth is the one
// before: no count, no change).
func rollUp(ms []DemoMinute, ids [2]int64, from, now time.Time) [3][]Bucket {
	var out [3][]Bucket
	keep := [3]time.Time{now.Add(-MinuteRetention), now.Add(-QuarterRetention), time.Time{}}
	for t, size := range [3]time.Duration{time.Minute, 15 * time.Minute, time.Hour} {
		var cur Bucket
		flush := func() {
			if cur.Stats != (Stats{Depth: cur.Depth}) && !cur.At.Before(keep[t].Truncate(size)) {
				out[t] = append(out[t], cur)
			}
		}
		for k, m := range ms {
			at := from.Add(time.Duration(k) * time.Minute)
			start := at.Truncate(size)
			if k == 0 || !start.Equal(cur.At) {
				if k > 0 {
					flush()
				}
				cur = Bucket{QueueID: ids[0], GroupID: ids[1], At: start}
			}
			cur.Stats = cur.Stats.add(m.Stats)
			cur.Depth, cur.OldestAt = m.Depth, m.OldestAt
		}
		if len(ms) > 0 {
			flush()
		}
	}
	return out
}
