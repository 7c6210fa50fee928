package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A bulk replay by filter is a job: it is kept, runs in chunks, counts
// what it did, and is one audit entry of its actor (the dead letters it
// filed are the broker's stream, hidden from the people's).
func testReplayJobIsOneAuditEntryAndCountsItsWork(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 600) // more than two chunks
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Actor: "user:dev"})
	if err != nil || j.Planned != 600 || j.State != broker.JobRunning || j.Scope.Filter == nil || j.Scope.Filter.Bound == nil {
		t.Fatalf("start %+v %v", j, err)
	}
	j, err = s.b.RunJob(s.ctx, j.ID)
	if err != nil || j.State != broker.JobDone || j.Done != 600 || j.Skipped != 0 || j.ArrivedSince != 0 || j.FinishedAt.IsZero() {
		t.Fatalf("run %+v %v", j, err)
	}
	if n := len(s.dead("q", "g")); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
	people, err := s.b.Audit(s.ctx, broker.AuditFilter{}, broker.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var replays []broker.AuditEntry
	for _, a := range people {
		if a.Broker {
			t.Fatalf("broker entry %+v in the people's stream", a)
		}
		if a.Action == broker.AuditReplay {
			replays = append(replays, a)
		}
	}
	if len(replays) != 1 || replays[0].JobID != j.ID || replays[0].Count != 600 || replays[0].Actor != "user:dev" {
		t.Fatalf("replay entries %+v, want one of job %d", replays, j.ID)
	}
	filed, err := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamBroker}, broker.Page{Limit: 1000})
	if err != nil || len(filed) != 600 || filed[0].Action != broker.AuditDeadLetter {
		t.Fatalf("broker stream %d entries %v", len(filed), err)
	}
}

// Pause stops a job between chunks, resume goes on where it stopped, and
// a cancelled job does nothing more; transitions that make no sense are
// refused with a conflict.
func testJobPauseResumeCancel(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 30)
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &broker.DLQQuery{Queue: "q"}, Rate: 50, Actor: "user:dev"}) // chunks of 5
	if err != nil {
		t.Fatal(err)
	}
	if j, err = s.b.StepJob(s.ctx, j.ID); err != nil || j.Done != 5 {
		t.Fatalf("first chunk %+v %v", j, err)
	}
	if j, err = s.b.PauseJob(s.ctx, j.ID, "user:dev"); err != nil || j.State != broker.JobPaused {
		t.Fatalf("pause %+v %v", j, err)
	}
	if _, err := s.b.PauseJob(s.ctx, j.ID, "user:dev"); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("second pause: %v, want a conflict", err)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.Done != 5 || j.State != broker.JobPaused {
		t.Fatalf("a paused job ran: %+v %v", j, err)
	}
	if j, err = s.b.ResumeJob(s.ctx, j.ID, "user:ops"); err != nil || j.State != broker.JobRunning {
		t.Fatalf("resume %+v %v", j, err)
	}
	if j, err = s.b.StepJob(s.ctx, j.ID); err != nil || j.Done != 10 {
		t.Fatalf("chunk after resume %+v %v", j, err)
	}
	if j, err = s.b.CancelJob(s.ctx, j.ID, "user:dev"); err != nil || j.State != broker.JobCancelled || j.FinishedAt.IsZero() {
		t.Fatalf("cancel %+v %v", j, err)
	}
	if _, err := s.b.ResumeJob(s.ctx, j.ID, "user:dev"); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("resume a cancelled job: %v, want a conflict", err)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.Done != 10 {
		t.Fatalf("a cancelled job ran: %+v %v", j, err)
	}
	if n := len(s.dead("q", "g")); n != 20 {
		t.Fatalf("%d dead letters left, want 20", n)
	}
	if _, err := s.b.PauseJob(s.ctx, 999, "user:dev"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("pause of no job: %v", err)
	}
	entries, _ := s.b.Audit(s.ctx, broker.AuditFilter{JobID: j.ID}, broker.Page{Limit: 10})
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	if got := strings.Join(actions, ","); got != "job_cancel,job_resume,job_pause,delete" {
		t.Fatalf("the job's audit entries, newest first: %s", got)
	}
}

// crashingStore lets n writes commit and then fails every other one, as
// a process killed part-way does (nothing after the kill commits).
type crashingStore struct {
	broker.Store
	n int
}

var errKilled = errors.New("killed")

func (c *crashingStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	if c.n <= 0 {
		return errKilled
	}
	c.n--
	return c.Store.Update(ctx, o, fn)
}

