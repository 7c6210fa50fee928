package main

// The crash test: the real binary under concurrent producers and consumers
// is killed with SIGKILL at random moments and restarted on the same
// database file, again and again; then what the clients saw is checked
// against the guarantees of the README (at-least-once, order per partition
// and group, dead letters intact, bulk replays exactly once or not at all).
//
// LAZARUS_CRASH_CYCLES (default 5; `go tool task test:crash` runs 20) and
// LAZARUS_CRASH_SEED (default: the clock) tune it; the seed is logged.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// What the crash test runs: two queues (one of 4 partitions), three groups.
var (
	crashQueues = map[string][]string{
		"orders": {"o0", "o1", "o2", "o3"},
		"mail":   {"m0", "m1"},
	}
	crashGroups = []string{"billing", "analytics", "notifier"}
)

// crashOptions: one retry 50 ms after a failure, then the dead letters;
// leases short enough that those of a killed worker run out soon.
const crashOptions = `{"leaseTime":1,"retryLimit":1,"retryDelay":50}`

func crashEnvInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestCrashCyclesKeepEveryGuarantee(t *testing.T) {
	t.Parallel()
	crashCycles(t, crashOptions, true)
}

// crashRetentionOptions: crashOptions, and messages every group settled
// deleted a second after (completedRetentionSeconds), with maintenance
// every second: the sweeps run, and are killed, among the cycles.
const crashRetentionOptions = `{"leaseTime":1,"retryLimit":1,"retryDelay":50,"completedRetentionSeconds":1}`

// The crash cycles with retention sweeping what every group settled
// while the kills go on: no message a group has not settled is lost, and
// the dead letters keep their payloads and ids once their messages went.
func TestCrashCyclesWithRetentionSweeps(t *testing.T) {
	t.Parallel()
	crashCycles(t, crashRetentionOptions, false, "--maintenance-every", "1s")
}

