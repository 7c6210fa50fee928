package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// steadyHistory is a synthetic history of one group: 10 completed and 1
// failed ack a minute, one dead letter filed at minute dlAt (a second
// in) and replayed at minute replayAt, whose copy then succeeds.
func steadyHistory(dlAt, replayAt int) broker.DemoHistoryFunc {
	return func(from, until time.Time, _ []broker.GroupStats) [][]broker.DemoMinute {
		n := int(until.Sub(from) / time.Minute)
		ms := make([]broker.DemoMinute, n)
		failedAt := from.Add(time.Duration(dlAt)*time.Minute + time.Second)
		for k := range ms {
			m := broker.DemoMinute{Stats: broker.Stats{Completed: 10, Failed: 1}}
			switch {
			case k == dlAt:
				m.DeadLettered = 1
			case k == replayAt:
				m.Replayed, m.ReplayCompleted = 1, 1
			}
			if k >= dlAt && k < replayAt {
				m.Depth, m.OldestAt = 1, failedAt
			}
			ms[k] = m
		}
		return [][]broker.DemoMinute{ms}
	}
}

// seriesSum adds the points of a history's series.
func seriesSum(t *testing.T, series []broker.Series) broker.Stats {
	t.Helper()
	var total broker.Stats
	for _, s := range series {
		for _, p := range s.Points {
			total.Completed += p.Completed
			total.Failed += p.Failed
			total.DeadLettered += p.DeadLettered
			total.Replayed += p.Replayed
			total.ReplayCompleted += p.ReplayCompleted
		}
	}
	return total
}

