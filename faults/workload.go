package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Workload is the clients of one queue: a producer a partition (pushes
// one at a time, so that each partition's push order is the order the
// producer sent them in), workers of each consumer group, and an
// operator (dead letters replayed and deleted one by one and in jobs,
// holds, error groups' states). Every request goes to one of Procs at
// random, and is recorded in H.
type Workload struct {
	H          *History
	Queue      string
	Procs      []*Proc
	Partitions int
	Groups     []string
	Workers    int           // per group
	LeaseTime  int           // seconds, the queue's leaseTime
	PushGap    time.Duration // between a producer's pushes
	Seed       uint64

	client *http.Client
	mu     sync.Mutex
	rng    *rand.Rand
}

// Fate is what group does with the message of transactionID every time
// it gets it: most complete, some go to the dead letters at once (dlq),
// some fail every try (failed: they become dead letters once their
// retries are spent). Each message has a dead-letter fate in one group
// at most, so a replay (which removes the message's dead letters in
// every group) never takes one group's dead letter from under another.
func Fate(transactionID, group string, groups []string) string {
	h := fnv.New32a()
	h.Write([]byte(transactionID))
	r := h.Sum32() % 25
	for i, g := range groups {
		if g != group {
			continue
		}
		switch r {
		case uint32(2 * i):
			return "dlq"
		case uint32(2*i + 1):
			return "failed"
		}
	}
	return "completed"
}

// errorTexts are the errors workers send: a few error groups.
var errorTexts = []string{"poison pill", "timeout calling billing", "card declined: insufficient funds"}

func (w *Workload) init() {
	w.client = &http.Client{Timeout: 15 * time.Second}
	w.rng = rand.New(rand.NewPCG(w.Seed, w.Seed^0x9e3779b97f4a7c15))
}

func (w *Workload) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.IntN(n)
}

func (w *Workload) proc() *Proc { return w.Procs[w.intn(len(w.Procs))] }

// call sends one request and reads its answer; status 0 when none came.
func (w *Workload) call(ctx context.Context, p *Proc, method, path string, body any, timeout time.Duration) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
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

// do records one request as op (sent to a process at random).
func (w *Workload) do(ctx context.Context, op *Op, method, path string, body any, timeout time.Duration) []byte {
	p := w.proc()
	op.Proc, op.Queue = p.Name, w.Queue
	w.H.Begin(op)
	status, b, err := w.call(ctx, p, method, path, body, timeout)
	op.Status = status
	if err != nil {
		op.Err = err.Error()
	} else if status >= 300 {
		op.Err = string(b[:min(len(b), 300)])
	}
	w.H.Finish(op)
	return b
}

// Configure makes the queue (retrying until a process answers).
func (w *Workload) Configure(ctx context.Context, options map[string]any) error {
	w.init()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		status, b, err := w.call(ctx, w.proc(), http.MethodPost, "/api/v1/configure", map[string]any{"queue": w.Queue, "options": options}, 15*time.Second)
		if status == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("configure %s: %d %s %v", w.Queue, status, b, err)
		}
		time.Sleep(200 * time.Millisecond) // a process restarting: try again
	}
}

// Run runs the producers and the operator until stop is done, and the
// workers until they have drained the queue after it (drain is closed
// when the faults are over and the producers have stopped).
func (w *Workload) Run(stop context.Context, drain <-chan struct{}) {
	var producers, others sync.WaitGroup
	for i := range w.Partitions {
		producers.Go(func() { w.produce(stop, fmt.Sprintf("p%d", i)) })
	}
	others.Go(func() { w.operate(stop) })
	var workers sync.WaitGroup
	for _, g := range w.Groups {
		for i := range w.Workers {
			workers.Go(func() { w.consume(drain, g, fmt.Sprintf("%s/%s-w%d", w.Queue, g, i)) })
		}
	}
	producers.Wait()
	others.Wait()
	workers.Wait()
}

