package main

// A replay job killed with SIGKILL part-way, with the real binary: after
// each restart the job resumes where its last committed chunk left it,
// and when it is done every dead-lettered message has exactly one copy,
// no dead letter is left, and the job counts each message once.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// jobCrashMessages is how many messages the job replays: a dozen chunks
// of the bulk replay's size.
const jobCrashMessages = 3000

// jobCrashKills is how many times the job is killed part-way.
const jobCrashKills = 2

// jobState is what the test reads of GET /api/v1/jobs/:id.
type jobState struct {
	ID      int64  `json:"id"`
	Kind    string `json:"kind"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
	Planned int64  `json:"planned"`
	Done    int64  `json:"done"`
	Skipped int64  `json:"skipped"`
	Failed  int64  `json:"failed"`
}

func (j jobState) String() string {
	return fmt.Sprintf("job #%d %s: %d of %d done, %d skipped, %d failed (%s)", j.ID, j.State, j.Done, j.Planned, j.Skipped, j.Failed, j.Reason)
}

// jobOf reads job id through the API; ok is false when the server did
// not answer (killed).
func jobOf(c *crashClient, id int64) (jobState, bool) {
	c.t.Helper()
	status, b, err := c.do(context.Background(), http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(id, 10), "")
	if err != nil {
		return jobState{}, false
	}
	var res struct {
		Job jobState `json:"job"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &res) != nil {
		c.t.Fatalf("GET job %d: %d %.300s", id, status, b)
	}
	return res.Job, true
}