func testDemoHistoryGoesIntoTheBucketsOfANewDatabaseOnce(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("orders", map[string]any{})
	s.clock.Advance(30 * time.Second) // until is the start of the minute now is in
	groups := []broker.QueueGroup{{Queue: "orders", Group: "billing"}}
	const days = 3
	span := days * 24 * time.Hour
	n := int(span / time.Minute)
	dlAt, replayAt := n-600, n-300 // in the last 10 hours
	mark, err := s.b.WriteDemoHistory(s.ctx, groups, span, steadyHistory(dlAt, replayAt), "demo")
	if err != nil {
		t.Fatalf("WriteDemoHistory: %v", err)
	}
	until := s.clock.Now().Truncate(time.Minute)
	if !mark.Until.Equal(until) || !mark.From.Equal(until.Add(-span)) {
		t.Fatalf("mark %+v, want [%s, %s)", mark, until.Add(-span), until)
	}
	if got, err := s.b.DemoHistory(s.ctx); err != nil || got != mark {
		t.Fatalf("DemoHistory = %+v, %v; want %+v", got, err, mark)
	}

	// Each range the charts read has the minutes it covers: by hour the
	// whole span, by quarter the last day, by minute the last hour.
	end := until.Add(time.Hour)
	for _, c := range []struct {
		name string
		from time.Time
		step time.Duration
		want int64 // completed acks
	}{
		{"7d by hour", end.Add(-7 * 24 * time.Hour), time.Hour, 10 * int64(n)},
		{"24h by quarter", until.Add(-24 * time.Hour), 15 * time.Minute, 10 * 24 * 60},
		{"1h by minute", until.Add(-time.Hour), time.Minute, 10 * 60},
		// Minutes older than MinuteRetention were compacted away.
		{"by minute 3 days back", until.Add(-span), time.Minute, 0},
	} {
		to := end
		if c.name == "by minute 3 days back" {
			to = until.Add(-span + time.Hour)
		}
		series, err := s.b.History(s.ctx, broker.HistoryQuery{From: c.from, To: to, Step: c.step})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := seriesSum(t, series).Completed; got != c.want {
			t.Errorf("%s: %d completed, want %d", c.name, got, c.want)
		}
	}

	// The dead letter waits from its minute to its replay, and counts.
	series, err := s.b.History(s.ctx, broker.HistoryQuery{From: until.Add(-24 * time.Hour), To: end, Step: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 || series[0].Queue != "orders" || series[0].Group != "billing" {
		t.Fatalf("series %+v, want orders/billing", series)
	}
	total := seriesSum(t, series)
	if total.DeadLettered != 1 || total.Replayed != 1 || total.ReplayCompleted != 1 || total.Failed != 24*60 {
		t.Errorf("last 24 h: %+v, want 1 filed, 1 replayed, 1 replay completed, %d failed", total, 24*60)
	}
	failedAt := until.Add(-span + time.Duration(dlAt)*time.Minute + time.Second)
	for _, p := range series[0].Points {
		mid := p.At.Add(7 * time.Minute)
		waiting := !mid.Before(failedAt.Truncate(time.Minute).Add(15*time.Minute)) && mid.Before(until.Add(-300*time.Minute).Truncate(15*time.Minute))
		if waiting && (p.Depth != 1 || !p.OldestAt.Equal(failedAt)) {
			t.Errorf("at %s: depth %d oldest %s, want 1 failed at %s", p.At, p.Depth, p.OldestAt, failedAt)
		}
		if !p.At.Before(until) && p.Depth != 0 {
			t.Errorf("at %s (after the history): depth %d, want the database's 0", p.At, p.Depth)
		}
	}

	// The running totals (the queue page, /metrics) are not touched.
	if st := s.stats("orders", "billing"); st != (broker.Stats{}) {
		t.Errorf("running totals %+v after a synthetic history, want none", st)
	}
	entries, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditDemoHistory}, broker.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Actor != "demo" {
		t.Fatalf("audit %+v, want one demo_history entry by demo", entries)
	}

	// A second start writes nothing.
	s.clock.Advance(time.Hour)
	again, err := s.b.WriteDemoHistory(s.ctx, groups, span, steadyHistory(dlAt, replayAt), "demo")
	if err != nil || again != (broker.DemoHistory{}) {
		t.Fatalf("second WriteDemoHistory = %+v, %v; want nothing written", again, err)
	}
	if got, _ := s.b.DemoHistory(s.ctx); got != mark {
		t.Errorf("mark after a second start %+v, want the first %+v", got, mark)
	}
	series, err = s.b.History(s.ctx, broker.HistoryQuery{From: until.Add(-8 * 24 * time.Hour), To: until.Add(2 * time.Hour), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := seriesSum(t, series).Completed; got != 10*int64(n) {
		t.Errorf("after a second start %d completed in the buckets, want the first's %d", got, 10*n)
	}
}

func testDemoHistoryIsNotWrittenIntoADatabaseWithAHistoryOfItsOwn(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("orders", "acme", "t-1")
	mark, err := s.b.WriteDemoHistory(s.ctx, []broker.QueueGroup{{Queue: "orders", Group: "billing"}}, 24*time.Hour, steadyHistory(10, 20), "demo")
	if err != nil || mark != (broker.DemoHistory{}) {
		t.Fatalf("WriteDemoHistory = %+v, %v; want nothing written", mark, err)
	}
	if got, _ := s.b.DemoHistory(s.ctx); got != (broker.DemoHistory{}) {
		t.Errorf("mark %+v on a database with a message, want none", got)
	}
	series, err := s.b.History(s.ctx, broker.HistoryQuery{From: s.clock.Now().Add(-48 * time.Hour), To: s.clock.Now().Add(time.Hour), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := seriesSum(t, series); got != (broker.Stats{}) {
		t.Errorf("buckets %+v, want none", got)
	}
}

func testDemoHistoryThatDoesNotAddUpIsRefused(t *testing.T, harness Harness) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		spoil func(ms []broker.DemoMinute)
	}{
		{"DepthNotFromTheCounts", func(ms []broker.DemoMinute) { ms[15].Depth = 2 }},
		{"EndsWithDeadLettersTheDatabaseHasNot", func(ms []broker.DemoMinute) {
			last := &ms[len(ms)-1]
			last.DeadLettered, last.Depth, last.OldestAt = 1, 1, time.Unix(0, 0)
		}},
		{"WaitingWithNoOldest", func(ms []broker.DemoMinute) { ms[12].OldestAt = time.Time{} }},
		{"NegativeCount", func(ms []broker.DemoMinute) { ms[3].Completed = -1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.configure("orders", map[string]any{})
			gen := func(from, until time.Time, end []broker.GroupStats) [][]broker.DemoMinute {
				out := steadyHistory(10, 20)(from, until, end)
				c.spoil(out[0])
				return out
			}
			_, err := s.b.WriteDemoHistory(s.ctx, []broker.QueueGroup{{Queue: "orders", Group: "billing"}}, 2*time.Hour, gen, "demo")
			if !errors.Is(err, broker.ErrInvalid) {
				t.Fatalf("WriteDemoHistory: %v, want ErrInvalid", err)
			}
			if got, _ := s.b.DemoHistory(s.ctx); got != (broker.DemoHistory{}) {
				t.Errorf("mark %+v after a refused history, want none", got)
			}
		})
	}
}
