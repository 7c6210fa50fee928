package demo

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// simClock is a clock the test moves by hand.
type simClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *simClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// The live traffic, run for simulated hours on a real database with the
// broker's clock injected (Simulate: producers, workers and triage as Run
// has them, stepped minute by minute instead of on timers), files dead
// letters and fails acks at the rates the week of history is made from (profiles),
// and its triage (as actor demo, audited) keeps the dead letters waiting
// bounded: under the depth alert on average, their oldest under the age
// alert. Nothing from a payload or an error text is logged.
func TestLiveTrafficHasTheHistorysRatesAndStaysBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A Tuesday from 10:00 UTC: the day's busy hours.
	clock := &simClock{now: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)}
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "demo.db"), db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	b := broker.New(broker.Config{Store: d, Clock: broker.ClockFunc(clock.Now)})
	var logs bytes.Buffer
	qs := queues()
	const hours = 3
	type key struct{ queue, group string }
	expected := map[key]*struct{ acks, failed, dead float64 }{}
	maxDepth := map[key]int64{}
	overAlert := map[key]int{} // minutes over the depth alert, after the first hour
	var depthSum map[key]int64
	var lateMinutes int
	var oldest time.Duration
	ps := profiles(qs)
	for _, p := range ps {
		expected[key{p.queue, p.group}] = &struct{ acks, failed, dead float64 }{}
		if p.bursts {
			n := openMin + float64(openSpan-1)/2 // the opening batch
			expected[key{p.queue, p.group}].dead = n
			expected[key{p.queue, p.group}].failed = n * float64(p.burstFailed)
		}
	}
	minute := 0
	err = Simulate(ctx, Config{Broker: b, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Clock: clock.Now}, hours*time.Hour, clock.add, func(now time.Time) error {
		// What the history's rates make of the minute just gone.
		for _, p := range ps {
			e := expected[key{p.queue, p.group}]
			e.dead += p.deadPerHour / 60 * rhythm(now.Add(-time.Minute))
			if p.bursts {
				n := burstsPerDay / (24 * 60) * rhythm(now) / meanRhythm * (burstMin + float64(burstSpan-1)/2)
				e.dead += n
				e.failed += n * float64(p.burstFailed)
			}
		}
		minute++
		if minute == 60 {
			depthSum = map[key]int64{}
		}
		health, _, err := b.Health(ctx)
		if err != nil {
			return err
		}
		for _, h := range health {
			oldest = max(oldest, h.Health.Oldest)
		}
		page, err := b.Queues(ctx)
		if err != nil {
			return err
		}
		for _, qq := range page {
			for _, g := range qq.Stats {
				k := key{qq.Name, g.Group}
				maxDepth[k] = max(maxDepth[k], g.Depth)
				if depthSum != nil {
					depthSum[k] += g.Depth
					if g.Depth > 10 {
						overAlert[k]++
					}
				}
			}
		}
		if depthSum != nil {
			lateMinutes++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.FlushStats(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := b.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range all {
		for _, g := range q.Stats {
			k := key{q.Name, g.Group}
			p := ps[0]
			for _, pp := range ps {
				if pp.queue == q.Name && pp.group == g.Group {
					p = pp
				}
			}
			acks := float64(g.Completed + g.Failed)
			share := float64(g.Failed) / acks
			// Failed acks: hundreds, so within three standard deviations
			// and 5 % (the model's approximations: a message handed back
			// behind a retried failure is handled again) of what the
			// history's share and bursts make, and a burst.
			wantFailed := p.failRate*acks + expected[k].failed
			if math.Abs(float64(g.Failed)-wantFailed) > 3*math.Sqrt(wantFailed)+0.05*wantFailed+float64((burstMin+burstSpan)*p.burstFailed) {
				t.Errorf("%s/%s: %d of %0.f acks failed, the history's rates make %.0f", q.Name, g.Group, g.Failed, acks, wantFailed)
			}
			// Dead letters: tens, so within three standard deviations and
			// a burst.
			want := expected[k].dead
			if got := float64(g.DeadLettered); math.Abs(got-want) > 3*math.Sqrt(want)+burstMin+burstSpan {
				t.Errorf("%s/%s: %0.f dead letters in %d h, the history's rates make %.1f", q.Name, g.Group, got, hours, want)
			}
			mean := float64(depthSum[k]) / float64(lateMinutes)
			t.Logf("%s/%s: %.2f %% failed (history %.2f %%), %d dead letters (history %.1f), %d replayed, %d deleted; depth mean %.1f, max %d, over 10 for %d min",
				q.Name, g.Group, 100*share, 100*p.failRate, g.DeadLettered, want, g.Replayed, g.Deleted, mean, maxDepth[k], overAlert[k])
			// The triage keeps what waits bounded: under the depth alert
			// (broker.DefaultLimits: 10) most of the time once it runs, a
			// burst or two above it for a while.
			if overAlert[k] > lateMinutes/4 || maxDepth[k] > 10+2*(burstMin+burstSpan) || g.Depth > 10+burstMin+burstSpan {
				t.Errorf("%s/%s: depth over the alert %d of %d minutes, %d at most, %d at the end", q.Name, g.Group, overAlert[k], lateMinutes, maxDepth[k], g.Depth)
			}
			if g.DeadLettered > 10 && (g.Replayed == 0 && g.Deleted == 0) {
				t.Errorf("%s/%s: %d dead letters, none triaged", q.Name, g.Group, g.DeadLettered)
			}
		}
	}
	if oldest > time.Hour {
		t.Errorf("the oldest dead letter waited %s, want under an hour", oldest)
	}
	// The triage is audited as anyone's action, by actor demo.
	for _, action := range []string{broker.AuditReplay, broker.AuditDelete} {
		entries, err := b.Audit(ctx, broker.AuditFilter{Actor: actor, Action: action}, broker.Page{})
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			t.Errorf("no audit entry of a %s by %s", action, actor)
		}
	}
	for _, leak := range []string{"orderId", "paymentId", ".example", "card_declined", "Too Many", "invoice_reminder", "panic"} {
		if strings.Contains(logs.String(), leak) {
			t.Errorf("log contains %q, which comes from a payload or an error text:\n%s", leak, logs.String())
		}
	}
}

// The triage touches the demo's queues only: serve --demo runs on the
// user's own database, whose dead letters are theirs to handle.
func TestTriageLeavesOtherQueuesAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &simClock{now: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)}
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "mine.db"), db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	b := broker.New(broker.Config{Store: d, Clock: broker.ClockFunc(clock.Now)})
	r := &runner{b: b, log: slog.New(slog.DiscardHandler), speed: 1, now: clock.Now}
	for _, q := range queues() {
		if err := r.configure(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i, qg := range []struct{ queue, group, err string }{
		{"mine", "workers", "upstream timeout after 30s"},      // looks transient
		{"mine", "workers", "validation failed: bad field"},    // looks hopeless
		{"orders", "workers", "upstream timeout after 30s"},    // a demo queue, another group
		{"orders", groupBilling, "upstream timeout after 30s"}, // the demo's: replayed
	} {
		if _, err := b.Push(ctx, []broker.PushItem{{Queue: qg.queue, Partition: "p", Payload: []byte(`{}`), TransactionID: fmt.Sprint("t-", i)}}); err != nil {
			t.Fatal(err)
		}
		res, err := b.Pop(ctx, broker.PopRequest{Queue: qg.queue, Group: qg.group, Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop %s/%s: %v", qg.queue, qg.group, err)
		}
		m := res.Messages[0]
		if _, err := b.AckBatch(ctx, qg.group, []broker.Ack{{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckDLQ, Error: qg.err}}); err != nil {
			t.Fatal(err)
		}
	}
	clock.add(time.Hour)
	r.triage(ctx, clock.Now())
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, dl := range page.Items {
		left = append(left, dl.Queue+"/"+dl.Group)
	}
	slices.Sort(left)
	if want := []string{"mine/workers", "mine/workers", "orders/workers"}; !slices.Equal(left, want) {
		t.Errorf("after the triage, dead letters of %v; want %v (the demo's own replayed, no other touched)", left, want)
	}
}
