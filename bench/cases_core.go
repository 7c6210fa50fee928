package main

import (
	"context"
	"encoding/json"
	"fmt"
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

// T1: push→pop→ack one message at a time.

func caseT1(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 500)
	s, err := interleave(ctx, e, e.reps,
		variant{"ours", func(ctx context.Context, _ int) (float64, error) { return oursLifecycle1(ctx, e, e.sync, n) }},
		variant{"raw", func(ctx context.Context, _ int) (float64, error) { return rawLifecycle1(ctx, e, n) }},
		variant{"goqite", func(ctx context.Context, _ int) (float64, error) { return goqiteLifecycle1(ctx, e, n) }},
	)
	if err != nil {
		return nil, err
	}
	r := compare(s, "T1", fmt.Sprintf("lifecycle 1 at a time (%d msgs)", n), "msg/s", "ours", "goqite")
	r.Must, r.Goal = atLeast("ratio", 1.0, "≥ 1.0× goqite"), atLeast("ratio", 2.0, "≥ 2× goqite")
	info := compare(s, "T1", "  same vs raw (3 tx a msg)", "msg/s", "ours", "raw")
	return []Row{r, info}, nil
}

func oursLifecycle1(ctx context.Context, e *env, sync db.Sync, n int) (float64, error) {
	o, err := e.openOurs(ctx, "t1-ours", sync)
	if err != nil {
		return 0, err
	}
	defer o.close()
	body := payload(0, 0)
	start := time.Now()
	for range n {
		if err := o.push(ctx, benchQueue, "", body); err != nil {
			return 0, err
		}
		res, err := o.b.Pop(ctx, broker.PopRequest{Queue: benchQueue, Batch: 1})
		if err != nil {
			return 0, err
		}
		if len(res.Messages) != 1 {
			return 0, errEmpty
		}
		m := res.Messages[0]
		if _, err := o.b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}); err != nil {
			return 0, err
		}
	}
	return rate(n, time.Since(start)), nil
}

func rawLifecycle1(ctx context.Context, e *env, n int) (float64, error) {
	r, err := e.openRaw(ctx, "t1-raw", e.sync)
	if err != nil {
		return 0, err
	}
	defer r.close()
	body := payload(0, 0)
	start := time.Now()
	for range n {
		if err := r.push(ctx, body); err != nil {
			return 0, err
		}
		ids, err := r.leaseN(ctx, 1)
		if err != nil {
			return 0, err
		}
		if len(ids) != 1 {
			return 0, errEmpty
		}
		if err := r.settle(ctx, ids[0]); err != nil {
			return 0, err
		}
	}
	return rate(n, time.Since(start)), nil
}

func goqiteLifecycle1(ctx context.Context, e *env, n int) (float64, error) {
	g, err := e.openGoqite(ctx, "t1-goqite", e.sync)
	if err != nil {
		return 0, err
	}
	defer g.close()
	body := payload(0, 0)
	start := time.Now()
	for range n {
		if err := g.q.Send(ctx, goqite.Message{Body: body}); err != nil {
			return 0, err
		}
		m, err := g.q.Receive(ctx)
		if err != nil {
			return 0, err
		}
		if m == nil {
			return 0, errEmpty
		}
		if err := g.q.Delete(ctx, m.ID); err != nil {
			return 0, err
		}
	}
	return rate(n, time.Since(start)), nil
}

// T2: pushes of one message, 8 callers at once.

const t2Callers = 8

