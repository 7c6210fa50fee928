package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"maragu.dev/goqite"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// parallel runs fn(0) … fn(n-1) at once and returns the first error.
func parallel(n int, fn func(w int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = fn(w)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// share is worker w's part of n items split among k workers.
func share(n, k, w int) int {
	s := n / k
	if w < n%k {
		s++
	}
	return s
}

// runStat is what one measured run did: its rate and the process's CPU
// time a message (user and system, µs), the load-independent figure
// beside the timing.
type runStat struct {
	rate float64 // messages a second
	cpu  float64 // µs of CPU a message
}

// stopwatch measures wall and CPU time from its start.
type stopwatch struct {
	wall time.Time
	cpu  time.Duration
}

func startStopwatch() stopwatch { return stopwatch{wall: time.Now(), cpu: cpuTime()} }

// stop is the run's stat for n messages.
func (s stopwatch) stop(n int) runStat {
	wall, cpu := time.Since(s.wall), cpuTime()-s.cpu
	return runStat{rate: rate(n, wall), cpu: float64(cpu.Nanoseconds()) / 1e3 / float64(n)}
}

// statVariant is a variant whose runs give a rate, and their CPU a
// message into cpu under the same name.
func statVariant(name string, cpu Samples, fn func(ctx context.Context) (runStat, error)) variant {
	return variant{name, func(ctx context.Context, _ int) (float64, error) {
		st, err := fn(ctx)
		if err != nil {
			return 0, err
		}
		cpu[name] = append(cpu[name], st.cpu)
		return st.rate, nil
	}}
}

// cpuRow is the CPU a message of two variants, beside a timing row.
func cpuRow(cpu Samples, id, measure, oursName, refName string) Row {
	r := compare(cpu, id, measure, "µs/msg", oursName, refName)
	r.Note = "CPU of the process (utime+stime, getrusage) over the timed part"
	return r
}

// L1: instructions a message of the lifecycle one at a time, ours and
// goqite, with callgrind: each subject runs as a child of its own at two
// sizes, whose difference cancels start-up (go tool task bench:instr).

//
// What the store does on a timer is charged by the messages, not by the
// run's speed (under callgrind a lifecycle takes some 50 times as long
// as natively, and longer still on a loaded machine, so a timer fires
// that much more often a message; its count moved ~10 % with the run's
// length): ours runs with its checkpoints started by the log's growth
// only (every checkpointFrames, as they are natively under load, where
// the log grows by that much well within the 50 ms timer), and with the
// counts folded only at close (in both runs: it cancels); a fold's own
// instructions are measured apart ("ours-fold": a fold at every commit,
// three a message) and one fold per lifecycleFoldShare messages is added
// to ours: one fold a second, as the store does, at 1,000 messages a
// second, far below its rate in L2 (so the share is an upper bound).

// lifecycleFoldShare is the messages one fold of the counts is charged
// to in L1 (FoldEvery, 1 s, at 1,000 messages a second).
const lifecycleFoldShare = 1000

// lifecycleOptions are ours's options in L1's children: fold says
// whether the counts fold at every commit (the fold's cost) or only at
// close.
func lifecycleOptions(fold bool) db.Options {
	o := db.Options{Sync: db.SyncNormal, CheckpointEvery: -1, FoldEvery: 24 * time.Hour}
	if fold {
		o.FoldEvery = -1
	}
	return o
}

func caseL1(ctx context.Context, e *env) ([]Row, error) {
	// 2,000 lifecycles between the two runs: the collector's cycles fall
	// differently in each, and over fewer the count moved by 2.2 % between
	// runs (docs/performance.md, L1), more than the 2 % asked.
	n1, n2 := e.size(1000, 200), e.size(3000, 600)
	count := func(subject string) (float64, error) {
		return perItem(n1, n2, func(n int) (float64, error) {
			return callgrindRun(ctx, fmt.Sprintf("lifecycle %s %d", subject, n))
		})
	}
	lc, err := count("ours")
	if err != nil {
		return []Row{{Case: "L1", Measure: "instructions a message (callgrind)", Verdict: verdictSkipped, Note: err.Error()}}, nil
	}
	folding, err := count("ours-fold")
	if err != nil {
		return nil, err
	}
	fold := max(folding-lc, 0) / 3 // three commits a message, each folding
	o := lc + fold/lifecycleFoldShare
	g, err := count("goqite")
	if err != nil {
		return nil, err
	}
	r := Row{Case: "L1", Measure: "push→pop→ack one at a time: instructions a message (callgrind)", Unit: "instr/msg", Reps: 1,
		Ours: ptr(o), RefName: "goqite", Ref: ptr(g), Ratio: ptr(o / g),
		Must: atMost("ratio", 0.8, "≤ 0.8× goqite"), Goal: atMost("ratio", 0.5, "≤ 0.5× goqite"),
		Note: fmt.Sprintf("callgrind, GOMAXPROCS=1, GODEBUG=asyncpreemptoff=1, runs of %d and %d lifecycles (their difference), synchronous=NORMAL, both with go-sqlite3's statement cache; user-space instructions (system calls' kernel time is not counted); ours: %.0f the lifecycle with checkpoints every %d frames of the log (no timer) + %.0f a fold of the counts / %d messages (one a second at 1,000 msg/s)",
			n1, n2, lc, 1000, fold, lifecycleFoldShare)}
	return []Row{r}, nil
}

// L2: the same lifecycle, wall time, interleaved with raw, goqite and
// River.

func caseL2(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 500)
	nRiver := e.size(5_000, 300)
	cpu := Samples{}
	s, err := interleave(ctx, e, e.reps,
		statVariant("ours", cpu, func(ctx context.Context) (runStat, error) { return oursLifecycle1(ctx, e, e.sync, n) }),
		statVariant("raw", cpu, func(ctx context.Context) (runStat, error) { return rawLifecycle1(ctx, e, n) }),
		statVariant("goqite", cpu, func(ctx context.Context) (runStat, error) { return goqiteLifecycle1(ctx, e, n) }),
		statVariant("River", cpu, func(ctx context.Context) (runStat, error) { return riverLifecycle(ctx, e, nRiver) }),
	)
	if err != nil {
		return nil, err
	}
	r := compare(s, "L2", fmt.Sprintf("push→pop→ack one at a time (%d msgs)", n), "msg/s", "ours", "goqite")
	r.Must = atLeast("ratio", 1.3, "≥ 1.3× goqite")
	raw := compare(s, "L2", "  same vs raw (3 tx a msg)", "msg/s", "ours", "raw")
	raw.Goal = atLeast("ratio", 2.0, "≥ 2× raw")
	riv := compare(s, "L2", fmt.Sprintf("  same vs River on SQLite (insert → work → complete, %d jobs; info)", nRiver), "msg/s", "ours", "River")
	riv.Note = "River v0.51.2, riversqlite, one connection, 10 workers, polling every 1 ms (its minimum), completions by its batch completer"
	return []Row{r, raw, riv,
		cpuRow(cpu, "L2", "  CPU a message vs goqite", "ours", "goqite"),
		cpuRow(cpu, "L2", "  CPU a message vs raw", "ours", "raw"),
		cpuRow(cpu, "L2", "  CPU a message vs River", "ours", "River")}, nil
}

func oursLifecycle1(ctx context.Context, e *env, sync db.Sync, n int) (runStat, error) {
	return oursLifecycle1With(ctx, e, db.Options{Sync: sync}, n)
}

// oursLifecycle1With is oursLifecycle1 on a store opened with opts.
func oursLifecycle1With(ctx context.Context, e *env, opts db.Options, n int) (runStat, error) {
	o, err := e.openOursWith(ctx, "l2-ours", opts)
	if err != nil {
		return runStat{}, err
	}
	defer o.close()
	body := payload(0, 0)
	sw := startStopwatch()
	for range n {
		if err := o.push(ctx, benchQueue, "", body); err != nil {
			return runStat{}, err
		}
		res, err := o.b.Pop(ctx, broker.PopRequest{Queue: benchQueue, Batch: 1})
		if err != nil {
			return runStat{}, err
		}
		if len(res.Messages) != 1 {
			return runStat{}, errEmpty
		}
		m := res.Messages[0]
		if _, err := o.b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}); err != nil {
			return runStat{}, err
		}
	}
	return sw.stop(n), nil
}