// produce pushes one message at a time to partition, each until it is
// answered 201 (sent again, to any process, while the outcome is
// unknown: no answer, or a 5xx), for as long as stop is not done.
func (w *Workload) produce(stop context.Context, partition string) {
	client := w.Queue + "/" + partition
	for seq := 0; stop.Err() == nil; seq++ {
		tx := fmt.Sprintf("%s-%s-%d", w.Queue, partition, seq)
		body := map[string]any{"items": []map[string]any{{"queue": w.Queue, "partition": partition, "transactionId": tx,
			"payload": map[string]any{"seq": seq, "partition": partition}}}}
		giveUp := time.Now().Add(3 * time.Minute)
		for {
			op := &Op{Client: client, Kind: OpPush, TransactionID: tx, Partition: partition, Seq: seq}
			b := w.do(context.Background(), op, http.MethodPost, "/api/v1/push", body, 15*time.Second)
			if op.Status == http.StatusCreated {
				var items []struct {
					Status    string `json:"status"`
					MessageID string `json:"message_id"`
				}
				if json.Unmarshal(b, &items) == nil && len(items) == 1 {
					op.MessageID, op.Duplicate = items[0].MessageID, items[0].Status == "duplicate"
				}
				break
			}
			if op.Status >= 400 && op.Status < 500 && op.Status != http.StatusTooManyRequests {
				break // refused: a bug the checker reports
			}
			if time.Now().After(giveUp) {
				break
			}
			time.Sleep(time.Duration(50+w.intn(200)) * time.Millisecond) // backoff before sending again
		}
		time.Sleep(w.PushGap)
	}
}

type popAnswer struct {
	Messages []struct {
		ID            string `json:"id"`
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		Partition     string `json:"partition"`
		LeaseID       string `json:"leaseId"`
		RetryCount    int    `json:"retryCount"`
	} `json:"messages"`
}

