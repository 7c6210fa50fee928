package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Retention of the time-bucketed counters: minute buckets are deleted
// after MinuteRetention, quarter-hour buckets after QuarterRetention, hour
// buckets after HourRetention; maintenance does it (Maintain's stats task,
// every --maintenance-every).
const (
	MinuteRetention  = 48 * time.Hour
	QuarterRetention = 8 * 24 * time.Hour
	HourRetention    = 90 * 24 * time.Hour
)

// StatsDelay is how long counts that move no depth (completed, failed,
// dropped, replay outcomes) may wait in memory before they are written:
// the acks of the hot path then write no counters at all. Any write after
// StatsDelay, any change of depth or of minute, and FlushStats (Run: every
// StatsDelay, and at shutdown) write them; reads add them from memory. A
// crash loses at most StatsDelay of these counts; never a message, a dead
// letter or a depth.
const StatsDelay = time.Second

// pendingStats are committed counts not yet written, per queue, group and
// minute. No depth has changed since the oldest of them (a change of depth
// writes them first), so each is written with the depth of its minute.
//
// That holds because they change only once a transaction has committed,
// in commit order and before the next write transaction begins (TxScope's
// End): a write sees the counts of every commit before it, and those that
// the earlier functions of its own transaction deferred (txState.visible).
type pendingStats struct {
	mu    sync.Mutex
	m     map[pendingKey]Stats
	keys  []pendingKey
	since time.Time // when the oldest was added
}

type pendingKey struct{ queueID, groupID, minute int64 }

type pendingEntry struct {
	key pendingKey
	d   Stats
}

// oldest returns when the oldest of the pending counts was added (ok
// false: there are none). Whether more may join them is txState.mayDefer.
func (p *pendingStats) oldest() (since time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.since, len(p.keys) > 0
}

func (p *pendingStats) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys) == 0
}

// add adds es (sign -1: takes them back).
func (p *pendingStats) add(es []pendingEntry, sign int64, now time.Time) {
	if len(es) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[pendingKey]Stats{}
	}
	if len(p.keys) == 0 {
		p.since = now
	}
	for _, e := range es {
		d := e.d
		if sign < 0 {
			d = Stats{}.sub(d)
		}
		if _, ok := p.m[e.key]; !ok {
			p.keys = append(p.keys, e.key)
		}
		if v := p.m[e.key].add(d); v == (Stats{}) {
			delete(p.m, e.key)
			p.keys = slices.DeleteFunc(p.keys, func(k pendingKey) bool { return k == e.key })
		} else {
			p.m[e.key] = v
		}
	}
}

// snapshot returns a copy of the pending counts.
func (p *pendingStats) snapshot() []pendingEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]pendingEntry, 0, len(p.keys))
	for _, k := range p.keys {
		out = append(out, pendingEntry{k, p.m[k]})
	}
	return out
}

// stats returns a queue's running totals per group, with the counts still
// waiting in memory: reads see every committed count and never write.
func (b *Broker) stats(ctx context.Context, tx statsSubscriptionTx, queueID int64) ([]GroupStats, error) {
	gs, err := tx.Stats(ctx, queueID)
	if err != nil {
		return nil, err
	}
	added := false
	for _, e := range b.pending.snapshot() {
		if e.key.queueID != queueID {
			continue
		}
		i := slices.IndexFunc(gs, func(g GroupStats) bool { return g.GroupID == e.key.groupID })
		if i < 0 {
			name, err := tx.GroupName(ctx, e.key.groupID)
			if err != nil {
				return nil, err
			}
			gs, i, added = append(gs, GroupStats{QueueID: queueID, GroupID: e.key.groupID, Group: name}), len(gs), true
		}
		gs[i].Stats = gs[i].Stats.add(e.d)
	}
	if added {
		slices.SortFunc(gs, func(a, b GroupStats) int { return strings.Compare(a.Group, b.Group) })
	}
	return gs, nil
}

