package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Limits are the monitoring thresholds of the dead-letter pattern: above
// (or, for replay success, below) them a queue is unhealthy.
type Limits struct {
	Depth         int64   `json:"depth"`         // dead letters in a queue and group
	OldestHours   float64 `json:"oldestHours"`   // age of the oldest dead letter
	FailurePct    float64 `json:"failurePct"`    // failed among acks, last 24 h
	ReplayMinPct  float64 `json:"replayMinPct"`  // replayed copies that then succeed, last 24 h
	MinAcks       int64   `json:"minAcks"`       // acks needed before the failure rate counts
	MinReplayEnds int64   `json:"minReplayEnds"` // settled replays needed before their rate counts
}

// DefaultLimits are the pattern article's alert levels.
func DefaultLimits() Limits {
	return Limits{Depth: 10, OldestHours: 4, FailurePct: 5, ReplayMinPct: 50, MinAcks: 20, MinReplayEnds: 5}
}

func (l Limits) validate(where string) error {
	switch {
	case l.Depth < 0:
		return errorf(ErrInvalid, "%s: depth must not be negative", where)
	case l.OldestHours <= 0:
		return errorf(ErrInvalid, "%s: oldest dead letter age must be above 0 hours", where)
	case l.FailurePct < 0 || l.FailurePct > 100:
		return errorf(ErrInvalid, "%s: failure rate must be between 0 and 100 %%", where)
	case l.ReplayMinPct < 0 || l.ReplayMinPct > 100:
		return errorf(ErrInvalid, "%s: replay success must be between 0 and 100 %%", where)
	case l.MinAcks < 0 || l.MinReplayEnds < 0:
		return errorf(ErrInvalid, "%s: minimum counts must not be negative", where)
	}
	return nil
}

// Thresholds are the default limits and per-queue overrides.
type Thresholds struct {
	Default Limits            `json:"default"`
	Queues  map[string]Limits `json:"queues,omitempty"`
}

// For returns the limits of a queue.
func (t Thresholds) For(queue string) Limits {
	if l, ok := t.Queues[queue]; ok {
		return l
	}
	return t.Default
}

// QueueNames lists the queues with overrides, sorted.
func (t Thresholds) QueueNames() []string {
	var out []string
	for q := range t.Queues {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// Health is what the thresholds judge of a queue (or of one group).
type Health struct {
	Depth       int64
	Oldest      time.Duration // zero without dead letters
	Acks        int64         // acks in the window
	Failed      int64         // of which failed
	ReplayEnds  int64         // replayed copies settled in the window
	ReplayOK    int64         // of which completed
	DepthGroups []string      // groups over the depth limit
}

// Breach is one threshold a queue is past, said for people.
type Breach struct {
	Metric string // depth, oldest, failures, replays
	Text   string
}

// Check returns the thresholds h is past.
func (l Limits) Check(h Health) []Breach {
	var out []Breach
	if h.Depth > l.Depth {
		out = append(out, Breach{"depth", fmt.Sprintf("%s dead letters (limit %s)", Thousands(h.Depth), Thousands(l.Depth))})
	}
	if lim := time.Duration(l.OldestHours * float64(time.Hour)); h.Oldest > lim {
		out = append(out, Breach{"oldest", fmt.Sprintf("oldest waits %s (limit %s)", round(h.Oldest), round(lim))})
	}
	if h.Acks >= max(l.MinAcks, 1) {
		if pct := 100 * float64(h.Failed) / float64(h.Acks); pct > l.FailurePct {
			out = append(out, Breach{"failures", fmt.Sprintf("%.1f %% of acks failed (limit %g %%)", pct, l.FailurePct)})
		}
	}
	if h.ReplayEnds >= max(l.MinReplayEnds, 1) {
		if pct := 100 * float64(h.ReplayOK) / float64(h.ReplayEnds); pct < l.ReplayMinPct {
			out = append(out, Breach{"replays", fmt.Sprintf("%.0f %% of replays succeeded (limit %g %%)", pct, l.ReplayMinPct)})
		}
	}
	return out
}

// round says a duration the way the overview does: minutes, hours, then
// days past 48 hours.
func round(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return strconv.FormatFloat(math.Round(d.Hours()/24*10)/10, 'f', -1, 64) + " d"
	case d >= time.Hour:
		return strconv.FormatFloat(math.Round(d.Hours()*10)/10, 'f', -1, 64) + " h"
	}
	return fmt.Sprintf("%.0f min", d.Minutes())
}

const thresholdsKey = "thresholds"

// Thresholds returns the monitoring thresholds (the defaults until an
// admin sets them).
func (b *Broker) Thresholds(ctx context.Context) (Thresholds, error) {
	var t Thresholds
	err := b.store.View(ctx, func(tx Tx) (err error) {
		t, err = thresholdsIn(ctx, tx)
		return err
	})
	return t, err
}

// SetThresholds stores the thresholds after checking every limit.
func (b *Broker) SetThresholds(ctx context.Context, t Thresholds, actor string) error {
	if err := t.Default.validate("default"); err != nil {
		return err
	}
	for q, l := range t.Queues {
		if err := checkName("queue", q); err != nil {
			return err
		}
		if err := l.validate("queue " + q); err != nil {
			return err
		}
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		if err := tx.SetSetting(ctx, thresholdsKey, string(raw)); err != nil {
			return err
		}
		return audit(ctx, tx, b.now(), actor, AuditConfigure, "", "", len(t.Queues)+1, "monitoring thresholds set: "+string(raw))
	})
}