func rawLifecycle1(ctx context.Context, e *env, n int) (runStat, error) {
	r, err := e.openRaw(ctx, "l2-raw", e.sync)
	if err != nil {
		return runStat{}, err
	}
	defer r.close()
	body := payload(0, 0)
	sw := startStopwatch()
	for range n {
		if err := r.push(ctx, body); err != nil {
			return runStat{}, err
		}
		ids, err := r.leaseN(ctx, 1)
		if err != nil {
			return runStat{}, err
		}
		if len(ids) != 1 {
			return runStat{}, errEmpty
		}
		if err := r.settle(ctx, ids[0]); err != nil {
			return runStat{}, err
		}
	}
	return sw.stop(n), nil
}

func goqiteLifecycle1(ctx context.Context, e *env, n int) (runStat, error) {
	g, err := e.openGoqite(ctx, "l2-goqite", e.sync)
	if err != nil {
		return runStat{}, err
	}
	defer g.close()
	body := payload(0, 0)
	sw := startStopwatch()
	for range n {
		if err := g.q.Send(ctx, goqite.Message{Body: body}); err != nil {
			return runStat{}, err
		}
		m, err := g.q.Receive(ctx)
		if err != nil {
			return runStat{}, err
		}
		if m == nil {
			return runStat{}, errEmpty
		}
		if err := g.q.Delete(ctx, m.ID); err != nil {
			return runStat{}, err
		}
	}
	return sw.stop(n), nil
}