func TestReplayJobSurvivesKill9(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dbPath := filepath.Join(t.TempDir(), "job.db")
	cmd, base := startBinary(t, bin, dbPath, "full")
	c := &crashClient{t: t, base: base, http: &http.Client{Timeout: time.Minute}}
	const queue = "jobcrash"
	parts := []string{"j0", "j1", "j2"}

	// 3,000 messages in three partitions, each dead-lettered by billing.
	payloads := map[string]string{} // message id -> payload
	for i := 0; i < jobCrashMessages; i += 500 {
		var items []string
		for k := i; k < i+500; k++ {
			items = append(items, fmt.Sprintf(`{"queue":%q,"partition":%q,"transactionId":"t-%d","payload":{"k":%d}}`, queue, parts[k%len(parts)], k, k))
		}
		var res []struct {
			MessageID string `json:"message_id"`
			TxID      string `json:"transaction_id"`
		}
		if err := json.Unmarshal(c.mustPost("/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`, http.StatusCreated), &res); err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			payloads[r.MessageID] = fmt.Sprintf(`{"k":%s}`, strings.TrimPrefix(r.TxID, "t-"))
		}
	}
	if len(payloads) != jobCrashMessages {
		t.Fatalf("%d messages pushed", len(payloads))
	}
	filed := 0
	for _, p := range parts {
		for {
			status, b, err := c.do(context.Background(), http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?consumerGroup=billing&batch=1000", queue, p), "")
			if err != nil {
				t.Fatal(err)
			}
			if status == http.StatusNoContent {
				break
			}
			var res struct {
				Messages []crashDelivery `json:"messages"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("pop: %v %.200s", err, b)
			}
			var acks []map[string]string
			for _, m := range res.Messages {
				acks = append(acks, map[string]string{"transactionId": m.TxID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": "poison " + m.TxID})
			}
			body, _ := json.Marshal(map[string]any{"consumerGroup": "billing", "acknowledgments": acks})
			c.mustPost("/api/v1/ack/batch", string(body), http.StatusOK)
			filed += len(acks)
		}
	}
	if n := len(deadLetters(c, queue)); n != jobCrashMessages || filed != jobCrashMessages {
		t.Fatalf("%d dead letters filed (%d acks), want %d", n, filed, jobCrashMessages)
	}

	// The replay by filter starts a job and answers at once.
	status, b, err := c.do(context.Background(), http.MethodPost, "/api/v1/dlq/replay", fmt.Sprintf(`{"filter":{"queue":%q}}`, queue))
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("replay: %d %v %.300s, want 202 with the job", status, err, b)
	}
	var started struct {
		Job jobState `json:"job"`
	}
	if err := json.Unmarshal(b, &started); err != nil || started.Job.ID == 0 || started.Job.Kind != "replay" {
		t.Fatalf("replay answered %.300s (%v): no job", b, err)
	}
	id := started.Job.ID
	if started.Job.Planned != jobCrashMessages {
		t.Fatalf("the job plans %d, want %d", started.Job.Planned, jobCrashMessages)
	}

	// Killed while part-way, twice: as soon as its progress moves past
	// what the last start had committed (a chunk committed), while later
	// chunks are running.
	var last int64
	for kill := 1; kill <= jobCrashKills; kill++ {
		deadline := time.Now().Add(30 * time.Second)
		var seen jobState
		for {
			j, ok := jobOf(c, id)
			if !ok {
				t.Fatal("the server stopped answering")
			}
			if j.State != "running" {
				t.Fatalf("kill %d: the job ended before it could be killed part-way: %s", kill, j)
			}
			if j.Done > last && j.Done < j.Planned {
				seen = j
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: no progress past %d in 30 s (not resumed?): %s", kill, last, j)
			}
			time.Sleep(time.Millisecond)
		}
		killServer(t, cmd)
		c.close()
		t.Logf("kill %d: SIGKILL with %d of %d done", kill, seen.Done, seen.Planned)

		cmd, base = startBinary(t, bin, dbPath, "full")
		c = &crashClient{t: t, base: base, http: &http.Client{Timeout: time.Minute}}
		j, ok := jobOf(c, id)
		if !ok {
			t.Fatal("the restarted server does not answer")
		}
		// What was committed stays done; what the kill cut off is not.
		if j.Done < seen.Done || j.Skipped != 0 || j.Failed != 0 {
			t.Fatalf("after kill %d: %s (%d was seen done before it)", kill, j, seen.Done)
		}
		t.Logf("restart %d: %s", kill, j)
		last = j.Done
	}

	// Resumed at the start, and done.
	deadline := time.Now().Add(2 * time.Minute)
	var j jobState
	for {
		var ok bool
		if j, ok = jobOf(c, id); !ok {
			t.Fatal("the server stopped answering")
		}
		if j.State != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not finish after the restart: %s", j)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if j.State != "done" || j.Done != jobCrashMessages || j.Skipped != 0 || j.Failed != 0 {
		t.Fatalf("after the restarts: %s, want done with %d done", j, jobCrashMessages)
	}
	if left := deadLetters(c, queue); len(left) != 0 {
		t.Fatalf("%d dead letters left after the job, e.g. %s", len(left), left[0].ID)
	}

	// Every message of the queue, read by a group of its own: one copy
	// dlq:<id> of each dead-lettered message, with its payload.
	copies := map[string]int{}
	for _, p := range parts {
		for {
			status, b, err := c.do(context.Background(), http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?consumerGroup=audit&batch=1000&autoAck=true", queue, p), "")
			if err != nil {
				t.Fatal(err)
			}
			if status == http.StatusNoContent {
				break
			}
			var res struct {
				Messages []crashDelivery `json:"messages"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("pop: %v %.200s", err, b)
			}
			for _, m := range res.Messages {
				orig, isCopy := strings.CutPrefix(m.TxID, "dlq:")
				if !isCopy {
					continue
				}
				want, ok := payloads[orig]
				if !ok {
					t.Fatalf("a copy %s of a message that was never pushed", m.TxID)
				}
				if !jsonEqual(m.Data, want) {
					t.Fatalf("copy %s: payload %s, the original %s", m.TxID, m.Data, want)
				}
				copies[orig]++
			}
		}
	}
	var bad []string
	for id := range payloads {
		if copies[id] != 1 {
			bad = append(bad, fmt.Sprintf("%s: %d copies", id, copies[id]))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d messages do not have exactly one copy, e.g. %s", len(bad), jobCrashMessages, strings.Join(bad[:min(5, len(bad))], "; "))
	}
	t.Logf("%s; %d copies, one each; no dead letter left", j, len(copies))
}
