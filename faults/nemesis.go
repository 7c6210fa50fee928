package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Nemesis injects one fault at a time, each healed before the next,
// until its context is done.
type Nemesis struct {
	H     *Harness
	Hist  *History
	Rng   *rand.Rand
	Lease time.Duration // the queues' leaseTime
	// LongPauses adds pauses of 15 to 40 s (the long run).
	LongPauses bool
	// Kinds, when not empty, is the faults to draw from (else all).
	Kinds []string
	Log   func(format string, args ...any)

	mu        sync.Mutex
	maxOffset time.Duration
	pausedAt  time.Time
	aux       *Workload // the requests of pause-filing, not recorded
}

// AllFaults is every kind of fault the nemesis knows.
var AllFaults = []string{"kill", "kill-leader", "pause", "pause-leader", "pause-filing", "pgcrash", "partition", "cut", "latency", "clock", "lite-kill", "lite-pause", "lite-clock"}

// MaxClockOffset is the largest clock offset of any process so far.
func (n *Nemesis) MaxClockOffset() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.maxOffset
}

func (n *Nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.Rng.Int64N(int64(hi-lo)+1))
}

// Run injects faults until ctx is done and each kind was injected once,
// then heals whatever is left.
func (n *Nemesis) Run(ctx context.Context) {
	kinds := n.Kinds
	if len(kinds) == 0 {
		kinds = AllFaults
	}
	for i := 0; i < len(kinds) || ctx.Err() == nil; i++ {
		// Every kind once in turn first, each in full even when ctx
		// ends before (a short run meets each), then at random.
		kind := kinds[i%len(kinds)]
		fctx := context.WithoutCancel(ctx)
		if i >= len(kinds) {
			kind = kinds[n.Rng.IntN(len(kinds))]
			fctx = ctx
		}
		n.inject(fctx, kind)
		if i+1 >= len(kinds) && ctx.Err() != nil {
			break
		}
		select {
		case <-fctx.Done():
		case <-time.After(n.quiet()): // between faults
		}
	}
}

// quiet is the time between two faults: shorter in a short run, so
// that it meets every kind.
func (n *Nemesis) quiet() time.Duration {
	if n.LongPauses {
		return n.between(time.Second, 3*time.Second)
	}
	return n.between(300*time.Millisecond, time.Second)
}

// sleep waits d, or less when ctx ends (a fault is then healed early).
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (n *Nemesis) pick() *Proc { return n.H.PG[n.Rng.IntN(len(n.H.PG))] }