func caseT2(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 1_000)
	s, err := interleave(ctx, e, e.reps,
		variant{"ours", func(ctx context.Context, _ int) (float64, error) { return oursConcurrentPush(ctx, e, n) }},
		variant{"raw", func(ctx context.Context, _ int) (float64, error) { return rawConcurrentPush(ctx, e, n) }},
		variant{"goqite", func(ctx context.Context, _ int) (float64, error) { return goqiteConcurrentPush(ctx, e, n) }},
	)
	if err != nil {
		return nil, err
	}
	e.t2Rate = median(s["ours"])
	must := compare(s, "T2", fmt.Sprintf("push 1 a call, 8 callers (%d msgs)", n), "msg/s", "ours", "goqite")
	must.Must = atLeast("ratio", 2.0, "≥ 2× goqite send")
	goal := compare(s, "T2", "  same vs raw 1-row insert tx", "msg/s", "ours", "raw")
	goal.Goal = atLeast("ratio", 0.5, "≥ 0.5× raw insert")
	return []Row{must, goal}, nil
}

func oursConcurrentPush(ctx context.Context, e *env, n int) (float64, error) {
	o, err := e.openOurs(ctx, "t2-ours", e.sync)
	if err != nil {
		return 0, err
	}
	defer o.close()
	body := payload(0, 0)
	start := time.Now()
	err = parallel(t2Callers, func(w int) error {
		for range share(n, t2Callers, w) {
			if err := o.push(ctx, benchQueue, "", body); err != nil {
				return err
			}
		}
		return nil
	})
	return rate(n, time.Since(start)), err
}

func rawConcurrentPush(ctx context.Context, e *env, n int) (float64, error) {
	r, err := e.openRaw(ctx, "t2-raw", e.sync)
	if err != nil {
		return 0, err
	}
	defer r.close()
	body := payload(0, 0)
	start := time.Now()
	err = parallel(t2Callers, func(w int) error {
		for range share(n, t2Callers, w) {
			if err := r.push(ctx, body); err != nil {
				return err
			}
		}
		return nil
	})
	return rate(n, time.Since(start)), err
}

func goqiteConcurrentPush(ctx context.Context, e *env, n int) (float64, error) {
	g, err := e.openGoqite(ctx, "t2-goqite", e.sync)
	if err != nil {
		return 0, err
	}
	defer g.close()
	body := payload(0, 0)
	start := time.Now()
	err = parallel(t2Callers, func(w int) error {
		for range share(n, t2Callers, w) {
			if err := g.q.Send(ctx, goqite.Message{Body: body}); err != nil {
				return err
			}
		}
		return nil
	})
	return rate(n, time.Since(start)), err
}

// T3: pushes of 1000 messages a call.

func caseT3(ctx context.Context, e *env) ([]Row, error) {
	const batch = 1000
	n := e.size(200_000, 10_000)
	bs := bodies(0, batch)
	s, err := interleave(ctx, e, e.reps,
		variant{"ours", func(ctx context.Context, _ int) (float64, error) {
			o, err := e.openOurs(ctx, "t3-ours", e.sync)
			if err != nil {
				return 0, err
			}
			defer o.close()
			start := time.Now()
			for range n / batch {
				if err := o.push(ctx, benchQueue, "", bs...); err != nil {
					return 0, err
				}
			}
			return rate(n, time.Since(start)), nil
		}},
		variant{"raw", func(ctx context.Context, _ int) (float64, error) {
			r, err := e.openRaw(ctx, "t3-raw", e.sync)
			if err != nil {
				return 0, err
			}
			defer r.close()
			start := time.Now()
			for range n / batch {
				if err := r.pushBatch(ctx, bs); err != nil {
					return 0, err
				}
			}
			return rate(n, time.Since(start)), nil
		}},
		variant{"goqite", func(ctx context.Context, _ int) (float64, error) {
			g, err := e.openGoqite(ctx, "t3-goqite", e.sync)
			if err != nil {
				return 0, err
			}
			defer g.close()
			start := time.Now()
			for range n / batch {
				if err := g.sendBatch(ctx, bs); err != nil {
					return 0, err
				}
			}
			return rate(n, time.Since(start)), nil
		}},
	)
	if err != nil {
		return nil, err
	}
	must := compare(s, "T3", fmt.Sprintf("push 1000 a call (%d msgs)", n), "msg/s", "ours", "goqite")
	must.Must = atLeast("ratio", 2.0, "≥ 2× goqite batched")
	goal := compare(s, "T3", "  same vs raw batched insert", "msg/s", "ours", "raw")
	goal.Goal = atLeast("ratio", 0.3, "≥ 0.3× raw batched")
	return []Row{must, goal}, nil
}