// L3: pushes of one message, 8 callers at once, against raw with group
// commit (the callers share transactions), raw with a transaction a push,
// and goqite.

const l3Callers = 8

func caseL3(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 1_000)
	cpu := Samples{}
	s, err := interleave(ctx, e, e.reps,
		statVariant("ours", cpu, func(ctx context.Context) (runStat, error) {
			o, err := e.openOurs(ctx, "l3-ours", e.sync)
			if err != nil {
				return runStat{}, err
			}
			defer o.close()
			return concurrentPush(n, func(body []byte) error { return o.push(ctx, benchQueue, "", body) })
		}),
		statVariant("raw+gc", cpu, func(ctx context.Context) (runStat, error) {
			r, err := e.openRaw(ctx, "l3-rawgc", e.sync)
			if err != nil {
				return runStat{}, err
			}
			defer r.close()
			gc := newGroupCommit(r.db)
			return concurrentPush(n, func(body []byte) error {
				return gc.do(ctx, func(tx *sql.Tx) error {
					_, err := tx.StmtContext(ctx, r.ins).ExecContext(ctx, body)
					return err
				})
			})
		}),
		statVariant("raw", cpu, func(ctx context.Context) (runStat, error) {
			r, err := e.openRaw(ctx, "l3-raw", e.sync)
			if err != nil {
				return runStat{}, err
			}
			defer r.close()
			return concurrentPush(n, func(body []byte) error { return r.push(ctx, body) })
		}),
		statVariant("goqite", cpu, func(ctx context.Context) (runStat, error) {
			g, err := e.openGoqite(ctx, "l3-goqite", e.sync)
			if err != nil {
				return runStat{}, err
			}
			defer g.close()
			return concurrentPush(n, func(body []byte) error { return g.q.Send(ctx, goqite.Message{Body: body}) })
		}),
	)
	if err != nil {
		return nil, err
	}
	r := compare(s, "L3", fmt.Sprintf("push 1 a call, %d callers (%d msgs)", l3Callers, n), "msg/s", "ours", "raw+gc")
	r.Must, r.Goal = atLeast("ratio", 0.8, "≥ 0.8× raw+gc"), atLeast("ratio", 1.0, "≥ 1.0× raw+gc")
	r.Note = "raw+gc: a caller who finds no commit running leads, and commits every caller's INSERT queued so far in one transaction (bench/groupcommit.go)"
	return []Row{r,
		compare(s, "L3", "  same vs raw, a transaction a push (info)", "msg/s", "ours", "raw"),
		compare(s, "L3", "  same vs goqite (info)", "msg/s", "ours", "goqite"),
		cpuRow(cpu, "L3", "  CPU a message vs raw+gc", "ours", "raw+gc")}, nil
}

// concurrentPush pushes n messages from l3Callers goroutines.
func concurrentPush(n int, push func(body []byte) error) (runStat, error) {
	body := payload(0, 0)
	sw := startStopwatch()
	err := parallel(l3Callers, func(w int) error {
		for range share(n, l3Callers, w) {
			if err := push(body); err != nil {
				return err
			}
		}
		return nil
	})
	return sw.stop(n), err
}

