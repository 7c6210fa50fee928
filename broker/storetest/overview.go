package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// readCounter is a store whose reads count the calls of the Tx methods
// an overview may make: those of OverviewTx (a statement each,
// DepthBuckets two) and the per-queue reads it must not make.
type readCounter struct {
	broker.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *readCounter) View(ctx context.Context, fn func(broker.Tx) error) error {
	return c.Store.View(ctx, func(tx broker.Tx) error { return fn(overviewTx{tx, c}) })
}

func (c *readCounter) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
}

func (c *readCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

type overviewTx struct {
	broker.Tx
	c *readCounter
}

func (t overviewTx) QueueTotals(ctx context.Context, w broker.TotalsWindow) ([]broker.QueueTotals, error) {
	t.c.count("QueueTotals")
	return t.Tx.QueueTotals(ctx, w)
}

func (t overviewTx) StatsOf(ctx context.Context, ids []int64) ([]broker.GroupStats, error) {
	t.c.count("StatsOf")
	return t.Tx.StatsOf(ctx, ids)
}

func (t overviewTx) ReadersOf(ctx context.Context, ids []int64) (map[int64][]string, error) {
	t.c.count("ReadersOf")
	return t.Tx.ReadersOf(ctx, ids)
}

func (t overviewTx) PartitionCounts(ctx context.Context, ids []int64) (map[int64]int, error) {
	t.c.count("PartitionCounts")
	return t.Tx.PartitionCounts(ctx, ids)
}

func (t overviewTx) DepthBuckets(ctx context.Context, ids []int64, from, to time.Time) ([]broker.Bucket, error) {
	t.c.count("DepthBuckets")
	return t.Tx.DepthBuckets(ctx, ids, from, to)
}

func (t overviewTx) TopErrorGroupsOf(ctx context.Context, ids []int64, limit int) ([]broker.ErrorGroup, error) {
	t.c.count("TopErrorGroupsOf")
	return t.Tx.TopErrorGroupsOf(ctx, ids, limit)
}

func (t overviewTx) Setting(ctx context.Context, key string) (string, error) {
	t.c.count("Setting")
	return t.Tx.Setting(ctx, key)
}

// The reads of one queue, which an overview page must not make.

func (t overviewTx) Stats(ctx context.Context, id int64) ([]broker.GroupStats, error) {
	t.c.count("Stats")
	return t.Tx.Stats(ctx, id)
}

func (t overviewTx) Series(ctx context.Context, id int64, from, to time.Time, step time.Duration) ([]broker.Bucket, error) {
	t.c.count("Series")
	return t.Tx.Series(ctx, id, from, to, step)
}

func (t overviewTx) GroupNames(ctx context.Context, id int64) ([]string, error) {
	t.c.count("GroupNames")
	return t.Tx.GroupNames(ctx, id)
}

func (t overviewTx) PartitionList(ctx context.Context, id int64) ([]broker.Partition, error) {
	t.c.count("PartitionList")
	return t.Tx.PartitionList(ctx, id)
}

func (t overviewTx) ErrorGroups(ctx context.Context, queueID, groupID int64, fp string, limit int) ([]broker.ErrorGroup, error) {
	t.c.count("ErrorGroups")
	return t.Tx.ErrorGroups(ctx, queueID, groupID, fp, limit)
}

func (t overviewTx) QueueByID(ctx context.Context, id int64) (broker.Queue, error) {
	t.c.count("QueueByID")
	return t.Tx.QueueByID(ctx, id)
}

func (s *bundle) overview(b *broker.Broker, q broker.OverviewQuery) broker.OverviewPage {
	s.t.Helper()
	p, err := b.Overview(s.ctx, q)
	if err != nil {
		s.t.Fatalf("overview %+v: %v", q, err)
	}
	return p
}

func overviewNames(p broker.OverviewPage) string {
	var out []string
	for _, r := range p.Rows {
		out = append(out, r.Name)
	}
	return strings.Join(out, " ")
}

// The overview's page of queues: sorted by health (thresholds past, then
// depth, then name), by dead letters or by name; filtered by a part of
// the name in any case and by having dead letters; paged; with the
// totals of every queue, the depth 24 h ago, the counts of the day
// before, the depth over the day and the top error groups; read in the
// same few statements whatever the number of queues, none of them of
// one queue.
func testOverviewPagesSortsAndFilters(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	counter := &readCounter{Store: s.db, calls: map[string]int{}}
	b := broker.New(broker.Config{Store: counter, Clock: s.clock})
	for _, q := range []string{"alpha", "beta", "crowded", "deep-but-fine", "empty-1", "empty-2"} {
		s.configure(q, map[string]any{})
	}
	pushed := 0
	fill := func(queue string, n int, errText string) {
		t.Helper()
		for range n {
			pushed++
			s.push(queue, "p", fmt.Sprintf("m%d", pushed))
		}
		s.fail(queue, "workers", n, errText)
	}
	fill("alpha", 1, "timeout")
	fill("beta", 3, "card declined")
	s.push("beta", "p", "done-1", "done-2")
	s.drain("beta", "workers")
	s.clock.Advance(25 * time.Hour)
	fill("alpha", 1, "timeout")
	s.push("beta", "p", "done-3")
	s.drain("beta", "workers")
	fill("crowded", 12, "no such customer")
	fill("crowded", 1, "card declined")
	fill("deep-but-fine", 8, "timeout") // fresh and under the depth limit: healthy

	counter.take()
	p := s.overview(b, broker.OverviewQuery{ErrorGroups: 3})
	if got := overviewNames(p); got != "crowded beta alpha deep-but-fine empty-1 empty-2" {
		t.Fatalf("by health: %s", got)
	}
	if p.Queues != 6 || p.Matching != 6 || p.Depth != 26 || p.DepthThen != 4 || p.Deepest != 13 || p.Filed != 22 || p.FiledBefore != 4 {
		t.Fatalf("totals: %+v", p)
	}
	crowded, beta, alpha := p.Rows[0], p.Rows[1], p.Rows[2]
	if len(crowded.Breaches) != 1 || crowded.Breaches[0].Metric != "depth" || len(beta.Breaches) != 1 || beta.Breaches[0].Metric != "oldest" {
		t.Fatalf("breaches: %+v / %+v", crowded.Breaches, beta.Breaches)
	}
	if alpha.Health.Depth != 2 || alpha.DepthThen != 1 || alpha.Filed != 1 || alpha.FiledBefore != 1 || beta.DepthThen != 3 || beta.Filed != 0 {
		t.Fatalf("alpha %+v, beta %+v", alpha, beta)
	}
	if beta.Health.Acks != 1 || beta.Before.Acks != 2 || p.Window.Acks != 1 || p.Before.Acks != 2 {
		t.Fatalf("beta's acks: now %+v, before %+v; all: now %+v, before %+v", beta.Health, beta.Before, p.Window, p.Before)
	}
	if n := len(alpha.DepthSeries); n != 96 || alpha.DepthSeries[0] != 1 || alpha.DepthSeries[n-1] != 2 {
		t.Fatalf("alpha's depth over the day: %v", alpha.DepthSeries)
	}
	if alpha.PartitionCount != 1 || strings.Join(alpha.Groups, ",") != "workers" || len(alpha.Stats) != 1 || alpha.Stats[0].Depth != 2 {
		t.Fatalf("alpha's details: %d partitions, groups %v, stats %+v", alpha.PartitionCount, alpha.Groups, alpha.Stats)
	}
	if g := crowded.ErrorGroups; len(g) != 2 || g[0].DeadLetters != 12 || g[1].DeadLetters != 1 || !strings.Contains(g[0].Fingerprint, "customer") {
		t.Fatalf("crowded's error groups: %+v", g)
	}
	few := counter.take()

	if got := overviewNames(s.overview(b, broker.OverviewQuery{Sort: broker.OverviewByName})); got != "alpha beta crowded deep-but-fine empty-1 empty-2" {
		t.Fatalf("by name: %s", got)
	}
	if got := overviewNames(s.overview(b, broker.OverviewQuery{Sort: broker.OverviewByDeadLetters, HideEmpty: true})); got != "crowded deep-but-fine beta alpha" {
		t.Fatalf("by dead letters, empty hidden: %s", got)
	}
	if p := s.overview(b, broker.OverviewQuery{Name: "EMPTY"}); overviewNames(p) != "empty-1 empty-2" || p.Matching != 2 || p.Queues != 6 || p.Depth != 26 {
		t.Fatalf("named EMPTY: %s, %+v", overviewNames(p), p)
	}
	if p := s.overview(b, broker.OverviewQuery{Sort: broker.OverviewByName, Offset: 2, Limit: 2}); overviewNames(p) != "crowded deep-but-fine" || p.Matching != 6 || p.Offset != 2 {
		t.Fatalf("second page of two: %s %+v", overviewNames(p), p)
	}
	if p := s.overview(b, broker.OverviewQuery{Offset: 50}); len(p.Rows) != 0 || p.Offset != 6 {
		t.Fatalf("past the end: %+v", p)
	}
	if _, err := b.Overview(s.ctx, broker.OverviewQuery{Limit: broker.MaxOverviewPage + 1}); err == nil {
		t.Fatal("a page above the most was given")
	}
	if _, err := b.Overview(s.ctx, broker.OverviewQuery{Sort: "age"}); err == nil {
		t.Fatal("an unknown sort was taken")
	}

	// Thirty more queues with dead letters: the same reads.
	for i := range 30 {
		q := fmt.Sprintf("more-%02d", i)
		s.configure(q, map[string]any{})
		fill(q, 1, "timeout")
	}
	counter.take()
	if p := s.overview(b, broker.OverviewQuery{ErrorGroups: 3}); len(p.Rows) != 36 || p.Depth != 56 {
		t.Fatalf("with more queues: %d rows, %d dead letters", len(p.Rows), p.Depth)
	}
	many := counter.take()
	if fmt.Sprint(many) != fmt.Sprint(few) {
		t.Fatalf("reads of 36 queues %v, of 6 %v", many, few)
	}
	want := map[string]int{"Setting": 1, "QueueTotals": 1, "StatsOf": 1, "ReadersOf": 1, "PartitionCounts": 1, "DepthBuckets": 1, "TopErrorGroupsOf": 1}
	if fmt.Sprint(many) != fmt.Sprint(want) {
		t.Fatalf("reads of a page: %v, want %v", many, want)
	}
}

// Health (what /metrics and the thresholds' check read at each scrape
// and maintenance) reads the same few statements whatever the number of
// queues, none of them of one queue (issue 30: a statement a queue, at
// 5,000 queues); its numbers are each queue's and group's.
func testHealthReadsAFewStatements(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	counter := &readCounter{Store: s.db, calls: map[string]int{}}
	b := broker.New(broker.Config{Store: counter, Clock: s.clock})
	s.configure("alpha", map[string]any{})
	s.configure("empty", map[string]any{})
	s.push("alpha", "p", "a1", "a2", "a3")
	s.fail("alpha", "workers", 2, "timeout")
	health := func() ([]broker.QueueHealth, map[string]int) {
		t.Helper()
		counter.take()
		h, _, err := b.Health(s.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h, counter.take()
	}
	h, few := health()
	if len(h) != 2 || h[0].Name != "alpha" || h[0].Health.Depth != 2 || len(h[0].Stats) != 1 || h[0].Stats[0].DeadLettered != 2 ||
		strings.Join(h[0].Groups, ",") != "workers" || h[1].Name != "empty" || h[1].Health.Depth != 0 {
		t.Fatalf("health: %d queues; %s: %+v, stats %+v, groups %v", len(h), h[0].Name, h[0].Health, h[0].Stats, h[0].Groups)
	}
	for i := range 20 {
		q := fmt.Sprintf("more-%02d", i)
		s.configure(q, map[string]any{})
		s.push(q, "p", "m-"+q)
		s.fail(q, "workers", 1, "card declined")
	}
	h, many := health()
	if len(h) != 22 || h[21].Name != "more-19" || h[21].Health.Depth != 1 {
		t.Fatalf("health of 22 queues: %d, last %+v", len(h), h[len(h)-1])
	}
	if fmt.Sprint(many) != fmt.Sprint(few) {
		t.Fatalf("reads of 22 queues %v, of 2 %v", many, few)
	}
	want := map[string]int{"Setting": 1, "QueueTotals": 1, "StatsOf": 1, "ReadersOf": 1}
	if fmt.Sprint(many) != fmt.Sprint(want) {
		t.Fatalf("reads of health: %v, want %v", many, want)
	}
	// The biggest error groups of every queue (/metrics): one read too.
	counter.take()
	top, err := b.TopErrorGroups(s.ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 21 || len(top["alpha"]) != 1 || top["alpha"][0].DeadLetters != 2 || len(top["more-07"]) != 1 || top["more-07"][0].DeadLetters != 1 || len(top["empty"]) != 0 {
		t.Fatalf("top error groups: %d queues, alpha %+v", len(top), top["alpha"])
	}
	if got := counter.take(); fmt.Sprint(got) != fmt.Sprint(map[string]int{"TopErrorGroupsOf": 1}) {
		t.Fatalf("reads of the top error groups of 22 queues: %v", got)
	}
}