// T4: the lifecycle in batches of 100.

const t4Batch = 100

func caseT4(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(200_000, 2_000)
	s, err := interleave(ctx, e, e.reps,
		variant{"ours", func(ctx context.Context, _ int) (float64, error) { return oursLifecycleBatched(ctx, e, e.sync, n) }},
		variant{"raw", func(ctx context.Context, _ int) (float64, error) { return rawLifecycleBatched(ctx, e, n) }},
		variant{"goqite", func(ctx context.Context, _ int) (float64, error) { return goqiteLifecycleBatched(ctx, e, n) }},
	)
	if err != nil {
		return nil, err
	}
	must := compare(s, "T4", fmt.Sprintf("lifecycle batched 100 (%d msgs)", n), "msg/s", "ours", "goqite")
	must.Must = atLeast("ratio", 2.0, "≥ 2× goqite batched")
	goal := compare(s, "T4", "  same vs raw batched lifecycle", "msg/s", "ours", "raw")
	goal.Goal = atLeast("ratio", 0.15, "≥ 0.15× raw batched")
	return []Row{must, goal}, nil
}

func oursLifecycleBatched(ctx context.Context, e *env, sync db.Sync, n int) (float64, error) {
	o, err := e.openOurs(ctx, "t4-ours", sync)
	if err != nil {
		return 0, err
	}
	defer o.close()
	bs := bodies(0, t4Batch)
	start := time.Now()
	for done := 0; done < n; done += t4Batch {
		if err := o.push(ctx, benchQueue, "", bs...); err != nil {
			return 0, err
		}
		if err := o.consume(ctx, benchQueue, "", t4Batch, t4Batch); err != nil {
			return 0, err
		}
	}
	return rate(n, time.Since(start)), nil
}

func rawLifecycleBatched(ctx context.Context, e *env, n int) (float64, error) {
	r, err := e.openRaw(ctx, "t4-raw", e.sync)
	if err != nil {
		return 0, err
	}
	defer r.close()
	bs := bodies(0, t4Batch)
	start := time.Now()
	for done := 0; done < n; done += t4Batch {
		if err := r.pushBatch(ctx, bs); err != nil {
			return 0, err
		}
		ids, err := r.leaseN(ctx, t4Batch)
		if err != nil {
			return 0, err
		}
		if len(ids) != t4Batch {
			return 0, errEmpty
		}
		if err := r.settleBatch(ctx, ids); err != nil {
			return 0, err
		}
	}
	return rate(n, time.Since(start)), nil
}

func goqiteLifecycleBatched(ctx context.Context, e *env, n int) (float64, error) {
	g, err := e.openGoqite(ctx, "t4-goqite", e.sync)
	if err != nil {
		return 0, err
	}
	defer g.close()
	bs := bodies(0, t4Batch)
	start := time.Now()
	for done := 0; done < n; done += t4Batch {
		if err := g.sendBatch(ctx, bs); err != nil {
			return 0, err
		}
		ids, err := g.receiveBatch(ctx, t4Batch)
		if err != nil {
			return 0, err
		}
		if len(ids) != t4Batch {
			return 0, errEmpty
		}
		if err := g.deleteBatch(ctx, ids); err != nil {
			return 0, err
		}
	}
	return rate(n, time.Since(start)), nil
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

// T8: fan-out: every group reads every message.

func caseT8(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 300)
	fanout := func(groups int) variant {
		return variant{fmt.Sprintf("%d groups", groups), func(ctx context.Context, _ int) (float64, error) {
			o, err := e.openOurs(ctx, "t8-ours", e.sync)
			if err != nil {
				return 0, err
			}
			defer o.close()
			if err := o.fill(ctx, benchQueue, n, nil); err != nil {
				return 0, err
			}
			start := time.Now()
			err = parallel(groups, func(g int) error {
				return o.consume(ctx, benchQueue, fmt.Sprintf("group-%d", g), 100, n)
			})
			return rate(groups*n, time.Since(start)), err
		}}
	}
	s, err := interleave(ctx, e, e.reps, fanout(1), fanout(5), fanout(10))
	if err != nil {
		return nil, err
	}
	r10 := compare(s, "T8", fmt.Sprintf("deliveries, 10 groups vs 1 (%d msgs)", n), "msg/s", "10 groups", "1 groups")
	r10.RefName = "1 group"
	r10.Must, r10.Goal = atLeast("ratio", 3.0, "≥ 3× one group"), atLeast("ratio", 4.0, "≥ 4× (Queen 4.3×)")
	r5 := compare(s, "T8", "  5 groups vs 1", "msg/s", "5 groups", "1 groups")
	r5.RefName = "1 group"
	return []Row{r10, r5}, nil
}

