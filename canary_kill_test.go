package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// canaryState is what the test reads of a job's canary.
type canaryState struct {
	State  string `json:"state"`
	Until  string `json:"until"`
	Copies []struct {
		TransactionID string `json:"transactionId"`
		Outcome       string `json:"outcome"`
	} `json:"copies"`
}

func canaryOf(c *crashClient, id int64) (jobState, canaryState) {
	c.t.Helper()
	b := c.mustDo(http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(id, 10), "", http.StatusOK)
	var res struct {
		Job struct {
			jobState
			Canary *canaryState `json:"canary"`
		} `json:"job"`
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Job.Canary == nil {
		c.t.Fatalf("GET job %d: %v %.300s", id, err, b)
	}
	return res.Job.jobState, *res.Job.Canary
}

// A canary job killed with SIGKILL while its canary settles: restarted,
// the job shows the same canary copies, still settling until its
// deadline; once the worker completes them (under the leases it took
// before the kill) the job goes on and finishes exactly, without waiting
// for the deadline (an hour away).
func TestCanaryJobSurvivesKill9(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dbPath := filepath.Join(t.TempDir(), "canary.db")
	cmd, base := startBinary(t, bin, dbPath, "normal")
	c := &crashClient{t: t, base: base, http: &http.Client{Timeout: time.Minute}}
	const queue, total = "orders", 20
	var items []string
	for k := range total {
		items = append(items, fmt.Sprintf(`{"queue":%q,"transactionId":"t-%d","payload":{"k":%d}}`, queue, k, k))
	}
	c.mustPost("/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`, http.StatusCreated)
	pop := func(wait bool) []crashDelivery {
		t.Helper()
		status, b, err := c.do(context.Background(), http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=billing&batch=100&wait=%v&timeout=30000", queue, wait), "")
		if err != nil || (status != http.StatusOK && status != http.StatusNoContent) {
			t.Fatalf("pop: %d %v %.200s", status, err, b)
		}
		if status == http.StatusNoContent {
			return nil
		}
		var res struct {
			Messages []crashDelivery `json:"messages"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("pop: %v %.200s", err, b)
		}
		return res.Messages
	}
	ack := func(ms []crashDelivery, status string) {
		t.Helper()
		var acks []map[string]string
		for _, m := range ms {
			acks = append(acks, map[string]string{"transactionId": m.TxID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": status, "error": "poison"})
		}
		body, _ := json.Marshal(map[string]any{"consumerGroup": "billing", "acknowledgments": acks})
		c.mustPost("/api/v1/ack/batch", string(body), http.StatusOK)
	}
	if ms := pop(false); len(ms) != total {
		t.Fatalf("popped %d, want %d", len(ms), total)
	} else {
		ack(ms, "dlq")
	}
	b := c.mustPost("/api/v1/dlq/replay", fmt.Sprintf(`{"filter":{"queue":%q},"canary":{"count":3,"settleSeconds":3600}}`, queue), http.StatusAccepted)
	var started struct {
		Job jobState `json:"job"`
	}
	if err := json.Unmarshal(b, &started); err != nil || started.Job.ID == 0 {
		t.Fatalf("replay answered %.300s (%v)", b, err)
	}
	id := started.Job.ID
	// The canary's copies reach the worker (a long-poll): the chunk that
	// pushed them committed the canary as settling. Not acked.
	canary := pop(true)
	if len(canary) != 3 {
		t.Fatalf("the canary delivered %d copies, want 3", len(canary))
	}
	before, cb := canaryOf(c, id)
	if cb.State != "settling" || len(cb.Copies) != 3 || before.Done != 3 {
		t.Fatalf("before the kill: %s, canary %+v", before, cb)
	}
	killServer(t, cmd)
	c.close()

	cmd, base = startBinary(t, bin, dbPath, "normal")
	defer killServer(t, cmd)
	c = &crashClient{t: t, base: base, http: &http.Client{Timeout: time.Minute}}
	after, ca := canaryOf(c, id)
	if after.State != "running" || after.Done != 3 || ca.State != "settling" || ca.Until != cb.Until {
		t.Fatalf("after the kill: %s, canary %+v (before: %+v)", after, ca, cb)
	}
	txids := func(cs canaryState) []string {
		var out []string
		for _, cp := range cs.Copies {
			out = append(out, cp.TransactionID)
		}
		slices.Sort(out)
		return out
	}
	var delivered []string
	for _, m := range canary {
		delivered = append(delivered, m.TxID)
	}
	slices.Sort(delivered)
	if !slices.Equal(txids(ca), txids(cb)) || !slices.Equal(txids(ca), delivered) {
		t.Fatalf("the canary's copies after the kill %v, before %v, delivered %v", txids(ca), txids(cb), delivered)
	}
	// Completed: the job goes on with the other 17 and finishes.
	ack(canary, "completed")
	var rest []crashDelivery
	for len(rest) < total-3 {
		ms := pop(true)
		if len(ms) == 0 {
			t.Fatalf("the rest never came: %d of %d", len(rest), total-3)
		}
		ack(ms, "completed")
		rest = append(rest, ms...)
	}
	// The job's last chunk, which finds nothing left, runs by itself:
	// the API has no long-poll of a job, so it is polled on a ticker up
	// to a deadline (as the other kill tests poll GET /jobs/:id).
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		j, cs := canaryOf(c, id)
		if j.State == "done" {
			if j.Done != total || j.Skipped != 0 || cs.State != "passed" {
				t.Fatalf("done: %s, canary %+v", j, cs)
			}
			break
		}
		if j.State != "running" {
			t.Fatalf("the job after the canary: %s, canary %+v", j, cs)
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("the job after the canary, a minute on: %s, canary %+v", j, cs)
		}
	}
	if left := deadLetters(c, queue); len(left) != 0 {
		t.Fatalf("%d dead letters left", len(left))
	}
}