// HealthWindow is how far back the failure and replay-success rates look.
const HealthWindow = 24 * time.Hour

// QueueHealth is a queue's health: its numbers and the thresholds past.
type QueueHealth struct {
	QueueBrief
	Health   Health
	Limits   Limits
	Breaches []Breach
	// Depth of the queue (all groups) over the window, oldest first, in
	// steps of HealthStep: for sparklines (the overview's rows; Health
	// leaves it out).
	DepthSeries []int64
}

// HealthStep is the step of QueueHealth.DepthSeries.
const HealthStep = 15 * time.Minute

// Health judges every queue against the thresholds, from the maintained
// counters and buckets only, with each queue's groups (Stats, Groups);
// its partitions and DepthSeries are not read.
func (b *Broker) Health(ctx context.Context) ([]QueueHealth, Thresholds, error) {
	// A few statements whatever the number of queues, as the overview
	// reads its totals (QueueTotals, StatsOf, ReadersOf): /metrics and
	// the thresholds' check run it at every scrape and maintenance.
	now := b.now()
	end := now.Truncate(HealthStep).Add(HealthStep) // the step now is in counts too
	from := end.Add(-HealthWindow)
	var out []QueueHealth
	var th Thresholds
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		if th, err = thresholdsIn(ctx, tx); err != nil {
			return err
		}
		totals, err := tx.QueueTotals(ctx, TotalsWindow{Then: from, To: end})
		if err != nil {
			return err
		}
		b.addPendingTotals(totals, from, end)
		ids := make([]int64, len(totals))
		at := make(map[int64]int, len(totals))
		out = make([]QueueHealth, len(totals))
		for i, t := range totals {
			ids[i], at[t.ID] = t.ID, i
			out[i] = overviewOf(t, th.For(t.Name), now).QueueHealth
		}
		if len(ids) == 0 {
			return nil
		}
		stats, err := b.statsOf(ctx, tx, ids)
		if err != nil {
			return err
		}
		for _, g := range stats {
			if i, ok := at[g.QueueID]; ok {
				out[i].Stats = append(out[i].Stats, g)
			}
		}
		readers, err := tx.ReadersOf(ctx, ids)
		if err != nil {
			return err
		}
		for i := range out {
			names := slices.Clone(readers[out[i].ID])
			for _, g := range out[i].Stats {
				if !slices.Contains(names, g.Group) {
					names = append(names, g.Group)
				}
			}
			slices.Sort(names)
			out[i].Groups = names
		}
		return nil
	})
	if err != nil {
		return nil, th, err
	}
	return out, th, nil
}

// statsOf is stats of the listed queues at once (StatsOf, one
// statement), with the counts still waiting in memory (StatsDelay); a
// group with waiting counts and no row yet costs a lookup of its name.
func (b *Broker) statsOf(ctx context.Context, tx Tx, ids []int64) ([]GroupStats, error) {
	gs, err := tx.StatsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	wanted := make(map[int64]bool, len(ids))
	for _, id := range ids {
		wanted[id] = true
	}
	added := false
	for _, e := range b.pending.snapshot() {
		if !wanted[e.key.queueID] {
			continue
		}
		i := slices.IndexFunc(gs, func(g GroupStats) bool { return g.QueueID == e.key.queueID && g.GroupID == e.key.groupID })
		if i < 0 {
			name, err := tx.GroupName(ctx, e.key.groupID)
			if err != nil {
				return nil, err
			}
			gs, i, added = append(gs, GroupStats{QueueID: e.key.queueID, GroupID: e.key.groupID, Group: name}), len(gs), true
		}
		gs[i].Stats = gs[i].Stats.add(e.d)
	}
	if added {
		slices.SortStableFunc(gs, func(a, b GroupStats) int {
			return cmp.Or(cmp.Compare(a.QueueID, b.QueueID), strings.Compare(a.Group, b.Group))
		})
	}
	return gs, nil
}