// crashCycles runs the crash cycles with queues configured with options
// and the binary started with args, then the checks; replays: the
// interrupted bulk replays too.
func crashCycles(t *testing.T, options string, replays bool, args ...string) {
	cycles := crashEnvInt("LAZARUS_CRASH_CYCLES", 5)
	seed := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("LAZARUS_CRASH_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (LAZARUS_CRASH_SEED=%d), %d cycles (LAZARUS_CRASH_CYCLES)", seed, seed, cycles)
	rng := rand.New(rand.NewPCG(uint64(seed), 0xc4a5))
	start := time.Now()

	bin := binary(t)
	dbPath := filepath.Join(t.TempDir(), "crash.db")
	h := newCrashHarness(t, seed)

	for cycle := 1; cycle <= cycles; cycle++ {
		cmd, base := startBinary(t, bin, dbPath, "full", args...)
		c := h.client(base)
		if cycle == 1 {
			for q := range crashQueues {
				c.mustPost("/api/v1/configure", fmt.Sprintf(`{"queue":%q,"options":%s}`, q, options), http.StatusOK)
			}
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		h.runProducers(ctx, &wg, c, cycle)
		h.runConsumers(ctx, &wg, c, 3, cycle)
		life := time.Duration(300+rng.IntN(1200)) * time.Millisecond
		time.Sleep(life)
		killServer(t, cmd)
		stop()
		wg.Wait()
		c.close()
		t.Logf("cycle %d: killed after %s; %s", cycle, life, h.summary())
	}

	// The last restart: what was pushed without an answer is pushed again,
	// then every group reads everything, and the checks run.
	cmd, base := startBinary(t, bin, dbPath, "full", args...)
	c := h.client(base)
	h.flushPending(c)
	drainStart := time.Now()
	h.drain(c)
	t.Logf("drained in %s; %s", time.Since(drainStart).Round(time.Millisecond), h.summary())
	h.checkDelivery()
	h.checkOrder()
	if !replays {
		// Everything is settled now: the sweeps (every second, a second
		// after the last settlement, a slot late at most) remove it all
		// within a few seconds, and the dead letters stay whole.
		h.checkSwept(c)
		h.checkDeadLetters(c)
		c.close()
		return
	}
	h.checkDeadLetters(c)

	rounds := max(2, cycles/4)
	c.close()
	h.checkInterruptedReplays(bin, dbPath, cmd, base, rounds, rng)
	t.Logf("%d cycles and %d interrupted replays in %s", cycles, rounds, time.Since(start).Round(100*time.Millisecond))
}

// checkSwept waits (10 s at most) until the queues keep no message: all
// were settled by every group, and completedRetentionSeconds removed
// them.
func (h *crashHarness) checkSwept(c *crashClient) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		for q := range crashQueues {
			var info struct {
				Messages int `json:"messages"`
			}
			if err := json.Unmarshal(c.mustDo(http.MethodGet, "/api/v1/resources/queues/"+q, "", http.StatusOK), &info); err != nil {
				h.t.Fatal(err)
			}
			left += info.Messages
		}
		if left == 0 {
			h.t.Logf("retention: every settled message swept")
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("seed %d: %d settled messages still kept 10 s after the last settlement (completedRetentionSeconds 1)", h.seed, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killServer kills the server with SIGKILL: no shutdown of any kind.
func killServer(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	_ = cmd.Wait()
}

// ---- the clients' record ----

// crashItem is one pushed message, as its producer made it.
type crashItem struct {
	queue, partition, txid string
	index                  int    // its place in the partition: producers push one partition each, in order
	payload                string // compact JSON, as the API gives it back
	acked                  bool   // answered 201
}

// crashPop is one pop's answer.
type crashPop struct {
	group     string
	lane      string // queue/partition
	first     int    // the first message's index in the partition
	sent, got time.Time
}

// crashSettle is an ack answered as settling a message: completed, or
// dead-lettered.
type crashSettle struct {
	index     int
	completed bool
	sent, got time.Time
}

type crashHarness struct {
	t    *testing.T
	seed int64

	mu      sync.Mutex
	items   map[string]*crashItem           // by txid (unique across partitions)
	lanes   map[string][]*crashItem         // queue/partition -> items in push order
	pending map[string][]*crashItem         // per partition: the batch sent without an answer
	seen    map[string]map[string]bool      // group -> txids delivered
	firstAt map[string]map[string]time.Time // group -> txid -> first answer that delivered it
	pops    map[string][]crashPop           // group + " " + lane
	settles map[string][]crashSettle        // group + " " + lane
	retried map[string]bool                 // group + " " + txid: acked retry once
	odd     []string                        // answers no guarantee allows
	counts  map[string]int                  // for the log
	idSeq   map[string]int                  // per partition: the next index
	msgIDs  map[string]string               // txid -> message id
	// replayed: per replay round's queue, its messages' ids and payloads.
	replayed map[string]map[string]string
}

func newCrashHarness(t *testing.T, seed int64) *crashHarness {
	return &crashHarness{t: t, seed: seed,
		items: map[string]*crashItem{}, lanes: map[string][]*crashItem{}, pending: map[string][]*crashItem{},
		seen: map[string]map[string]bool{}, firstAt: map[string]map[string]time.Time{},
		pops: map[string][]crashPop{}, settles: map[string][]crashSettle{}, retried: map[string]bool{},
		counts: map[string]int{}, idSeq: map[string]int{}, msgIDs: map[string]string{}}
}

func (h *crashHarness) oddf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.odd) < 50 {
		h.odd = append(h.odd, fmt.Sprintf(format, args...))
	}
}

func (h *crashHarness) count(k string, n int) {
	h.mu.Lock()
	h.counts[k] += n
	h.mu.Unlock()
}

func (h *crashHarness) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, h.counts[k]))
	}
	return strings.Join(parts, ", ")
}

// decision is what a group's workers do with a message, the same at every
// delivery: most complete, some fail (twice: into the dead letters with
// one retry spent), some go to the dead letters at once, some are retried
// once first.
func (h *crashHarness) decision(group, txid string) string {
	f := fnv.New32a()
	fmt.Fprintf(f, "%d/%s/%s", h.seed, group, txid)
	switch x := f.Sum32() % 100; {
	case x < 7:
		return "failed"
	case x < 11:
		return "dlq"
	case x < 16:
		return "retry"
	}
	return "completed"
}

// errorText is the error a group's worker sends with a failing ack.
func errorText(group, txid, status string) string {
	return fmt.Sprintf("%s of %s by %s: \"<b>boom</b>\"\n\tat worker.go:42", status, txid, group)
}

// ---- HTTP ----

type crashClient struct {
	t    *testing.T
	base string
	http *http.Client
}

