package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Exact counters after a scripted sequence: every event counted once, in
// its group, and depth and the oldest dead letter right across replays and
// deletes.
func testStatsAfterAScriptedSequence(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 1, "retryDelay": 0})
	s.configure("drop", map[string]any{"deadLetterQueue": false, "retryLimit": 0})
	s.push("q", "", "a", "b", "c", "d")
	t0 := s.clock.Now()

	// a: failed, failed again → dead letter (2 failed acks, 1 filed).
	for i := 0; i < 2; i++ {
		_, res := s.popTxids("q", "g", 1)
		s.ack(res.Messages[0], broker.AckFailed, "boom")
	}
	s.clock.Advance(time.Minute)
	// b: retry (no count), then dlq.
	_, res := s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckRetry, "")
	_, res = s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckDLQ, "bad")
	// c, d completed.
	s.drain("q", "g")
	want := broker.Stats{Depth: 2, DeadLettered: 2, Failed: 2, Completed: 2}
	if got := s.stats("q", "g"); got != want {
		t.Fatalf("after failures: %+v, want %+v", got, want)
	}
	checkOldest(t, s, "q", "g", t0)

	// Replay a (the oldest): its copy completes.
	dead := s.dead("q", "g")
	a, b := dead[1], dead[0]
	if _, err := s.b.Replay(s.ctx, a.MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	checkOldest(t, s, "q", "g", t0.Add(time.Minute))
	s.drain("q", "g")
	// Replay b: its copy is dead-lettered again.
	if _, err := s.b.Replay(s.ctx, b.MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	checkOldest(t, s, "q", "g", time.Time{})
	s.clock.Advance(time.Minute)
	s.fail("q", "g", 1, "still bad")
	checkOldest(t, s, "q", "g", s.clock.Now())
	// Delete that one.
	if _, err := s.b.Delete(s.ctx, s.dead("q", "g")[0].MessageID(), "", "dev"); err != nil {
		t.Fatal(err)
	}
	want = broker.Stats{Depth: 0, DeadLettered: 3, Failed: 2, Completed: 3, Replayed: 2, Deleted: 1, ReplayCompleted: 1, ReplayFailed: 1}
	if got := s.stats("q", "g"); got != want {
		t.Fatalf("after replays and delete: %+v, want %+v", got, want)
	}
	checkOldest(t, s, "q", "g", time.Time{})

	// Drops are counted, not kept.
	s.push("drop", "", "x")
	_, res = s.popTxids("drop", "g", 1)
	s.ack(res.Messages[0], broker.AckFailed, "gone")
	if got := s.stats("drop", "g"); got != (broker.Stats{Dropped: 1, Failed: 1}) {
		t.Fatalf("drop queue: %+v", got)
	}
}

func checkOldest(t *testing.T, s *bundle, queue, group string, want time.Time) {
	t.Helper()
	q, err := s.b.Brief(s.ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range q.Stats {
		if g.Group == group {
			if !g.OldestFailedAt.Equal(want) {
				t.Fatalf("oldest dead letter at %v, want %v", g.OldestFailedAt, want)
			}
			return
		}
	}
	t.Fatalf("no stats for %s/%s", queue, group)
}

// The history has one point per step, counts events in the step they
// happened, and carries depth through quiet steps.
func testHistory(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	start := s.clock.Now().Truncate(time.Hour)
	s.push("q", "", "a", "b", "c")
	s.fail("q", "g", 2, "boom") // minute 0: 2 dead letters
	s.clock.Advance(3 * time.Minute)
	if _, err := s.b.Replay(s.ctx, s.dead("q", "g")[0].MessageID(), "dev"); err != nil { // minute 3: 1 replayed
		t.Fatal(err)
	}
	series, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: start, To: start.Add(time.Hour), Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 || series[0].Group != "g" || len(series[0].Points) != 60 {
		t.Fatalf("series %+v", series)
	}
	off := int(s.clock.Now().Sub(start)/time.Minute) - 3 // the minute of the failures
	p := series[0].Points
	if p[off].DeadLettered != 2 || p[off].Depth != 2 || p[off+1].Depth != 2 || p[off+3].Replayed != 1 || p[off+3].Depth != 1 || p[59].Depth != 1 {
		t.Fatalf("points: %+v / %+v / %+v / %+v", p[off], p[off+1], p[off+3], p[59])
	}
	if off > 0 && p[off-1].Depth != 0 {
		t.Fatalf("depth before anything happened: %d", p[off-1].Depth)
	}

	// After compaction the same range read by hours says the same.
	s.clock.Advance(broker.MinuteRetention + 2*time.Hour)
	if err := s.b.CompactStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	hours, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: start, To: start.Add(2 * time.Hour), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := hours[0].Points
	if h[0].DeadLettered != 2 || h[0].Replayed != 1 || h[0].Depth != 1 || h[1].Depth != 1 {
		t.Fatalf("hour points after compaction: %+v", h)
	}
	// A later range starts from the depth carried in.
	later, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: start.Add(5 * time.Hour), To: start.Add(6 * time.Hour), Step: time.Hour})
	if err != nil || later[0].Points[0].Depth != 1 || later[0].Points[0].DeadLettered != 0 {
		t.Fatalf("later range: %+v %v", later, err)
	}
}