// A job stopped part-way (its process killed) resumes on the next
// broker over the same file and replays every message exactly once.
func testReplayJobResumesAfterAKillExactlyOnce(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	path := harness.New(t, "lazarus.db")
	d, err := harness.Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	s := &bundle{t: t, ctx: ctx, b: broker.New(broker.Config{Store: d, Clock: c}), db: d, clock: c}
	s.fill("q", "g", []string{"a", "b"}, 300)
	dead := s.dead("q", "g")
	// The start and two chunks commit; the third chunk dies with the process.
	killed := broker.New(broker.Config{Store: &crashingStore{Store: d, n: 3}, Clock: c})
	j, err := killed.StartJob(ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := killed.RunJob(ctx, j.ID); !errors.Is(err, errKilled) {
		t.Fatalf("run: %v, want the kill", err)
	}
	mid, err := s.b.JobDetail(ctx, j.ID)
	if err != nil || mid.State != broker.JobRunning || mid.Done != 500 {
		t.Fatalf("after the kill %+v %v, want running with 2 chunks done", mid.Job, err)
	}
	d.Close()
	d, err = harness.Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s.b, s.db = broker.New(broker.Config{Store: d, Clock: c}), d
	running, err := s.b.Jobs(ctx, broker.JobFilter{State: broker.JobRunning}, broker.Page{})
	if err != nil || len(running) != 1 || running[0].ID != j.ID {
		t.Fatalf("running jobs at start %+v %v", running, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go s.b.RunJobs(runCtx)
	done, err := s.b.WaitJob(ctx, j.ID)
	if err != nil || done.State != broker.JobDone || done.Done != 600 {
		t.Fatalf("resumed %+v %v", done, err)
	}
	// Exactly one copy of each: a pop of everything finds 600 copies,
	// one per dead letter that was.
	copies := map[string]int{}
	for {
		res := s.pop("q", "reader", 1000)
		if len(res.Messages) == 0 {
			break
		}
		for _, m := range res.Messages {
			if broker.IsReplayTransaction(m.TransactionID) {
				copies[m.TransactionID]++
			}
		}
		for _, m := range res.Messages {
			s.ack(m, broker.AckCompleted, "")
		}
	}
	if len(copies) != 600 {
		t.Fatalf("%d copies, want 600", len(copies))
	}
	for _, dl := range dead {
		if copies[broker.ReplayPrefix+dl.MessageID()] != 1 {
			t.Fatalf("message %s has %d copies", dl.MessageID(), copies[broker.ReplayPrefix+dl.MessageID()])
		}
	}
}

// A replay job pauses itself when too many of its copies fail again, and
// says why, with the error they share; its outcomes per group are kept
// as the copies settle.
func testReplayJobPausesItselfWhenCopiesFailAgain(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"replayPauseWindow": 10, "replayPausePercent": 20, "retryLimit": 0})
	s.fill("q", "g", []string{"p"}, 30)
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q", Group: "g"}, Rate: 80, Actor: "user:dev"}) // chunks of 8
	if err != nil || j.PauseWindow != 10 || j.PausePercent != 20 {
		t.Fatalf("start %+v %v", j, err)
	}
	if j, err = s.b.StepJob(s.ctx, j.ID); err != nil || j.Done != 8 {
		t.Fatalf("chunk %+v %v", j, err)
	}
	// The worker of g gets the 8 copies: 5 succeed, then 3 fail again.
	res := s.pop("q", "g", 8)
	if len(res.Messages) != 8 {
		t.Fatalf("popped %d copies", len(res.Messages))
	}
	for _, m := range res.Messages[:5] {
		s.ack(m, broker.AckCompleted, "")
	}
	// A failure on the last try brings the rest of its batch back: each
	// failing copy is taken on its own.
	s.ack(res.Messages[5], broker.AckFailed, "still broken: timeout after 105 ms")
	for i := 6; i < 8; i++ {
		s.ack(s.pop("q", "g", 1).Messages[0], broker.AckFailed, fmt.Sprintf("still broken: timeout after %d ms", 100+i))
	}
	v, err := s.b.JobDetail(s.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != broker.JobPaused || !strings.Contains(v.Reason, "3 of the last 8") || !strings.Contains(v.Reason, `3 of them share the error "still broken: timeout after <n> ms"`) {
		t.Fatalf("state %s, reason %q", v.State, v.Reason)
	}
	if len(v.Outcomes) != 1 || v.Outcomes[0] != (broker.JobOutcome{GroupID: v.Outcomes[0].GroupID, Group: "g", Replayed: 8, Succeeded: 5, Failed: 3}) {
		t.Fatalf("outcomes %+v", v.Outcomes)
	}
	if len(v.Failures) != 3 || !v.Failures[0].DeadLetter || v.Failures[0].Group != "g" || v.Failures[0].Fingerprint == "" {
		t.Fatalf("failures %+v", v.Failures)
	}
	// Paused: a step does nothing. Resumed: it goes on.
	if j, err = s.b.StepJob(s.ctx, j.ID); err != nil || j.Done != 8 {
		t.Fatalf("a paused job stepped: %+v %v", j, err)
	}
	if _, err := s.b.ResumeJob(s.ctx, j.ID, "user:dev"); err != nil {
		t.Fatal(err)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.State != broker.JobDone || j.Done != 30 || j.ArrivedSince != 0 {
		t.Fatalf("after resume %+v %v (its own copies that failed again did not arrive since)", j, err)
	}
	// Its copies that failed again are dead letters again, not replayed
	// again by the same job (filed after its bound).
	if n := len(s.dead("q", "g")); n != 3 {
		t.Fatalf("%d dead letters, want the 3 that failed again", n)
	}
	auto, _ := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamBroker, Action: broker.AuditJobPause}, broker.Page{Limit: 10})
	if len(auto) != 1 || auto[0].JobID != j.ID || auto[0].Actor != broker.BrokerActor {
		t.Fatalf("auto-pause entries %+v", auto)
	}
}

// A delete keeps what it deleted for the restore window: a delete job
// is undone by a restore job, a single delete by Restore; after the
// window nothing can be, and the sweep cuts the records.
func testDeleteCanBeUndoneWithinTheWindowOnly(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 5)
	before := s.dead("q", "g")
	groups, err := s.b.ErrorGroups(s.ctx, "q", "g", "", 10)
	if err != nil || len(groups) != 1 || groups[0].DeadLetters != 5 {
		t.Fatalf("error groups %+v %v", groups, err)
	}
	res, err := s.b.DeleteMatching(s.ctx, broker.DLQQuery{Queue: "q"}, "user:dev")
	if err != nil || res.Done != 5 || res.JobID == 0 {
		t.Fatalf("delete %+v %v", res, err)
	}
	if s.stats("q", "g").Depth != 0 {
		t.Fatal("depth not 0 after the delete")
	}
	s.clock.Advance(time.Hour)
	r, err := s.b.UndoJob(s.ctx, res.JobID, "user:dev")
	if err != nil || r.Kind != broker.JobRestore || r.Planned != 5 || r.UndoOf != res.JobID {
		t.Fatalf("undo %+v %v", r, err)
	}
	if _, err := s.b.UndoJob(s.ctx, res.JobID, "user:dev"); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("second undo: %v, want a conflict", err)
	}
	if r, err = s.b.RunJob(s.ctx, r.ID); err != nil || r.State != broker.JobDone || r.Done != 5 {
		t.Fatalf("restore %+v %v", r, err)
	}
	after := s.dead("q", "g")
	if len(after) != 5 || s.stats("q", "g").Depth != 5 {
		t.Fatalf("%d dead letters back, depth %d", len(after), s.stats("q", "g").Depth)
	}
	for i := range after {
		a, b := after[i], before[i]
		if a.MessageID() != b.MessageID() || a.Error != b.Error || !a.FailedAt.Equal(b.FailedAt) || string(a.Payload) != string(b.Payload) || a.ID <= before[0].ID {
			t.Fatalf("restored %+v\nwas %+v (a restored row gets a new, higher id)", a, b)
		}
	}
	if groups, _ := s.b.ErrorGroups(s.ctx, "q", "g", "", 10); len(groups) != 1 || groups[0].DeadLetters != 5 {
		t.Fatalf("error groups after restore %+v", groups)
	}
	// A single delete, restored within the window; another, after it.
	id := after[0].MessageID()
	if _, err := s.b.Delete(s.ctx, id, "", "user:dev"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.b.Restore(s.ctx, id, "", "user:dev"); err != nil || n != 1 {
		t.Fatalf("restore %d %v", n, err)
	}
	if _, err := s.b.Restore(s.ctx, id, "", "user:dev"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("second restore: %v, want not found", err)
	}
	if _, err := s.b.Delete(s.ctx, id, "", "user:dev"); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(broker.RestoreWindow + time.Minute)
	if _, err := s.b.Restore(s.ctx, id, "", "user:dev"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("restore after the window: %v, want not found", err)
	}
	if err := s.b.SweepHistory(s.ctx); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.db.QueryRowUncatalogued(s.ctx, `SELECT COUNT(*) FROM removed_dead_letters WHERE restore_until > 0 OR error <> ''`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d removed rows still whole after the sweep (%v)", left, err)
	}
	if n := len(s.dead("q", "g")); n != 4 {
		t.Fatalf("%d dead letters, want 4", n)
	}
}

