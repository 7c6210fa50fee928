package broker

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Retention of the time-bucketed counters: minute buckets roll up into
// hour buckets after MinuteRetention; hour buckets are deleted after
// HourRetention. Compact does both; serve runs it every CompactEvery.
const (
	MinuteRetention = 48 * time.Hour
	HourRetention   = 90 * 24 * time.Hour
	CompactEvery    = 10 * time.Minute
)

// statsTx gathers the stats a transaction adds, so that they are written
// once per queue and group when it ends, still inside it.
type statsTx struct {
	Tx
	acc  map[[2]int64]Stats
	keys [][2]int64 // in first-touch order, so writes are deterministic
}

// AddStats records d to be written by flush.
func (t *statsTx) AddStats(_ context.Context, queueID, groupID int64, d Stats, _ time.Time) error {
	if t.acc == nil {
		t.acc = map[[2]int64]Stats{}
	}
	k := [2]int64{queueID, groupID}
	if _, ok := t.acc[k]; !ok {
		t.keys = append(t.keys, k)
	}
	t.acc[k] = t.acc[k].add(d)
	return nil
}

func (t *statsTx) flush(ctx context.Context, now time.Time) error {
	for _, k := range t.keys {
		if d := t.acc[k]; d != (Stats{}) {
			if err := t.Tx.AddStats(ctx, k[0], k[1], d, now); err != nil {
				return fmt.Errorf("stats: %w", err)
			}
		}
	}
	return nil
}

// Bucket is a queue and group's counters over one interval, with the depth
// and the oldest dead letter at its end (Stats.Depth is that depth).
type Bucket struct {
	QueueID  int64
	GroupID  int64
	Queue    string
	Group    string
	At       time.Time // the interval's start
	Stats              // counters during the interval
	OldestAt time.Time // zero when there were no dead letters
}

// Series is one queue and group's buckets over a range, one per step,
// with the depth and oldest dead letter carried through quiet steps.
type Series struct {
	Queue  string
	Group  string
	Points []Bucket
}

// HistoryQuery asks for the series of [From, To) in steps of Step.
type HistoryQuery struct {
	Queue    string // empty: every queue
	From, To time.Time
	Step     time.Duration // a whole number of minutes
}

// History returns the time series of every queue and group in range, for
// the charts. It reads only the maintained buckets: no dead letter is
// scanned.
func (b *Broker) History(ctx context.Context, q HistoryQuery) ([]Series, error) {
	if q.Step < time.Minute || q.Step%time.Minute != 0 || !q.To.After(q.From) {
		return nil, errorf(ErrInvalid, "a history needs a range and a step of whole minutes")
	}
	if n := q.To.Sub(q.From) / q.Step; n > 5000 {
		return nil, errorf(ErrInvalid, "a history has at most 5000 steps, asked for %d", n)
	}
	from, to := q.From.Truncate(q.Step), q.To
	var rows []Bucket
	err := b.store.View(ctx, func(tx Tx) error {
		var queueID int64
		if q.Queue != "" {
			qu, err := queueNamed(ctx, tx, q.Queue)
			if err != nil {
				return err
			}
			queueID = qu.ID
		}
		var err error
		rows, err = tx.Series(ctx, queueID, from, to, q.Step)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fillSeries(rows, from, to, q.Step), nil
}

// fillSeries lays rows out as one point per step and group. A row before
// from only seeds the depth and the oldest dead letter.
func fillSeries(rows []Bucket, from, to time.Time, step time.Duration) []Series {
	type key struct{ q, g string }
	byKey := map[key][]Bucket{}
	var keys []key
	for _, r := range rows {
		k := key{r.Queue, r.Group}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].q != keys[j].q {
			return keys[i].q < keys[j].q
		}
		return keys[i].g < keys[j].g
	})
	n := int(to.Sub(from) / step)
	if to.Sub(from)%step != 0 {
		n++
	}
	out := make([]Series, 0, len(keys))
	for _, k := range keys {
		s := Series{Queue: k.q, Group: k.g, Points: make([]Bucket, n)}
		var depth int64
		var oldest time.Time
		rs := byKey[k]
		j := 0
		for j < len(rs) && rs[j].At.Before(from) {
			depth, oldest = rs[j].Depth, rs[j].OldestAt
			j++
		}
		for i := range s.Points {
			at := from.Add(time.Duration(i) * step)
			p := Bucket{Queue: k.q, Group: k.g, At: at}
			for j < len(rs) && rs[j].At.Before(at.Add(step)) {
				d := rs[j]
				p.Stats = p.Stats.add(d.Stats)
				depth, oldest = d.Depth, d.OldestAt
				j++
			}
			p.Depth, p.OldestAt = depth, oldest
			s.Points[i] = p
		}
		out = append(out, s)
	}
	return out
}

// CompactStats rolls minute buckets past MinuteRetention into hour buckets
// and deletes hour buckets past HourRetention.
func (b *Broker) CompactStats(ctx context.Context) error {
	now := b.now()
	return b.store.Update(ctx, func(tx Tx) error {
		return tx.CompactStats(ctx, now.Add(-MinuteRetention).Truncate(time.Hour), now.Add(-HourRetention))
	})
}