func testHistoryRejectsBadQueries(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	now := s.clock.Now()
	for _, q := range []broker.HistoryQuery{
		{From: now, To: now, Step: time.Minute},
		{From: now, To: now.Add(time.Hour), Step: time.Second},
		{From: now, To: now.Add(30 * 24 * time.Hour), Step: time.Minute},
	} {
		if _, err := s.b.History(s.ctx, q); err == nil {
			t.Errorf("%+v accepted", q)
		}
	}
}

// A replayed copy's outcome counts only in the groups that had given up on
// the original: a group that never failed it says nothing about the fix.
func testReplayOutcomesCountWhereTheOriginalFailed(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a")
	s.drain("q", "happy")           // happy completes the original
	s.fail("q", "sad", 1, "broken") // sad gives up on it
	if _, err := s.b.Replay(s.ctx, s.dead("q", "sad")[0].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	s.drain("q", "happy") // the copy: no outcome for happy
	s.drain("q", "sad")   // the copy: the fix worked for sad
	if got := s.stats("q", "happy"); got.ReplayCompleted != 0 || got.ReplayFailed != 0 {
		t.Fatalf("happy counted a replay outcome: %+v", got)
	}
	if got := s.stats("q", "sad"); got.ReplayCompleted != 1 || got.ReplayFailed != 0 {
		t.Fatalf("sad: %+v", got)
	}
}

// Counts that move no depth wait in memory (StatsDelay) and are written by
// the next write that changes a depth, by any write once they are
// StatsDelay old or of another minute, and by every read of the counters;
// each lands in the minute it happened, with that minute's depth.
func testCountsWaitThenLandInTheirMinute(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0, "retryDelay": 0})
	s.push("q", "", "a", "b", "c", "d", "e")
	t0 := s.clock.Now().Truncate(time.Minute)
	stored := func() broker.Stats {
		t.Helper()
		var out broker.Stats
		err := s.db.View(s.ctx, func(tx broker.Tx) error {
			q, err := tx.QueueByName(s.ctx, "q")
			if err != nil {
				return err
			}
			gs, err := tx.Stats(s.ctx, q.ID)
			for _, g := range gs {
				out = g.Stats
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	_, res := s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckCompleted, "")
	if got := stored(); got.Completed != 0 {
		t.Fatalf("a completed ack was written at once: %+v", got)
	}
	// A dead letter (depth +1) writes the waiting count with it.
	_, res = s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckDLQ, "bad")
	if got := stored(); got != (broker.Stats{Completed: 1, DeadLettered: 1, Depth: 1}) {
		t.Fatalf("after the dead letter: %+v", got)
	}
	// Two minutes on, a completed ack waits; a push after StatsDelay
	// writes it.
	s.clock.Advance(2 * time.Minute)
	_, res = s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckCompleted, "")
	if got := stored(); got.Completed != 1 {
		t.Fatalf("second completed ack was written at once: %+v", got)
	}
	s.clock.Advance(broker.StatsDelay)
	s.push("q", "", "f")
	if got := stored(); got.Completed != 2 {
		t.Fatalf("a write after StatsDelay left the count waiting: %+v", got)
	}
	// A failed ack (into the dead letters, retryLimit 0) in the next
	// minute, and one completed that waits until the history is read.
	s.clock.Advance(time.Minute)
	_, res = s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckFailed, "boom")
	_, res = s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckCompleted, "")
	series, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: t0, To: t0.Add(5 * time.Minute), Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 {
		t.Fatalf("%d series", len(series))
	}
	type point struct{ completed, failed, dead, depth int64 }
	want := []point{{1, 0, 1, 1}, {0, 0, 0, 1}, {1, 0, 0, 1}, {1, 1, 1, 2}, {0, 0, 0, 2}}
	for i, p := range series[0].Points {
		if got := (point{p.Completed, p.Failed, p.DeadLettered, p.Depth}); got != want[i] {
			t.Errorf("minute %d: %+v, want %+v", i, got, want[i])
		}
	}
	// The history read showed the waiting count without writing it; the
	// totals show it too; writing it changes nothing that is read.
	totals := broker.Stats{Completed: 3, Failed: 1, DeadLettered: 2, Depth: 2}
	if got := stored(); got.Completed != 2 {
		t.Fatalf("a read wrote the waiting count: %+v", got)
	}
	if got := s.stats("q", "g"); got != totals {
		t.Fatalf("totals read with the waiting count: %+v, want %+v", got, totals)
	}
	if err := s.b.FlushStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != totals {
		t.Fatalf("totals written: %+v, want %+v", got, totals)
	}
	again, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: t0, To: t0.Add(5 * time.Minute), Step: time.Minute})
	if err != nil || !reflect.DeepEqual(again, series) {
		t.Fatalf("history after writing the counts differs:\n%+v\n%+v (%v)", again, series, err)
	}
}

