package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// jobJSON is a job as a client reads it.
type jobJSON struct {
	ID          int64   `json:"id"`
	URL         string  `json:"url"`
	Kind        string  `json:"kind"`
	State       string  `json:"state"`
	Reason      string  `json:"reason"`
	Actor       string  `json:"actor"`
	CreatedAt   string  `json:"createdAt"`
	FinishedAt  *string `json:"finishedAt"`
	Queue       *string `json:"queue"`
	Description string  `json:"description"`
	Rate        int     `json:"rate"`
	Pace        string  `json:"pace"`
	Planned     int64   `json:"planned"`
	Done        int64   `json:"done"`
	Skipped     int64   `json:"skipped"`
	Failed      int64   `json:"failed"`
	Scope       struct {
		IDs           int    `json:"ids"`
		ConsumerGroup string `json:"consumerGroup"`
		Mode          string `json:"mode"`
		Filter        *struct {
			Queue         string `json:"queue"`
			ConsumerGroup string `json:"consumerGroup"`
		} `json:"filter"`
		Bound *struct {
			FailedAt string `json:"failedAt"`
			ID       int64  `json:"id"`
		} `json:"bound"`
	} `json:"scope"`
	ArrivedSince *int64 `json:"arrivedSince"`
	UndoOf       *int64 `json:"undoOf"`
	UndoneBy     *int64 `json:"undoneBy"`
}

type jobAnswer struct {
	Job jobJSON `json:"job"`
}

type jobDetailAnswer struct {
	Job      jobJSON `json:"job"`
	Outcomes []struct {
		ConsumerGroup string `json:"consumerGroup"`
		Replayed      int64  `json:"replayed"`
		Succeeded     int64  `json:"succeeded"`
		Failed        int64  `json:"failed"`
		Pending       int64  `json:"pending"`
	} `json:"outcomes"`
	Failures []struct {
		ID            string  `json:"id"`
		Queue         string  `json:"queue"`
		ConsumerGroup string  `json:"consumerGroup"`
		SettledAt     string  `json:"settledAt"`
		DeadLetter    bool    `json:"deadLetter"`
		Fingerprint   *string `json:"fingerprint"`
		ErrorMessage  *string `json:"errorMessage"`
	} `json:"failures"`
}

type jobsAnswer struct {
	Jobs []jobJSON `json:"jobs"`
	Next *string   `json:"next"`
}