// L4: the lifecycle in batches of 100.

const l4Batch = 100

func caseL4(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(100_000, 2_000)
	cpu := Samples{}
	s, err := interleave(ctx, e, e.reps,
		statVariant("ours", cpu, func(ctx context.Context) (runStat, error) { return oursLifecycleBatched(ctx, e, e.sync, n) }),
		statVariant("raw batched", cpu, func(ctx context.Context) (runStat, error) { return rawLifecycleBatched(ctx, e, n) }),
		statVariant("goqite batched", cpu, func(ctx context.Context) (runStat, error) { return goqiteLifecycleBatched(ctx, e, n) }),
	)
	if err != nil {
		return nil, err
	}
	r := compare(s, "L4", fmt.Sprintf("lifecycle batched %d: push, pop, ack (%d msgs)", l4Batch, n), "msg/s", "ours", "raw batched")
	r.Must, r.Goal = atLeast("ratio", 0.6, "≥ 0.6× raw batched"), atLeast("ratio", 1.0, "≥ 1.0× raw batched")
	return []Row{r,
		compare(s, "L4", "  same vs goqite, a transaction a step (info)", "msg/s", "ours", "goqite batched"),
		cpuRow(cpu, "L4", "  CPU a message vs raw batched", "ours", "raw batched")}, nil
}

func oursLifecycleBatched(ctx context.Context, e *env, sync db.Sync, n int) (runStat, error) {
	o, err := e.openOurs(ctx, "l4-ours", sync)
	if err != nil {
		return runStat{}, err
	}
	defer o.close()
	bs := bodies(0, l4Batch)
	sw := startStopwatch()
	for done := 0; done < n; done += l4Batch {
		if err := o.push(ctx, benchQueue, "", bs...); err != nil {
			return runStat{}, err
		}
		if err := o.consume(ctx, benchQueue, "", l4Batch, l4Batch); err != nil {
			return runStat{}, err
		}
	}
	return sw.stop(n), nil
}

func rawLifecycleBatched(ctx context.Context, e *env, n int) (runStat, error) {
	r, err := e.openRaw(ctx, "l4-raw", e.sync)
	if err != nil {
		return runStat{}, err
	}
	defer r.close()
	bs := bodies(0, l4Batch)
	sw := startStopwatch()
	for done := 0; done < n; done += l4Batch {
		if err := r.pushBatch(ctx, bs); err != nil {
			return runStat{}, err
		}
		ids, err := r.leaseN(ctx, l4Batch)
		if err != nil {
			return runStat{}, err
		}
		if len(ids) != l4Batch {
			return runStat{}, errEmpty
		}
		if err := r.settleBatch(ctx, ids); err != nil {
			return runStat{}, err
		}
	}
	return sw.stop(n), nil
}

func goqiteLifecycleBatched(ctx context.Context, e *env, n int) (runStat, error) {
	g, err := e.openGoqite(ctx, "l4-goqite", e.sync)
	if err != nil {
		return runStat{}, err
	}
	defer g.close()
	bs := bodies(0, l4Batch)
	sw := startStopwatch()
	for done := 0; done < n; done += l4Batch {
		if err := g.sendBatch(ctx, bs); err != nil {
			return runStat{}, err
		}
		ids, err := g.receiveBatch(ctx, l4Batch)
		if err != nil {
			return runStat{}, err
		}
		if len(ids) != l4Batch {
			return runStat{}, errEmpty
		}
		if err := g.deleteBatch(ctx, ids); err != nil {
			return runStat{}, err
		}
	}
	return sw.stop(n), nil
}

// L5: the fixed cost of a pop+ack pair. Popping and acknowledging b
// messages a pair costs c(b) = F/b + m of CPU a message: F the pair's
// fixed cost (two transactions, their statements and commits), m what
// each message adds. Measured at two batch sizes on a backlog pushed
// beforehand (untimed), the two equations give F and m (pairCost).

const l5Small, l5Large = 1, 100

