package demo

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The demo's week of history. On a new demo database the charts and the
// sparklines would start flat; so the first start writes a week of
// plausible history into the time buckets (broker.WriteDemoHistory), as a
// manager would see it after a week in production: busier by day than by
// night and at weekends, completed acks far above failed ones, and dead
// letters at the rates the live traffic files them (profiles derives them
// from rates.go, the live workers' source), now and then in a burst,
// worked off by the same triage as the live demo's (every ten minutes:
// transient failures replayed, bad messages deleted), so that depth and
// age stay under the default alert levels except in the bursts and in two
// incidents, where the alerts show (a payment provider's outage one
// afternoon, replayed once it is over; an email template missing after a
// deploy one morning). The week ends where the database really is: no
// dead letter waiting, the last replays' copies settling in the live
// traffic.

// HistorySpan is how far back the synthetic history goes.
const HistorySpan = 7 * 24 * time.Hour

// DefaultHistorySeed is the seed of the synthetic history when Config
// gives none.
const DefaultHistorySeed = 17

// WriteHistory configures the demo queues and writes a week of synthetic
// history before now into a database that has none of its own (see
// broker.WriteDemoHistory: a database with a mark, a bucket, a message or
// a dead letter gets nothing, and the zero DemoHistory is returned). The
// history depends on cfg.Seed and the broker's clock only.
func WriteHistory(ctx context.Context, cfg Config) (broker.DemoHistory, error) {
	if cfg.Broker == nil {
		return broker.DemoHistory{}, errors.New("demo: broker is required")
	}
	d := &runner{b: cfg.Broker}
	qs := queues()
	for _, q := range qs {
		if err := d.configure(ctx, q); err != nil {
			return broker.DemoHistory{}, err
		}
	}
	return writeHistory(ctx, cfg.Broker, qs, cfg.Seed)
}

func writeHistory(ctx context.Context, b *broker.Broker, qs []queue, seed uint64) (broker.DemoHistory, error) {
	if seed == 0 {
		seed = DefaultHistorySeed
	}
	ps := profiles(qs)
	groups := make([]broker.QueueGroup, len(ps))
	for i, p := range ps {
		groups[i] = broker.QueueGroup{Queue: p.queue, Group: p.group}
	}
	return b.WriteDemoHistory(ctx, groups, HistorySpan, func(from, until time.Time, _ []broker.GroupStats) [][]broker.DemoMinute {
		out := make([][]broker.DemoMinute, len(ps))
		for i, p := range ps {
			out[i] = p.synthesize(rand.New(rand.NewPCG(seed, uint64(i))), from, until)
		}
		return out
	}, actor)
}

// profile is how one queue and group behaves in the synthetic history.
type profile struct {
	queue, group string
	perMinute    float64 // messages a minute at the day's peak (the live demo's rate)
	failRate     float64 // failed acks among all, on a normal day
	deadPerHour  float64 // dead letters an hour at the peak, on a normal day
	transient    float64 // their share that the triage replays
	replayOK     float64 // the share of those replays that succeed
	bursts       bool    // the queue's main group: its producer's bursts
	burstFailed  int64   // failed acks a message of a burst makes
	incidents    []incident
}

// incident is a stretch of failures that ends in a burst of dead letters,
// and their replay once it is over.
type incident struct {
	daysBack        int           // before the day the history ends
	start           time.Duration // into that day (UTC)
	length          time.Duration
	failRate        float64 // failed acks among all, meanwhile
	deadPerMinute   float64
	replayAfter     time.Duration // from its end
	replaySucceeded float64       // the copies' share that then succeed
}

