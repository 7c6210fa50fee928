package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// atCap leaves one dead letter in queue caps (maxReplays 1), group g, of
// a message replayed once already: at the cap.
func atCap(t *testing.T, s *bundle, txid string) deadLetter {
	t.Helper()
	d := s.fail("caps", "", "g", txid, `{"n":1}`, "boom")
	s.configure("caps", `{"maxReplays":1}`)
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").want(http.StatusOK)
	p := s.pop("caps", "consumerGroup=g")
	if len(p.Messages) != 1 {
		t.Fatalf("copy: popped %+v", p.Messages)
	}
	s.ack(p.Messages[0], "failed", "boom again").want(http.StatusOK)
	l := s.deadLetters(url.Values{"queue": {"caps"}, "transactionId": {broker.ReplayPrefix + d.ID}}.Encode())
	if len(l.Messages) != 1 {
		t.Fatalf("the copy's dead letter: %+v", l.Messages)
	}
	return l.Messages[0]
}

func TestReplayCapOnTheAPI(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := atCap(t, s, "a")
	var got struct {
		Replays struct {
			Count, MaxReplays int
			AtCap             bool
		}
	}
	s.call("GET", "/api/v1/dlq/"+d.ID, "").want(http.StatusOK).decode(&got)
	if got.Replays.Count != 1 || got.Replays.MaxReplays != 1 || !got.Replays.AtCap {
		t.Fatalf("the dead letter's replays %+v", got.Replays)
	}
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").wantError(http.StatusConflict, "replayed 1 time already (maxReplays 1)", "force")
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", `{"force":"yes"}`).want(http.StatusBadRequest)
	if n := len(s.deadLetters("queue=caps").Messages); n != 1 {
		t.Fatalf("%d dead letters after a refused replay", n)
	}
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", `{"force":true}`).want(http.StatusOK)
	if n := len(s.deadLetters("queue=caps").Messages); n != 0 {
		t.Fatalf("%d dead letters after a forced replay", n)
	}
	settle(t, s)

	// Bulk: b at the cap, c an original; without force b is skipped and
	// counted, with it b is replayed.
	b, c := atCap(t, s, "b"), s.fail("caps", "", "g", "c", `{"n":2}`, "boom")
	var res struct{ Done, Skipped, Capped int }
	s.call("POST", "/api/v1/dlq/replay", `{"ids":["`+b.ID+`","`+c.ID+`"],"wait":true}`).want(http.StatusOK).decode(&res)
	if res.Done != 1 || res.Skipped != 1 || res.Capped != 1 {
		t.Fatalf("bulk %+v", res)
	}
	s.call("POST", "/api/v1/dlq/delete", `{"ids":["`+b.ID+`"],"force":true}`).wantError(http.StatusBadRequest, "force goes with a replay")
	s.call("POST", "/api/v1/dlq/replay", `{"filter":{"queue":"caps"},"force":true,"wait":true}`).want(http.StatusOK).decode(&res)
	if res.Done != 1 || res.Capped != 1 || len(s.deadLetters("queue=caps").Messages) != 0 {
		t.Fatalf("forced bulk %+v", res)
	}
	var jobs struct {
		Jobs []struct {
			Capped int64
			Scope  struct{ Force bool }
		}
	}
	s.call("GET", "/api/v1/jobs?limit=1", "").want(http.StatusOK).decode(&jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].Capped != 1 || !jobs.Jobs[0].Scope.Force {
		t.Fatalf("the forced job in the list %+v", jobs)
	}
	// The audit page shows the forced replays as such, escaped.
	viewer, _ := s.loggedIn(broker.RoleViewer)
	if n := strings.Count(string(viewer.get("/audit?action=replay").want(http.StatusOK).body), "forced past the replay cap"); n != 3 {
		t.Fatalf("%d forced entries on the audit page, want 3 (the single replay, the job's entry and its count)", n)
	}
}