func caseL5(ctx context.Context, e *env) ([]Row, error) {
	n1, nL := e.size(5_000, 1_000), e.size(50_000, 10_000)
	consumeCPU := func(batch, n int) func(ctx context.Context, _ int) (float64, error) {
		return func(ctx context.Context, _ int) (float64, error) {
			o, err := e.openOurs(ctx, "l5", e.sync)
			if err != nil {
				return 0, err
			}
			defer o.close()
			if err := o.fill(ctx, benchQueue, n, nil); err != nil {
				return 0, err
			}
			sw := startStopwatch()
			if err := o.consume(ctx, benchQueue, "", batch, n); err != nil {
				return 0, err
			}
			return sw.stop(n).cpu, nil
		}
	}
	small, large := fmt.Sprintf("batch %d", l5Small), fmt.Sprintf("batch %d", l5Large)
	s, err := interleave(ctx, e, e.reps, variant{small, consumeCPU(l5Small, n1)}, variant{large, consumeCPU(l5Large, nL)})
	if err != nil {
		return nil, err
	}
	var fixed, per []float64
	for i := range min(len(s[small]), len(s[large])) {
		f, m := pairCost(l5Small, s[small][i], l5Large, s[large][i])
		fixed, per = append(fixed, f), append(per, m)
	}
	r := Row{Case: "L5", Measure: "a pop+ack pair's fixed cost: CPU", Unit: "µs", Ours: ptr(median(fixed)), Reps: len(fixed),
		Must: atMost("ours", 50, "≤ 50 µs"), Goal: atMost("ours", 25, "≤ 25 µs"),
		Samples: Samples{"fixed": roundAll(fixed), small: roundAll(s[small]), large: roundAll(s[large])},
		Note: fmt.Sprintf("CPU a message c(b) = F/b + m popping and acknowledging b a pair (the process's utime+stime, a backlog pushed beforehand, untimed): "+
			"measured at b = %d (%d msgs) and b = %d (%d msgs), median %.1f and %.1f µs a message, solved for F (the pair's fixed cost) and m each repetition",
			l5Small, n1, l5Large, nL, median(s[small]), median(s[large]))}
	m := Row{Case: "L5", Measure: "  what each message of a pair adds: CPU (info)", Unit: "µs", Ours: ptr(median(per)), Reps: len(per), Samples: Samples{"per message": roundAll(per)}}
	return []Row{r, m}, nil
}

// pairCost solves c1 = F/b1 + m and c2 = F/b2 + m for the fixed cost F
// of a pair and the cost m of each of its messages, from the CPU a
// message c1 and c2 measured at batch sizes b1 and b2.
func pairCost(b1 int, c1 float64, b2 int, c2 float64) (fixed, perMsg float64) {
	if b1 == b2 {
		return math.NaN(), math.NaN()
	}
	fixed = (c1 - c2) / (1/float64(b1) - 1/float64(b2))
	return fixed, c1 - fixed/float64(b1)
}

// fill pushes n messages in calls of 1000, to partitions named by part.
func (o *ours) fill(ctx context.Context, queue string, n int, part func(i int) string) error {
	const batch = 1000
	items := make([]broker.PushItem, 0, batch)
	now := time.Now().UnixNano()
	for i := 0; i < n; i++ {
		p := ""
		if part != nil {
			p = part(i)
		}
		items = append(items, broker.PushItem{Queue: queue, Partition: p, Payload: payload(i, now)})
		if len(items) == batch || i == n-1 {
			if _, err := o.b.Push(ctx, items); err != nil {
				return err
			}
			items = items[:0]
		}
	}
	return nil
}

// F1: fan-out: every group reads every message; CPU a delivery with 10
// groups against 1.

func caseF1(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 1_000)
	cpu := Samples{}
	fanout := func(groups int) variant {
		return statVariant(fmt.Sprintf("%d groups", groups), cpu, func(ctx context.Context) (runStat, error) {
			o, err := e.openOurs(ctx, "f1", e.sync)
			if err != nil {
				return runStat{}, err
			}
			defer o.close()
			if err := o.fill(ctx, benchQueue, n, nil); err != nil {
				return runStat{}, err
			}
			sw := startStopwatch()
			err = parallel(groups, func(g int) error {
				return o.consume(ctx, benchQueue, fmt.Sprintf("group-%d", g), 100, n)
			})
			return sw.stop(groups * n), err
		})
	}
	s, err := interleave(ctx, e, e.reps, fanout(1), fanout(10))
	if err != nil {
		return nil, err
	}
	r := compare(cpu, "F1", fmt.Sprintf("CPU a delivery, 10 groups vs 1 (%d msgs, pop 100/batch ack)", n), "µs", "10 groups", "1 groups")
	r.RefName = "1 group"
	r.Must, r.Goal = atMost("ratio", 1.1, "≤ 1.1×"), atMost("ratio", 1.0, "≤ 1.0×")
	r.Note = "CPU of the process (utime+stime) over the deliveries, a backlog pushed beforehand (untimed); each group pops from its own goroutine"
	d := compare(s, "F1", "  deliveries a second, 10 groups vs 1 (info)", "/s", "10 groups", "1 groups")
	d.RefName = "1 group"
	return []Row{r, d}, nil
}

