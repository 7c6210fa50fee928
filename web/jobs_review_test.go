package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Selected rows of one group replayed to that group only: the job
// replays that group's dead letters, the other group keeps its own.
func TestReplaySelectedRowsToTheirGroupOnly(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	fill(t, f.s, "bulk", 7)                // dead letters of g
	deadLetterAlso(t, f.s, "bulk", "h", 3) // three of them in h too
	h := f.s.deadLetters("queue=bulk&consumerGroup=h").Messages
	if len(h) != 3 {
		t.Fatalf("%d dead letters of h", len(h))
	}
	q := url.Values{"action": {"replay"}, "group": {"h"}}
	for _, d := range h {
		q.Add("ids", d.ID)
	}
	c := f.op.get("/queues/bulk/dead-letters/confirm?" + q.Encode()).want(http.StatusOK)
	if got := c.testid("confirm-mode-own-label"); got != "Replay to h only" {
		t.Fatalf("own mode %q", got)
	}
	form := confirmForm(t, c)
	form.Set("mode", "own")
	r := hx(f.op, "/queues/bulk/dead-letters/replay", form).want(http.StatusOK)
	if got := r.testid("flash"); !strings.Contains(got, "to group h only") {
		t.Fatalf("flash %q", got)
	}
	j := followJob(t, f.s, f.op, r)
	if j.testid("job-done") != "3" {
		t.Fatalf("job %q", j.testid("job-counts"))
	}
	if n := len(f.s.deadLetters("queue=bulk&consumerGroup=g").Messages); n != 7 {
		t.Fatalf("g has %d dead letters, want its 7 kept", n)
	}
	if n := len(f.s.deadLetters("queue=bulk&consumerGroup=h").Messages); n != 0 {
		t.Fatalf("h has %d dead letters, want 0", n)
	}
}

// A bulk delete's message offers Undo; a failed job offers Resume.
func TestBulkDeleteOffersUndoAndAFailedJobResume(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	fill(t, f.s, "bulk", 5)
	c := f.op.get("/queues/bulk/dead-letters/confirm?action=delete&all=1").want(http.StatusOK)
	r := hx(f.op, "/queues/bulk/dead-letters/delete", confirmForm(t, c)).want(http.StatusOK)
	undo, ok := r.doc().Find(`[data-testid="flash-undo"]`).Attr("hx-post")
	if !ok {
		t.Fatalf("no Undo in the flash %q", r.testid("flash"))
	}
	page := followJob(t, f.s, f.op, r)
	if n := f.s.deadLetters("queue=bulk").Total; n != 0 {
		t.Fatalf("%d left after the delete", n)
	}
	if got := page.testid("job-undo-until"); !strings.Contains(got, "Restorable until 2026-11-02 12:00") {
		t.Fatalf("undo until %q, want the restore window's end (24 h after the start)", got)
	}
	hx(f.op, undo, nil).want(http.StatusOK)
	jobs, err := f.s.broker.Jobs(f.s.ctx, broker.JobFilter{Kind: broker.JobRestore}, broker.Page{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("restore jobs %+v %v", jobs, err)
	}
	if _, err := f.s.broker.WaitJob(f.s.ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := f.s.deadLetters("queue=bulk").Total; n != 5 {
		t.Fatalf("%d back after the undo, want 5", n)
	}
	// A failed job: Resume is offered (and works).
	if _, err := f.s.db.ExecUncatalogued(f.s.ctx, `UPDATE jobs SET state = 'failed', reason = 'it stopped on a storage error' WHERE id = ?`, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	p := f.op.get(jobPath(jobs[0].ID)).want(http.StatusOK)
	if p.doc().Find(`[data-testid="job-resume"]`).Length() != 1 {
		t.Fatal("a failed job offers no Resume")
	}
}

// After the restore window a delete job offers no Undo.
func TestNoUndoAfterTheRestoreWindow(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	fill(t, f.s, "bulk", 2)
	res, err := f.s.broker.DeleteMatching(f.s.ctx, broker.DLQQuery{Queue: "bulk"}, "user:dev")
	if err != nil {
		t.Fatal(err)
	}
	if p := f.op.get(jobPath(res.JobID)).want(http.StatusOK); p.doc().Find(`[data-testid="job-undo-until"]`).Length() != 1 {
		t.Fatal("no Undo within the window")
	}
	f.s.clock.Advance(broker.RestoreWindow + time.Minute)
	op, _ := f.s.loggedIn(broker.RoleOperator) // the session of a day ago has ended
	if p := op.get(jobPath(res.JobID)).want(http.StatusOK); p.doc().Find(`[data-testid="job-undo-until"]`).Length() != 0 {
		t.Fatal("Undo offered after the restore window")
	}
}

// The dead letter of a copy replayed to one group offers a replay to
// that group only: the other groups passed the copy by.
func TestACopyForOneGroupIsReplayedToItOnly(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0}`)
	ctx := s.ctx
	if _, err := s.broker.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: "m", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	settle := func(group, status string) {
		t.Helper()
		res, err := s.broker.Pop(ctx, broker.PopRequest{Queue: "q", Group: group})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop %s: %+v %v", group, res, err)
		}
		m := res.Messages[0]
		if _, err := s.broker.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: status, Error: "no", Group: group}); err != nil {
			t.Fatal(err)
		}
	}
	settle("analytics", broker.AckCompleted)
	settle("billing", broker.AckFailed)
	first := s.deadLetters("queue=q").Messages[0].ID
	if _, err := s.broker.ReplayWith(ctx, first, broker.ReplayOptions{Actor: "user:dev", Mode: broker.ReplayOwnGroup, Group: "billing"}); err != nil {
		t.Fatal(err)
	}
	settle("billing", broker.AckFailed)
	copyID := s.deadLetters("queue=q").Messages[0].ID
	op, _ := s.loggedIn(broker.RoleOperator)
	doc := op.get("/queues/q/dead-letters/" + copyID + "?group=billing").want(http.StatusOK).doc()
	every, own := doc.Find(`[data-testid="detail-replay"]`), doc.Find(`[data-testid="detail-replay-own"]`)
	if every.Length() != 0 || strings.TrimSpace(own.Text()) != "Replay for billing only" {
		t.Fatalf("choices: every %d %q, own %q", every.Length(), every.Text(), own.Text())
	}
}

// The API replays ids to one group's own dead letters with "mode": "own"
// and a consumerGroup; a consumerGroup on a replay to every group is
// refused and starts nothing.
func TestAPIReplayOfIDsToOneGroup(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	fill(t, f.s, "bulk", 3)
	deadLetterAlso(t, f.s, "bulk", "h", 3)
	var ids []string
	for _, d := range f.s.deadLetters("queue=bulk&consumerGroup=h").Messages {
		ids = append(ids, `"`+d.ID+`"`)
	}
	list := "[" + strings.Join(ids, ",") + "]"
	f.s.call("POST", "/api/v1/dlq/replay", `{"ids":`+list+`,"consumerGroup":"h","wait":true}`).want(http.StatusBadRequest)
	f.s.call("POST", "/api/v1/dlq/replay", `{"ids":`+list+`,"consumerGroup":"h","mode":"own","wait":true}`).want(http.StatusOK)
	if g, h := len(f.s.deadLetters("queue=bulk&consumerGroup=g").Messages), len(f.s.deadLetters("queue=bulk&consumerGroup=h").Messages); g != 3 || h != 0 {
		t.Fatalf("g %d, h %d: want g's 3 kept and h's replayed", g, h)
	}
}