func (h *crashHarness) client(base string) *crashClient {
	// A killed server resets its connections at once; the timeout is for a
	// hung one, and long enough for a loaded machine under SyncFull.
	return &crashClient{t: h.t, base: base, http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
}

func (c *crashClient) close() { c.http.CloseIdleConnections() }

// do sends a request with the admin token; err is a transport error (the
// server is gone).
func (c *crashClient) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+killToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

func (c *crashClient) mustDo(method, path, body string, want int) []byte {
	c.t.Helper()
	status, b, err := c.do(context.Background(), method, path, body)
	if err != nil || status != want {
		c.t.Fatalf("%s %s: %d %v %.300s, want %d", method, path, status, err, b, want)
	}
	return b
}

func (c *crashClient) mustPost(path, body string, want int) []byte {
	c.t.Helper()
	return c.mustDo(http.MethodPost, path, body, want)
}

// ---- producers ----

// runProducers starts one producer per partition: batches of 1-4 items,
// each batch sent until it is answered (after a kill, by the next cycle's
// producer), so that a partition's push order is the order its producer
// made the items in.
func (h *crashHarness) runProducers(ctx context.Context, wg *sync.WaitGroup, c *crashClient, cycle int) {
	for q, parts := range crashQueues {
		for i, p := range parts {
			rng := rand.New(rand.NewPCG(uint64(h.seed), uint64(cycle)<<32|uint64(len(q))<<16|uint64(i)))
			wg.Go(func() {
				for ctx.Err() == nil {
					batch := h.nextBatch(q, p, rng)
					if !h.push(ctx, c, batch) {
						return
					}
					time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
				}
			})
		}
	}
}

// nextBatch is the partition's unanswered batch, or a new one.
func (h *crashHarness) nextBatch(q, p string, rng *rand.Rand) []*crashItem {
	h.mu.Lock()
	defer h.mu.Unlock()
	lane := q + "/" + p
	if b := h.pending[lane]; len(b) > 0 {
		return b
	}
	var b []*crashItem
	for range 1 + rng.IntN(4) {
		i := h.idSeq[lane]
		h.idSeq[lane]++
		txid := fmt.Sprintf("%s-%d", p, i)
		it := &crashItem{queue: q, partition: p, txid: txid, index: i,
			payload: fmt.Sprintf(`{"p":%q,"i":%d,"note":"ünïcode \u003c%d\u003e","n":[1,2.5,null,true]}`, p, i, rng.IntN(1000))}
		h.items[txid] = it
		h.lanes[lane] = append(h.lanes[lane], it)
		b = append(b, it)
	}
	h.pending[lane] = b
	return b
}

// push sends a batch; it returns false when the server is gone (the batch
// stays pending).
func (h *crashHarness) push(ctx context.Context, c *crashClient, batch []*crashItem) bool {
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for i, it := range batch {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"queue":%q,"partition":%q,"transactionId":%q,"payload":%s}`, it.queue, it.partition, it.txid, it.payload)
	}
	body.WriteString(`]}`)
	status, b, err := c.do(ctx, http.MethodPost, "/api/v1/push", body.String())
	if err != nil {
		h.count("push unanswered", 1)
		return false
	}
	if status != http.StatusCreated {
		h.oddf("push %s: %d %.200s", batch[0].txid, status, b)
		return false
	}
	var res []struct {
		Status    string `json:"status"`
		MessageID string `json:"message_id"`
		TxID      string `json:"transaction_id"`
	}
	if err := json.Unmarshal(b, &res); err != nil || len(res) != len(batch) {
		h.oddf("push %s: %v %.200s", batch[0].txid, err, b)
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, it := range batch {
		if res[i].TxID != it.txid || (res[i].Status != "queued" && res[i].Status != "duplicate") {
			h.odd = append(h.odd, fmt.Sprintf("push %s: answered %+v", it.txid, res[i]))
		}
		if res[i].Status == "duplicate" {
			h.counts["push duplicate (resent after a kill)"]++
		}
		it.acked = true
		h.msgIDs[it.txid] = res[i].MessageID
	}
	h.counts["pushed"] += len(batch)
	delete(h.pending, batch[0].queue+"/"+batch[0].partition)
	return true
}

// flushPending pushes the batches a kill left unanswered.
func (h *crashHarness) flushPending(c *crashClient) {
	h.mu.Lock()
	var batches [][]*crashItem
	for _, b := range h.pending {
		batches = append(batches, b)
	}
	h.mu.Unlock()
	for _, b := range batches {
		if !h.push(context.Background(), c, b) {
			h.t.Fatalf("pushing %s again after the last restart failed: %v", b[0].txid, h.odd)
		}
	}
}

// ---- consumers ----

type crashDelivery struct {
	ID          string          `json:"id"`
	TxID        string          `json:"transactionId"`
	PartitionID string          `json:"partitionId"`
	Partition   string          `json:"partition"`
	Queue       string          `json:"queue"`
	LeaseID     string          `json:"leaseId"`
	Data        json.RawMessage `json:"data"`
	RetryCount  int             `json:"retryCount"`
}

// runConsumers starts workers per group; each pops a batch of 1-5 from a
// queue and acks it as the group's decisions say: the completed ones in
// order, up to and with the first that is not completed (what is behind
// it comes back anyway).
func (h *crashHarness) runConsumers(ctx context.Context, wg *sync.WaitGroup, c *crashClient, perGroup, cycle int) {
	for gi, g := range crashGroups {
		for w := range perGroup {
			rng := rand.New(rand.NewPCG(uint64(h.seed)+1, uint64(cycle)<<32|uint64(gi)<<16|uint64(w)))
			wg.Go(func() {
				for ctx.Err() == nil {
					q := "orders"
					if rng.IntN(3) == 0 {
						q = "mail"
					}
					switch h.consume(ctx, c, g, q, 1+rng.IntN(8)) {
					case consumeGone:
						return
					case consumeEmpty:
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
		}
	}
}

const (
	consumeGot = iota
	consumeEmpty
	consumeGone
)

func (h *crashHarness) consume(ctx context.Context, c *crashClient, group, queue string, batch int) int {
	sent := time.Now()
	status, b, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=%s&batch=%d", queue, group, batch), "")
	got := time.Now()
	if err != nil {
		return consumeGone
	}
	if status == http.StatusNoContent {
		return consumeEmpty
	}
	var res struct {
		Messages []crashDelivery `json:"messages"`
		LeaseID  string          `json:"leaseId"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &res) != nil || len(res.Messages) == 0 {
		h.oddf("pop %s %s: %d %.200s", group, queue, status, b)
		return consumeGone
	}
	ms := res.Messages
	lane := ms[0].Queue + "/" + ms[0].Partition
	h.mu.Lock()
	first := -1
	for j, m := range ms {
		it, ok := h.items[m.TxID]
		switch {
		case !ok || it.queue != m.Queue || it.partition != m.Partition:
			h.odd = append(h.odd, fmt.Sprintf("pop %s: %s of %s/%s was never pushed there", group, m.TxID, m.Queue, m.Partition))
		case !jsonEqual(m.Data, it.payload):
			h.odd = append(h.odd, fmt.Sprintf("pop %s: %s has payload %s, pushed %s", group, m.TxID, m.Data, it.payload))
		case m.Queue+"/"+m.Partition != lane:
			h.odd = append(h.odd, fmt.Sprintf("pop %s: one batch from two partitions: %s and %s", group, lane, m.Partition))
		case j == 0:
			first = it.index
		case it.index != first+j:
			h.odd = append(h.odd, fmt.Sprintf("pop %s %s: batch %v is not consecutive in push order", group, lane, txids(ms)))
		}
		if h.seen[group] == nil {
			h.seen[group], h.firstAt[group] = map[string]bool{}, map[string]time.Time{}
		}
		if !h.seen[group][m.TxID] {
			h.seen[group][m.TxID], h.firstAt[group][m.TxID] = true, got
		}
	}
	h.pops[group+" "+lane] = append(h.pops[group+" "+lane], crashPop{group: group, lane: lane, first: first, sent: sent, got: got})
	h.counts["delivered"] += len(ms)
	h.mu.Unlock()
	// Ack in order, as the group decides for each message. A failure (with
	// or without a retry left) or a retry ends the lease (what is behind
	// comes back anyway, and its acks would change nothing): the acks stop
	// there, as docs/concepts.md says a worker may.
	if h.ackSome(ctx, c, group, lane, ms) {
		return consumeGone
	}
	return consumeGot
}