// F2: the same messages over 1 and over many partitions.

func caseF2(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(200_000, 1_000)
	many := e.size(10_000, 50) // 20 messages a partition either way
	cpu := Samples{}
	// A pop leases one partition (SPEC 3) and takes at most what it
	// holds: 20 messages a pop over many partitions against 100 over one.
	// "1 partition, pops of 20" makes the pops and acks of the many
	// partitions' run over one partition: what is left between the two
	// is what the partitions themselves cost.
	perPart := n / many
	spread := func(name string, parts, batch int) variant {
		return statVariant(name, cpu, func(ctx context.Context) (runStat, error) {
			o, err := e.openOurs(ctx, "f2", e.sync)
			if err != nil {
				return runStat{}, err
			}
			defer o.close()
			sw := startStopwatch()
			if err := o.fill(ctx, benchQueue, n, func(i int) string { return fmt.Sprintf("p%05d", i%parts) }); err != nil {
				return runStat{}, err
			}
			if err := o.consume(ctx, benchQueue, "", batch, n); err != nil {
				return runStat{}, err
			}
			return sw.stop(n), nil
		})
	}
	manyName := fmt.Sprintf("%d partitions", many)
	smallPops := fmt.Sprintf("1 partition, pops of %d", perPart)
	s, err := interleave(ctx, e, e.reps, spread("1 partitions", 1, 100), spread(manyName, many, 100), spread(smallPops, 1, perPart))
	if err != nil {
		return nil, err
	}
	r := compare(s, "F2", fmt.Sprintf("push 1000 a call + pop 100/ack, %d partitions vs 1 (%d msgs)", many, n), "msg/s", manyName, "1 partitions")
	r.RefName = "1 partition"
	r.Must, r.Goal = atLeast("ratio", 0.65, "≥ 0.65×"), atLeast("ratio", 0.85, "≥ 0.85×")
	c := cpuRow(cpu, "F2", "  CPU a message, the same", manyName, "1 partitions")
	c.RefName = "1 partition"
	pops := compare(s, "F2", fmt.Sprintf("  1 partition popped %d at a time (as many pops and acks as %d partitions) vs 100 (info)", perPart, many), "msg/s", smallPops, "1 partitions")
	pops.RefName = "1 partition"
	pops.Note = fmt.Sprintf("info: a pop leases one partition and takes what it holds, %d messages here: this is the part of F2 that the pops' number makes", perPart)
	rest := compare(s, "F2", fmt.Sprintf("  %d partitions vs 1 partition popped %d at a time (info)", many, perPart), "msg/s", manyName, smallPops)
	rest.Note = "info: what the partitions cost beside the pops' number (their rows, the pushes spread over them)"
	idle, err := idlePartitions(ctx, e, many)
	if err != nil {
		return nil, err
	}
	return []Row{r, c, pops, rest, idle}, nil
}

// F3: 5 % of the messages fail their first try and their one retry
// (retryLimit 1) and end in the dead letters; popped one at a time, so
// that no failure sends the rest of a batch back (SPEC 3.6). A failing
// message is delivered twice, so the measure is CPU a delivery.