// Replay to one group: the copy is for the group that gave up on it; the
// other group's dead letter of the message stays. Every group is the
// default.
func testReplayToOwnGroupLeavesOtherGroupsDeadLetters(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	s.push("q", "p", "m1")
	for _, g := range []string{"billing", "analytics"} {
		res := s.pop("q", g, 1)
		s.ack(res.Messages[0], broker.AckFailed, g+" failed")
	}
	id := s.dead("q", "billing")[0].MessageID()
	if _, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "user:dev", Group: "billing"}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("a group without mode own: %v", err)
	}
	res, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "user:dev", Mode: broker.ReplayOwnGroup, Group: "billing"})
	if err != nil || res.TransactionID != broker.OwnGroupTransaction(id, "billing") || len(res.Groups) != 1 || res.Groups[0] != "billing" {
		t.Fatalf("replay %+v %v", res, err)
	}
	if len(s.dead("q", "billing")) != 0 || len(s.dead("q", "analytics")) != 1 {
		t.Fatal("billing's dead letter should be gone, analytics's kept")
	}
	if _, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "user:dev", Mode: broker.ReplayOwnGroup, Group: "billing"}); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("second replay to billing: %v, want not found", err)
	}
	// analytics's, to every group now: a copy of its own kind.
	res, err = s.b.Replay(s.ctx, id, "user:dev")
	if err != nil || res.TransactionID != broker.ReplayPrefix+id || res.Status != broker.StatusQueued {
		t.Fatalf("replay to every group %+v %v", res, err)
	}
}

