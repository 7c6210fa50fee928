package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// canaryBundle is a bundle whose broker draws from a seeded source and
// keeps the events it tells.
type canaryBundle struct {
	*bundle
	news   *broker.LocalNotifier
	mu     sync.Mutex
	events []broker.Event
}

// canarySeed is the seed of the tests' draws (Config.Rand).
const canarySeed1, canarySeed2 = 7, 11

func setupCanary(t *testing.T, harness Harness) *canaryBundle {
	t.Helper()
	s := setup(t, harness)
	cb := &canaryBundle{bundle: s, news: &broker.LocalNotifier{}}
	s.b = broker.New(broker.Config{Store: &retryStore{Store: s.db}, Clock: s.clock, Rand: rand.NewPCG(canarySeed1, canarySeed2), Notifier: cb.news,
		OnEvent: func(e broker.Event) {
			cb.mu.Lock()
			defer cb.mu.Unlock()
			cb.events = append(cb.events, e)
		}})
	return cb
}

func (s *canaryBundle) told(kind string) []broker.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []broker.Event
	for _, e := range s.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// startCanary starts a replay job of queue q's dead letters (group g's
// when set) beginning with canary c, at rate.
func (s *canaryBundle) startCanary(q, g string, c broker.Canary, rate int) broker.Job {
	s.t.Helper()
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: q, Group: g}, Canary: &c, Rate: rate, Actor: "user:dev"})
	if err != nil || j.Canary == nil || j.Canary.State != broker.CanaryDrawn {
		s.t.Fatalf("start a canary job: %+v %v", j, err)
	}
	return j
}

func (s *canaryBundle) step(id int64) broker.Job {
	s.t.Helper()
	j, err := s.b.StepJob(s.ctx, id)
	if err != nil {
		s.t.Fatalf("step job %d: %v", id, err)
	}
	return j
}

// deadList lists the message ids of the dead letters of queue's group.
func (s *bundle) deadList(queue, group string) []string {
	var ids []string
	for _, d := range s.dead(queue, group) {
		ids = append(ids, d.MessageID())
	}
	return ids
}

// canaryTxids are the transactionIds of j's canary copies, sorted.
func canaryTxids(j broker.Job) []string {
	var out []string
	for _, c := range j.Canary.Copies {
		out = append(out, c.TransactionID)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A canary of 5 of 60 replays those 5 first and nothing else until they
// settle: the next steps do nothing, the group is handed exactly them.
func testCanaryReplaysCountFirst(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 60)
	j := s.startCanary("q", "", broker.Canary{Count: 5}, 0)
	if j.Planned != 60 || j.Canary.SettleSeconds != broker.DefaultCanarySettleSeconds || !strings.Contains(j.Description, "canary of 5") {
		t.Fatalf("started %+v", j)
	}
	j = s.step(j.ID)
	c := j.Canary
	if j.State != broker.JobRunning || j.Done != 5 || c.State != broker.CanarySettling || len(c.Copies) != 5 ||
		!c.Until.Equal(s.clock.Now().Add(120*time.Second)) {
		t.Fatalf("after the canary's step: %+v canary %+v", j, c)
	}
	for _, cp := range c.Copies {
		if cp.Outcome != broker.CanaryPending || cp.Group != "g" || cp.Queue != "q" || cp.Partition != "p" || cp.TransactionID != "dlq:"+cp.DeadLetterID {
			t.Fatalf("a canary copy: %+v", cp)
		}
	}
	for range 3 {
		if j = s.step(j.ID); j.Done != 5 || j.Canary.State != broker.CanarySettling {
			t.Fatalf("a step while settling did something: %+v", j)
		}
	}
	if n := len(s.dead("q", "g")); n != 55 {
		t.Fatalf("%d dead letters left, want 55", n)
	}
	ids, _ := s.popTxids("q", "g", 100)
	if slices.Sort(ids); !slices.Equal(ids, canaryTxids(j)) {
		t.Fatalf("the group was handed %v, want the canary's %v", ids, canaryTxids(j))
	}
	audit, _ := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamBroker, Action: broker.AuditJobCanary}, broker.Page{Limit: 10})
	if len(audit) != 1 || audit[0].JobID != j.ID || audit[0].Detail != fmt.Sprintf("job #%d: canary of 5 replayed, settling up to 120 s", j.ID) {
		t.Fatalf("canary audit %+v", audit)
	}
}

