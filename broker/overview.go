package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OverviewTx is what the broker needs for the overview's page of
// queues: a few statements whatever the number of queues, each of
// every queue at once or of the queues of one page (a JSON list of
// their ids), never one a queue.
type OverviewTx interface {
	// QueueTotals reads every queue, by name, with its kept counts:
	// its dead letters now and at w.Then (the sum, over its groups, of
	// the depth of each group's last quarter-hour bucket before Then, or
	// hour bucket when the quarter hours are gone), its oldest dead
	// letter, and the sums of its quarter-hour buckets in [Then, To)
	// and in the 24 h before Then. One statement.
	QueueTotals(ctx context.Context, w TotalsWindow) ([]QueueTotals, error)
	// StatsOf reads group_stats of the listed queues, by queue and group
	// name, as Stats does for one. One statement.
	StatsOf(ctx context.Context, queueIDs []int64) ([]GroupStats, error)
	// ReadersOf names the groups that read each of the listed queues
	// (subscriptions), by queue and name. One statement.
	ReadersOf(ctx context.Context, queueIDs []int64) (map[int64][]string, error)
	// PartitionCounts counts the partitions of each listed queue. One
	// statement.
	PartitionCounts(ctx context.Context, queueIDs []int64) (map[int64]int, error)
	// DepthBuckets reads the quarter-hour buckets of the listed queues
	// in [from, to), and each group's last bucket before from (its depth
	// then, as QueueTotals reads it) as a bucket at from minus a
	// quarter hour. Two statements.
	DepthBuckets(ctx context.Context, queueIDs []int64, from, to time.Time) ([]Bucket, error)
	// TopErrorGroupsOf returns, of each listed queue, its limit biggest
	// error groups summed over its consumer groups (GroupID 0; only
	// QueueID, Fingerprint and DeadLetters are set), biggest first. One
	// statement.
	TopErrorGroupsOf(ctx context.Context, queueIDs []int64, limit int) ([]ErrorGroup, error)
	// QueueNames reads every queue's name, by name (the unique index
	// only). One statement.
	QueueNames(ctx context.Context) ([]string, error)
}

// TotalsWindow is the two windows of QueueTotals: [Then-24h, Then) and
// [Then, To), in whole quarter hours.
type TotalsWindow struct{ Then, To time.Time }

// QueueTotals is a queue's kept counts for the overview.
type QueueTotals struct {
	ID        int64
	Name      string
	Depth     int64     // dead letters now
	DepthThen int64     // dead letters at the window's start (24 h ago)
	OldestAt  time.Time // the oldest dead letter's failure; zero without
	Replayed  int64     // dead letters replayed in all (group_stats)
	Window    Stats     // counts of the last 24 h (Depth unset)
	Before    Stats     // counts of the 24 h before
	CreatedAt time.Time // when the queue was made
}

// Overview sorts.
const (
	OverviewByHealth      = "health"       // most thresholds past first, then deepest
	OverviewByDeadLetters = "dead-letters" // deepest first
	OverviewByName        = "name"
)

// MaxOverviewPage is the most queues an overview page shows.
const MaxOverviewPage = 200

// OverviewQuery asks for one page of the overview's queues.
type OverviewQuery struct {
	Sort      string // OverviewBy...; empty: by health
	Name      string // only queues whose name contains it (any case)
	HideEmpty bool   // only queues with dead letters
	Offset    int
	Limit     int // 1..MaxOverviewPage; 0: 50
	// ErrorGroups is how many error groups each queue of the page gets
	// (0: none).
	ErrorGroups int
	// Scope is the queues the viewer may see: the others are left out of
	// the page and of every total, as if absent (zero: every queue).
	Scope QueueScope
}

// QueueOverview is one queue of an overview page: what QueueHealth has,
// the window before beside it, and the queue's top error groups.
type QueueOverview struct {
	QueueHealth
	DepthThen      int64  // dead letters 24 h ago (at DepthSeries' start)
	Before         Health // acks, failures and replay outcomes of the 24 h before
	Filed          int64  // dead letters filed in the last 24 h
	FiledBefore    int64  // in the 24 h before
	PartitionCount int    // the queue's partitions (Partitions is not read)
	ErrorGroups    []ErrorGroup
}

// OverviewPage is one page of the overview: totals over every queue,
// and the queues of the page.
type OverviewPage struct {
	Thresholds Thresholds
	Queues     int // every queue
	Matching   int // those the query's filter keeps
	Offset     int
	Rows       []QueueOverview
	// Over every queue (not only those matched).
	Depth, DepthThen int64
	Deepest          int64 // the deepest queue's dead letters
	Oldest           time.Duration
	Window, Before   Health
	Filed            int64
	FiledBefore      int64
	Replayed         int64 // dead letters replayed in all
}

