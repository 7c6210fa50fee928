package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The campaign's knobs, from the environment (go tool task test:faults
// sets them for the long run).
const (
	envDuration   = "LAZARUS_FAULTS_DURATION"    // how long faults are injected (default shortRun)
	envSeed       = "LAZARUS_FAULTS_SEED"        // the nemesis's and clients' seed (default: the time)
	envPauseBound = "LAZARUS_FAULTS_PAUSE_BOUND" // the longest write wait allowed during a pause (default: measured, not checked)
	envReport     = "LAZARUS_FAULTS_REPORT"      // a file to write the run's report to
	envHistory    = "LAZARUS_FAULTS_HISTORY"     // a file to write the history to (JSON)
	envKinds      = "LAZARUS_FAULTS_KINDS"       // the kinds of fault, comma-separated (default: all, AllFaults)
)

// shortRun is how long go test injects faults when
// LAZARUS_FAULTS_DURATION is not set: about as long as every kind once
// takes (their mean lengths add up to about a minute; the nemesis
// injects each once in full whatever the duration), short enough that
// the whole test, the build of the binary included, takes 2½ to 5
// minutes on a loaded 2-core machine.
const shortRun = 60 * time.Second

func envDurationOr(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// TestFaultCampaign starts three processes on one PostgreSQL database,
// each behind a proxy, and one on SQLite; runs the clients while the
// nemesis injects faults; drains the queues once the faults are over;
// and checks the history. The short run (go test ./faults, in go tool
// task test) injects faults for shortRun, each kind once and some again;
// LAZARUS_FAULTS_DURATION=1h is the long run (go tool task test:faults),
// with pauses of up to 40 s among them.
// drainLimit is how long the workers may take to drain the queues once
// the faults are over (under a minute on a quiet machine).
const drainLimit = 5 * time.Minute

func TestFaultCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault campaign takes minutes: not under -short")
	}
	duration := envDurationOr(t, envDuration, shortRun)
	pauseBound := envDurationOr(t, envPauseBound, 0)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", envSeed, err)
		}
		seed = n
	}
	t.Logf("seed %d (%s=%d runs the same choices), faults for %s", seed, envSeed, seed, duration)
	began := time.Now()

	h := Start(t, 3)
	t.Logf("started in %s", time.Since(began).Round(time.Millisecond))
	hist := &History{}
	const leaseTime = 2
	options := map[string]any{"leaseTime": leaseTime, "retryLimit": 1, "retryDelay": 200}
	pg := &Workload{H: hist, Queue: "fq", Procs: h.PG, Partitions: 6, Groups: []string{"g1", "g2"}, Workers: 2, LeaseTime: leaseTime, PushGap: 30 * time.Millisecond, Seed: seed}
	lite := &Workload{H: hist, Queue: "sq", Procs: []*Proc{h.Lite}, Partitions: 3, Groups: []string{"g1", "g2"}, Workers: 1, LeaseTime: leaseTime, PushGap: 30 * time.Millisecond, Seed: seed + 1}
	cb := &Workload{H: hist, Queue: BreakerQueue, Procs: h.PG, Groups: []string{"cb"}, LeaseTime: leaseTime, Seed: seed + 2}
	ctx := context.Background()
	for _, w := range []*Workload{pg, lite} {
		if err := w.Configure(ctx, options); err != nil {
			t.Fatal(err)
		}
	}
	if err := cb.Configure(ctx, map[string]any{"leaseTime": leaseTime, "retryLimit": 0, "holdAfterFailures": breakerAfter, "holdProbeSeconds": 1}); err != nil {
		t.Fatal(err)
	}

	stop, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	drain := make(chan struct{})
	var clients sync.WaitGroup
	for _, w := range []*Workload{pg, lite} {
		clients.Go(func() { w.Run(stop, drain) })
	}
	clients.Go(func() { cb.Breaker(stop, drain) })
	for _, p := range h.PG {
		probe := &Workload{H: hist, Queue: "probe-" + p.Name, Procs: []*Proc{p}, PushGap: 100 * time.Millisecond, Seed: seed}
		probe.init()
		clients.Go(func() { probe.Probe(stop) })
	}
	nem := &Nemesis{H: h, Hist: hist, Rng: rand.New(rand.NewPCG(seed, seed>>1)), Lease: leaseTime * time.Second,
		LongPauses: duration >= 10*time.Minute, Log: t.Logf}
	if v := os.Getenv(envKinds); v != "" {
		nem.Kinds = strings.Split(v, ",")
	}
	nem.Run(stop)
	// Healed: every process up again, then the producers stop (stop is
	// done) and the workers drain the queues.
	for _, p := range h.All() {
		if err := p.WaitUp(3 * time.Minute); err != nil {
			h.Fatal(p, err)
		}
	}
	close(drain)
	// The queues drain within minutes of the faults' end; a broker that
	// stalls (a lock never granted, a message delivered for ever) fails
	// the run here rather than hanging it until the test binary's timeout.
	drained := make(chan struct{})
	go func() { clients.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainLimit):
		t.Fatalf("the clients had not drained the queues %s after the faults ended: a stalled broker; the processes' last errors:\n%s",
			drainLimit, strings.Join(h.ErrorLines(20), "\n"))
	}
	t.Logf("faults and drain over after %s", time.Since(began).Round(time.Millisecond))
	for _, p := range h.All() {
		if ends := p.SelfExits(); len(ends) > 0 {
			t.Errorf("%s ended by itself %d times, not killed (the run's logs are printed at its end): %s", p.Name, len(ends), strings.Join(ends, "; "))
		}
	}

	final := map[string]map[string]map[string]string{}
	for _, w := range []*Workload{pg, lite} {
		final[w.Queue] = map[string]map[string]string{}
		for _, g := range w.Groups {
			final[w.Queue][g] = listDLQ(t, w.Procs[0], w.Queue, g)
		}
	}
	ops, faults := hist.Snapshot()
	// The history is written where LAZARUS_FAULTS_HISTORY says, and
	// always into the run's directory, which a failed run keeps: an
	// anomaly seen once can then be read again (the lease overlap on
	// SQLite of docs/guarantees.md was seen once with no history kept).
	paths := []string{h.Path("history.json")}
	if path := os.Getenv(envHistory); path != "" {
		paths = append(paths, path)
	}
	if b, err := json.Marshal(map[string]any{"ops": ops, "faults": faults}); err != nil {
		t.Error(err)
	} else {
		for _, path := range paths {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	rep := Check(ops, faults, CheckConfig{
		Groups:     map[string][]string{pg.Queue: pg.Groups, lite.Queue: lite.Groups, cb.Queue: cb.Groups},
		LeaseTime:  leaseTime * time.Second,
		Skew:       nem.MaxClockOffset(),
		FinalDLQ:   final,
		PauseBound: pauseBound,
	})
	summary := fmt.Sprintf("fault campaign, seed %d, faults for %s, %s in all\n%s", seed, duration, time.Since(began).Round(time.Second), rep.Summary())
	for _, pw := range rep.PauseWaits {
		summary += fmt.Sprintf("\n  pause of %s (leader %v, %s): longest healthy write %s %s", pw.Fault.Proc, pw.Fault.Leader, pw.Fault.Detail, pw.Wait.Round(time.Millisecond), pw.Op)
	}
	t.Log(summary)
	if path := os.Getenv(envReport); path != "" {
		if err := os.WriteFile(path, []byte(summary+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
	if len(rep.Anomalies) > 0 {
		for _, l := range h.ErrorLines(40) {
			t.Log(l)
		}
		t.Errorf("%d anomalies (above)", len(rep.Anomalies))
	}
	if rep.Pushed == 0 || rep.Deliveries == 0 {
		t.Errorf("the clients did nothing: %d pushes, %d deliveries", rep.Pushed, rep.Deliveries)
	}
}

// listDLQ reads every dead letter of a queue's group: id → transactionId.
func listDLQ(t *testing.T, p *Proc, queue, group string) map[string]string {
	t.Helper()
	out := map[string]string{}
	w := &Workload{}
	w.init()
	for offset := 0; ; offset += 1000 {
		q := url.Values{"queue": {queue}, "consumerGroup": {group}, "limit": {"1000"}, "offset": {strconv.Itoa(offset)}}
		status, b, err := w.call(context.Background(), p, http.MethodGet, "/api/v1/dlq?"+q.Encode(), nil, time.Minute)
		var dl dlqList
		if err != nil || status != http.StatusOK || json.Unmarshal(b, &dl) != nil {
			t.Fatalf("list the dead letters of %s/%s: %d %s %v", queue, group, status, b, err)
		}
		for _, m := range dl.Messages {
			out[m.ID] = m.TransactionID
		}
		if len(dl.Messages) < 1000 {
			return out
		}
	}
}