// The canary is drawn at random from the frozen set: with a seeded
// source the dead letters replayed are those DrawRanks names in the set
// as counted (newest failure first), none filed after its bound.
func testCanaryDrawIsRandomFromTheFrozenSet(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 40)
	frozen := s.dead("q", "g") // newest failure first
	j := s.startCanary("q", "g", broker.Canary{Count: 5}, 0)
	s.fill("q", "g", []string{"later"}, 10) // filed after the bound
	seed := rand.NewPCG(canarySeed1, canarySeed2).Uint64()
	ranks := broker.DrawRanks(seed, 40, 5)
	if slices.Equal(ranks, []int64{0, 1, 2, 3, 4}) || len(ranks) != 5 {
		t.Fatalf("ranks %v: not a draw", ranks)
	}
	var want []string
	for _, r := range ranks {
		want = append(want, "dlq:"+frozen[r].MessageID())
	}
	slices.Sort(want)
	j = s.step(j.ID)
	if got := canaryTxids(j); !slices.Equal(got, want) {
		t.Fatalf("the canary replayed %v, want the draw %v (ranks %v)", got, want, ranks)
	}
	for _, cp := range j.Canary.Copies {
		if strings.Contains(cp.Partition, "later") {
			t.Fatalf("a dead letter filed after the bound was drawn: %+v", cp)
		}
	}
	// Another seed draws others.
	if other := broker.DrawRanks(seed+1, 40, 5); slices.Equal(other, ranks) {
		t.Fatalf("two seeds drew the same %v", ranks)
	}
	if all := broker.DrawRanks(seed, 3, 5); !slices.Equal(all, []int64{0, 1, 2}) {
		t.Fatalf("a canary bigger than the set: %v, want all of it", all)
	}
}

// Every copy completed: the next step passes the canary and goes on with
// the rest at the job's rate, then to the end.
func testCanaryPassesWhenCopiesComplete(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 30)
	j := s.startCanary("q", "", broker.Canary{Count: 5, SettleSeconds: 600}, 50) // chunks of 5
	j = s.step(j.ID)
	if got := s.drain("q", "g"); len(got) != 5 {
		t.Fatalf("drained %v", got)
	}
	j = s.step(j.ID)
	if j.Canary.State != broker.CanaryPassed || j.State != broker.JobRunning || j.Done != 10 {
		t.Fatalf("after the copies completed: %+v canary %+v", j, j.Canary)
	}
	for _, cp := range j.Canary.Copies {
		if cp.Outcome != broker.CanarySucceeded {
			t.Fatalf("a copy that completed: %+v", cp)
		}
	}
	j, err := s.b.RunJob(s.ctx, j.ID)
	if err != nil || j.State != broker.JobDone || j.Done != 30 || j.Skipped != 0 || j.Canary.State != broker.CanaryPassed {
		t.Fatalf("run %+v %v", j, err)
	}
	if n := len(s.told(broker.EventJobPaused)); n != 0 {
		t.Fatalf("%d job.paused events for a canary that passed", n)
	}
}