// profiles are the demo's queues and groups, in order, with how each
// behaves: the rates of the live demo (outcomeOf, from rates), and the
// incidents.
func profiles(qs []queue) []profile {
	incidents := map[string][]incident{
		// The card processor down one afternoon, three days back: charges
		// time out until it is back, then the on-call engineer replays them.
		"payments/" + groupBilling: {{daysBack: 3, start: 13*time.Hour + 50*time.Minute, length: 2*time.Hour + 15*time.Minute,
			failRate: 0.45, deadPerMinute: 5, replayAfter: 35 * time.Minute, replaySucceeded: 0.97}},
		// A deploy without the new email template, five days back.
		"emails/" + groupNotifier: {{daysBack: 5, start: 9*time.Hour + 10*time.Minute, length: 45 * time.Minute,
			failRate: 0.2, deadPerMinute: 6, replayAfter: 40 * time.Minute, replaySucceeded: 0.99}},
	}
	var out []profile
	for _, q := range qs {
		groups := make([]string, 0, len(q.handlers))
		for g := range q.handlers {
			groups = append(groups, g)
		}
		slices.Sort(groups)
		for _, g := range groups {
			o := outcomeOf(q.name, g, q.retryLimit())
			perMinute := float64(time.Minute / q.every)
			out = append(out, profile{queue: q.name, group: g, perMinute: perMinute,
				failRate: o.failed / (1 + o.failed), deadPerHour: o.dead * perMinute * 60,
				transient: o.transientShare, replayOK: o.replayOK, bursts: g == q.main, burstFailed: badFailed(q),
				incidents: incidents[q.name+"/"+g]})
		}
	}
	return out
}

// badFailed is the failed acks a message of q's bursts makes with q's
// main worker, as its handler answers: none when it is refused at once
// (permanent), one an attempt when it is retried to a dead letter.
func badFailed(q queue) int64 {
	rng := rand.New(rand.NewPCG(1, 1))
	_, payload := q.bad(rng, tenants[0])
	body, err := json.Marshal(payload)
	if err != nil {
		panic(err) // the demo's own types marshal
	}
	d := broker.Delivery{Message: broker.Message{Payload: body}, Queue: q.name, Partition: tenants[0], Group: q.main}
	if text, permanent := handle(context.Background(), q.handlers[q.main], rng, d); text == "" || permanent {
		return 0
	}
	return int64(q.retryLimit() + 1)
}

// The kinds of dead letters, for what the triage does with them.
type kind int

const (
	transient kind = iota // replayed at a triage
	bad                   // deleted at a triage
	outage                // of an incident: replayed once it is over
)

// waiting are the dead letters of a group that wait, oldest first, in runs
// of one kind that failed at one time.
type waiting []run

type run struct {
	at   time.Time
	n    int64
	kind kind
}

func (w waiting) depth() int64 {
	var n int64
	for _, r := range w {
		n += r.n
	}
	return n
}

// take removes up to n of the kinds given, oldest first.
func (w *waiting) take(n int64, kinds ...kind) int64 {
	return w.takeIf(n, func(r run) bool { return slices.Contains(kinds, r.kind) })
}

// takeIf removes up to n of the runs that match, oldest first.
func (w *waiting) takeIf(n int64, match func(run) bool) int64 {
	var got int64
	for i := range *w {
		r := &(*w)[i]
		if got == n {
			break
		}
		if r.n == 0 || !match(*r) {
			continue
		}
		k := min(r.n, n-got)
		r.n -= k
		got += k
	}
	*w = slices.DeleteFunc(*w, func(r run) bool { return r.n == 0 })
	return got
}

// Triage speeds: dead letters a minute a bulk job settles.
const (
	replaysPerMinute = 150
	deletesPerMinute = 100
)