// Overview returns one page of the overview's queues, sorted and
// filtered as q says, with the totals of every queue: a fixed number of
// statements (QueueTotals for every queue, then the page's details)
// whatever the number of queues.
func (b *Broker) Overview(ctx context.Context, q OverviewQuery) (OverviewPage, error) {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	if q.Limit > MaxOverviewPage {
		return OverviewPage{}, errorf(ErrInvalid, "a page has at most %d queues", MaxOverviewPage)
	}
	if q.Offset < 0 {
		return OverviewPage{}, errorf(ErrInvalid, "offset must not be negative")
	}
	switch q.Sort {
	case "":
		q.Sort = OverviewByHealth
	case OverviewByHealth, OverviewByDeadLetters, OverviewByName:
	default:
		return OverviewPage{}, errorf(ErrInvalid, "sort must be health, dead-letters or name")
	}
	if q.ErrorGroups < 0 || q.ErrorGroups > MaxErrorGroups {
		return OverviewPage{}, errorf(ErrInvalid, "error groups must be between 0 and %d", MaxErrorGroups)
	}
	now := b.now()
	end := now.Truncate(HealthStep).Add(HealthStep) // the step now is in counts too
	from := end.Add(-HealthWindow)
	var out OverviewPage
	err := b.store.View(ctx, func(tx Tx) error {
		th, err := thresholdsIn(ctx, tx)
		if err != nil {
			return err
		}
		out.Thresholds = th
		totals, err := tx.QueueTotals(ctx, TotalsWindow{Then: from, To: end})
		if err != nil {
			return err
		}
		b.addPendingTotals(totals, from, end)
		if !q.Scope.All() {
			kept := totals[:0]
			for _, t := range totals {
				if q.Scope.Allows(t.Name) {
					kept = append(kept, t)
				}
			}
			totals = kept
		}
		out.Queues = len(totals)
		all := make([]QueueOverview, len(totals))
		for i, t := range totals {
			all[i] = overviewOf(t, th.For(t.Name), now)
			r := &all[i]
			out.Depth += r.Health.Depth
			out.DepthThen += r.DepthThen
			out.Deepest = max(out.Deepest, r.Health.Depth)
			out.Oldest = max(out.Oldest, r.Health.Oldest)
			out.Window = addHealth(out.Window, r.Health)
			out.Before = addHealth(out.Before, r.Before)
			out.Filed += r.Filed
			out.FiledBefore += r.FiledBefore
			out.Replayed += t.Replayed
		}
		name := strings.ToLower(q.Name)
		kept := all[:0]
		for _, r := range all {
			if (q.HideEmpty && r.Health.Depth == 0) || (name != "" && !strings.Contains(strings.ToLower(r.Name), name)) {
				continue
			}
			kept = append(kept, r)
		}
		out.Matching = len(kept)
		sortOverview(kept, q.Sort)
		out.Offset = min(q.Offset, len(kept))
		out.Rows = kept[out.Offset:min(out.Offset+q.Limit, len(kept))]
		return b.overviewDetails(ctx, tx, out.Rows, from, end, q.ErrorGroups)
	})
	return out, err
}