// Edit and replay: the copy carries the edited payload; invalid JSON is
// refused and changes nothing; the audit names both versions.
func testEditAndReplay(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 1)
	id := s.dead("q", "g")[0].MessageID()
	if _, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "user:dev", Payload: []byte(`{"tx":`)}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("invalid JSON: %v", err)
	}
	if len(s.dead("q", "g")) != 1 {
		t.Fatal("a refused edit changed something")
	}
	edited := json.RawMessage(`{"tx":"p-0","fixed":true}`)
	res, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "user:dev", Payload: edited})
	if err != nil || res.Status != broker.StatusQueued {
		t.Fatalf("edit and replay %+v %v", res, err)
	}
	got := s.pop("q", "g", 1)
	if len(got.Messages) != 1 || string(got.Messages[0].Payload) != string(edited) || got.Messages[0].TransactionID != broker.ReplayPrefix+id {
		t.Fatalf("copy %+v", got.Messages)
	}
	entries, _ := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditEditReplay}, broker.Page{Limit: 10})
	if len(entries) != 1 || !strings.Contains(entries[0].Detail, "original 12 bytes") || !strings.Contains(entries[0].Detail, "edited 25 bytes") {
		t.Fatalf("audit %+v", entries)
	}
}

// A job by a filter that names a queue (or group) that does not exist
// plans nothing and does nothing, whatever other queues hold.
func testJobOfAFilterNamingNothingDoesNothing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 3)
	for _, q := range []broker.DLQQuery{{Queue: "nope"}, {Queue: "q", Group: "nobody"}, {Queue: "q", Partition: "nowhere"}} {
		j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &q, Actor: "user:dev"})
		if err != nil || j.Planned != 0 {
			t.Fatalf("%+v: start %+v %v, want nothing planned", q, j, err)
		}
		if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.State != broker.JobDone || j.Done != 0 {
			t.Fatalf("%+v: run %+v %v", q, j, err)
		}
	}
	if n := len(s.dead("q", "g")); n != 3 {
		t.Fatalf("%d dead letters left, want 3", n)
	}
}