// consume pops and acks for group until drain is closed and the queue
// has stayed empty for the group over several long-polls.
func (w *Workload) consume(drain <-chan struct{}, group, client string) {
	empty := 0
	for {
		draining := false
		select {
		case <-drain:
			draining = true
		default:
		}
		if draining && empty >= 2*w.LeaseTime+4 {
			return
		}
		op := &Op{Client: client, Kind: OpPop, Group: group}
		q := url.Values{"consumerGroup": {group}, "batch": {"4"}, "wait": {"true"}, "timeout": {"1000"}}
		b := w.do(context.Background(), op, http.MethodGet, "/api/v1/pop/queue/"+w.Queue+"?"+q.Encode(), nil, 12*time.Second)
		if op.Status != http.StatusOK {
			if op.Status == http.StatusNoContent {
				empty++
			} else {
				time.Sleep(100 * time.Millisecond) // a process down: try another
			}
			continue
		}
		empty = 0
		var pop popAnswer
		if err := json.Unmarshal(b, &pop); err != nil {
			op.Err = "unreadable pop answer: " + err.Error()
			continue
		}
		for _, m := range pop.Messages {
			op.Deliveries = append(op.Deliveries, Delivery{TransactionID: m.TransactionID, MessageID: m.ID, Partition: m.Partition, LeaseID: m.LeaseID, RetryCount: m.RetryCount})
		}
		// A worker that dies with its lease: the messages come back once
		// it runs out.
		if !draining && w.intn(30) == 0 {
			continue
		}
		var acks []map[string]any
		var items []AckItem
		for _, m := range pop.Messages {
			fate := Fate(m.TransactionID, group, w.Groups)
			a := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": fate}
			if fate != "completed" {
				a["error"] = errorTexts[int(fnv32(m.TransactionID))%len(errorTexts)]
			}
			acks = append(acks, a)
			items = append(items, AckItem{TransactionID: m.TransactionID, Partition: m.Partition, LeaseID: m.LeaseID, Status: fate})
		}
		ack := &Op{Client: client, Kind: OpAck, Group: group, Acks: items}
		ab := w.do(context.Background(), ack, http.MethodPost, "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks}, 12*time.Second)
		if ack.Status == http.StatusOK {
			var results []struct {
				Success bool `json:"success"`
			}
			if json.Unmarshal(ab, &results) == nil && len(results) == len(ack.Acks) {
				for i := range results {
					ack.Acks[i].Success = results[i].Success
				}
			}
		}
	}
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

type dlqList struct {
	Messages []struct {
		ID            string `json:"id"`
		TransactionID string `json:"transactionId"`
		ConsumerGroup string `json:"consumerGroup"`
		Fingerprint   string `json:"fingerprint"`
	} `json:"messages"`
	Total int `json:"total"`
}

// operate is the operator: every round it lists a group's dead letters
// and replays or deletes a few (each sent again until its outcome is
// known); some rounds start a bulk replay job of a few ids, hold the
// other group for a while, or change an error group's state.
func (w *Workload) operate(stop context.Context) {
	client := w.Queue + "/operator"
	for round := 0; stop.Err() == nil; round++ {
		time.Sleep(time.Duration(800+w.intn(800)) * time.Millisecond) // the operator's pace
		group := w.Groups[round%len(w.Groups)]
		list := &Op{Client: client, Kind: OpList, Group: group}
		q := url.Values{"queue": {w.Queue}, "consumerGroup": {group}, "limit": {"20"}}
		b := w.do(context.Background(), list, http.MethodGet, "/api/v1/dlq?"+q.Encode(), nil, 15*time.Second)
		var dl dlqList
		if list.Status != http.StatusOK || json.Unmarshal(b, &dl) != nil || len(dl.Messages) == 0 {
			continue
		}
		switch {
		case round%7 == 3 && len(dl.Messages) >= 2:
			var ids []string
			for _, m := range dl.Messages[:min(len(dl.Messages), 5)] {
				ids = append(ids, m.ID)
			}
			w.job(client, group, ids, round%14 == 10)
		case round%9 == 5:
			w.hold(stop, client, w.Groups[(round+1)%len(w.Groups)])
		case round%5 == 1 && dl.Messages[0].Fingerprint != "":
			w.groupState(client, group, dl.Messages[0].Fingerprint, round)
		default:
			for _, m := range dl.Messages[:min(len(dl.Messages), 2)] {
				if w.intn(10) < 7 {
					w.once(client, group, OpReplay, m.ID)
				} else {
					w.once(client, group, OpDelete, m.ID)
				}
			}
		}
	}
}

// once replays or deletes one dead letter, sending it again while its
// outcome is unknown (a replay sent again is always safe: SPEC 4).
func (w *Workload) once(client, group string, kind Kind, id string) {
	for try := 0; try < 8; try++ {
		op := &Op{Client: client, Kind: kind, Group: group, DLQID: id}
		var b []byte
		if kind == OpReplay {
			b = w.do(context.Background(), op, http.MethodPost, "/api/v1/dlq/"+url.PathEscape(id)+"/replay", nil, 15*time.Second)
		} else {
			b = w.do(context.Background(), op, http.MethodDelete, "/api/v1/dlq/"+url.PathEscape(id), nil, 15*time.Second)
		}
		var ans struct {
			Result         string   `json:"result"`
			TransactionID  string   `json:"transactionId"`
			ConsumerGroups []string `json:"consumerGroups"`
		}
		_ = json.Unmarshal(b, &ans)
		op.Result = ans.Result
		if kind == OpReplay && ans.Result == "moved" {
			op.TransactionID = ans.TransactionID
			op.Comment = fmt.Sprint(ans.ConsumerGroups)
		}
		if op.Known() && op.Status < 500 {
			return
		}
		time.Sleep(200 * time.Millisecond) // before sending it again
	}
}

// job replays (or deletes) ids in a bulk job and waits for its end.
func (w *Workload) job(client, group string, ids []string, remove bool) {
	op := &Op{Client: client, Kind: OpJob, Group: group, DLQIDs: ids, Comment: "replay"}
	path := "/api/v1/dlq/replay"
	if remove {
		op.Comment, path = "delete", "/api/v1/dlq/delete"
	}
	b := w.do(context.Background(), op, http.MethodPost, path, map[string]any{"ids": ids, "wait": true}, 30*time.Second)
	var ans struct {
		Job struct {
			ID      int    `json:"id"`
			State   string `json:"state"`
			Planned int    `json:"planned"`
			Done    int    `json:"done"`
			Skipped int    `json:"skipped"`
			Failed  int    `json:"failed"`
			Results struct {
				Moved     int `json:"moved"`
				Duplicate int `json:"duplicate"`
				Gone      int `json:"gone"`
			} `json:"results"`
		} `json:"job"`
	}
	if json.Unmarshal(b, &ans) == nil && ans.Job.ID != 0 {
		op.JobID = strconv.Itoa(ans.Job.ID)
		op.Result = ans.Job.State
		op.Moved, op.Dup, op.Gone, op.Done = ans.Job.Results.Moved, ans.Job.Results.Duplicate, ans.Job.Results.Gone, ans.Job.Done
		op.Skipped, op.Failed, op.Planned = ans.Job.Skipped, ans.Job.Failed, ans.Job.Planned
	}
}

// hold holds group for a while (2 s), then releases it, each sent again
// until answered.
func (w *Workload) hold(stop context.Context, client, group string) {
	var id string
	for try := 0; try < 8 && id == ""; try++ {
		op := &Op{Client: client, Kind: OpHold, Group: group}
		b := w.do(context.Background(), op, http.MethodPost, "/api/v1/holds", map[string]any{"queue": w.Queue, "consumerGroup": group, "reason": "fault campaign"}, 15*time.Second)
		var ans struct {
			ID int `json:"id"`
		}
		if op.OK() && json.Unmarshal(b, &ans) == nil && ans.ID != 0 {
			id = strconv.Itoa(ans.ID)
			op.HoldID = id
		}
	}
	if id == "" {
		return
	}
	select {
	case <-time.After(2 * time.Second): // how long the hold lasts
	case <-stop.Done():
	}
	for try := 0; try < 40; try++ {
		op := &Op{Client: client, Kind: OpRelease, Group: group, HoldID: id}
		w.do(context.Background(), op, http.MethodDelete, "/api/v1/holds/"+id, nil, 15*time.Second)
		if op.Status == http.StatusOK || op.Status == http.StatusNotFound {
			return
		}
		time.Sleep(250 * time.Millisecond) // before sending it again
	}
}

// groupState moves an error group to acknowledged, or back to open.
func (w *Workload) groupState(client, group, fingerprint string, round int) {
	state := "acknowledged"
	if round%2 == 0 {
		state = "open"
	}
	op := &Op{Client: client, Kind: OpGroup, Group: group, Comment: state}
	body := map[string]any{"queue": w.Queue, "consumerGroup": group, "state": state}
	if state == "acknowledged" {
		body["owner"] = "admin"
	}
	b := w.do(context.Background(), op, http.MethodPost, "/api/v1/error-groups/"+url.PathEscape(fingerprint)+"/state", body, 15*time.Second)
	var ans struct {
		ErrorGroups []struct {
			State string `json:"state"`
		} `json:"errorGroups"`
	}
	if json.Unmarshal(b, &ans) == nil && len(ans.ErrorGroups) > 0 {
		op.Result = ans.ErrorGroups[0].State
	}
}

// Breaker is the circuit breaker's client, on a queue of its own with
// holdAfterFailures set (SPEC 6): while stop is not done every message
// it gets fails, so the group holds itself; then every message
// completes, so a probe ends the hold. It pushes one message each round,
// pops and acks it, and reads the queue's holds (recorded as OpBreaker:
// "held" while a breaker's hold is there, else "free"). It returns once
// drain is closed and the hold has ended (or after 3 minutes).
func (w *Workload) Breaker(stop context.Context, drain <-chan struct{}) {
	client := w.Queue + "/breaker"
	group := w.Groups[0]
	var giveUp time.Time
	for seq := 0; ; seq++ {
		failing := stop.Err() == nil
		select {
		case <-drain:
			if giveUp.IsZero() {
				giveUp = time.Now().Add(3 * time.Minute)
			}
		default:
		}
		if !giveUp.IsZero() && time.Now().After(giveUp) {
			return
		}
		if failing {
			tx := fmt.Sprintf("%s-p-%d", w.Queue, seq)
			op := &Op{Client: client, Kind: OpPush, TransactionID: tx, Partition: "p", Seq: seq}
			b := w.do(context.Background(), op, http.MethodPost, "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": w.Queue, "partition": "p", "transactionId": tx, "payload": seq}}}, 15*time.Second)
			var items []struct {
				Status    string `json:"status"`
				MessageID string `json:"message_id"`
			}
			if op.Status == http.StatusCreated && json.Unmarshal(b, &items) == nil && len(items) == 1 {
				op.MessageID, op.Duplicate = items[0].MessageID, items[0].Status == "duplicate"
			} else {
				seq-- // the same transactionId again next round: its outcome is unknown
			}
		}
		pop := &Op{Client: client, Kind: OpPop, Group: group}
		batch := "1"
		if !failing {
			batch = "20" // draining what piled up while it held
		}
		q := url.Values{"consumerGroup": {group}, "batch": {batch}, "wait": {"true"}, "timeout": {"1000"}}
		b := w.do(context.Background(), pop, http.MethodGet, "/api/v1/pop/queue/"+w.Queue+"?"+q.Encode(), nil, 12*time.Second)
		var ans popAnswer
		if pop.Status == http.StatusOK && json.Unmarshal(b, &ans) == nil {
			status := "failed"
			if !failing {
				status = "completed"
			}
			var acks []map[string]any
			for _, m := range ans.Messages {
				pop.Deliveries = append(pop.Deliveries, Delivery{TransactionID: m.TransactionID, MessageID: m.ID, Partition: m.Partition, LeaseID: m.LeaseID, RetryCount: m.RetryCount})
				acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": status, "error": "downstream is down"})
			}
			if len(acks) > 0 {
				ack := &Op{Client: client, Kind: OpAck, Group: group}
				for _, m := range ans.Messages {
					ack.Acks = append(ack.Acks, AckItem{TransactionID: m.TransactionID, Partition: m.Partition, LeaseID: m.LeaseID, Status: status})
				}
				ab := w.do(context.Background(), ack, http.MethodPost, "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks}, 12*time.Second)
				var results []struct {
					Success bool `json:"success"`
				}
				if ack.Status == http.StatusOK && json.Unmarshal(ab, &results) == nil && len(results) == len(ack.Acks) {
					for i := range results {
						ack.Acks[i].Success = results[i].Success
					}
				}
			}
		}
		obs := &Op{Client: client, Kind: OpBreaker, Group: group}
		hb := w.do(context.Background(), obs, http.MethodGet, "/api/v1/holds?"+url.Values{"queue": {w.Queue}}.Encode(), nil, 12*time.Second)
		var holds struct {
			Holds []struct {
				Kind string `json:"kind"`
			} `json:"holds"`
		}
		if obs.Status == http.StatusOK && json.Unmarshal(hb, &holds) == nil {
			obs.Result = "free"
			for _, h := range holds.Holds {
				if h.Kind == "breaker" {
					obs.Result = "held"
				}
			}
			if !giveUp.IsZero() && obs.Result == "free" && !failing && pop.Status == http.StatusNoContent {
				return // the hold ended and the queue is drained
			}
		}
	}
}

// Probe pushes to its queue on its one process every PushGap until stop
// is done: steady writes on each process, so that the wait of a healthy
// process's writes during another's pause is measured even when the
// other clients are all waiting on the paused one.
func (w *Workload) Probe(stop context.Context) { w.produce(stop, "p") }
