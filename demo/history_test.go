package demo_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/demo"
)

// historyStart is when the tests' demo databases are first started: a
// Wednesday afternoon, so that the week back has a weekend in it.
var historyStart = time.Date(2026, 11, 4, 14, 37, 20, 0, time.UTC)

// newDemoBroker is a broker on a new database file whose clock stands at
// historyStart.
func newDemoBroker(t *testing.T) *broker.Broker {
	t.Helper()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "lazarus-demo.db"), db.SyncNormal)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return broker.New(broker.Config{Store: d, Clock: broker.ClockFunc(func() time.Time { return historyStart })})
}

// week is the history the 7-day chart reads (as page_charts.go asks for
// it), and the hour before, where the synthetic history starts.
func week(t *testing.T, b *broker.Broker) []broker.Series {
	t.Helper()
	end := historyStart.Truncate(time.Hour).Add(time.Hour)
	series, err := b.History(context.Background(), broker.HistoryQuery{From: end.Add(-7*24*time.Hour - time.Hour), To: end, Step: time.Hour})
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	return series
}

func TestHistoryOfANewDemoDatabaseCoversTheWeekAndAddsUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newDemoBroker(t)
	start := time.Now()
	mark, err := demo.WriteHistory(ctx, demo.Config{Broker: b})
	if err != nil {
		t.Fatalf("WriteHistory: %v", err)
	}
	t.Logf("WriteHistory took %s", time.Since(start))
	until := historyStart.Truncate(time.Minute)
	if !mark.Until.Equal(until) || !mark.From.Equal(until.Add(-demo.HistorySpan)) {
		t.Fatalf("mark %+v, want the week before %s", mark, until)
	}
	if got, err := b.DemoHistory(ctx); err != nil || got != mark {
		t.Fatalf("DemoHistory = %+v, %v; want %+v", got, err, mark)
	}

	series := week(t, b)
	var pairs []string
	for _, s := range series {
		pairs = append(pairs, s.Queue+"/"+s.Group)
	}
	want := []string{"emails/analytics", "emails/notifier", "orders/analytics", "orders/billing", "payments/analytics", "payments/billing"}
	if !reflect.DeepEqual(pairs, want) {
		t.Fatalf("series of %v, want %v", pairs, want)
	}
	var all broker.Stats
	for _, s := range series {
		if len(s.Points) != 7*24+1 {
			t.Fatalf("%s/%s: %d points, want 169", s.Queue, s.Group, len(s.Points))
		}
		var total broker.Stats
		var day, night int64
		var depth int64
		var peakFiled int64
		var filedHours []int64
		for i, p := range s.Points {
			// Every hour of the week has traffic (the first starts at the
			// history's first minute).
			if p.Completed == 0 && p.At.Before(until) {
				t.Errorf("%s/%s at %s: no completed ack", s.Queue, s.Group, p.At)
			}
			// The depth follows from the counts, hour by hour.
			depth += p.DeadLettered - p.Replayed - p.Deleted - p.DeadLettersExpired
			if p.Depth != depth {
				t.Fatalf("%s/%s at %s (point %d): depth %d, the counts make %d", s.Queue, s.Group, p.At, i, p.Depth, depth)
			}
			if (p.Depth > 0) == p.OldestAt.IsZero() || p.OldestAt.After(p.At.Add(time.Hour)) {
				t.Errorf("%s/%s at %s: depth %d, oldest %s", s.Queue, s.Group, p.At, p.Depth, p.OldestAt)
			}
			// The triage works: nothing waits for days.
			if p.Depth > 0 && p.At.Add(time.Hour).Sub(p.OldestAt) > 48*time.Hour {
				t.Errorf("%s/%s at %s: the oldest dead letter failed at %s", s.Queue, s.Group, p.At, p.OldestAt)
			}
			switch h := p.At.Hour(); {
			case h >= 12 && h < 16:
				day += p.Completed
			case h < 4:
				night += p.Completed
			}
			peakFiled = max(peakFiled, p.DeadLettered)
			filedHours = append(filedHours, p.DeadLettered)
			total = addStats(total, p.Stats)
		}
		name := s.Queue + "/" + s.Group
		// The week ends where the database is: no dead letter waiting.
		if last := s.Points[len(s.Points)-1]; last.Depth != 0 {
			t.Errorf("%s: the week ends at depth %d, the database has 0", name, last.Depth)
		}
		if day < 2*night {
			t.Errorf("%s: %d completed 12-16 h, %d 0-4 h: no daily rhythm", name, day, night)
		}
		if total.Completed < 20*total.Failed || total.Failed == 0 {
			t.Errorf("%s: %d completed, %d failed: want completed far above failed", name, total.Completed, total.Failed)
		}
		all = addStats(all, total)
		if s.Group == "analytics" {
			// The analytics store takes any JSON: its failures are
			// retried away, as in the live demo.
			if total.DeadLettered > 20 {
				t.Errorf("%s: %d dead letters, want next to none", name, total.DeadLettered)
			}
			continue
		}
		if total.DeadLettered == 0 || total.Replayed == 0 || total.Deleted == 0 || total.ReplayCompleted <= total.ReplayFailed {
			t.Errorf("%s: %+v, want dead letters filed, replayed (mostly successfully) and deleted", name, total)
		}
		// The last replays' copies settle in the live traffic: none is
		// counted as settled at the end (a forced 100 %% last point).
		if total.ReplayCompleted+total.ReplayFailed >= total.Replayed {
			t.Errorf("%s: %d replayed, %d settled: the last replays settled within the week", name, total.Replayed, total.ReplayCompleted+total.ReplayFailed)
		}
		// Dead letters come in bursts: the busiest hour files many times
		// what a typical one does.
		slices.Sort(filedHours)
		if median := filedHours[len(filedHours)/2]; peakFiled < 4*max(median, 1) {
			t.Errorf("%s: at most %d filed an hour, median %d: no burst", name, peakFiled, median)
		}
		// The alert levels (broker.DefaultLimits) are crossed in bursts
		// and incidents only: most hours are under them, the oldest dead
		// letter younger than 4 h outside the incidents' days, and replay
		// success is a line (most hours have replays that settled).
		var over, withReplays int
		for _, p := range s.Points {
			if p.Depth > 10 {
				over++
			}
			if p.ReplayCompleted+p.ReplayFailed > 0 {
				withReplays++
			}
			if p.Depth > 0 && p.At.Add(time.Hour).Sub(p.OldestAt) > 4*time.Hour && !incidentDay(p.At) {
				t.Errorf("%s at %s: the oldest dead letter failed at %s, over the 4 h alert", name, p.At, p.OldestAt)
			}
		}
		if over > len(s.Points)/10 {
			t.Errorf("%s: %d of %d hours over the depth alert (10)", name, over, len(s.Points))
		}
		if withReplays < len(s.Points)*6/10 {
			t.Errorf("%s: replays settled in %d of %d hours: dots, not a line", name, withReplays, len(s.Points))
		}
	}
	// The payment provider's outage: an afternoon of failed charges, then
	// its replay, which succeeds.
	pay := series[slices.Index(pairs, "payments/billing")]
	outageDay := until.Truncate(24*time.Hour).AddDate(0, 0, -3)
	var outage broker.Stats
	for _, p := range pay.Points {
		if !p.At.Before(outageDay.Add(13*time.Hour)) && p.At.Before(outageDay.Add(18*time.Hour)) {
			outage = addStats(outage, p.Stats)
		}
	}
	if outage.DeadLettered < 400 || outage.Replayed < 400 || outage.ReplayCompleted < outage.Replayed*9/10 || outage.Failed*5 < outage.Completed {
		t.Errorf("payments/billing on the outage's afternoon: %+v, want hundreds filed and replayed, the replays succeeding, many failures", outage)
	}

	// Nothing but the buckets: no message, no dead letter, no running
	// total (the queue page's counts, /metrics' counters).
	qs, err := b.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		for _, g := range q.Stats {
			if g.Stats != (broker.Stats{}) {
				t.Errorf("%s/%s running totals %+v, want none", q.Name, g.Group, g.Stats)
			}
		}
		for _, p := range q.Partitions {
			if p.Messages != 0 {
				t.Errorf("%s/%s: %d messages, want none", q.Name, p.Name, p.Messages)
			}
		}
	}
	// The overview's sparklines have a shape (Health reads no series:
	// the overview draws them).
	ov, err := b.Overview(ctx, broker.OverviewQuery{Limit: broker.MaxOverviewPage})
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Rows) == 0 {
		t.Fatal("no queue on the overview")
	}
	for _, r := range ov.Rows {
		if len(r.DepthSeries) == 0 || slices.Max(r.DepthSeries) == 0 {
			t.Errorf("%s: a flat sparkline %v", r.Name, r.DepthSeries)
		}
	}
	entries, err := b.Audit(ctx, broker.AuditFilter{Action: broker.AuditDemoHistory}, broker.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Actor != "demo" || entries[0].Count != 6 {
		t.Errorf("audit %+v, want one demo_history entry by demo for 6 groups", entries)
	}
	raw, _ := json.Marshal(all)
	t.Logf("the week, all groups: %s", raw)

	// A second start writes nothing more.
	if again, err := demo.WriteHistory(ctx, demo.Config{Broker: b}); err != nil || again != (broker.DemoHistory{}) {
		t.Fatalf("second WriteHistory = %+v, %v; want nothing", again, err)
	}
	if !reflect.DeepEqual(week(t, b), series) {
		t.Error("a second start changed the history")
	}
}

func TestHistoryDependsOnTheSeedOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	write := func(seed uint64) []broker.Series {
		b := newDemoBroker(t)
		if _, err := demo.WriteHistory(ctx, demo.Config{Broker: b, Seed: seed}); err != nil {
			t.Fatalf("WriteHistory: %v", err)
		}
		return week(t, b)
	}
	a, again, other := write(5), write(5), write(6)
	if !reflect.DeepEqual(a, again) {
		t.Error("two histories of seed 5 differ")
	}
	if reflect.DeepEqual(a, other) {
		t.Error("the histories of seeds 5 and 6 are the same")
	}
}

func TestHistoryIsNotWrittenIntoADatabaseWithTrafficOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newDemoBroker(t)
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "orders", Partition: "acme-corp", Payload: []byte(`{}`), TransactionID: "t-1"}}); err != nil {
		t.Fatal(err)
	}
	mark, err := demo.WriteHistory(ctx, demo.Config{Broker: b})
	if err != nil || mark != (broker.DemoHistory{}) {
		t.Fatalf("WriteHistory = %+v, %v; want nothing written", mark, err)
	}
	for _, s := range week(t, b) {
		for _, p := range s.Points {
			if p.Stats != (broker.Stats{}) {
				t.Fatalf("%s/%s at %s: %+v in a database with traffic of its own", s.Queue, s.Group, p.At, p.Stats)
			}
		}
	}
}

// incidentDay reports whether t is on the day of one of the history's
// incidents (history.go: three and five days before historyStart's).
func incidentDay(t time.Time) bool {
	d := historyStart.Truncate(24 * time.Hour).Sub(t.Truncate(24 * time.Hour))
	return d == 3*24*time.Hour || d == 5*24*time.Hour
}

func addStats(a, b broker.Stats) broker.Stats {
	return broker.Stats{
		DeadLettered: a.DeadLettered + b.DeadLettered, Replayed: a.Replayed + b.Replayed, Deleted: a.Deleted + b.Deleted,
		Dropped: a.Dropped + b.Dropped, Completed: a.Completed + b.Completed, Failed: a.Failed + b.Failed,
		ReplayCompleted: a.ReplayCompleted + b.ReplayCompleted, ReplayFailed: a.ReplayFailed + b.ReplayFailed,
		Expired: a.Expired + b.Expired, DeadLettersExpired: a.DeadLettersExpired + b.DeadLettersExpired,
	}
}
