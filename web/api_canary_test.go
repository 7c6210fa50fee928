package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// canaryAnswer is a job's JSON with its canary and results.
type canaryAnswer struct {
	Job struct {
		ID     int64  `json:"id"`
		State  string `json:"state"`
		Reason string `json:"reason"`
		Done   int64  `json:"done"`
		Canary *struct {
			Count         int     `json:"count"`
			SettleSeconds int     `json:"settleSeconds"`
			MaxFailed     int     `json:"maxFailed"`
			State         string  `json:"state"`
			Until         *string `json:"until"`
			Failed        int     `json:"failed"`
			Reason        *string `json:"reason"`
			Copies        []struct {
				DeadLetterID  string  `json:"deadLetterId"`
				ConsumerGroup string  `json:"consumerGroup"`
				TransactionID string  `json:"transactionId"`
				Queue         string  `json:"queue"`
				Partition     string  `json:"partition"`
				Outcome       string  `json:"outcome"`
				Error         *string `json:"error"`
			} `json:"copies"`
		} `json:"canary"`
		Results *struct {
			Moved     int64 `json:"moved"`
			Duplicate int64 `json:"duplicate"`
			Gone      int64 `json:"gone"`
		} `json:"results"`
	} `json:"job"`
}

// A bulk replay with a canary: the answer and GET /api/v1/jobs/:id carry
// the canary as it goes (drawn, settling with its copies, failed with the
// reason and the copy that failed again) and the results.
func TestBulkReplayWithACanary(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	s.configure("q", `{"retryLimit":0}`)
	fill(t, s, "q", 20)
	var started canaryAnswer
	s.call("POST", "/api/v1/dlq/replay", `{"filter":{"queue":"q"},"canary":{"count":5,"settleSeconds":60}}`).want(http.StatusAccepted).decode(&started)
	c := started.Job.Canary
	if c == nil || c.Count != 5 || c.SettleSeconds != 60 || c.MaxFailed != 0 || c.State != "drawn" || c.Until != nil || len(c.Copies) != 0 || c.Reason != nil {
		t.Fatalf("started: %s", mustJSON(started))
	}
	if r := started.Job.Results; r == nil || *r != (struct {
		Moved     int64 `json:"moved"`
		Duplicate int64 `json:"duplicate"`
		Gone      int64 `json:"gone"`
	}{}) {
		t.Fatalf("results of a job that did nothing yet: %s", mustJSON(started.Job.Results))
	}
	id := started.Job.ID
	if _, err := s.broker.StepJob(s.ctx, id); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/api/v1/jobs/%d", id)
	var settling canaryAnswer
	s.call("GET", path, "").want(http.StatusOK).decode(&settling)
	c = settling.Job.Canary
	if c == nil || c.State != "settling" || c.Until == nil || len(c.Copies) != 5 || settling.Job.Done != 5 || settling.Job.Results.Moved != 5 {
		t.Fatalf("settling: %s", mustJSON(settling))
	}
	for _, cp := range c.Copies {
		if cp.ConsumerGroup != "g" || cp.Queue != "q" || cp.Outcome != "pending" || cp.TransactionID != "dlq:"+cp.DeadLetterID || cp.Error != nil {
			t.Fatalf("a copy: %s", mustJSON(cp))
		}
	}
	res, err := s.broker.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10})
	if err != nil || len(res.Messages) != 5 {
		t.Fatalf("pop %d, %v", len(res.Messages), err)
	}
	for i, m := range res.Messages {
		st, text := broker.AckCompleted, ""
		if i == 4 {
			st, text = broker.AckFailed, "still <broken>"
		}
		if _, err := s.broker.Ack(s.ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: st, Error: text, Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.broker.StepJob(s.ctx, id); err != nil {
		t.Fatal(err)
	}
	var paused canaryAnswer
	r := s.call("GET", path, "").want(http.StatusOK)
	r.decode(&paused)
	c = paused.Job.Canary
	if paused.Job.State != "paused" || paused.Job.Reason != "canary: 1 of 5 failed again" || c.State != "failed" || c.Failed != 1 ||
		c.Reason == nil || *c.Reason != paused.Job.Reason {
		t.Fatalf("paused: %s", r.body)
	}
	failed := 0
	for _, cp := range c.Copies {
		if cp.Outcome == "failed" {
			failed++
			if cp.TransactionID != res.Messages[4].TransactionID || cp.Error == nil || *cp.Error != "still <broken>" {
				t.Fatalf("the copy that failed again: %s", mustJSON(cp))
			}
		}
	}
	if failed != 1 {
		t.Fatalf("%d failed: %s", failed, r.body)
	}
}

// A canary is refused, naming the field, on a delete and with numbers
// out of range; nothing is started.
func TestBulkCanaryRefusals(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 3)
	for _, tc := range []struct{ path, canary, want string }{
		{"/api/v1/dlq/delete", `{"count":5}`, "canary goes with a replay"},
		{"/api/v1/dlq/replay", `{}`, "canary.count is required"},
		{"/api/v1/dlq/replay", `{"count":0}`, "canary.count must be between 1 and 100"},
		{"/api/v1/dlq/replay", `{"count":101}`, "canary.count must be between 1 and 100"},
		{"/api/v1/dlq/replay", `{"count":5,"settleSeconds":0}`, "canary.settleSeconds must be between 1 and 86400"},
		{"/api/v1/dlq/replay", `{"count":5,"settleSeconds":86401}`, "canary.settleSeconds must be between 1 and 86400"},
		{"/api/v1/dlq/replay", `{"count":5,"maxFailed":5}`, "canary.maxFailed must be between 0 and count-1 (4)"},
		{"/api/v1/dlq/replay", `{"count":5,"maxFailed":-1}`, "canary.maxFailed"},
		{"/api/v1/dlq/replay", `{"count":"5"}`, ""},
	} {
		s.call("POST", tc.path, `{"filter":{"queue":"q"},"canary":`+tc.canary+`}`).wantError(http.StatusBadRequest, tc.want)
	}
	var list struct {
		Jobs []jobJSON `json:"jobs"`
	}
	s.call("GET", "/api/v1/jobs", "").want(http.StatusOK).decode(&list)
	if len(list.Jobs) != 0 {
		t.Fatalf("refused canaries started jobs: %s", mustJSON(list))
	}
	// A replay by ids takes one too; its answer with wait says the
	// results once paused.
	var ids []string
	for _, d := range s.deadLetters("queue=q").Messages {
		ids = append(ids, `"`+d.ID+`"`)
	}
	var started canaryAnswer
	s.call("POST", "/api/v1/dlq/replay", `{"ids":[`+strings.Join(ids, ",")+`,"bogus"],"canary":{"count":2,"maxFailed":1}}`).want(http.StatusAccepted).decode(&started)
	if c := started.Job.Canary; c == nil || c.Count != 2 || c.MaxFailed != 1 || c.SettleSeconds != 120 {
		t.Fatalf("by ids: %s", mustJSON(started))
	}
}