// A dead letter of a copy that was replayed to one group only is replayed
// to that group only, even by a replay to every group: the other groups
// passed the first copy by, and must not get its payload again.
func testReplayOfACopyForOneGroupStaysWithThatGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	s.push("q", "p", "m")
	s.ack(s.pop("q", "analytics", 1).Messages[0], broker.AckCompleted, "")
	s.ack(s.pop("q", "billing", 1).Messages[0], broker.AckFailed, "declined")
	id := s.dead("q", "billing")[0].MessageID()
	if _, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "user:dev", Mode: broker.ReplayOwnGroup, Group: "billing"}); err != nil {
		t.Fatal(err)
	}
	if got := s.pop("q", "analytics", 10); len(got.Messages) != 0 {
		t.Fatalf("analytics got %v", got.Messages)
	}
	first := s.pop("q", "billing", 1).Messages[0]
	s.ack(first, broker.AckFailed, "declined again")
	again := s.dead("q", "billing")
	if len(again) != 1 || again[0].TransactionID != first.TransactionID {
		t.Fatalf("billing's dead letters %+v", again)
	}
	res, err := s.b.Replay(s.ctx, again[0].MessageID(), "user:dev") // to every group
	if err != nil || res.TransactionID != broker.OwnGroupTransaction(again[0].MessageID(), "billing") {
		t.Fatalf("replay %+v %v, want a copy for billing only", res, err)
	}
	if got := s.pop("q", "analytics", 10); len(got.Messages) != 0 {
		t.Fatalf("analytics got the copy of a copy for billing only: %v", got.Messages)
	}
	got := s.pop("q", "billing", 10)
	if len(got.Messages) != 1 || got.Messages[0].TransactionID != res.TransactionID {
		t.Fatalf("billing got %v", got.Messages)
	}
	// A bulk replay to every group does the same.
	s.ack(got.Messages[0], broker.AckFailed, "declined a third time")
	r, err := s.b.ReplayMatching(s.ctx, broker.DLQQuery{Queue: "q"}, "user:dev")
	if err != nil || r.Done != 1 {
		t.Fatalf("bulk %+v %v", r, err)
	}
	if got := s.pop("q", "analytics", 10); len(got.Messages) != 0 {
		t.Fatalf("analytics got a bulk copy of a copy for billing only: %v", got.Messages)
	}
}

// A job by ids is listed with the queue of its dead letters and keeps
// that queue's auto-pause rule; a replay of ids to their own group with
// a group replays that group's dead letters only.
func testJobByIDsTakesItsQueueAndGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0, "replayPausePercent": 0})
	s.push("q", "p", "a", "b")
	for _, g := range []string{"g", "h"} {
		for range 2 {
			s.ack(s.pop("q", g, 1).Messages[0], broker.AckFailed, "no")
		}
	}
	var ids []string
	for _, d := range s.dead("q", "h") {
		ids = append(ids, d.MessageID())
	}
	if _, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Group: "h", Actor: "user:dev"}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("a group on a replay to every group: %v", err)
	}
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Group: "h", Mode: broker.ReplayOwnGroup, Actor: "user:dev"})
	if err != nil || j.Queue != "q" || j.PausePercent != 0 {
		t.Fatalf("start %+v %v, want queue q and its rule (never pause)", j, err)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.Done != 2 {
		t.Fatalf("run %+v %v", j, err)
	}
	if len(s.dead("q", "h")) != 0 || len(s.dead("q", "g")) != 2 {
		t.Fatalf("h's dead letters should be replayed, g's kept: g %d, h %d", len(s.dead("q", "g")), len(s.dead("q", "h")))
	}
	listed, err := s.b.Jobs(s.ctx, broker.JobFilter{Queue: "q"}, broker.Page{})
	if err != nil || len(listed) != 1 || listed[0].ID != j.ID {
		t.Fatalf("jobs of q %+v %v", listed, err)
	}
}

// A delete whose restore job was cancelled can be undone again: what the
// first restore had not put back yet is restored.
func testUndoAgainAfterACancelledRestore(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 6)
	del, err := s.b.DeleteMatching(s.ctx, broker.DLQQuery{Queue: "q"}, "user:dev")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.b.UndoJob(s.ctx, del.JobID, "user:dev")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.b.JobDetail(s.ctx, del.JobID); v.Undoable {
		t.Fatal("undoable while its restore runs")
	}
	if _, err := s.b.CancelJob(s.ctx, r.ID, "user:dev"); err != nil {
		t.Fatal(err)
	}
	v, err := s.b.JobDetail(s.ctx, del.JobID)
	if err != nil || !v.Undoable || v.Restorable != 6 || !v.RestorableUntil.Equal(s.clock.Now().Add(broker.RestoreWindow)) {
		t.Fatalf("after the restore was cancelled: undoable %v, %d restorable until %s (%v)", v.Undoable, v.Restorable, v.RestorableUntil, err)
	}
	r2, err := s.b.UndoJob(s.ctx, del.JobID, "user:dev")
	if err != nil || r2.Planned != 6 {
		t.Fatalf("undo after a cancelled restore %+v %v", r2, err)
	}
	if r2, err = s.b.RunJob(s.ctx, r2.ID); err != nil || r2.Done != 6 || len(s.dead("q", "g")) != 6 {
		t.Fatalf("restore %+v %v", r2, err)
	}
	if _, err := s.b.UndoJob(s.ctx, del.JobID, "user:dev"); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("undo after a done restore: %v, want a conflict", err)
	}
	if v, _ := s.b.JobDetail(s.ctx, del.JobID); v.Undoable || v.Restorable != 0 {
		t.Fatalf("after the restore: undoable %v, %d restorable", v.Undoable, v.Restorable)
	}
}

