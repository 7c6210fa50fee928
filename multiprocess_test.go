package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// Several `lazarus serve` processes over one PostgreSQL database (issue
// 18, phase 3): they are one broker to their clients. These tests always
// run on PostgreSQL (a throwaway cluster, or LAZARUS_TEST_POSTGRES).

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	removeBinary()
	os.Exit(code)
}

// proc is one lazarus serve process of a test.
type proc struct {
	name string
	cmd  *exec.Cmd
	url  string
}

// startProcs starts n serve processes on the database dsn, one after the
// other (the first leads the background work, but tests ask lazarus_leading).
func startProcs(t *testing.T, bin, dsn string, n int) []*proc {
	t.Helper()
	ps := make([]*proc, n)
	for i := range ps {
		cmd, url := startBinary(t, bin, dsn, "full")
		ps[i] = &proc{name: string(rune('A' + i)), cmd: cmd, url: url}
	}
	return ps
}

// call sends a request with the admin token and returns the status and
// body; a transport error fails the test.
func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	resp, err := authed(method, url, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	return resp.StatusCode, b
}

func mustCall(t *testing.T, want int, method, url, body string) []byte {
	t.Helper()
	status, b := call(t, method, url, body)
	if status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, status, b, want)
	}
	return b
}

// metric reads one unlabelled gauge of a process's /metrics.
func metric(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	b := mustCall(t, http.StatusOK, http.MethodGet, p.url+"/metrics", "")
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		var v float64
		if n, _ := fmt.Sscanf(sc.Text(), name+" %g", &v); n == 1 {
			return v
		}
	}
	t.Fatalf("%s has no %s", p.name, name)
	return 0
}

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not waiting for one to happen by itself
	}
}

type popped struct {
	Messages []struct {
		TransactionID string          `json:"transactionId"`
		PartitionID   string          `json:"partitionId"`
		Partition     string          `json:"partition"`
		LeaseID       string          `json:"leaseId"`
		Data          json.RawMessage `json:"data"`
		Payload       json.RawMessage `json:"payload"`
	} `json:"messages"`
}

// drain pops every message of queue on p (autoAck) and counts how often
// each transactionId came.
func drain(t *testing.T, p *proc, queue string) map[string]int {
	t.Helper()
	count := map[string]int{}
	for {
		status, body := call(t, http.MethodGet, p.url+"/api/v1/pop/queue/"+queue+"?batch=1000&autoAck=true", "")
		if status == http.StatusNoContent {
			return count
		}
		var pop popped
		if status != http.StatusOK || json.Unmarshal(body, &pop) != nil {
			t.Fatalf("pop %s on %s: %d %s", queue, p.name, status, body)
		}
		for _, m := range pop.Messages {
			count[m.TransactionID]++
		}
	}
}