type crashAck struct {
	TxID        string `json:"transactionId"`
	PartitionID string `json:"partitionId"`
	LeaseID     string `json:"leaseId"`
	Status      string `json:"status"`
	Error       string `json:"error,omitempty"`
}

// ackSome acks the leading messages of ms up to and with the first that
// is not completed or dlq; it says whether the server is gone.
func (h *crashHarness) ackSome(ctx context.Context, c *crashClient, group, lane string, ms []crashDelivery) (gone bool) {
	var acks []crashAck
	h.mu.Lock()
	for _, m := range ms {
		st := h.decision(group, m.TxID)
		if st == "retry" {
			if h.retried[group+" "+m.TxID] {
				st = "completed"
			} else {
				h.retried[group+" "+m.TxID] = true
			}
		}
		a := crashAck{TxID: m.TxID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: st}
		if st == "failed" || st == "dlq" {
			a.Error = errorText(group, m.TxID, st)
		}
		acks = append(acks, a)
		if st == "failed" || st == "retry" {
			break
		}
	}
	h.mu.Unlock()

	body, _ := json.Marshal(map[string]any{"consumerGroup": group, "acknowledgments": acks})
	sent := time.Now()
	status, b, err := c.do(ctx, http.MethodPost, "/api/v1/ack/batch", string(body))
	got := time.Now()
	if err != nil {
		h.count("ack unanswered", 1)
		return true
	}
	var results []struct {
		TxID    string `json:"transactionId"`
		Success bool   `json:"success"`
		DLQ     bool   `json:"dlq"`
		Error   string `json:"error"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &results) != nil || len(results) != len(acks) {
		h.oddf("ack %s %s: %d %.300s", group, lane, status, b)
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	key := group + " " + lane
	for i, r := range results {
		a := acks[i]
		if !r.Success {
			h.counts["ack refused (lease ran out)"]++
			return false
		}
		switch {
		case a.Status == "completed":
			h.settles[key] = append(h.settles[key], crashSettle{index: h.items[a.TxID].index, completed: true, sent: sent, got: got})
			h.counts["completed"]++
		case r.DLQ:
			h.settles[key] = append(h.settles[key], crashSettle{index: h.items[a.TxID].index, sent: sent, got: got})
			h.counts["dead-lettered"]++
		case a.Status == "dlq":
			h.odd = append(h.odd, fmt.Sprintf("ack %s %s dlq: answered without dlq: %+v", group, a.TxID, r))
		}
	}
	return false
}

func txids(ms []crashDelivery) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.TxID)
	}
	return out
}

// jsonEqual reports whether a is the JSON text b, compacted.
func jsonEqual(a json.RawMessage, b string) bool {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(b)); err != nil {
		return false
	}
	return bytes.Equal(a, buf.Bytes())
}

// lagOf returns each group's lag in a queue.
func lagOf(c *crashClient, queue string) map[string]int64 {
	var q struct {
		Groups []struct {
			Name string `json:"name"`
			Lag  int64  `json:"lag"`
		} `json:"consumerGroups"`
	}
	b := c.mustDo(http.MethodGet, "/api/v1/resources/queues/"+queue, "", http.StatusOK)
	if err := json.Unmarshal(b, &q); err != nil {
		c.t.Fatalf("queue %s: %v", queue, err)
	}
	out := map[string]int64{}
	for _, g := range q.Groups {
		out[g.Name] = g.Lag
	}
	return out
}

// drain has the groups read every queue until nothing is left (the
// leases of killed workers run out, retry delays end), with more workers
// than the cycles had.
func (h *crashHarness) drain(c *crashClient) {
	ctx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	var wg sync.WaitGroup
	h.runConsumers(ctx, &wg, c, 3, 0)
	defer wg.Wait()
	defer stop()
	for {
		left := 0
		for q := range crashQueues {
			lag := lagOf(c, q)
			for _, g := range crashGroups {
				n, ok := lag[g]
				if !ok {
					n = 1 // the group has not read the queue yet
				}
				left += int(n)
			}
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			h.mu.Lock()
			odd := slices.Clone(h.odd)
			h.mu.Unlock()
			h.t.Errorf("drain: %d messages still unsettled after 2 minutes; %s; odd answers: %v", left, h.summary(), odd)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ---- checks ----

func (h *crashHarness) failOdd() {
	h.t.Helper()
	if len(h.odd) > 0 {
		h.t.Fatalf("seed %d: answers no guarantee allows:\n%s", h.seed, strings.Join(h.odd, "\n"))
	}
}

// checkDelivery: every push answered 201 was delivered to every group.
func (h *crashHarness) checkDelivery() {
	h.t.Helper()
	h.failOdd()
	var missing []string
	n := 0
	for _, it := range h.items {
		if !it.acked {
			missing = append(missing, "unanswered push "+it.txid)
			continue
		}
		n++
		for _, g := range crashGroups {
			if !h.seen[g][it.txid] {
				missing = append(missing, g+" never got "+it.txid)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		h.t.Fatalf("seed %d: at-least-once broken: %d of %d × %d deliveries missing, e.g. %v", h.seed, len(missing), n, len(crashGroups), missing[:min(20, len(missing))])
	}
	h.t.Logf("at-least-once: all %d pushes answered 201 were delivered to each of the %d groups", n, len(crashGroups))
}

// checkOrder checks, per (partition, group), from the times at which the
// clients sent requests and got answers (so that no interleaving of the
// workers can fake a violation):
//   - a message was only delivered once every message pushed ahead of it
//     had been delivered (and so could have been settled) before;
//   - a message settled (completed or dead-lettered) is never delivered
//     again, nor any message ahead of it;
//   - completions happen in push order.
func (h *crashHarness) checkOrder() {
	h.t.Helper()
	var bad []string
	checked := 0
	for key, pops := range h.pops {
		group, lane, _ := strings.Cut(key, " ")
		items := h.lanes[lane]
		// first[i]: the earliest answer that delivered message i to the group.
		first := make([]time.Time, len(items))
		for i, it := range items {
			first[i] = h.firstAt[group][it.txid]
		}
		// latest[k]: the latest of first[0..k-1] (zero when one is missing).
		latest := make([]time.Time, len(items)+1)
		ok := make([]bool, len(items)+1)
		ok[0] = true
		for i := range items {
			ok[i+1] = ok[i] && !first[i].IsZero()
			latest[i+1] = latest[i]
			if first[i].After(latest[i+1]) {
				latest[i+1] = first[i]
			}
		}
		settles := slices.Clone(h.settles[key])
		sort.Slice(settles, func(a, b int) bool { return settles[a].got.Before(settles[b].got) })
		for _, p := range pops {
			checked++
			if p.first < 0 {
				continue
			}
			if !ok[p.first] || !latest[p.first].Before(p.got) {
				bad = append(bad, fmt.Sprintf("%s %s: %s delivered before a message pushed ahead of it had been", group, lane, items[p.first].txid))
			}
			for _, s := range settles {
				if !s.got.Before(p.sent) {
					break
				}
				if s.index >= p.first {
					bad = append(bad, fmt.Sprintf("%s %s: %s delivered again after %s was settled", group, lane, items[p.first].txid, items[s.index].txid))
					break
				}
			}
		}
		var done []crashSettle
		for _, s := range settles {
			if s.completed {
				done = append(done, s)
			}
		}
		sort.Slice(done, func(a, b int) bool { return done[a].index < done[b].index })
		var maxSent time.Time
		for i, s := range done {
			if i > 0 && s.got.Before(maxSent) {
				bad = append(bad, fmt.Sprintf("%s %s: %s was completed before a message pushed ahead of it", group, lane, items[s.index].txid))
			}
			if s.sent.After(maxSent) {
				maxSent = s.sent
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		h.t.Fatalf("seed %d: order broken (%d):\n%s", h.seed, len(bad), strings.Join(bad[:min(30, len(bad))], "\n"))
	}
	h.t.Logf("order: %d pops checked against every settlement of their partition and group", checked)
}

type crashDLQEntry struct {
	ID            string          `json:"id"`
	TxID          string          `json:"transactionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  string          `json:"errorMessage"`
	RetryCount    int             `json:"retryCount"`
	Data          json.RawMessage `json:"data"`
}

// deadLetters lists every dead letter of a queue.
func deadLetters(c *crashClient, queue string) []crashDLQEntry {
	var out []crashDLQEntry
	for offset := 0; ; offset += 1000 {
		var page struct {
			Messages []crashDLQEntry `json:"messages"`
			Total    int             `json:"total"`
		}
		b := c.mustDo(http.MethodGet, fmt.Sprintf("/api/v1/dlq?queue=%s&limit=1000&offset=%d", url.QueryEscape(queue), offset), "", http.StatusOK)
		if err := json.Unmarshal(b, &page); err != nil {
			c.t.Fatalf("dlq: %v", err)
		}
		out = append(out, page.Messages...)
		if len(page.Messages) < 1000 {
			return out
		}
	}
}

// checkDeadLetters: the dead letters are exactly the messages each group
// gave up on, each once, with the payload pushed, the error sent and the
// retries spent.
func (h *crashHarness) checkDeadLetters(c *crashClient) {
	h.t.Helper()
	var bad []string
	got := map[string]bool{}
	n := 0
	for q := range crashQueues {
		for _, d := range deadLetters(c, q) {
			n++
			key := d.ConsumerGroup + " " + d.TxID
			it, ok := h.items[d.TxID]
			st := h.decision(d.ConsumerGroup, d.TxID)
			wantRetries := map[string]int{"failed": 1, "dlq": 0}[st]
			switch {
			case got[key]:
				bad = append(bad, "two dead letters of "+key)
			case !ok || it.queue != d.Queue || it.partition != d.Partition:
				bad = append(bad, fmt.Sprintf("dead letter %s of %s/%s was never pushed there", key, d.Queue, d.Partition))
			case st != "failed" && st != "dlq":
				bad = append(bad, fmt.Sprintf("dead letter %s: the group %s it", key, map[string]string{"completed": "completed", "retry": "retried and completed"}[st]))
			case !jsonEqual(d.Data, it.payload):
				bad = append(bad, fmt.Sprintf("dead letter %s: payload %s, pushed %s", key, d.Data, it.payload))
			case d.ErrorMessage != errorText(d.ConsumerGroup, d.TxID, st):
				bad = append(bad, fmt.Sprintf("dead letter %s: error %q, sent %q", key, d.ErrorMessage, errorText(d.ConsumerGroup, d.TxID, st)))
			case d.RetryCount != wantRetries:
				bad = append(bad, fmt.Sprintf("dead letter %s: retryCount %d, want %d", key, d.RetryCount, wantRetries))
			case d.ID != h.msgIDs[d.TxID]:
				bad = append(bad, fmt.Sprintf("dead letter %s: id %s, the push said %s", key, d.ID, h.msgIDs[d.TxID]))
			}
			got[key] = true
		}
	}
	want := 0
	for _, it := range h.items {
		for _, g := range crashGroups {
			if st := h.decision(g, it.txid); st == "failed" || st == "dlq" {
				want++
				if !got[g+" "+it.txid] {
					bad = append(bad, fmt.Sprintf("%s gave up on %s, but it is not among the dead letters", g, it.txid))
				}
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		h.t.Fatalf("seed %d: dead letters wrong (%d):\n%s", h.seed, len(bad), strings.Join(bad[:min(30, len(bad))], "\n"))
	}
	h.t.Logf("dead letters: all %d there once, with payload, error and retries (%d expected)", n, want)
}

// ---- interrupted bulk replays ----

// replayMessages is how many messages each replay round dead-letters (in
// two partitions and two groups) and replays in one bulk call: a few
// transactions of the bulk replay's size.
const replayMessages = 2000

// checkInterruptedReplays makes dead letters in two groups and replays
// them all with one bulk call (by filter), killed part-way; after a
// restart each message must be replayed once or not at all: either its two
// dead letters are there and no copy, or no dead letter and exactly one
// copy dlq:<id>. The replay sent again then finishes the job. The kill is
// aimed: once the dead letters are seen going (a chunk committed), after
// a random 0-200 ms more: inside one of the next chunks' transactions,
// or (rarely) after the last.
func (h *crashHarness) checkInterruptedReplays(bin, dbPath string, cmd *exec.Cmd, base string, rounds int, rng *rand.Rand) {
	t := h.t
	c := h.client(base)
	partial := 0
	for r := 1; r <= rounds; r++ {
		queue := fmt.Sprintf("replay-%d", r)
		extra := time.Duration(rng.IntN(200)) * time.Millisecond
		var seen int
		h.replayRound(c, queue, func(answered <-chan struct{}) {
			// The dead letters' count, read while the replay runs (reads do
			// not wait for the writer).
			deadline := time.After(30 * time.Second)
		poll:
			for {
				select {
				case <-answered:
					t.Logf("the replay of %s was answered before the kill", queue)
					break poll
				case <-deadline:
					break poll
				default:
				}
				_, b, err := c.do(context.Background(), http.MethodGet, "/api/v1/dlq?limit=1&queue="+queue, "")
				var page struct {
					Total int `json:"total"`
				}
				if err == nil && json.Unmarshal(b, &page) == nil && page.Total < 2*replayMessages {
					seen = page.Total
					time.Sleep(extra)
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			killServer(t, cmd)
		})
		c.close()
		cmd, base = startBinary(t, bin, dbPath, "full")
		c = h.client(base)
		// The job the kill cut off resumes by itself at the start; what
		// it had committed stays (each chunk with its progress), and it
		// finishes the rest. Checked once it has: a check of the dead
		// letters and then of the copies while it runs would see it move.
		resumed := waitNoRunningJobs(t, c)
		done, left := h.checkReplayState(c, queue)
		if done > 0 && left > 0 {
			partial++
		}
		if resumed && left != 0 {
			t.Fatalf("round %d: the resumed job left %d messages unreplayed", r, left)
		}
		t.Logf("replay round %d: killed %s after %d of %d dead letters were seen left: %d messages replayed, %d not",
			r, extra, seen, 2*replayMessages, done, left)
		c.mustPost("/api/v1/dlq/replay", fmt.Sprintf(`{"filter":{"queue":%q},"wait":true}`, queue), http.StatusOK)
		if done, left := h.checkReplayState(c, queue); left != 0 || done != replayMessages {
			t.Fatalf("round %d, after the replay was called again: %d replayed, %d not", r, done, left)
		}
	}
	t.Logf("interrupted replays: %d of %d stopped part-way (the others before or after all of it)", partial, rounds)
	c.close()
}

// replayRound pushes replayMessages messages to queue, has two groups
// give up on all of them, and replays them by filter; interrupt runs while
// the replay is in flight (and kills the server), told when it is
// answered.
func (h *crashHarness) replayRound(c *crashClient, queue string, interrupt func(answered <-chan struct{})) {
	t := h.t
	parts := []string{"r0", "r1"}
	h.mu.Lock()
	if h.replayed == nil {
		h.replayed = map[string]map[string]string{}
	}
	ids := map[string]string{} // message id -> payload
	h.replayed[queue] = ids
	h.mu.Unlock()
	for _, p := range parts {
		for start := 0; start < replayMessages/len(parts); start += 200 {
			var items []string
			for i := start; i < start+200; i++ {
				items = append(items, fmt.Sprintf(`{"queue":%q,"partition":%q,"transactionId":"%s-%d","payload":{"round":%q,"i":%d}}`, queue, p, p, i, queue, i))
			}
			b := c.mustPost("/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`, http.StatusCreated)
			var res []struct {
				MessageID string `json:"message_id"`
				TxID      string `json:"transaction_id"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				i, _ := strconv.Atoi(r.TxID[strings.IndexByte(r.TxID, '-')+1:])
				ids[r.MessageID] = fmt.Sprintf(`{"round":%q,"i":%d}`, queue, i)
			}
		}
	}
	for _, g := range []string{"ra", "rb"} {
		for _, p := range parts {
			b := c.mustDo(http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?consumerGroup=%s&batch=1000", queue, p, g), "", http.StatusOK)
			var res struct {
				Messages []crashDelivery `json:"messages"`
			}
			if err := json.Unmarshal(b, &res); err != nil || len(res.Messages) != replayMessages/len(parts) {
				t.Fatalf("pop %s %s: %v, %d messages", queue, p, err, len(res.Messages))
			}
			var acks []map[string]string
			for _, m := range res.Messages {
				acks = append(acks, map[string]string{"transactionId": m.TxID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": "poison " + m.TxID})
			}
			body, _ := json.Marshal(map[string]any{"consumerGroup": g, "acknowledgments": acks})
			c.mustPost("/api/v1/ack/batch", string(body), http.StatusOK)
		}
	}
	answered := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		status, b, err := c.do(context.Background(), http.MethodPost, "/api/v1/dlq/replay", fmt.Sprintf(`{"filter":{"queue":%q},"wait":true}`, queue))
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("%d %s", status, b)
		}
		answered <- err
		close(done)
	}()
	interrupt(done)
	select {
	case err := <-answered:
		if err != nil && !isGone(err) {
			t.Fatalf("replay: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the replay was not answered, nor cut off by the kill, within 15s")
	}
}

// waitNoRunningJobs waits until the server runs no job (at most 30 s),
// and reports whether one was running when it was asked first.
func waitNoRunningJobs(t *testing.T, c *crashClient) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for first := true; ; first = false {
		status, b, err := c.do(context.Background(), http.MethodGet, "/api/v1/jobs?state=running", "")
		var res struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		if err != nil || status != http.StatusOK || json.Unmarshal(b, &res) != nil {
			t.Fatalf("running jobs: %d %v %.200s", status, err, b)
		}
		if len(res.Jobs) == 0 {
			return !first
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still running after 30 s: %.300s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// isGone reports whether err is a transport error of a killed server.
func isGone(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}

var auditGroup int

// checkReplayState counts a round's messages that were replayed (no dead
// letter, one copy) and not (both dead letters, no copy), and fails the
// test on anything else: a dead letter left in one group only, two
// copies, a copy and a dead letter, a copy that lost its payload.
func (h *crashHarness) checkReplayState(c *crashClient, queue string) (done, left int) {
	t := h.t
	h.mu.Lock()
	ids := h.replayed[queue]
	h.mu.Unlock()
	dead := map[string]int{}
	for _, d := range deadLetters(c, queue) {
		dead[d.ID]++
		if _, ok := ids[d.ID]; !ok {
			t.Fatalf("%s: a dead letter of %s (%s), which was never pushed there", queue, d.ID, d.TxID)
		}
	}
	// Every message of the queue, read by a group of its own.
	auditGroup++
	group := fmt.Sprintf("audit-%d", auditGroup)
	copies := map[string]int{}
	for _, p := range []string{"r0", "r1"} {
		for {
			status, b, err := c.do(context.Background(), http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?consumerGroup=%s&batch=1000&autoAck=true", queue, p, group), "")
			if err != nil || status == http.StatusNoContent {
				if err != nil {
					t.Fatalf("pop %s: %v", queue, err)
				}
				break
			}
			var res struct {
				Messages []crashDelivery `json:"messages"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("pop %s: %v %.200s", queue, err, b)
			}
			for _, m := range res.Messages {
				id, isCopy := strings.CutPrefix(m.TxID, "dlq:")
				if !isCopy {
					continue
				}
				payload, ok := ids[id]
				if !ok {
					t.Fatalf("%s: a copy %s of a message that was never pushed there", queue, m.TxID)
				}
				if !jsonEqual(m.Data, payload) {
					t.Fatalf("%s: the copy %s has payload %s, the original %s", queue, m.TxID, m.Data, payload)
				}
				copies[id]++
			}
		}
	}
	for id := range ids {
		switch {
		case copies[id] == 1 && dead[id] == 0:
			done++
		case copies[id] == 0 && dead[id] == 2:
			left++
		default:
			t.Fatalf("seed %d: %s: message %s is half replayed: %d copies, %d dead letters (want 1 and 0, or 0 and 2)", h.seed, queue, id, copies[id], dead[id])
		}
	}
	return done, left
}