// T9: the same traffic over 1 and over many partitions.

func caseT9(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(200_000, 1_000)
	many := e.size(10_000, 50) // 20 messages a partition either way
	spread := func(parts int) variant {
		return variant{fmt.Sprintf("%d partitions", parts), func(ctx context.Context, _ int) (float64, error) {
			o, err := e.openOurs(ctx, "t9-ours", e.sync)
			if err != nil {
				return 0, err
			}
			defer o.close()
			start := time.Now()
			if err := o.fill(ctx, benchQueue, n, func(i int) string { return fmt.Sprintf("p%05d", i%parts) }); err != nil {
				return 0, err
			}
			pushed := time.Since(start)
			if err := o.consume(ctx, benchQueue, "", 100, n); err != nil {
				return 0, err
			}
			e.log.Info("T9 split", "partitions", parts, "push", pushed, "consume", time.Since(start)-pushed)
			return rate(n, time.Since(start)), nil
		}}
	}
	s, err := interleave(ctx, e, e.reps, spread(1), spread(many))
	if err != nil {
		return nil, err
	}
	r := compare(s, "T9", fmt.Sprintf("push 1000s + pop 100/ack, %d vs 1 partition (%d msgs)", many, n), "msg/s", fmt.Sprintf("%d partitions", many), "1 partitions")
	r.RefName = "1 partition"
	r.Must, r.Goal = atLeast("ratio", 0.6, "≥ 0.6×"), atLeast("ratio", 0.7, "≥ 0.7× (Queen 0.71×)")
	idle, err := idlePartitions(ctx, e, many)
	if err != nil {
		return nil, err
	}
	return []Row{r, idle}, nil
}

// idlePartitions times push→pop→ack of one message at a time on a busy
// partition, beside many partitions that were drained earlier and beside
// none: a pop that names no partition must not pay for the idle ones
// (before migration 0009 it walked them all: 5.9 ms a pop behind 10,000).
func idlePartitions(ctx context.Context, e *env, idle int) (Row, error) {
	cycles := e.size(2_000, 300)
	run := func(name string, idle int) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			o, err := e.openOurs(ctx, "t9-idle", e.sync)
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
	r := compare(s, "T9", fmt.Sprintf("  push→pop→ack on a busy partition beside %d drained ones vs none", idle), "msg/s", "beside idle", "beside none")
	r.RefName = "beside none"
	r.Note = "not a PERF.md case: a pop that names no partition must not walk the idle ones"
	return r, nil
}

// T10: 5 % of the messages fail their first try and their one retry, and
// end in the dead letters. Popped 100 at a time as PERF.md's other
// lifecycle cases are; and, for information, one at a time, where no
// failure sends the rest of a batch back (SPEC 3.6), so what is left is
// the cost of the retry and of filing the dead letter.