func pushItems(t *testing.T, p *proc, queue, partition string, txids ...string) {
	t.Helper()
	var items []string
	for _, id := range txids {
		items = append(items, fmt.Sprintf(`{"queue":%q,"partition":%q,"transactionId":%q,"payload":{"id":%q}}`, queue, partition, id, id))
	}
	mustCall(t, http.StatusCreated, http.MethodPost, p.url+"/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`)
}

// A push on A wakes a long-poll waiting on B (LISTEN/NOTIFY); a queue
// deleted on A is gone on B at once, its cached partitions included;
// pops of six workers over three processes hand each message to one
// worker, in order within its partition.
func TestProcessesAreOneBroker(t *testing.T) {
	dsn := pgtest.Database(t, "lazarus", db.Prepare)
	ps := startProcs(t, binary(t), dsn, 3)
	a, b, c := ps[0], ps[1], ps[2]

	t.Run("a push on A wakes a long-poll on B", func(t *testing.T) {
		mustCall(t, http.StatusOK, http.MethodPost, a.url+"/api/v1/configure", `{"queue":"wake","options":{}}`)
		type answer struct {
			status int
			body   []byte
		}
		got := make(chan answer, 1)
		go func() {
			resp, err := authed(http.MethodGet, b.url+"/api/v1/pop/queue/wake?wait=true&timeout=30000", "")
			if err != nil {
				got <- answer{status: -1, body: []byte(err.Error())}
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			got <- answer{resp.StatusCode, body}
		}()
		eventually(t, 10*time.Second, "B's pop waiting", func() bool { return metric(t, b, "lazarus_pops_waiting") == 1 })
		pushItems(t, a, "wake", "p", "w1")
		// Without news from A, B's pop would wait out its 30 s and answer 204.
		ans := <-got
		if ans.status != http.StatusOK || !strings.Contains(string(ans.body), `"w1"`) {
			t.Fatalf("B's long-poll: %d %s, want the message pushed on A", ans.status, ans.body)
		}
	})

	t.Run("a queue deleted on A is gone on B at once", func(t *testing.T) {
		pushItems(t, b, "gone", "p", "old-1", "old-2")
		// B has looked the queue and its partition up (its cache holds them).
		mustCall(t, http.StatusOK, http.MethodGet, b.url+"/api/v1/resources/queues/gone", "")
		mustCall(t, http.StatusOK, http.MethodDelete, a.url+"/api/v1/resources/queues/gone", "")
		if status, body := call(t, http.MethodGet, b.url+"/api/v1/resources/queues/gone", ""); status != http.StatusNotFound {
			t.Fatalf("B after A deleted the queue: %d %s, want 404", status, body)
		}
		// A push on B makes the queue again, with a partition of its own:
		// nothing goes into the removed one.
		pushItems(t, b, "gone", "p", "new-1")
		body := mustCall(t, http.StatusOK, http.MethodGet, c.url+"/api/v1/pop/queue/gone?batch=10", "")
		var pop popped
		if err := json.Unmarshal(body, &pop); err != nil {
			t.Fatal(err)
		}
		if len(pop.Messages) != 1 || pop.Messages[0].TransactionID != "new-1" {
			t.Fatalf("pop on C after the queue was made again: %s, want new-1 alone", body)
		}
	})

	t.Run("pops across processes hand each message out once, in order", func(t *testing.T) {
		const partitions, each = 6, 40
		for pi := range partitions {
			var ids []string
			for i := range each {
				ids = append(ids, fmt.Sprintf("p%d-%03d", pi, i))
			}
			pushItems(t, ps[pi%3], "spread", fmt.Sprintf("p%d", pi), ids...)
		}
		var mu sync.Mutex
		seen := map[string]string{} // txid -> worker
		last := map[string]string{} // partition -> last txid delivered
		var odd []string
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for w := range 6 {
			p := ps[w%3]
			worker := fmt.Sprintf("%s%d", p.name, w)
			wg.Go(func() {
				for ctx.Err() == nil {
					mu.Lock()
					done := len(seen) == partitions*each
					mu.Unlock()
					if done {
						return
					}
					status, body := call(t, http.MethodGet, p.url+"/api/v1/pop/queue/spread?batch=5", "")
					if status == http.StatusNoContent {
						continue
					}
					var pop popped
					if status != http.StatusOK || json.Unmarshal(body, &pop) != nil || len(pop.Messages) == 0 {
						mu.Lock()
						odd = append(odd, fmt.Sprintf("%s: pop %d %s", worker, status, body))
						mu.Unlock()
						return
					}
					var acks []string
					mu.Lock()
					for _, m := range pop.Messages {
						if prev, ok := seen[m.TransactionID]; ok {
							odd = append(odd, fmt.Sprintf("%s and %s both got %s", prev, worker, m.TransactionID))
						}
						seen[m.TransactionID] = worker
						part := m.TransactionID[:2]
						if l := last[part]; l != "" && l >= m.TransactionID {
							odd = append(odd, fmt.Sprintf("%s got %s after %s", worker, m.TransactionID, l))
						}
						last[part] = m.TransactionID
						acks = append(acks, fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"leaseId":%q,"status":"completed"}`, m.TransactionID, m.PartitionID, m.LeaseID))
					}
					mu.Unlock()
					if status, body := call(t, http.MethodPost, p.url+"/api/v1/ack/batch", `{"acknowledgments":[`+strings.Join(acks, ",")+`]}`); status != http.StatusOK {
						mu.Lock()
						odd = append(odd, fmt.Sprintf("%s: ack %d %s", worker, status, body))
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		if len(odd) > 0 || len(seen) != partitions*each {
			t.Fatalf("%d of %d delivered; %s", len(seen), partitions*each, strings.Join(odd, "; "))
		}
	})
}

// A kill -9 of one process loses nothing it answered: every push answered
// 201 by A before it died is there for B.
func TestKillOfOneProcessLosesNothingAnswered(t *testing.T) {
	dsn := pgtest.Database(t, "lazarus", db.Prepare)
	ps := startProcs(t, binary(t), dsn, 2)
	a, b := ps[0], ps[1]
	var mu sync.Mutex
	var answered []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%05d", w, i)
				resp, err := authed(http.MethodPost, a.url+"/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"kill","partition":"w%d","transactionId":%q,"payload":{"i":%d}}]}`, w, id, i))
				if err != nil {
					return // A is gone
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated {
					mu.Lock()
					answered = append(answered, id)
					mu.Unlock()
				}
			}
		})
	}
	eventually(t, 30*time.Second, "200 pushes answered", func() bool { mu.Lock(); defer mu.Unlock(); return len(answered) >= 200 })
	killServer(t, a.cmd)
	close(stop)
	wg.Wait()

	got := drain(t, b, "kill")
	var lost []string
	for _, id := range answered {
		if got[id] == 0 {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d pushes answered 201 by A are lost: %v", len(lost), len(answered), lost)
	}
}

// A bulk replay job survives the death of the process running it: the
// next process to lead resumes it, and every dead letter is replayed
// exactly once.
func TestJobSurvivesTheDeathOfItsRunner(t *testing.T) {
	dsn := pgtest.Database(t, "lazarus", db.Prepare)
	ps := startProcs(t, binary(t), dsn, 3)
	const n = 120
	a := ps[0]
	mustCall(t, http.StatusOK, http.MethodPost, a.url+"/api/v1/configure", `{"queue":"job","options":{"retryLimit":0,"deadLetterQueue":true}}`)
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("j-%03d", i))
	}
	pushItems(t, a, "job", "p", ids...)
	for filed := 0; filed < n; {
		var pop popped
		if err := json.Unmarshal(mustCall(t, http.StatusOK, http.MethodGet, a.url+"/api/v1/pop/queue/job?batch=50", ""), &pop); err != nil {
			t.Fatal(err)
		}
		var acks []string
		for _, m := range pop.Messages {
			acks = append(acks, fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"leaseId":%q,"status":"dlq","error":"boom"}`, m.TransactionID, m.PartitionID, m.LeaseID))
		}
		mustCall(t, http.StatusOK, http.MethodPost, a.url+"/api/v1/ack/batch", `{"acknowledgments":[`+strings.Join(acks, ",")+`]}`)
		filed += len(pop.Messages)
	}
	var leader *proc
	eventually(t, 15*time.Second, "a leader", func() bool {
		for _, p := range ps {
			if metric(t, p, "lazarus_leading") == 1 {
				leader = p
				return true
			}
		}
		return false
	})
	var others []*proc
	for _, p := range ps {
		if p != leader {
			others = append(others, p)
		}
	}
	// Started on a process that does not lead; 40 a second: three seconds.
	var started struct {
		Job struct {
			ID int64 `json:"id"`
		} `json:"job"`
	}
	if err := json.Unmarshal(mustCall(t, http.StatusAccepted, http.MethodPost, others[0].url+"/api/v1/dlq/replay", `{"filter":{"queue":"job"},"rate":40}`), &started); err != nil {
		t.Fatal(err)
	}
	jobURL := func(p *proc) string { return fmt.Sprintf("%s/api/v1/jobs/%d", p.url, started.Job.ID) }
	type jobReply struct {
		Job jobState `json:"job"`
	}
	var lastJob []byte // for the failure's message
	read := func(p *proc) jobReply {
		var j jobReply
		lastJob = mustCall(t, http.StatusOK, http.MethodGet, jobURL(p), "")
		if err := json.Unmarshal(lastJob, &j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	defer func() {
		if t.Failed() {
			t.Logf("the job as last read: %.600s", lastJob)
		}
	}()
	eventually(t, 30*time.Second, "the job under way", func() bool { d := read(others[0]).Job.Done; return d > 0 })
	if j := read(others[0]); j.Job.State != "running" || j.Job.Done >= int64(n) {
		t.Fatalf("before the kill the job is %+v, want running and not done", j.Job)
	}
	killServer(t, leader.cmd)
	eventually(t, 60*time.Second, "the job done by another process", func() bool { return read(others[1]).Job.State == "done" })
	if j := read(others[1]); j.Job.Done != int64(n) {
		t.Fatalf("the job after its runner died: %+v, want %d done", j.Job, n)
	}
	count := drain(t, others[1], "job")
	if len(count) != n {
		t.Fatalf("%d distinct copies replayed, want %d", len(count), n)
	}
	for id, k := range count {
		if k != 1 {
			t.Fatalf("%s replayed %d times, want once", id, k)
		}
	}
}