func caseF3(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 1_000)
	cpu := Samples{}
	deliveries := map[string]int{}
	run := func(name string, failEvery int) variant {
		return statVariant(name, cpu, func(ctx context.Context) (runStat, error) {
			o, err := e.openOurs(ctx, "f3", e.sync)
			if err != nil {
				return runStat{}, err
			}
			defer o.close()
			opts := map[string]json.RawMessage{"retryLimit": json.RawMessage("1"), "retryDelay": json.RawMessage("0")}
			if _, err := o.b.Configure(ctx, benchQueue, opts, "bench"); err != nil {
				return runStat{}, err
			}
			if err := o.fill(ctx, benchQueue, n, nil); err != nil {
				return runStat{}, err
			}
			sw := startStopwatch()
			k, err := consumeFailing(ctx, o, n, 1, failEvery, nil)
			if err != nil {
				return runStat{}, err
			}
			deliveries[name] = k
			return sw.stop(k), nil
		})
	}
	s, err := interleave(ctx, e, e.reps, run("5% failing", 20), run("no failures", 0))
	if err != nil {
		return nil, err
	}
	r := compare(cpu, "F3", fmt.Sprintf("CPU a delivery, 5%% failing twice into the DLQ vs none, popped 1 at a time (%d msgs)", n), "µs", "5% failing", "no failures")
	r.Must, r.Goal = atMost("ratio", 1.15, "≤ 1.15×"), atMost("ratio", 1.05, "≤ 1.05×")
	r.Note = fmt.Sprintf("retryLimit 1, retryDelay 0: %d deliveries with failures, %d without; CPU of the process over the pops and acks, a backlog pushed beforehand", deliveries["5% failing"], deliveries["no failures"])
	d := compare(s, "F3", "  deliveries a second, the same (info)", "/s", "5% failing", "no failures")
	return []Row{r, d}, nil
}

// idlePartitions times push→pop→ack of one message at a time on a busy
// partition, beside many partitions that were drained earlier and beside
// none: a pop that names no partition must not pay for the idle ones
// (before migration 0009 it walked them all: 5.9 ms a pop behind 10,000).
func idlePartitions(ctx context.Context, e *env, idle int) (Row, error) {
	cycles := e.size(2_000, 300)
	run := func(name string, idle int) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			o, err := e.openOurs(ctx, "f2-idle", e.sync)
			if err != nil {
				return 0, err
			}
			defer o.close()
			if idle > 0 {
				if err := o.fill(ctx, benchQueue, idle, func(i int) string { return fmt.Sprintf("idle%05d", i) }); err != nil {
					return 0, err
				}
				if err := o.consume(ctx, benchQueue, "", 100, idle); err != nil {
					return 0, err
				}
			}
			body := payload(0, 0)
			start := time.Now()
			for range cycles {
				if err := o.push(ctx, benchQueue, "busy", body); err != nil {
					return 0, err
				}
				if err := o.consume(ctx, benchQueue, "", 1, 1); err != nil {
					return 0, err
				}
			}
			return rate(cycles, time.Since(start)), nil
		}}
	}
	s, err := interleave(ctx, e, e.reps, run("beside none", 0), run("beside idle", idle))
	if err != nil {
		return Row{}, err
	}
	r := compare(s, "F2", fmt.Sprintf("  push→pop→ack on a busy partition beside %d drained ones vs none", idle), "msg/s", "beside idle", "beside none")
	r.RefName = "beside none"
	r.Note = "info: a pop that names no partition must not walk the idle ones"
	return r, nil
}

// consumeFailing pops batches and acknowledges them, failing every
// failEvery-th message (by its index) each time it comes, until all n are
// settled: completed, or dead-lettered. A failure's error is errOf of
// the message's index ("bench: induced failure" for every one when errOf
// is nil). It returns how many deliveries that took.
func consumeFailing(ctx context.Context, o *ours, n, batch, failEvery int, errOf func(idx int) string) (int, error) {
	settled, delivered := 0, 0
	for settled < n {
		res, err := o.b.Pop(ctx, broker.PopRequest{Queue: benchQueue, Batch: batch})
		if err != nil {
			return delivered, err
		}
		if len(res.Messages) == 0 {
			return delivered, fmt.Errorf("pop found nothing after %d of %d settled", settled, n)
		}
		delivered += len(res.Messages)
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
			if idx, _, ok := payloadFields(m.Payload); ok && failEvery > 0 && idx%failEvery == 0 {
				acks[i].Status, acks[i].Error = broker.AckFailed, "bench: induced failure"
				if errOf != nil {
					acks[i].Error = errOf(idx)
				}
			}
		}
		out, err := o.b.AckBatch(ctx, "", acks)
		if err != nil {
			return delivered, err
		}
		for i, r := range out {
			switch {
			case !r.Success:
				return delivered, fmt.Errorf("ack refused: %s", r.Error)
			case r.Requeued:
			case acks[i].Status == broker.AckCompleted, r.DLQ, r.Dropped:
				settled++
			}
		}
	}
	return delivered, nil
}