// synthesize makes the minutes of [from, until) of one group.
func (p profile) synthesize(rng *rand.Rand, from, until time.Time) []broker.DemoMinute {
	n := int(until.Sub(from) / time.Minute)
	out := make([]broker.DemoMinute, n)
	// Replayed copies settle a minute or two after the replay; those that
	// would settle after until do so in the live traffic, not here.
	type outcome struct{ ok, failed int64 }
	later := make([]outcome, n+3)
	var w waiting
	var triage bool
	var replaying *incident // whose dead letters are being replayed
	drift, day := 1.0, -1
	endDay := until.Truncate(24 * time.Hour)
	for k := range out {
		at := from.Add(time.Duration(k) * time.Minute)
		last := k == n-1
		if d := at.YearDay(); d != day {
			day, drift = d, 0.9+0.2*rng.Float64() // some days are busier
		}
		var s broker.Stats
		traffic := p.perMinute * rhythm(at) * drift * math.Max(0.5, 1+0.06*rng.NormFloat64())
		fail, deadRate := p.failRate, p.deadPerHour/60*rhythm(at)*drift
		var inIncident *incident
		for i := range p.incidents {
			inc := &p.incidents[i]
			start := endDay.AddDate(0, 0, -inc.daysBack).Add(inc.start)
			if !at.Before(start) && at.Before(start.Add(inc.length)) {
				inIncident = inc
			}
			if at.Equal(start.Add(inc.length + inc.replayAfter)) {
				replaying = inc
			}
		}
		if inIncident != nil {
			fail = inIncident.failRate
		}
		s.Failed = poisson(rng, traffic*fail)
		s.Completed = max(0, int64(math.Round(traffic))-s.Failed)

		arrive := func(n int64, kd kind) {
			if n > 0 {
				w = append(w, run{at: at.Add(time.Duration(rng.IntN(60000)) * time.Millisecond), n: n, kind: kd})
				s.DeadLettered += n
			}
		}
		if !last {
			for range poisson(rng, deadRate) {
				if rng.Float64() < p.transient {
					arrive(1, transient)
				} else {
					arrive(1, bad)
				}
			}
			// The producer's bursts, as the live producers make them.
			if p.bursts && rng.Float64() < burstsPerDay/(24*60)*rhythm(at)/meanRhythm {
				n := int64(burstMin + rng.IntN(burstSpan))
				arrive(n, bad)
				s.Failed += n * p.burstFailed
			}
			if inIncident != nil {
				arrive(poisson(rng, inIncident.deadPerMinute), outage)
			}
		}
		// Copies replayed before settle now: those that fail are dead
		// letters again, bad ones.
		o := later[k]
		s.ReplayCompleted, s.ReplayFailed = o.ok, o.failed
		s.Completed += o.ok
		s.Failed += o.failed
		arrive(o.failed, bad)

		replay := func(limit int64, success float64, match func(run) bool) {
			got := w.takeIf(limit, match)
			s.Replayed += got
			if got == 0 {
				return
			}
			ok := binomial(rng, got, success)
			if when := k + 1 + rng.IntN(2); when < n {
				later[when].ok += ok
				later[when].failed += got - ok
			}
		}
		// The triage every triageEvery, as the live demo's; the replay
		// after an incident; at the last minute, all that waits, so that
		// the week ends where the database is.
		if at.Sub(at.Truncate(triageEvery)) == 0 {
			triage = true
		}
		replayable := func(r run) bool { return r.kind == transient && at.Sub(r.at) >= triageReplayAfter }
		deletable := func(r run) bool { return r.kind == bad && at.Sub(r.at) >= triageDeleteAfter }
		switch {
		case last:
			replay(math.MaxInt64, p.replayOK, func(r run) bool { return r.kind != bad })
			s.Deleted += w.take(math.MaxInt64, bad)
		default:
			if replaying != nil {
				replay(replaysPerMinute, replaying.replaySucceeded, func(r run) bool { return r.kind == outage })
				if !slices.ContainsFunc(w, func(r run) bool { return r.kind == outage }) {
					replaying = nil
				}
			}
			if triage {
				replay(replaysPerMinute, p.replayOK, replayable)
				s.Deleted += w.takeIf(deletesPerMinute, deletable)
				triage = slices.ContainsFunc(w, func(r run) bool { return replayable(r) || deletable(r) })
			}
		}
		s.Depth = w.depth()
		m := broker.DemoMinute{Stats: s}
		if len(w) > 0 {
			m.OldestAt = w[0].at
		}
		out[k] = m
	}
	return out
}

// poisson draws a count of mean mean: Knuth's method while it is small,
// the normal approximation beyond.
func poisson(rng *rand.Rand, mean float64) int64 {
	if mean <= 0 {
		return 0
	}
	if mean > 30 {
		return max(0, int64(math.Round(mean+math.Sqrt(mean)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-mean), int64(0), 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// binomial draws how many of n succeed, each with probability p.
func binomial(rng *rand.Rand, n int64, p float64) int64 {
	if n > 50 {
		mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
		return min(n, max(0, int64(math.Round(mean+sd*rng.NormFloat64()))))
	}
	var k int64
	for range n {
		if rng.Float64() < p {
			k++
		}
	}
	return k
}