// A replay job whose queue is deleted while its copies are pending keeps
// no copies pending for ever: they will never settle.
func testDeletingTheQueueSettlesAJobsPendingCopies(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 3)
	res, err := s.b.ReplayMatching(s.ctx, broker.DLQQuery{Queue: "q"}, "user:dev")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := s.b.JobDetail(s.ctx, res.JobID)
	if len(v.Outcomes) != 1 || v.Outcomes[0].Pending() != 3 {
		t.Fatalf("outcomes before %+v", v.Outcomes)
	}
	if err := s.b.DeleteQueue(s.ctx, "q", "user:admin"); err != nil {
		t.Fatal(err)
	}
	v, _ = s.b.JobDetail(s.ctx, res.JobID)
	if len(v.Outcomes) != 1 || v.Outcomes[0].Pending() != 0 {
		t.Fatalf("outcomes after the queue was deleted %+v", v.Outcomes)
	}
}

// A delete undone before its first chunk is only cancelled: nothing is
// deleted, and nothing needs restoring.
func testUndoOfADeleteBeforeItsFirstChunk(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 3)
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &broker.DLQQuery{Queue: "q"}, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.b.UndoJob(s.ctx, j.ID, "user:dev")
	if err != nil || u.ID != j.ID || u.State != broker.JobCancelled {
		t.Fatalf("undo %+v %v, want the delete job cancelled", u, err)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.Done != 0 || len(s.dead("q", "g")) != 3 {
		t.Fatalf("after the undo %+v %v, %d dead letters", j, err, len(s.dead("q", "g")))
	}
}