func caseT10(ctx context.Context, e *env) ([]Row, error) {
	run := func(name string, n, batch, failEvery int) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			o, err := e.openOurs(ctx, "t10-ours", e.sync)
			if err != nil {
				return 0, err
			}
			defer o.close()
			opts := map[string]json.RawMessage{"retryLimit": json.RawMessage("1"), "retryDelay": json.RawMessage("0")}
			if _, err := o.b.Configure(ctx, benchQueue, opts, "bench"); err != nil {
				return 0, err
			}
			if err := o.fill(ctx, benchQueue, n, nil); err != nil {
				return 0, err
			}
			start := time.Now()
			if err := consumeFailing(ctx, o, n, batch, failEvery); err != nil {
				return 0, err
			}
			return rate(n, time.Since(start)), nil
		}}
	}
	n, n1 := e.size(200_000, 600), e.size(20_000, 300)
	s, err := interleave(ctx, e, e.reps, run("no failures", n, 100, 0), run("5% failing", n, 100, 20),
		run("no failures, 1 at a time", n1, 1, 0), run("5% failing, 1 at a time", n1, 1, 20))
	if err != nil {
		return nil, err
	}
	r := compare(s, "T10", fmt.Sprintf("pop 100/ack, 5%% fail twice → DLQ (%d msgs)", n), "msg/s", "5% failing", "no failures")
	r.Must, r.Goal = atLeast("ratio", 0.85, "≥ 0.85× no failures"), atLeast("ratio", 0.95, "≥ 0.95×")
	r.Note = "retryLimit 1, retryDelay 0: a failure voids the rest of its batch, which comes back"
	one := compare(s, "T10", fmt.Sprintf("  the same popped 1 at a time (%d msgs)", n1), "msg/s", "5% failing, 1 at a time", "no failures, 1 at a time")
	one.Note = "no batch to void: the cost of the retry and of filing the dead letter alone"
	return []Row{r, one}, nil
}

// consumeFailing pops batches and acknowledges them, failing every
// failEvery-th message (by its index) each time it comes, until all n are
// settled: completed, or dead-lettered.
func consumeFailing(ctx context.Context, o *ours, n, batch, failEvery int) error {
	settled := 0
	for settled < n {
		res, err := o.b.Pop(ctx, broker.PopRequest{Queue: benchQueue, Batch: batch})
		if err != nil {
			return err
		}
		if len(res.Messages) == 0 {
			return fmt.Errorf("pop found nothing after %d of %d settled", settled, n)
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
			if idx, _, ok := payloadFields(m.Payload); ok && failEvery > 0 && idx%failEvery == 0 {
				acks[i].Status, acks[i].Error = broker.AckFailed, "bench: induced failure"
			}
		}
		out, err := o.b.AckBatch(ctx, "", acks)
		if err != nil {
			return err
		}
		for i, r := range out {
			switch {
			case !r.Success:
				return fmt.Errorf("ack refused: %s", r.Error)
			case r.Requeued:
			case acks[i].Status == broker.AckCompleted, r.DLQ, r.Dropped:
				settled++
			}
		}
	}
	return nil
}

// T11: T4 with synchronous=FULL against NORMAL.

func caseT11(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(100_000, 1_000)
	s, err := interleave(ctx, e, e.reps,
		variant{"FULL", func(ctx context.Context, _ int) (float64, error) { return oursLifecycleBatched(ctx, e, db.SyncFull, n) }},
		variant{"NORMAL", func(ctx context.Context, _ int) (float64, error) {
			return oursLifecycleBatched(ctx, e, db.SyncNormal, n)
		}},
	)
	if err != nil {
		return nil, err
	}
	r := compare(s, "T11", fmt.Sprintf("T4 lifecycle, FULL vs NORMAL (%d msgs)", n), "msg/s", "FULL", "NORMAL")
	r.Must, r.Goal = atLeast("ratio", 0.7, "≥ 0.7×"), atLeast("ratio", 0.85, "≥ 0.85×")
	return []Row{r}, nil
}