// One copy of 5 failing again, with maxFailed 0, pauses the job saying
// why, the failed copy named (and listed with the job's failures); the
// pause is audited and told once.
func testCanaryPausesSayingWhy(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	s.fill("q", "g", []string{"p"}, 30)
	j := s.startCanary("q", "", broker.Canary{Count: 5}, 0)
	j = s.step(j.ID)
	res := s.pop("q", "g", 5)
	if len(res.Messages) != 5 {
		t.Fatalf("popped %d copies", len(res.Messages))
	}
	for _, m := range res.Messages[:4] {
		s.ack(m, broker.AckCompleted, "")
	}
	s.ack(res.Messages[4], broker.AckFailed, "still broken")
	failedTx := res.Messages[4].TransactionID
	j = s.step(j.ID)
	if j.State != broker.JobPaused || j.Reason != "canary: 1 of 5 failed again" || j.Canary.State != broker.CanaryFailed ||
		j.Canary.Reason != j.Reason || j.Done != 5 || j.Canary.Failed() != 1 {
		t.Fatalf("after 1 of 5 failed: %+v canary %+v", j, j.Canary)
	}
	for _, cp := range j.Canary.Copies {
		want := broker.CanarySucceeded
		if cp.TransactionID == failedTx {
			want = broker.CanaryFailedOut
			if cp.Error != "still broken" {
				t.Fatalf("the failed copy's error: %+v", cp)
			}
		}
		if cp.Outcome != want {
			t.Fatalf("copy %+v, want %s", cp, want)
		}
	}
	v, err := s.b.JobDetail(s.ctx, j.ID)
	if err != nil || len(v.Failures) != 1 || !v.Failures[0].DeadLetter || v.Failures[0].Error != "still broken" {
		t.Fatalf("the job's failures %+v %v", v.Failures, err)
	}
	// Paused: steps do nothing, and nothing is told again.
	if j = s.step(j.ID); j.Done != 5 || j.State != broker.JobPaused {
		t.Fatalf("a paused job stepped: %+v", j)
	}
	ev := s.told(broker.EventJobPaused)
	if len(ev) != 1 || ev[0].JobID != j.ID || ev[0].Detail != "canary: 1 of 5 failed again" || ev[0].Queue != "q" {
		t.Fatalf("job.paused told %+v, want once", ev)
	}
	auto, _ := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamBroker, Action: broker.AuditJobPause}, broker.Page{Limit: 10})
	if len(auto) != 1 || auto[0].JobID != j.ID || !strings.Contains(auto[0].Detail, "canary: 1 of 5 failed again") {
		t.Fatalf("pause entries %+v", auto)
	}
}

// Copies not settled by settleSeconds count as failed: not before the
// deadline, at it.
func testCanaryCountsUnsettledAsFailedAtSettleSeconds(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 20)
	j := s.startCanary("q", "", broker.Canary{Count: 5, SettleSeconds: 60, MaxFailed: 1}, 0)
	j = s.step(j.ID)
	res := s.pop("q", "g", 5) // leased, never acked
	if len(res.Messages) != 5 {
		t.Fatalf("popped %d", len(res.Messages))
	}
	for _, m := range res.Messages[:3] {
		s.ack(m, broker.AckCompleted, "")
	}
	s.clock.Advance(59 * time.Second)
	if j = s.step(j.ID); j.State != broker.JobRunning || j.Canary.State != broker.CanarySettling {
		t.Fatalf("before the deadline: %+v", j.Canary)
	}
	s.clock.Advance(time.Second)
	j = s.step(j.ID)
	if j.State != broker.JobPaused || j.Reason != "canary: 2 of 5 failed again; 2 not settled within 60 s" || j.Done != 5 {
		t.Fatalf("at the deadline: %+v", j)
	}
	failed := 0
	for _, cp := range j.Canary.Copies {
		if cp.Outcome == broker.CanaryFailedOut {
			failed++
			if cp.Error != "not settled within 60 s" {
				t.Fatalf("an unsettled copy: %+v", cp)
			}
		}
	}
	if failed != 2 || j.Canary.Failed() != 2 {
		t.Fatalf("%d copies failed, want the 2 unsettled", failed)
	}
}

// maxFailed lets that many fail again: the canary passes.
func testCanaryMaxFailedAllowsSome(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	s.fill("q", "g", []string{"p"}, 20)
	j := s.startCanary("q", "", broker.Canary{Count: 5, MaxFailed: 2}, 0)
	j = s.step(j.ID)
	for i := range 5 {
		_, res := s.popTxids("q", "g", 1)
		st := broker.AckCompleted
		if i < 2 {
			st = broker.AckFailed
		}
		s.ack(res.Messages[0], st, "flaky")
	}
	j = s.step(j.ID)
	if j.Canary.State != broker.CanaryPassed || j.State != broker.JobRunning || j.Done != 20 || j.Canary.Failed() != 2 {
		t.Fatalf("2 of 5 failed with maxFailed 2: %+v canary %+v", j, j.Canary)
	}
	if j = s.step(j.ID); j.State != broker.JobDone || j.Done != 20 {
		t.Fatalf("the end: %+v", j)
	}
}