// Every step reads its own table (minutes, quarter hours, hours) and
// sums it per step; all of them agree with the minutes summed by hand,
// depth included (that of each step's end).
func testHistoryStepsAgree(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0, "retryDelay": 0})
	start := s.clock.Now().Truncate(2 * time.Hour)
	for i := 0; i < 12; i++ {
		s.push("q", "", fmt.Sprintf("m%d", i))
	}
	// Over two hours: failures into the dead letters, completions, and a
	// replay now and then.
	for i, gap := range []int{0, 7, 16, 3, 30, 14, 1, 45, 2} {
		s.clock.Advance(time.Duration(gap) * time.Minute)
		if i%3 == 2 {
			if _, err := s.b.Replay(s.ctx, s.dead("q", "g")[0].MessageID(), "dev"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		_, res := s.popTxids("q", "g", 1)
		status := broker.AckFailed
		if i%2 == 1 {
			status = broker.AckCompleted
		}
		s.ack(res.Messages[0], status, "boom")
	}
	end := start.Add(2 * time.Hour)
	minutes, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: start, To: end, Step: time.Minute})
	if err != nil || len(minutes) != 1 {
		t.Fatalf("minutes: %v %v", minutes, err)
	}
	var filed, replayed, completed int64
	for _, m := range minutes[0].Points {
		filed, replayed, completed = filed+m.DeadLettered, replayed+m.Replayed, completed+m.Completed
	}
	if filed != 3 || replayed != 3 || completed != 3 {
		t.Fatalf("by minute: %d filed, %d replayed, %d completed; want 3 each", filed, replayed, completed)
	}
	for _, step := range []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour} {
		got, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: start, To: end, Step: step})
		if err != nil || len(got) != 1 {
			t.Fatalf("step %s: %v %v", step, got, err)
		}
		per := int(step / time.Minute)
		if len(got[0].Points) != len(minutes[0].Points)/per {
			t.Fatalf("step %s: %d points", step, len(got[0].Points))
		}
		for i, p := range got[0].Points {
			var want broker.Stats
			for _, m := range minutes[0].Points[i*per : (i+1)*per] {
				d := m.Stats
				d.Depth = 0
				want = broker.Stats{
					DeadLettered: want.DeadLettered + d.DeadLettered, Replayed: want.Replayed + d.Replayed,
					Completed: want.Completed + d.Completed, Failed: want.Failed + d.Failed,
				}
			}
			want.Depth = minutes[0].Points[(i+1)*per-1].Depth
			if p.Stats != want {
				t.Errorf("step %s, point %d: %+v, want %+v", step, i, p.Stats, want)
			}
		}
	}
	// All queues at once read the same.
	all, err := s.b.History(s.ctx, broker.HistoryQuery{From: start, To: end, Step: time.Hour})
	if err != nil || len(all) != 1 || all[0].Points[1].Depth != minutes[0].Points[119].Depth {
		t.Fatalf("every queue: %+v %v", all, err)
	}
}