func TestReplayCapOnTheDeadLetterPage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := atCap(t, s, "a")
	op, _ := s.loggedIn(broker.RoleOperator)
	page := "/queues/caps/dead-letters/" + d.ID + "?group=g"
	r := op.get(page).want(http.StatusOK)
	if got := r.testid("fact-replays"); !strings.Contains(got, "replayed once (cap 1)") || !strings.Contains(got, "needs force") {
		t.Fatalf("replays fact %q", got)
	}
	if r.doc().Find(`[data-testid="replay-force"][name="force"]`).Length() != 1 {
		t.Fatal("no force box at the cap")
	}
	if inc, _ := r.doc().Find(`[data-testid="detail-actions"]`).Attr("hx-include"); inc != "#replay-force" {
		t.Fatalf("the replay buttons do not send the box: %q", inc)
	}
	hx(op, "/queues/caps/dead-letters/"+d.ID+"/replay", nil).want(http.StatusConflict)
	if n := len(s.deadLetters("queue=caps").Messages); n != 1 {
		t.Fatalf("%d dead letters after a refused replay", n)
	}
	hx(op, "/queues/caps/dead-letters/"+d.ID+"/replay", url.Values{"force": {"1"}}).want(http.StatusOK)
	if n := len(s.deadLetters("queue=caps").Messages); n != 0 {
		t.Fatalf("%d dead letters after a forced replay", n)
	}
	settle(t, s)
	// Below the cap: the count, no box.
	c := s.fail("caps", "", "g", "c", `{"n":2}`, "boom")
	r = op.get("/queues/caps/dead-letters/" + c.ID + "?group=g").want(http.StatusOK)
	if got := r.testid("fact-replays"); got != "replayed 0 times (cap 1)" || r.doc().Find(`[data-testid="replay-force"]`).Length() != 0 {
		t.Fatalf("below the cap: %q", got)
	}
	// The bulk dialog's form sends the box as the job's force.
	if r := hx(op, "/queues/caps/dead-letters/replay", url.Values{"ids": {c.ID}, "force": {"maybe"}}).want(http.StatusBadRequest); !strings.Contains(string(r.body), "orce must be on or left out") {
		t.Fatalf("a bad force box: %s", r.body)
	}
}

// settle completes the forced copy.
func settle(t *testing.T, s *bundle) {
	t.Helper()
	p := s.pop("caps", "consumerGroup=g")
	if len(p.Messages) != 1 || !strings.HasPrefix(p.Messages[0].TransactionID, broker.ReplayPrefix) {
		t.Fatalf("the forced copy: %+v", p.Messages)
	}
	s.ack(p.Messages[0], "completed", "").want(http.StatusOK)
}

func TestReplayCapInTheBulkDialog(t *testing.T) {
	t.Parallel()
	for _, force := range []bool{false, true} {
		s := setup(t)
		d := atCap(t, s, "a")
		s.fail("caps", "", "g", "c", `{"n":2}`, "boom")
		op, _ := s.loggedIn(broker.RoleOperator)
		c := op.get("/queues/caps/dead-letters/confirm?action=replay&all=1").want(http.StatusOK)
		if c.doc().Find(`[data-testid="confirm-dialog"] form input[type="checkbox"][name="force"]`).Length() != 1 {
			t.Fatal("the replay dialog has no force box")
		}
		form := confirmForm(t, c)
		if force {
			form.Set("force", "1") // the box ticked
		}
		r := hx(op, "/queues/caps/dead-letters/replay", form).want(http.StatusOK)
		j := followJob(t, s, op, r)
		left := s.deadLetters("queue=caps").Messages
		if !force && (j.testid("job-done") != "1" || j.testid("job-capped") != "1" || !strings.Contains(j.testid("job-counts"), "at the replay cap") || len(left) != 1 || left[0].ID != d.ID) {
			t.Fatalf("not forced: %q, left %+v", j.testid("job-counts"), left)
		}
		if force && (j.testid("job-done") != "2" || j.testid("job-capped") != "1" || !strings.Contains(j.testid("job-counts"), "replayed past the replay cap (forced)") || len(left) != 0) {
			t.Fatalf("forced: %q, left %+v", j.testid("job-counts"), left)
		}
	}
}

// Edit and replay at the cap: the edit form offers the force box; without
// it the replay is refused and nothing changes, with it the edited copy
// goes.
func TestReplayCapOnTheEditPage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := atCap(t, s, "e")
	op, _ := s.loggedIn(broker.RoleOperator)
	edit := "/queues/caps/dead-letters/" + d.ID + "/edit"
	r := op.get(edit + "?group=g").want(http.StatusOK)
	if r.doc().Find(`form[data-testid="edit-form"] [data-testid="edit-force"][name="force"]`).Length() != 1 {
		t.Fatal("no force box in the edit form at the cap")
	}
	form := url.Values{"payload": {`{"n":2}`}, "group": {"g"}}
	hx(op, edit, form).want(http.StatusConflict)
	if n := len(s.deadLetters("queue=caps").Messages); n != 1 {
		t.Fatalf("%d dead letters after a refused edit and replay", n)
	}
	form.Set("force", "1")
	hx(op, edit, form).want(http.StatusOK)
	if n := len(s.deadLetters("queue=caps").Messages); n != 0 {
		t.Fatalf("%d dead letters after a forced edit and replay", n)
	}
	settle(t, s)
	// Below the cap: no box.
	c := s.fail("caps", "", "g", "c2", `{"n":3}`, "boom")
	if r := op.get("/queues/caps/dead-letters/" + c.ID + "/edit?group=g").want(http.StatusOK); r.doc().Find(`[data-testid="edit-force"]`).Length() != 0 {
		t.Fatal("a force box below the cap")
	}
}