// Resumed after its canary paused it, a job goes on with the rest (no
// second canary); its canary stays failed, for the page.
func testCanaryResumeGoesOn(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	s.fill("q", "g", []string{"p"}, 20)
	j := s.startCanary("q", "", broker.Canary{Count: 3}, 0)
	j = s.step(j.ID)
	for range 3 {
		_, res := s.popTxids("q", "g", 1)
		s.ack(res.Messages[0], broker.AckFailed, "down")
	}
	if j = s.step(j.ID); j.State != broker.JobPaused || j.Reason != "canary: 3 of 3 failed again" {
		t.Fatalf("paused? %+v", j)
	}
	if _, err := s.b.ResumeJob(s.ctx, j.ID, "user:ops"); err != nil {
		t.Fatal(err)
	}
	j, err := s.b.RunJob(s.ctx, j.ID)
	if err != nil || j.State != broker.JobDone || j.Done != 20 || j.Canary.State != broker.CanaryFailed {
		t.Fatalf("after resume %+v %v", j, err)
	}
	// The 3 that failed again are dead letters again (filed after the
	// bound: not replayed again by the job); the other 17 are copies.
	if n := len(s.dead("q", "g")); n != 3 {
		t.Fatalf("%d dead letters, want 3", n)
	}
	if got := s.drain("q", "g"); len(got) != 17 {
		t.Fatalf("the rest replayed: %d copies, want 17", len(got))
	}
}

// A job by ids puts its canary first: its first step takes exactly the
// drawn ids (one gone among the others), and every count is exact.
func testCanaryByIDsIsTheFirstChunk(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 10)
	ids := s.deadList("q", "g")
	ids = append(ids, "bogus")
	c := broker.Canary{Count: 4, MaxFailed: 3}
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Canary: &c, Actor: "user:dev"})
	if err != nil || j.Planned != 11 {
		t.Fatalf("start %+v %v", j, err)
	}
	got := slices.Clone(j.Scope.IDs)
	slices.Sort(got)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the frozen ids changed: %v", j.Scope.IDs)
	}
	drawn := j.Scope.IDs[:4]
	// Those drawn (the seeded source's first number is the job's seed)
	// are put first, in the order given; the rest follow in theirs.
	ranks := broker.DrawRanks(rand.NewPCG(canarySeed1, canarySeed2).Uint64(), int64(len(ids)), 4)
	if slices.Equal(ranks, []int64{0, 1, 2, 3}) {
		t.Fatalf("ranks %v: not a draw", ranks)
	}
	var wantFirst []string
	for _, r := range ranks {
		wantFirst = append(wantFirst, ids[r])
	}
	if !slices.Equal(drawn, wantFirst) {
		t.Fatalf("the ids put first %v, want those drawn %v (ranks %v)", drawn, wantFirst, ranks)
	}
	j = s.step(j.ID)
	if j.Position != 4 || j.Done+j.Skipped != 4 || j.Canary.State != broker.CanarySettling {
		t.Fatalf("the canary's step: %+v", j)
	}
	var copied []string
	for _, cp := range j.Canary.Copies {
		copied = append(copied, cp.DeadLetterID)
	}
	slices.Sort(copied)
	wantCopied := slices.DeleteFunc(slices.Clone(drawn), func(id string) bool { return id == "bogus" })
	slices.Sort(wantCopied)
	if !slices.Equal(copied, wantCopied) || int64(len(copied)) != j.Done {
		t.Fatalf("copied %v, want the drawn ids %v", copied, drawn)
	}
	s.drain("q", "g")
	j, err = s.b.RunJob(s.ctx, j.ID)
	if err != nil || j.State != broker.JobDone || j.Done != 10 || j.Skipped != 1 || j.Position != 11 {
		t.Fatalf("run %+v %v", j, err)
	}
}