// A queue deleted while counts of it wait in memory leaves no counters
// behind: none for it, none for a queue made after it.
func testDeleteQueueDropsItsWaitingCounts(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a", "b")
	s.drain("q", "g") // two completed acks, waiting in memory
	if err := s.b.DeleteQueue(s.ctx, "q", "admin"); err != nil {
		t.Fatal(err)
	}
	if err := s.b.FlushStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	series, err := s.b.History(s.ctx, broker.HistoryQuery{From: s.clock.Now().Add(-time.Hour), To: s.clock.Now().Add(time.Hour), Step: time.Minute})
	if err != nil || len(series) != 0 {
		t.Fatalf("history after deleting the only queue: %+v %v", series, err)
	}
	s.push("q2", "", "x")
	if got := s.stats("q2", "g"); got != (broker.Stats{}) {
		t.Fatalf("a new queue starts with %+v", got)
	}
}

// A count still in memory, alone in its step, is read into a bucket of its
// own with the group's depth: the history reads the same before and after
// it is written, and nothing was written by reading.
func testHistoryReadsWaitingCountsAloneInTheirStep(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a", "b")
	start := s.clock.Now().Truncate(time.Hour)
	s.fail("q", "g", 1, "boom") // depth 1
	s.clock.Advance(20 * time.Minute)
	s.drain("q", "g") // one completed ack, waiting in memory
	read := func() []broker.Series {
		t.Helper()
		h, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: start, To: start.Add(time.Hour), Step: 15 * time.Minute})
		if err != nil || len(h) != 1 {
			t.Fatalf("history: %+v %v", h, err)
		}
		return h
	}
	before := read()
	var completed int64
	for _, p := range before[0].Points {
		completed += p.Completed
		if p.Depth != 1 && !p.At.Before(start.Add(15*time.Minute)) {
			t.Errorf("depth %d at %s, want 1", p.Depth, p.At)
		}
	}
	if completed != 1 {
		t.Fatalf("the waiting completed ack is not in the history: %+v", before)
	}
	if err := s.b.FlushStats(s.ctx); err != nil {
		t.Fatal(err)
	}
	if after := read(); !reflect.DeepEqual(after, before) {
		t.Fatalf("history changed when the count was written:\n%+v\n%+v", before, after)
	}
}

// Each step of a history says the oldest dead letter's age at its end, as
// it was then, and the step now is in says the age now: not the age at
// its end, still to come (the 7 d chart showed a 5 minute old dead letter
// 60 minutes old).
func testHistoryAgesAreMeasuredAtEachStepsEndAndNeverAfterNow(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	noon := s.clock.Now()
	s.push("q", "", "a", "b")
	s.clock.Advance(5 * time.Minute) // 12:05: a fails
	s.fail("q", "g", 1, "boom")
	s.clock.Advance(30 * time.Minute) // 12:35: b fails
	s.fail("q", "g", 1, "boom")
	s.clock.Advance(10 * time.Minute) // 12:45: a is replayed; b is the oldest
	dead := s.dead("q", "g")
	if _, err := s.b.Replay(s.ctx, dead[len(dead)-1].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(10 * time.Minute) // now 12:55
	for _, tc := range []struct {
		step time.Duration
		want []time.Duration // per step from noon
	}{
		{15 * time.Minute, []time.Duration{10 * time.Minute, 25 * time.Minute, 40 * time.Minute, 20 * time.Minute}},
		{time.Hour, []time.Duration{20 * time.Minute}},
		// A range past now: the steps to come say the age now.
		{30 * time.Minute, []time.Duration{25 * time.Minute, 20 * time.Minute, 20 * time.Minute}},
	} {
		n := len(tc.want)
		series, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: noon, To: noon.Add(time.Duration(n) * tc.step), Step: tc.step})
		if err != nil {
			t.Fatal(err)
		}
		if len(series) != 1 || len(series[0].Points) != n {
			t.Fatalf("step %s: series %+v", tc.step, series)
		}
		for i, p := range series[0].Points {
			if p.OldestAge != tc.want[i] {
				t.Errorf("step %s, the one at %s: oldest age %s, want %s", tc.step, p.At.Format("15:04"), p.OldestAge, tc.want[i])
			}
		}
	}
	// Before anything failed there is no age (and so no series).
	series, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "q", From: noon, To: noon.Add(5 * time.Minute), Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, sr := range series {
		for _, p := range sr.Points {
			if p.OldestAge != 0 {
				t.Errorf("at %s, before any dead letter: age %s", p.At.Format("15:04"), p.OldestAge)
			}
		}
	}
}