// A bulk action starts a job (202, its Location); the job's answer says
// what it acts on, frozen; with wait it answers once done, with the
// counts scripts read before jobs.
func TestBulkAPIStartsAJob(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "q", 3)
	id := startReplay(t, s, `{"filter":{"queue":"q"},"mode":"own","rate":50,"pace":"full"}`)
	j, err := s.broker.WaitJob(s.ctx, id)
	if err != nil || j.Done != 3 {
		t.Fatalf("job %+v %v", j, err)
	}
	var d jobDetailAnswer
	s.call("GET", fmt.Sprintf("/api/v1/jobs/%d", id), "").want(http.StatusOK).decode(&d)
	got := d.Job
	if got.Kind != "replay" || got.State != "done" || got.Rate != 50 || got.Pace != "full" || got.Scope.Mode != "own" || got.Scope.Filter == nil || got.Scope.Filter.Queue != "q" ||
		got.Scope.Bound == nil || got.Planned != 3 || got.Done != 3 || got.ArrivedSince == nil || *got.ArrivedSince != 0 || got.FinishedAt == nil ||
		got.Queue == nil || *got.Queue != "q" || got.URL != fmt.Sprintf("/jobs/%d", id) || got.Actor != "anonymous" {
		t.Fatalf("job %+v", got)
	}
	if len(d.Outcomes) != 1 || d.Outcomes[0].ConsumerGroup != "g" || d.Outcomes[0].Replayed != 3 || d.Outcomes[0].Pending != 3 || d.Failures == nil {
		t.Fatalf("outcomes %+v failures %+v", d.Outcomes, d.Failures)
	}
	popAll(t, s, "q", "g", func(i int) bool { return i == 1 }, "<b>again</b>")
	s.call("GET", fmt.Sprintf("/api/v1/jobs/%d", id), "").want(http.StatusOK).decode(&d)
	if o := d.Outcomes[0]; o.Succeeded != 2 || o.Failed != 1 || o.Pending != 0 {
		t.Fatalf("outcomes %+v", d.Outcomes)
	}
	if len(d.Failures) != 1 || !d.Failures[0].DeadLetter || d.Failures[0].ErrorMessage == nil || *d.Failures[0].ErrorMessage != "<b>again</b>" || d.Failures[0].ConsumerGroup != "g" {
		t.Fatalf("failures %+v", d.Failures)
	}
	// The copy that failed again is a dead letter of the API.
	s.call("GET", "/api/v1/dlq/"+d.Failures[0].ID+"?consumerGroup=g", "").want(http.StatusOK)

	// With wait: the old counts, and the job.
	fill(t, s, "w", 2)
	var w struct {
		bulkAnswer
		Job jobJSON `json:"job"`
	}
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"w"},"wait":true}`).want(http.StatusOK).decode(&w)
	if w.Done != 2 || w.ArrivedSince == nil || *w.ArrivedSince != 0 || w.Bound == nil || w.Job.State != "done" || w.Job.Kind != "delete" || w.Job.Scope.Mode != "" {
		t.Fatalf("waited delete %+v", w)
	}
}

// Bad job fields are a 400 and start nothing.
func TestBulkAPIRefusesBadJobFields(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "q", 1)
	for _, tc := range []struct{ path, body, want string }{
		{"replay", `{"filter":{"queue":"q"},"mode":"sideways"}`, "mode"},
		{"delete", `{"filter":{"queue":"q"},"mode":"own"}`, "mode is for replays"},
		{"replay", `{"filter":{"queue":"q"},"rate":-1}`, "rate"},
		{"replay", `{"filter":{"queue":"q"},"rate":100000000}`, "rate"},
		{"replay", `{"filter":{"queue":"q"},"dryRun":true,"wait":true}`, "wait"},
		{"replay", `{"filter":{"queue":"q"},"rate":"fast"}`, "rate"},
		{"replay", `{"filter":{"queue":"q"},"pace":"fast"}`, "pace"},
		{"delete", `{"filter":{"queue":"q"},"pace":1}`, "pace"},
	} {
		s.call("POST", "/api/v1/dlq/"+tc.path, tc.body).wantError(http.StatusBadRequest, tc.want)
	}
	var l jobsAnswer
	s.call("GET", "/api/v1/jobs", "").want(http.StatusOK).decode(&l)
	if len(l.Jobs) != 0 || l.Next != nil {
		t.Fatalf("refused requests started jobs: %+v", l)
	}
}

// GET /api/v1/jobs lists newest first, pages by after, filters; pause,
// resume and cancel answer the job, or 409 with why not; undo is for
// deletes.
func TestJobsAPI(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 2)
	first := startReplay(t, s, `{"filter":{"queue":"q"}}`)
	var del jobAnswer
	s.call("POST", "/api/v1/dlq/delete", `{"ids":["x","y"],"consumerGroup":"g"}`).want(http.StatusAccepted).decode(&del)
	if del.Job.Scope.IDs != 2 || del.Job.Scope.ConsumerGroup != "g" || del.Job.Queue != nil || del.Job.Planned != 2 {
		t.Fatalf("delete by ids %+v", del.Job)
	}
	var l jobsAnswer
	s.call("GET", "/api/v1/jobs?limit=1", "").want(http.StatusOK).decode(&l)
	if len(l.Jobs) != 1 || l.Jobs[0].ID != del.Job.ID || l.Next == nil {
		t.Fatalf("first page %+v", l)
	}
	s.call("GET", "/api/v1/jobs?limit=1&after="+*l.Next, "").want(http.StatusOK).decode(&l)
	if len(l.Jobs) != 1 || l.Jobs[0].ID != first {
		t.Fatalf("second page %+v", l)
	}
	s.call("GET", "/api/v1/jobs?kind=delete", "").want(http.StatusOK).decode(&l)
	if len(l.Jobs) != 1 || l.Jobs[0].ID != del.Job.ID || l.Next != nil {
		t.Fatalf("kind=delete %+v", l)
	}
	s.call("GET", "/api/v1/jobs?state=paused", "").want(http.StatusOK).decode(&l)
	if len(l.Jobs) != 0 {
		t.Fatalf("state=paused %+v", l)
	}
	for _, bad := range []string{"state=asleep", "kind=purge", "limit=0", "limit=501", "after=-3", "limit=x"} {
		s.call("GET", "/api/v1/jobs?"+bad, "").wantError(http.StatusBadRequest)
	}
	s.call("GET", "/api/v1/jobs/999", "").wantError(http.StatusNotFound, "job #999")
	s.call("GET", "/api/v1/jobs/x", "").wantError(http.StatusNotFound)

	path := fmt.Sprintf("/api/v1/jobs/%d/", first)
	var a jobAnswer
	s.call("POST", path+"pause", "").want(http.StatusOK).decode(&a)
	if a.Job.State != "paused" || !strings.Contains(a.Job.Reason, "paused by anonymous") {
		t.Fatalf("paused %+v", a.Job)
	}
	s.call("POST", path+"pause", "").wantError(http.StatusConflict, "is paused", "only a running job")
	s.call("POST", path+"resume", "").want(http.StatusOK).decode(&a)
	if a.Job.State != "running" {
		t.Fatalf("resumed %+v", a.Job)
	}
	s.call("POST", path+"resume", "").wantError(http.StatusConflict, "is running")
	s.call("POST", path+"undo", "").wantError(http.StatusConflict, "only a delete")
	s.call("POST", path+"cancel", "").want(http.StatusOK).decode(&a)
	if a.Job.State != "cancelled" || a.Job.FinishedAt == nil {
		t.Fatalf("cancelled %+v", a.Job)
	}
	s.call("POST", path+"cancel", "").wantError(http.StatusConflict, "cancelled already")
	s.call("POST", "/api/v1/jobs/999/cancel", "").wantError(http.StatusNotFound)
}

// Undo of a delete job starts a restore job (202) that puts back what it
// deleted; a second undo is a 409.
func TestJobsAPIUndoesADelete(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "q", 3)
	var w struct {
		Job jobJSON `json:"job"`
	}
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"q"},"wait":true}`).want(http.StatusOK).decode(&w)
	if l := s.deadLetters("queue=q"); l.Total != 0 {
		t.Fatalf("%d left after the delete", l.Total)
	}
	var u jobAnswer
	r := s.call("POST", fmt.Sprintf("/api/v1/jobs/%d/undo", w.Job.ID), "").want(http.StatusAccepted)
	r.decode(&u)
	if u.Job.Kind != "restore" || u.Job.UndoOf == nil || *u.Job.UndoOf != w.Job.ID || r.header.Get("Location") != fmt.Sprintf("/api/v1/jobs/%d", u.Job.ID) {
		t.Fatalf("undo %s", r.body)
	}
	if _, err := s.broker.WaitJob(s.ctx, u.Job.ID); err != nil {
		t.Fatal(err)
	}
	if l := s.deadLetters("queue=q"); l.Total != 3 {
		t.Fatalf("%d back after the undo, want 3", l.Total)
	}
	var d jobDetailAnswer
	s.call("GET", fmt.Sprintf("/api/v1/jobs/%d", w.Job.ID), "").want(http.StatusOK).decode(&d)
	if d.Job.UndoneBy == nil || *d.Job.UndoneBy != u.Job.ID {
		t.Fatalf("the delete job %+v", d.Job)
	}
	s.call("POST", fmt.Sprintf("/api/v1/jobs/%d/undo", w.Job.ID), "").wantError(http.StatusConflict, "undone already")
}