// A held group is handed the canary copy first in line in its partition,
// alone, under a lease; nothing behind it, and nothing else, passes.
func testCanaryCopyPassesAHoldAtTheHead(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 10)
	h := s.hold("q", "g")
	j := s.startCanary("q", "", broker.Canary{Count: 1}, 0)
	j = s.step(j.ID)
	s.push("q", "p", "behind") // behind the canary copy
	ids, res := s.popTxids("q", "g", 10)
	if !slices.Equal(ids, canaryTxids(j)) || res.LeaseID == "" {
		t.Fatalf("a held pop got %v (lease %q), want the canary copy %v alone", ids, res.LeaseID, canaryTxids(j))
	}
	s.popsNothing(everyPopForm("q", "g")...) // leased: nothing more
	s.ack(res.Messages[0], broker.AckCompleted, "")
	s.popsNothing(everyPopForm("q", "g")...) // settled: "behind" stays held
	if j = s.step(j.ID); j.Canary.State != broker.CanaryPassed || j.Canary.Copies[0].Outcome != broker.CanarySucceeded {
		t.Fatalf("after the canary copy completed: %+v", j.Canary)
	}
	s.popsNothing(everyPopForm("q", "g")...) // the rest's copies are held
	s.release(h.ID)
	if got := s.drain("q", "g"); len(got) != 10 || got[0] != "behind" {
		t.Fatalf("released: %v", got)
	}
}

// A held group's worker takes a canary's copies one after another, each
// acked before the next pop, faster than the job reads their outcomes:
// a copy settled already does not stop the next one first in line.
func testCanaryCopiesPassAHoldOneAfterAnother(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 10)
	s.hold("q", "g")
	j := s.startCanary("q", "", broker.Canary{Count: 3}, 0)
	j = s.step(j.ID)
	var got []string
	for range 3 {
		ids, res := s.popTxids("q", "g", 10)
		if len(ids) != 1 {
			t.Fatalf("a held pop got %v after %v, want the next canary copy", ids, got)
		}
		got = append(got, ids...)
		s.ack(res.Messages[0], broker.AckCompleted, "")
	}
	slices.Sort(got)
	if !slices.Equal(got, canaryTxids(j)) {
		t.Fatalf("handed %v, want the canary copies %v", got, canaryTxids(j))
	}
	s.popsNothing(everyPopForm("q", "g")...)
	if j = s.step(j.ID); j.Canary.State != broker.CanaryPassed {
		t.Fatalf("after the copies completed: %+v", j.Canary)
	}
}

// Two canary jobs settling in one held partition: the older job's copy,
// first in line, is handed, then, once acked, the newer one's; both
// canaries pass (whichever job's copies come first in the list of jobs).
func testCanaryTwoJobsSettlingInOnePartitionBothPass(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 4)
	ids := s.deadList("q", "g")
	s.hold("q", "g")
	start := func(ids []string) broker.Job {
		c := broker.Canary{Count: 1}
		j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Canary: &c, Actor: "user:dev"})
		if err != nil {
			t.Fatal(err)
		}
		return s.step(j.ID)
	}
	j1 := start(ids[:2])
	j2 := start(ids[2:])
	for i, want := range [][]string{canaryTxids(j1), canaryTxids(j2)} {
		got, res := s.popTxids("q", "g", 10)
		if !slices.Equal(got, want) {
			t.Fatalf("held pop %d got %v, want the canary copy first in line %v", i+1, got, want)
		}
		s.ack(res.Messages[0], broker.AckCompleted, "")
	}
	for _, j := range []broker.Job{j1, j2} {
		if j = s.step(j.ID); j.Canary.State != broker.CanaryPassed {
			t.Fatalf("job %d after its copy completed: %+v %s", j.ID, j.Canary, j.Reason)
		}
	}
}

// jobReadCounter counts what a held pop reads of the jobs: whole jobs
// (Jobs) and settling canaries.
type jobReadCounter struct {
	broker.Store
	jobs, canaries *atomic.Int64
}

type jobReadCountingTx struct {
	broker.Tx
	jobs, canaries *atomic.Int64
}

func (t jobReadCountingTx) Jobs(ctx context.Context, f broker.JobFilter, p broker.Page) ([]broker.Job, error) {
	t.jobs.Add(1)
	return t.Tx.Jobs(ctx, f, p)
}

func (t jobReadCountingTx) SettlingCanaries(ctx context.Context) ([]broker.JobCanary, error) {
	t.canaries.Add(1)
	return t.Tx.SettlingCanaries(ctx)
}

func (s jobReadCounter) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return s.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(jobReadCountingTx{tx, s.jobs, s.canaries}) })
}