// withPending adds the counts waiting in memory to the buckets of a
// history (rows as Tx.Series returns them), in the steps they fall in.
func (b *Broker) withPending(ctx context.Context, tx queueStatsSubscriptionTx, rows []Bucket, queueID int64, from, to time.Time, step time.Duration) ([]Bucket, error) {
	added := false
	for _, e := range b.pending.snapshot() {
		at := time.Unix(e.key.minute*60, 0).UTC()
		if (queueID != 0 && e.key.queueID != queueID) || at.Before(from) || !at.Before(to) {
			continue
		}
		start := from.Add(at.Sub(from) / step * step)
		i := slices.IndexFunc(rows, func(r Bucket) bool {
			return r.QueueID == e.key.queueID && r.GroupID == e.key.groupID && r.At.Equal(start)
		})
		if i < 0 {
			// No bucket of that step yet: one with the group's depth now
			// (no depth has changed since the counts were made).
			q, err := tx.QueueByID(ctx, e.key.queueID)
			if err != nil {
				return nil, err
			}
			gs, err := b.stats(ctx, tx, e.key.queueID)
			if err != nil {
				return nil, err
			}
			r := Bucket{QueueID: e.key.queueID, GroupID: e.key.groupID, Queue: q.Name, At: start}
			if j := slices.IndexFunc(gs, func(g GroupStats) bool { return g.GroupID == e.key.groupID }); j >= 0 {
				r.Group, r.Depth, r.OldestAt = gs[j].Group, gs[j].Depth, gs[j].OldestFailedAt
			}
			rows, i, added = append(rows, r), len(rows), true
		}
		depth := rows[i].Depth
		rows[i].Stats = rows[i].Stats.add(e.d)
		rows[i].Depth = depth
	}
	if added {
		slices.SortStableFunc(rows, func(a, b Bucket) int {
			return cmp.Or(cmp.Compare(a.QueueID, b.QueueID), cmp.Compare(a.GroupID, b.GroupID), a.At.Compare(b.At))
		})
	}
	return rows, nil
}

// takeQueue removes and returns the pending counts of a queue.
func (p *pendingStats) takeQueue(queueID int64) []pendingEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pendingEntry
	keep := p.keys[:0]
	for _, k := range p.keys {
		if k.queueID == queueID {
			out = append(out, pendingEntry{k, p.m[k]})
			delete(p.m, k)
			continue
		}
		keep = append(keep, k)
	}
	p.keys = keep
	return out
}

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

// countOnly reports whether the transaction's stats move no depth.
func (t *statsTx) countOnly() bool {
	for _, d := range t.acc {
		if d.Depth != 0 || d.DeadLettered != 0 || d.Replayed != 0 || d.Deleted != 0 {
			return false
		}
	}
	return true
}

// entries returns the transaction's stats as pending counts of now.
func (t *statsTx) entries(now time.Time) []pendingEntry {
	var out []pendingEntry
	for _, k := range t.keys {
		if d := t.acc[k]; d != (Stats{}) {
			out = append(out, pendingEntry{pendingKey{k[0], k[1], now.Unix() / 60}, d})
		}
	}
	return out
}

// flushWith writes taken, the pending counts the transaction takes, then
// its own (flush). A pending count of the minute of now for a queue and
// group the transaction counts too joins that count: one upsert of each
// table instead of two, which leave the rows as the one does (the
// pending count moves no depth; the transaction's sets it).
func (t *statsTx) flushWith(ctx context.Context, taken []pendingEntry, now time.Time) error {
	minute := now.Unix() / 60
	for _, e := range taken {
		k := [2]int64{e.key.queueID, e.key.groupID}
		if d, ok := t.acc[k]; ok && e.key.minute == minute {
			t.acc[k] = d.add(e.d)
			continue
		}
		if err := t.Tx.AddStats(ctx, e.key.queueID, e.key.groupID, e.d, time.Unix(e.key.minute*60, 0)); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
	}
	return t.flush(ctx, now)
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
	// OldestAge is the oldest dead letter's age at the interval's end, or
	// now for the interval now is in (never an age in the future); zero
	// without dead letters. Set by History.
	OldestAge time.Duration
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
		if rows, err = tx.Series(ctx, queueID, from, to, q.Step); err != nil {
			return err
		}
		rows, err = b.withPending(ctx, tx, rows, queueID, from, to, q.Step)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fillSeries(rows, from, to, q.Step, b.now()), nil
}

// fillSeries lays rows out as one point per step and group. A row before
// from only seeds the depth and the oldest dead letter. Ages are measured
// at each step's end, but never after now.
func fillSeries(rows []Bucket, from, to time.Time, step time.Duration, now time.Time) []Series {
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
			if depth > 0 && !oldest.IsZero() {
				end := at.Add(step)
				if end.After(now) {
					end = now
				}
				p.OldestAge = max(end.Sub(oldest), 0)
			}
			s.Points[i] = p
		}
		out = append(out, s)
	}
	return out
}

// CompactStats deletes the buckets past their retention, and the error
// groups' hourly counts past ErrorGroupHourRetention: the stats task of
// Maintain, in chunks.
func (b *Broker) CompactStats(ctx context.Context) error {
	var r TaskReport
	return b.maintainStats(ctx, &r)
}