// thresholdsIn reads the thresholds in tx (the defaults until an admin
// sets them).
func thresholdsIn(ctx context.Context, tx UserTx) (Thresholds, error) {
	t := Thresholds{Default: DefaultLimits()}
	v, err := tx.Setting(ctx, thresholdsKey)
	if isNotFound(err) {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	return t, json.Unmarshal([]byte(v), &t)
}

func addHealth(a, b Health) Health {
	a.Acks += b.Acks
	a.Failed += b.Failed
	a.ReplayEnds += b.ReplayEnds
	a.ReplayOK += b.ReplayOK
	return a
}

// healthOf is the rates' part of a Health from a window's counts.
func healthOf(s Stats) Health {
	return Health{Acks: s.Completed + s.Failed, Failed: s.Failed, ReplayEnds: s.ReplayCompleted + s.ReplayFailed, ReplayOK: s.ReplayCompleted}
}

func overviewOf(t QueueTotals, l Limits, now time.Time) QueueOverview {
	r := QueueOverview{DepthThen: t.DepthThen, Before: healthOf(t.Before), Filed: t.Window.DeadLettered, FiledBefore: t.Before.DeadLettered}
	r.Queue = Queue{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt}
	r.Limits = l
	r.Health = healthOf(t.Window)
	r.Health.Depth = t.Depth
	if !t.OldestAt.IsZero() && t.Depth > 0 {
		r.Health.Oldest = max(now.Sub(t.OldestAt), 0)
	}
	r.Breaches = l.Check(r.Health)
	return r
}

// sortOverview sorts the queues: by health, the most thresholds past
// first, then the deepest, then by name; by dead letters, the deepest
// first, then by name; by name.
func sortOverview(rows []QueueOverview, by string) {
	slices.SortStableFunc(rows, func(a, b QueueOverview) int {
		switch by {
		case OverviewByHealth:
			if c := cmp.Compare(len(b.Breaches), len(a.Breaches)); c != 0 {
				return c
			}
			fallthrough
		case OverviewByDeadLetters:
			if c := cmp.Compare(b.Health.Depth, a.Health.Depth); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// addPendingTotals adds the counts still waiting in memory (StatsDelay)
// to the windows they fall in; they move no depth.
func (b *Broker) addPendingTotals(totals []QueueTotals, from, end time.Time) {
	pending := b.pending.snapshot()
	if len(pending) == 0 {
		return
	}
	at := make(map[int64]int, len(totals))
	for i, t := range totals {
		at[t.ID] = i
	}
	for _, e := range pending {
		i, ok := at[e.key.queueID]
		if !ok {
			continue
		}
		when := time.Unix(e.key.minute*60, 0)
		switch {
		case !when.Before(from) && when.Before(end):
			totals[i].Window = totals[i].Window.add(e.d)
		case !when.Before(from.Add(-HealthWindow)) && when.Before(from):
			totals[i].Before = totals[i].Before.add(e.d)
		}
	}
}

// overviewDetails fills in the page's rows: their groups' counts,
// readers, partitions, depth over the window and top error groups, a
// statement each for the whole page.
func (b *Broker) overviewDetails(ctx context.Context, tx OverviewTx, rows []QueueOverview, from, end time.Time, errorGroups int) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]int64, len(rows))
	at := make(map[int64]int, len(rows))
	for i, r := range rows {
		ids[i], at[r.ID] = r.ID, i
	}
	stats, err := tx.StatsOf(ctx, ids)
	if err != nil {
		return err
	}
	for _, g := range stats {
		rows[at[g.QueueID]].Stats = append(rows[at[g.QueueID]].Stats, g)
	}
	readers, err := tx.ReadersOf(ctx, ids)
	if err != nil {
		return err
	}
	parts, err := tx.PartitionCounts(ctx, ids)
	if err != nil {
		return err
	}
	buckets, err := tx.DepthBuckets(ctx, ids, from, end)
	if err != nil {
		return err
	}
	var groups []ErrorGroup
	if errorGroups > 0 {
		if groups, err = tx.TopErrorGroupsOf(ctx, ids, errorGroups); err != nil {
			return err
		}
	}
	for _, g := range groups {
		r := &rows[at[g.QueueID]]
		r.ErrorGroups = append(r.ErrorGroups, g)
	}
	perQueue := map[int64][]Bucket{}
	for _, bk := range buckets {
		bk.Group = strconv.FormatInt(bk.GroupID, 10) // fillSeries keys by names
		perQueue[bk.QueueID] = append(perQueue[bk.QueueID], bk)
	}
	for i := range rows {
		r := &rows[i]
		r.PartitionCount = parts[r.ID]
		names := slices.Clone(readers[r.ID])
		for _, s := range r.Stats {
			if !slices.Contains(names, s.Group) {
				names = append(names, s.Group)
			}
		}
		slices.Sort(names)
		r.Groups = names
		// A queue without traffic in the window has no series (no
		// sparkline), as Briefs gives it.
		series := fillSeries(perQueue[r.ID], from, end, HealthStep, b.now())
		if len(series) > 0 {
			r.DepthSeries = make([]int64, int(end.Sub(from)/HealthStep))
		}
		for _, s := range series {
			for k, p := range s.Points {
				r.DepthSeries[k] += p.Depth
			}
		}
	}
	return nil
}

// MaxQueueMatches is the most names FindQueues returns.
const MaxQueueMatches = 100

// QueueNames names every queue, by name: one statement whatever their
// number.
func (b *Broker) QueueNames(ctx context.Context) ([]string, error) {
	var names []string
	err := b.store.View(ctx, func(tx Tx) (err error) {
		names, err = tx.QueueNames(ctx)
		return err
	})
	return names, err
}

// FindQueues returns the first limit queue names, by name, that contain
// part (in any case; "" matches every queue), and how many match in
// all: for a picker that suggests as a person types.
func (b *Broker) FindQueues(ctx context.Context, part string, limit int) ([]string, int, error) {
	return b.FindQueuesIn(ctx, part, limit, QueueScope{})
}

// FindQueuesIn is FindQueues among the queues of a scope: the others are
// neither suggested nor counted.
func (b *Broker) FindQueuesIn(ctx context.Context, part string, limit int, scope QueueScope) ([]string, int, error) {
	if limit < 1 || limit > MaxQueueMatches {
		return nil, 0, errorf(ErrInvalid, "limit must be between 1 and %d", MaxQueueMatches)
	}
	var names []string
	err := b.store.View(ctx, func(tx Tx) (err error) {
		names, err = tx.QueueNames(ctx)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if !scope.All() {
		names = slices.DeleteFunc(names, func(n string) bool { return !scope.Allows(n) })
	}
	part = strings.ToLower(part)
	var out []string
	n := 0
	for _, name := range names {
		if part != "" && !strings.Contains(strings.ToLower(name), part) {
			continue
		}
		if n++; len(out) < limit {
			out = append(out, name)
		}
	}
	return out, n, nil
}