// A held pop reads no job, only the settling canaries (one statement,
// which finds none while a replay job without a canary runs).
func testHeldPopsReadNoJob(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	var jobs, canaries atomic.Int64
	s.b = broker.New(broker.Config{Store: jobReadCounter{s.db, &jobs, &canaries}, Clock: s.clock})
	s.fill("q", "g", []string{"p"}, 3)
	ids := s.deadList("q", "g")
	s.hold("q", "g")
	if _, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Rate: 1, Actor: "user:dev"}); err != nil {
		t.Fatal(err)
	}
	jobs.Store(0)
	canaries.Store(0)
	s.popsNothing(broker.PopRequest{Queue: "q", Group: "g"}, broker.PopRequest{Queue: "q", Group: "g"})
	if j, c := jobs.Load(), canaries.Load(); j != 0 || c != 2 {
		t.Fatalf("two held pops read %d lists of jobs and the settling canaries %d times, want 0 and 2", j, c)
	}
}

// A canary by ids copies at most about 4 MiB of payloads a transaction,
// as any chunk: ten payloads of a million bytes, all the canary, go in
// steps of 4, 4 and 2 while it is drawn, then it settles with its ten
// copies, and nothing else of the job is done before it passes.
func testCanaryByIDsIsCutToBulkBytes(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	big := `"` + strings.Repeat("x", 1_000_000-2) + `"`
	var items []broker.PushItem
	for i := range 12 {
		items = append(items, broker.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("m%d", i), Payload: []byte(big)})
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	s.fail("q", "g", 12, "boom")
	c := broker.Canary{Count: 10}
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: s.deadList("q", "g"), Canary: &c, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for j.Canary.State == broker.CanaryDrawn {
		j = s.step(j.ID)
		steps = append(steps, fmt.Sprintf("%d %s", j.Done, j.Canary.State))
	}
	if want := "[4 drawn 8 drawn 10 settling]"; fmt.Sprint(steps) != want || len(j.Canary.Copies) != 10 {
		t.Fatalf("the canary's steps %v (done, state), want %s; %d copies", steps, want, len(j.Canary.Copies))
	}
	if j = s.step(j.ID); j.Done != 10 || j.Canary.State != broker.CanarySettling {
		t.Fatalf("settling: %+v", j)
	}
}

// A canary copy behind held messages waits; at the deadline it counts as
// failed and the reason says it waits behind a hold.
func testCanaryCopyBehindHeldMessagesWaits(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 5)
	s.push("q", "p", "first") // in line before any copy
	s.hold("q", "g")
	j := s.startCanary("q", "", broker.Canary{Count: 2, SettleSeconds: 30}, 0)
	j = s.step(j.ID)
	s.popsNothing(everyPopForm("q", "g")...)
	s.clock.Advance(30 * time.Second)
	j = s.step(j.ID)
	if j.State != broker.JobPaused || j.Reason != "canary: 2 of 2 failed again; 2 still waiting behind a hold" {
		t.Fatalf("at the deadline: %+v", j)
	}
}

// A replay job counts the copies that were there already (duplicates),
// within what it did.
func testJobCountsDuplicates(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.push("q", "", "a", "b")
	s.fail("q", "fast", 2, "x")
	ids := []string{s.dead("q", "fast")[0].MessageID()}
	if _, err := s.b.Replay(s.ctx, ids[0], "dev"); err != nil {
		t.Fatal(err)
	}
	s.fail("q", "slow", 2, "y") // slow reaches the originals only now
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q", Group: "slow"}, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.Done != 2 || j.Duplicates != 1 {
		t.Fatalf("job %+v %v: want 2 done, 1 a duplicate", j, err)
	}
	if j, err = s.b.WaitJob(s.ctx, j.ID); err != nil || j.Duplicates != 1 {
		t.Fatalf("read back: %+v %v", j, err)
	}
}

