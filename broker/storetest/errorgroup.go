package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Dead letters are counted into their error group as they are filed:
// count, first and last failure, the newest full error as the sample, and
// the trend by hour; replays and deletes take them out, and a group with
// none left is gone.
func testErrorGroupsAreKeptAsEventsHappen(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	start := s.clock.Now()
	var ids []string
	for i := range 6 {
		ids = append(ids, fmt.Sprintf("m%d", i))
	}
	s.push("q", "p", ids...)
	s.fail("q", "g", 1, "timeout after 30s: POST https://pay.example/v1/charges/ch_1\nstack one")
	s.clock.Advance(2 * time.Hour)
	s.fail("q", "g", 1, "timeout after 31s: POST https://pay.example/v1/charges/ch_2\nstack two")
	s.fail("q", "g", 1, "card declined")
	s.clock.Advance(30 * time.Minute)
	s.fail("q", "g", 1, "timeout after 32s: POST https://pay.example/v1/charges/ch_3\nstack three")
	s.clock.Advance(time.Minute)
	s.fail("q", "h", 2, "timeout after 1s: POST https://pay.example/v1/charges/ch_4")

	const fp = "timeout after <n>s: POST https://pay.example/v1/charges/<id>"
	gs, err := s.b.ErrorGroups(s.ctx, "q", "g", "", 10)
	if err != nil || len(gs) != 2 {
		t.Fatalf("error groups of g: %+v %v", gs, err)
	}
	g := gs[0]
	if g.Fingerprint != fp || g.DeadLetters != 3 || !g.FirstFailedAt.Equal(start) || !g.LastFailedAt.Equal(s.clock.Now().Add(-time.Minute)) ||
		g.SampleError != "timeout after 32s: POST https://pay.example/v1/charges/ch_3\nstack three" {
		t.Fatalf("group: %+v", g)
	}
	if len(g.Trend) != broker.TrendHours || g.Trend[broker.TrendHours-1] != 2 || g.Trend[broker.TrendHours-3] != 1 || sum(g.Trend) != 3 {
		t.Fatalf("trend %v: want 1 two hours ago, 2 this hour", g.Trend)
	}
	if gs[1].Fingerprint != "card declined" || gs[1].DeadLetters != 1 {
		t.Fatalf("second group: %+v", gs[1])
	}
	// Across consumer groups: summed, the newest sample.
	all, err := s.b.ErrorGroups(s.ctx, "q", "", "", 10)
	if err != nil || len(all) != 2 || all[0].DeadLetters != 5 || all[0].GroupID != 0 || sum(all[0].Trend) != 5 ||
		all[0].SampleError != "timeout after 1s: POST https://pay.example/v1/charges/ch_4" {
		t.Fatalf("error groups of q: %+v %v", all, err)
	}
	// One group only.
	one, err := s.b.ErrorGroups(s.ctx, "q", "", "card declined", 10)
	if err != nil || len(one) != 1 || one[0].DeadLetters != 1 {
		t.Fatalf("the group card declined: %+v %v", one, err)
	}

	dead := s.dead("q", "g")
	var declined broker.DeadLetter
	for _, d := range dead {
		if d.Fingerprint == "card declined" {
			declined = d
		}
	}
	if _, err := s.b.Delete(s.ctx, declined.MessageID(), "g", "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.b.Replay(s.ctx, dead[0].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	gs, err = s.b.ErrorGroups(s.ctx, "q", "g", "", 10)
	if err != nil || len(gs) != 1 || gs[0].DeadLetters != 2 {
		t.Fatalf("after a delete and a replay: %+v %v", gs, err)
	}
	if sum(gs[0].Trend) != 3 {
		t.Fatalf("the trend counts filings, which a replay does not undo: %v", gs[0].Trend)
	}

	// The trend slides with the clock; the sweep keeps 48 hours.
	s.clock.Advance(23 * time.Hour)
	gs, _ = s.b.ErrorGroups(s.ctx, "q", "g", "", 10)
	if sum(gs[0].Trend) != 2 || gs[0].Trend[0] != 2 {
		t.Fatalf("23 hours later the trend is %v: want the 2 of then in its first hour", gs[0].Trend)
	}
	// The hours are kept for ErrorGroupHourRetention (the funnel's 7
	// days, and one more), then swept.
	s.clock.Advance(broker.ErrorGroupHourRetention - 23*time.Hour - time.Hour)
	if err := s.b.CompactStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	var hours int
	if err := s.db.QueryRowUncatalogued(s.ctx, `SELECT COUNT(*) FROM error_group_hours`).Scan(&hours); err != nil || hours == 0 {
		t.Fatalf("hourly counts within their retention after a sweep: %d %v", hours, err)
	}
	s.clock.Advance(2 * time.Hour)
	if err := s.b.CompactStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowUncatalogued(s.ctx, `SELECT COUNT(*) FROM error_group_hours`).Scan(&hours); err != nil || hours != 0 {
		t.Fatalf("hourly counts past their retention and a sweep: %d %v", hours, err)
	}
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// A group is a filter: listed, counted, replayed and deleted by its
// fingerprint, and only it.
func testErrorGroupIsAFilter(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	var ids []string
	for i := range 7 {
		ids = append(ids, fmt.Sprintf("m%d", i))
	}
	s.push("q", "p", ids...)
	s.fail("q", "g", 3, "upstream timeout after 30s")
	s.fail("q", "g", 2, "card 4242 declined")
	s.fail("q", "h", 2, "upstream timeout after 5s")
	const fp = "upstream timeout after <n>s"

	page, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Fingerprint: fp, WithTotal: true})
	if err != nil || len(page.Items) != 5 || page.Total != 5 {
		t.Fatalf("list of the group: %d items, total %d, %v", len(page.Items), page.Total, err)
	}
	page, err = s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Group: "h", Fingerprint: fp, WithTotal: true})
	if err != nil || len(page.Items) != 2 || page.Total != 2 {
		t.Fatalf("list of the group in h: %d items, total %d, %v", len(page.Items), page.Total, err)
	}
	if _, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Fingerprint: fp}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("a fingerprint without a queue: %v, want ErrInvalid", err)
	}
	counted, err := s.b.CountMatching(s.ctx, broker.DLQQuery{Queue: "q", Group: "g", Fingerprint: fp})
	if err != nil || counted.Count != 3 {
		t.Fatalf("count of the group in g: %+v %v", counted, err)
	}
	res, err := s.b.ReplayMatching(s.ctx, broker.DLQQuery{Queue: "q", Group: "g", Fingerprint: fp, Bound: &counted.Bound}, "dev")
	if err != nil || res.Done != 3 {
		t.Fatalf("replay the group: %+v %v", res, err)
	}
	// A replay takes a message's dead letters in every group: h had
	// dead-lettered two of the same messages.
	gs, err := s.b.ErrorGroups(s.ctx, "q", "", "", 10)
	if err != nil || groupCounts(gs) != "card <n> declined=2" {
		t.Fatalf("after replaying the group in g: %s %v", groupCounts(gs), err)
	}
	res, err = s.b.DeleteMatching(s.ctx, broker.DLQQuery{Queue: "q", Fingerprint: "card <n> declined"}, "dev")
	if err != nil || res.Done != 2 {
		t.Fatalf("delete the group: %+v %v", res, err)
	}
	gs, err = s.b.ErrorGroups(s.ctx, "q", "", "", 10)
	if err != nil || len(gs) != 0 {
		t.Fatalf("after deleting the last group: %s %v", groupCounts(gs), err)
	}
}