func (n *Nemesis) inject(ctx context.Context, kind string) {
	f := Fault{Kind: kind, Start: time.Now()}
	var p *Proc
	switch {
	case strings.HasSuffix(kind, "-leader"):
		p = n.H.Leader()
		if p == nil {
			p = n.pick()
		}
		f.Leader = true
		f.Kind = strings.TrimSuffix(kind, "-leader")
	case strings.HasPrefix(kind, "lite-"):
		p = n.H.Lite
		f.Kind = strings.TrimPrefix(kind, "lite-")
	case kind != "pgcrash":
		p = n.pick()
		f.Leader = p.Leading()
	}
	if p != nil {
		f.Proc = p.Name
	}
	f.Start = time.Now()
	switch f.Kind {
	case "kill":
		p.Kill()
		sleep(ctx, n.between(200*time.Millisecond, 2*time.Second))
		if err := p.Start(); err != nil {
			f.Detail = "restart failed: " + err.Error()
		}
	case "pause":
		d := n.between(n.Lease+time.Second, n.Lease+4*time.Second)
		if n.LongPauses && n.Rng.IntN(3) == 0 {
			d = n.between(15*time.Second, 40*time.Second)
		}
		f.Detail = d.Round(time.Millisecond).String()
		p.Pause()
		f.Start = time.Now()
		sleep(context.Background(), d) // a pause is never cut short
		p.Resume()
	case "pause-filing":
		f.Detail = n.pauseFiling(p)
		f.Start = n.pausedAt
		if strings.HasPrefix(f.Detail, "could not set up") {
			f.Kind = "pause-filing not set up" // no pause: not measured
		}
	case "pgcrash":
		if err := n.H.Cluster.Crash(); err != nil {
			f.Detail = err.Error()
			break
		}
		sleep(ctx, n.between(500*time.Millisecond, 3*time.Second))
		if err := n.H.Cluster.Start(); err != nil {
			f.Detail = "restart failed: " + err.Error()
		}
	case "partition":
		// A blackhole: the proxy takes the process's bytes and passes
		// none on, either way, on its open connections and new ones.
		d := n.between(2*time.Second, 6*time.Second)
		f.Detail = d.Round(time.Millisecond).String()
		n.toxic(p, `{"name":"bh-up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
		n.toxic(p, `{"name":"bh-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
		sleep(ctx, d)
		n.untoxic(p, "bh-up")
		n.untoxic(p, "bh-down")
	case "cut":
		// Every connection to PostgreSQL closed, new ones refused.
		d := n.between(time.Second, 5*time.Second)
		f.Detail = d.Round(time.Millisecond).String()
		p.Proxy.Stop()
		sleep(ctx, d)
		if err := p.Proxy.Start(); err != nil {
			f.Detail += "; proxy restart failed: " + err.Error()
		}
	case "latency":
		d := n.between(3*time.Second, 6*time.Second)
		ms := 50 + n.Rng.IntN(250)
		f.Detail = fmt.Sprintf("%dms±%dms for %s", ms, ms/2, d.Round(time.Millisecond))
		n.toxic(p, fmt.Sprintf(`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`, ms, ms/2))
		sleep(ctx, d)
		n.untoxic(p, "slow")
	case "clock":
		// Steps stay under half the lease: the broker's clock decides
		// when a lease runs out, so a process whose clock runs ahead by
		// more than a lease takes the leases of others for ended
		// (docs/guarantees.md); the checker allows for the skew.
		step := n.between(200*time.Millisecond, n.Lease/2)
		if n.Rng.IntN(2) == 0 {
			step = -step
		}
		d := n.between(2*time.Second, 8*time.Second)
		f.Detail = fmt.Sprintf("%+v for %s", step.Round(time.Millisecond), d.Round(time.Millisecond))
		n.mu.Lock()
		n.maxOffset = max(n.maxOffset, step.Abs())
		n.mu.Unlock()
		if err := p.StepClock(step); err != nil {
			f.Detail += "; " + err.Error()
		}
		sleep(ctx, d)
		_ = p.StepClock(0)
	}
	f.End = time.Now()
	n.Hist.AddFault(f)
	if n.Log != nil {
		n.Log("fault %-9s %-3s leader=%-5v %s (%s)", f.Kind, f.Proc, f.Leader, f.End.Sub(f.Start).Round(time.Millisecond), f.Detail)
	}
}

func (n *Nemesis) toxic(p *Proc, spec string) {
	if _, err := p.Proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil && n.Log != nil {
		n.Log("toxic %s on %s: %v", spec, p.Name, err)
	}
}

func (n *Nemesis) untoxic(p *Proc, name string) {
	if err := p.Proxy.Toxics.RemoveToxic(context.Background(), name); err != nil && n.Log != nil {
		n.Log("remove toxic %s on %s: %v", name, p.Name, err)
	}
}

// fillingBatch is how many dead letters pause-filing's ack files in one
// transaction.
const fillingBatch = 400

// pauseFiling pauses p while it files dead letters: an ack batch of
// fillingBatch messages with status dlq, in flight when SIGSTOP comes
// (a filing holds the writer's lock exclusively on PostgreSQL, issue 36).
// Its queue is the nemesis's own (fx), outside the history.
func (n *Nemesis) pauseFiling(p *Proc) string {
	if n.aux == nil {
		n.aux = &Workload{Queue: "fx", Procs: []*Proc{p}}
		n.aux.init()
	}
	ctx := context.Background()
	items := make([]map[string]any, fillingBatch)
	tag := time.Now().UnixNano()
	for i := range items {
		// A partition of its own: one a lease of an earlier pause-filing
		// still holds (its ack cut by the pause) gives nothing.
		items[i] = map[string]any{"queue": "fx", "partition": fmt.Sprintf("x%d", tag), "transactionId": fmt.Sprintf("fx-%d-%d", tag, i), "payload": map[string]any{"i": i}}
	}
	if status, b, err := n.aux.call(ctx, p, "POST", "/api/v1/push", map[string]any{"items": items}, 30*time.Second); status != 201 {
		n.pausedAt = time.Now()
		return fmt.Sprintf("could not set up: push %d %.200s %v", status, b, err)
	}
	status, b, err := n.aux.call(ctx, p, "GET", fmt.Sprintf("/api/v1/pop/queue/fx/partition/x%d?consumerGroup=fx&batch=%d", tag, fillingBatch), nil, 30*time.Second)
	var pop popAnswer
	if status != 200 || json.Unmarshal(b, &pop) != nil || len(pop.Messages) == 0 {
		n.pausedAt = time.Now()
		return fmt.Sprintf("could not set up: pop %d %.200s %v", status, b, err)
	}
	acks := make([]map[string]any, 0, len(pop.Messages))
	for _, m := range pop.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": "filed while paused"})
	}
	answered := make(chan time.Time, 1)
	go func() {
		_, _, _ = n.aux.call(ctx, p, "POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": "fx", "acknowledgments": acks}, 5*time.Minute)
		answered <- time.Now()
	}()
	sleep(ctx, n.between(5*time.Millisecond, 60*time.Millisecond)) // the ack reaches the process and starts filing
	d := n.between(5*time.Second, 7*time.Second)
	if n.LongPauses {
		d = n.between(20*time.Second, 70*time.Second)
	}
	p.Pause()
	n.pausedAt = time.Now()
	inFlight := "in flight"
	select {
	case at := <-answered:
		if at.Before(n.pausedAt) {
			inFlight = "answered before the pause"
		}
	default:
	}
	sleep(ctx, d)
	p.Resume()
	return fmt.Sprintf("%s, filing %d dead letters (%s)", d.Round(time.Millisecond), len(acks), inFlight)
}