// Bad canaries are refused, naming the field; a delete takes none.
func testCanaryIsValidated(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 2)
	for _, tc := range []struct {
		kind string
		c    broker.Canary
		want string
	}{
		{broker.JobReplay, broker.Canary{Count: 0}, "canary.count"},
		{broker.JobReplay, broker.Canary{Count: 101}, "canary.count"},
		{broker.JobReplay, broker.Canary{Count: 5, SettleSeconds: -1}, "canary.settleSeconds"},
		{broker.JobReplay, broker.Canary{Count: 5, SettleSeconds: 86401}, "canary.settleSeconds"},
		{broker.JobReplay, broker.Canary{Count: 5, MaxFailed: 5}, "canary.maxFailed"},
		{broker.JobReplay, broker.Canary{Count: 5, MaxFailed: -1}, "canary.maxFailed"},
		{broker.JobDelete, broker.Canary{Count: 5}, "a canary goes with a replay"},
	} {
		_, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: tc.kind, Query: &broker.DLQQuery{Queue: "q"}, Canary: &tc.c, Actor: "user:dev"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s with %+v: %v, want an error naming %s", tc.kind, tc.c, err, tc.want)
		}
	}
	if jobs, _ := s.b.Jobs(s.ctx, broker.JobFilter{}, broker.Page{}); len(jobs) != 0 {
		t.Fatalf("refused canaries left jobs: %+v", jobs)
	}
}

// The job runner (RunJobs) looks at a settling canary as soon as its
// copies settle, not at its deadline (a day away here, on a clock that
// does not move): the canary passes and the job runs to its end.
func testCanaryRunnerGoesOnOnceCopiesSettle(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 12)
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute) // a bound on failure, not a wait
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.b.RunJobs(ctx)
	}()
	defer func() { cancel(); <-done }()
	j := s.startCanary("q", "", broker.Canary{Count: 3, SettleSeconds: 86400}, 0)
	var got []broker.Delivery
	for len(got) < 3 {
		res, err := s.b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10, Wait: true, Timeout: time.Minute})
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("the canary's copies never came: %v (%d of 3)", err, len(got))
		}
		got = append(got, res.Messages...)
	}
	for _, m := range got {
		s.ack(m, broker.AckCompleted, "")
	}
	j, err := s.b.WaitJob(ctx, j.ID)
	if err != nil || j.State != broker.JobDone || j.Done != 12 || j.Canary.State != broker.CanaryPassed {
		t.Fatalf("after the canary settled: %+v %v", j, err)
	}
}

// An auto-pause (too many copies failing again) is told too, once, with
// its reason.
func testReplayJobAutoPauseIsTold(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.configure("q", map[string]any{"replayPauseWindow": 4, "replayPausePercent": 25, "retryLimit": 0})
	s.fill("q", "g", []string{"p"}, 8)
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Rate: 40, Actor: "user:dev"}) // chunks of 4
	if err != nil {
		t.Fatal(err)
	}
	s.step(j.ID)
	for range 2 {
		_, res := s.popTxids("q", "g", 1)
		s.ack(res.Messages[0], broker.AckFailed, "down")
	}
	ev := s.told(broker.EventJobPaused)
	if len(ev) != 1 || ev[0].JobID != j.ID || !strings.HasPrefix(ev[0].Detail, "paused itself: 2 of the last 2") {
		t.Fatalf("job.paused told %+v, want once for the auto-pause", ev)
	}
}

// jobsNews is the Notifier's key of the job runner's news (broker's
// jobNews).
const jobsNews = "\x00jobs"

// A canary copy settling is news for the job runner (so that it looks at
// the canary then, not at its deadline); a copy of a job without a
// settling canary is not.
func testCanaryCopySettledIsNewsForTheRunner(t *testing.T, harness Harness) {
	t.Parallel()
	s := setupCanary(t, harness)
	s.fill("q", "g", []string{"p"}, 10)
	j := s.startCanary("q", "", broker.Canary{Count: 2, SettleSeconds: 3600}, 0)
	s.step(j.ID)
	res := s.pop("q", "g", 10)
	if len(res.Messages) != 2 {
		t.Fatalf("popped %d", len(res.Messages))
	}
	for _, m := range res.Messages {
		news := s.news.Watch(jobsNews)
		s.ack(m, broker.AckCompleted, "")
		select {
		case <-news:
		default:
			t.Fatalf("the ack of canary copy %s told the runner nothing", m.TransactionID)
		}
	}
	j = s.step(j.ID) // passes; the rest is replayed
	if j.Canary.State != broker.CanaryPassed || j.Done != 10 {
		t.Fatalf("after the canary: %+v", j)
	}
	res = s.pop("q", "g", 1)
	news := s.news.Watch(jobsNews)
	s.ack(res.Messages[0], broker.AckCompleted, "")
	select {
	case <-news:
		t.Fatalf("a copy of a job whose canary passed was news for the runner")
	default:
	}
}