// The history sweep keeps the record of a copy for one group that
// another group has not passed yet: without it that group would read
// the copy.
func testSweepKeepsACopyForOneGroupNotPassedYet(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	s.push("q", "p", "m")
	s.ack(s.pop("q", "analytics", 1).Messages[0], broker.AckCompleted, "")
	s.ack(s.pop("q", "billing", 1).Messages[0], broker.AckFailed, "declined")
	id := s.dead("q", "billing")[0].MessageID()
	if _, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "user:dev", Mode: broker.ReplayOwnGroup, Group: "billing"}); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(broker.HistoryRetention + time.Hour)
	if err := s.b.SweepHistory(s.ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.pop("q", "analytics", 10); len(got.Messages) != 0 {
		t.Fatalf("after the sweep analytics got the copy for billing: %v", got.Messages)
	}
	// Passed by analytics now: the next sweep takes it.
	if err := s.b.SweepHistory(s.ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRowUncatalogued(s.ctx, `SELECT COUNT(*) FROM replays`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d replays rows left (%v)", n, err)
	}
}

// The sweep goes on past a page of kept copies: a group that never passes
// its partition's copies for another group does not stop the history of
// everything after them from going.
func testSweepGoesOnPastKeptCopies(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	const n = 520 // more than a sweep's page (500)
	var txids []string
	for i := range n + 1 {
		txids = append(txids, fmt.Sprintf("m%d", i))
	}
	s.push("q", "p", txids...)
	s.pop("q", "legacy", 1) // a group that reads the queue, and stops
	for range n + 1 {
		s.ack(s.pop("q", "billing", 1).Messages[0], broker.AckFailed, "declined")
	}
	dead := s.dead("q", "billing")
	for _, d := range dead[1:] { // n copies for billing only, that legacy never passes
		if _, err := s.b.ReplayWith(s.ctx, d.MessageID(), broker.ReplayOptions{Actor: "user:dev", Mode: broker.ReplayOwnGroup, Group: "billing"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.b.Replay(s.ctx, dead[0].MessageID(), "user:dev"); err != nil { // the newest copy: for every group
		t.Fatal(err)
	}
	s.clock.Advance(broker.HistoryRetention + time.Hour)
	if err := s.b.SweepHistory(s.ctx); err != nil {
		t.Fatal(err)
	}
	var kept, every int
	if err := s.db.QueryRowUncatalogued(s.ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE group_id = 0) FROM replays`).Scan(&kept, &every); err != nil {
		t.Fatal(err)
	}
	if kept != n || every != 0 {
		t.Fatalf("%d replays rows left (%d for every group), want the %d kept copies for billing only", kept, every, n)
	}
}

// A job paused, resumed and paused again names in its reason only the
// failures of its window, not those of before the resume.
func testAutoPauseReasonCountsTheWindowOnly(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"replayPauseWindow": 10, "replayPausePercent": 20, "retryLimit": 0})
	s.fill("q", "g", []string{"p"}, 20)
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q", Group: "g"}, Rate: 40, Actor: "user:dev"}) // chunks of 4
	if err != nil {
		t.Fatal(err)
	}
	round := func() broker.JobView {
		t.Helper()
		if _, err := s.b.StepJob(s.ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		// One at a time: a failure on the last try brings the rest of
		// its batch back.
		for range 3 {
			s.ack(s.pop("q", "g", 1).Messages[0], broker.AckFailed, "still broken")
		}
		s.ack(s.pop("q", "g", 1).Messages[0], broker.AckCompleted, "") // after the pause: not in the window
		v, err := s.b.JobDetail(s.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := round(); v.State != broker.JobPaused || !strings.Contains(v.Reason, `3 of them share`) {
		t.Fatalf("first pause: %s %q", v.State, v.Reason)
	}
	if _, err := s.b.ResumeJob(s.ctx, j.ID, "user:dev"); err != nil {
		t.Fatal(err)
	}
	if v := round(); v.State != broker.JobPaused || !strings.Contains(v.Reason, "3 of the last 3") || !strings.Contains(v.Reason, `3 of them share`) {
		t.Fatalf("second pause: %s %q", v.State, v.Reason)
	}
}

// A replay job that meets a dead letter again, come back (imported)
// while the job's copy of it is still pending, beside one it has not
// met, counts the copy it replayed once: its replayed count is the
// copies it made, 2 here, not 3. The job meets it again because its ids
// name the message twice, in lower and in upper case (the same id; the
// list's repeats are dropped as written only).
func testReplayJobCountsACopyOnceWhenItsDeadLetterComesBack(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 2)
	dead := s.dead("q", "g")
	d1, d2 := dead[1], dead[0] // oldest first
	m1 := d1.MessageID()
	none := broker.MessageID(d1.CreatedAt, d2.Seq+100) // no dead letter
	ids := []string{m1, none, strings.ToUpper(m1), d2.MessageID()}
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Rate: 20, Actor: "user:dev"}) // chunks of 2
	if err != nil || len(j.Scope.IDs) != 4 {
		t.Fatalf("start %+v %v", j, err)
	}
	if j, err = s.b.StepJob(s.ctx, j.ID); err != nil || j.Done != 1 {
		t.Fatalf("first chunk %+v %v", j, err)
	}
	// m1's dead letter comes back (as from an export taken before) while
	// its copy is pending.
	res, err := s.b.ImportDeadLetters(s.ctx, "cli", "export.ndjson", []broker.ImportedDeadLetter{{
		MessageID: m1, Queue: "q", Partition: "p", Group: "g", TransactionID: d1.TransactionID, Payload: d1.Payload,
		Error: d1.Error, RetryCount: d1.RetryCount, FailedAt: d1.FailedAt, CreatedAt: d1.CreatedAt}})
	if err != nil || res.Imported != 1 {
		t.Fatalf("import %+v %v", res, err)
	}
	if back := s.dead("q", "g"); len(back) != 2 || back[0].MessageID() != m1 && back[1].MessageID() != m1 {
		t.Fatalf("dead letters after the import %+v, want m1's back", back)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.State != broker.JobDone || j.Done != 3 || j.Skipped != 1 {
		t.Fatalf("the rest %+v %v", j, err)
	}
	v, err := s.b.JobDetail(s.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Outcomes) != 1 || v.Outcomes[0].Replayed != 2 || v.Outcomes[0].Pending() != 2 {
		t.Fatalf("outcomes %+v, want 2 replayed, both pending", v.Outcomes)
	}
	// The group gets the two copies, once each; both settle.
	got := s.pop("q", "g", 10)
	if len(got.Messages) != 2 {
		t.Fatalf("popped %+v, want the two copies", got.Messages)
	}
	for _, m := range got.Messages {
		s.ack(m, broker.AckCompleted, "")
	}
	if v, _ = s.b.JobDetail(s.ctx, j.ID); len(v.Outcomes) != 1 || v.Outcomes[0].Succeeded != 2 || v.Outcomes[0].Pending() != 0 {
		t.Fatalf("outcomes after the acks %+v", v.Outcomes)
	}
}

// A job's chunk stops at its rows or once its time is spent, whichever
// comes first (issue 37): by the broker's clock, here one that stands
// still (the chunks are then bounded by rows: 250 dead letters at the
// default pace), then one that moves a second each time it is read (a
// chunk then stops after its first step, sized by what a row cost in
// the chunks before: one row). Flat out (PaceFull) a chunk takes many
// more rows. Each dead letter is replayed once, whatever the chunks.
func testJobChunksAreBoundedByTimeAndRows(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 1000)
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = s.b.StepJob(s.ctx, j.ID); err != nil || j.Done != 250 {
		t.Fatalf("a chunk by a still clock: %+v %v, want 250 done", j, err)
	}
	ticking := broker.New(broker.Config{Store: s.db, Clock: broker.ClockFunc(func() time.Time {
		s.clock.Advance(time.Second)
		return s.clock.Now()
	})})
	t.Cleanup(ticking.Close)
	// Its first chunk knows nothing yet of what a row costs: it takes
	// its rows, and learns that a row costs seconds.
	if j, err = ticking.StepJob(s.ctx, j.ID); err != nil || j.Done != 500 {
		t.Fatalf("the first chunk by a moving clock: %+v %v, want 500 done", j, err)
	}
	for want := int64(501); want <= 503; want++ {
		if j, err = ticking.StepJob(s.ctx, j.ID); err != nil || j.Done != want || j.State != broker.JobRunning {
			t.Fatalf("a chunk by a moving clock: %+v %v, want %d done", j, err, want)
		}
	}
	if j, err = s.b.CancelJob(s.ctx, j.ID, "user:dev"); err != nil || j.Done != 503 {
		t.Fatalf("cancel %+v %v", j, err)
	}
	full, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Pace: broker.PaceFull, Actor: "user:dev"})
	if err != nil || full.Planned != 497 || full.Scope.Pace != broker.PaceFull {
		t.Fatalf("start flat out: %+v %v", full, err)
	}
	if full, err = s.b.StepJob(s.ctx, full.ID); err != nil || full.Done != 497 {
		t.Fatalf("a chunk flat out: %+v %v, want all 497 done in one", full, err)
	}
	if full, err = s.b.StepJob(s.ctx, full.ID); err != nil || full.Done != 497 || full.State != broker.JobDone || full.Skipped != 0 {
		t.Fatalf("the chunk after: %+v %v, want the job done", full, err)
	}
	if n := len(s.dead("q", "g")); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
	var copies int
	if err := s.db.QueryRowUncatalogued(s.ctx, `SELECT COUNT(*) FROM replays`).Scan(&copies); err != nil || copies != 1000 {
		t.Fatalf("%d copies made (%v), want 1000", copies, err)
	}
	if _, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Pace: "fast", Actor: "user:dev"}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("pace fast: %v, want invalid", err)
	}
}

// countlessWrites is a store whose writes fail any count of dead letters
// by their rows: a test's way to see that a job's count is read before
// its write, where it holds no other write back.
type countlessWrites struct{ broker.Store }

type countlessTx struct{ broker.Tx }

var errCountInWrite = errors.New("dead letters counted by their rows inside a write")

func (c countlessWrites) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return c.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(countlessTx{tx}) })
}

func (countlessTx) CountDeadLetters(context.Context, broker.Filter) (int64, error) {
	return 0, errCountInWrite
}

func (countlessTx) CountDeadLetterMessages(context.Context, broker.Filter) (int64, error) {
	return 0, errCountInWrite
}

// A job by a filter that no kept count answers (a time range, every
// group: its rows and its messages are counted) counts them from a read
// snapshot before its write, and plans exactly what it then does.
func testJobCountsBeforeItsWrite(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	// Each message dead in two groups: 60 dead letters of 30 messages.
	s.fill("q", "g", []string{"p"}, 30)
	s.fill("q", "h", []string{"p"}, 30)
	b := broker.New(broker.Config{Store: countlessWrites{s.db}, Clock: s.clock})
	t.Cleanup(b.Close)
	from := s.clock.Now().Add(-24 * time.Hour)
	for _, mode := range []string{broker.ReplayEveryGroup, broker.ReplayOwnGroup} {
		j, err := b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Mode: mode, Query: &broker.DLQQuery{Queue: "q", From: from}, Actor: "user:dev"})
		if err != nil {
			t.Fatalf("start (mode %q): %v", mode, err)
		}
		want := int64(60) // to its own group: the dead letters
		if mode == broker.ReplayEveryGroup {
			want = 30 // to every group: the messages
		}
		if j.Planned != want || j.Scope.Filter == nil || j.Scope.Filter.Bound == nil || j.Scope.Filter.Bound.ID == 0 {
			t.Fatalf("mode %q: planned %d, bound %+v; want %d planned and a bound", mode, j.Planned, j.Scope.Filter, want)
		}
		if _, err := b.CancelJob(s.ctx, j.ID, "user:dev"); err != nil {
			t.Fatal(err)
		}
	}
}
