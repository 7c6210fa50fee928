package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"maragu.dev/goqite"

	"github.com/lazarus-dlq/lazarus/broker"
)

// T5: the batched lifecycle through the HTTP API.

const (
	t5Producers = 4
	t5Consumers = 2
	t5PushBatch = 10
	t5PopBatch  = 100
)

func caseT5(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(200_000, 3_000)
	reps := e.reps
	if !e.quick {
		reps = 3 // a minute a run at today's rates; no reference to interleave with
	}
	s, err := interleave(ctx, e, reps, variant{"ours", func(ctx context.Context, _ int) (float64, error) { return oursHTTP(ctx, e, n) }})
	if err != nil {
		return nil, err
	}
	r := single(s, "T5", fmt.Sprintf("HTTP push 10 / pop 100 / batch ack (%d msgs)", n), "msg/s", "ours")
	r.Must, r.Goal = atLeast("ours", 3000, "≥ 3k msg/s"), atLeast("ours", 6000, "≥ 6k msg/s (Queen/vCPU, fsync)")
	r.Note = fmt.Sprintf("%d producers to %d partitions, %d long-polling consumers, admin bearer token; synchronous=%s", t5Producers, t5Producers, t5Consumers, e.sync)
	return []Row{r}, nil
}

func oursHTTP(ctx context.Context, e *env, n int) (float64, error) {
	o, err := e.openOurs(ctx, "t5-ours", e.sync)
	if err != nil {
		return 0, err
	}
	defer o.close()
	srv, err := startServer(o)
	if err != nil {
		return 0, err
	}
	defer srv.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var acked atomic.Int64
	var end atomic.Int64
	start := time.Now()
	err = parallel(t5Producers+t5Consumers, func(w int) error {
		if w < t5Producers {
			items := make([]apiPushItem, 0, t5PushBatch)
			part := fmt.Sprintf("p%d", w)
			left := share(n, t5Producers, w)
			for i := 0; left > 0; i++ {
				items = items[:0]
				for range min(t5PushBatch, left) {
					items = append(items, apiPushItem{Queue: benchQueue, Partition: part, Payload: payload(i, 0)})
				}
				if _, err := srv.api(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": items}, nil); err != nil {
					return err
				}
				left -= len(items)
			}
			return nil
		}
		for acked.Load() < int64(n) {
			var pop apiPop
			status, err := srv.api(ctx, http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s?batch=%d&wait=true&timeout=200", benchQueue, t5PopBatch), nil, &pop)
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			if err != nil {
				return err
			}
			if status == http.StatusNoContent || len(pop.Messages) == 0 || pop.LeaseID == nil {
				continue
			}
			acks := make([]apiAck, len(pop.Messages))
			for i, m := range pop.Messages {
				acks[i] = apiAck{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: *pop.LeaseID, Status: broker.AckCompleted}
			}
			var res []apiAckResult
			if _, err := srv.api(ctx, http.MethodPost, "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, &res); err != nil {
				return err
			}
			for _, r := range res {
				if !r.Success {
					return fmt.Errorf("ack refused: %v", r.Error)
				}
			}
			if acked.Add(int64(len(acks))) >= int64(n) {
				end.CompareAndSwap(0, int64(time.Since(start)))
				cancel() // the other consumer may be in a long poll
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rate(n, time.Duration(end.Load())), nil
}

// T6: latency from push to delivery at a steady 1,000 messages a second.

const (
	t6Rate = 1000 // messages a second
	// goqitePoll is how often the goqite consumer polls an empty queue
	// (goqite's job runner polls every 100 ms by default).
	goqitePoll = 10 * time.Millisecond
)

func caseT6(ctx context.Context, e *env) ([]Row, error) {
	d := e.dur(5*time.Second, 500*time.Millisecond)
	p50s := Samples{}
	run := func(name string, fn func(ctx context.Context, d time.Duration) ([]time.Duration, error)) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			lat, err := fn(ctx, d)
			if err != nil {
				return 0, err
			}
			p50s[name] = append(p50s[name], percentile(lat, 0.50))
			return percentile(lat, 0.99), nil
		}}
	}
	s, err := interleave(ctx, e, e.reps,
		run("ours", func(ctx context.Context, d time.Duration) ([]time.Duration, error) { return oursPaced(ctx, e, d) }),
		run("goqite", func(ctx context.Context, d time.Duration) ([]time.Duration, error) { return goqitePaced(ctx, e, d) }),
	)
	if err != nil {
		return nil, err
	}
	p99 := compare(s, "T6", fmt.Sprintf("push→delivery p99 at 1k msg/s for %s", d), "ms", "ours", "goqite")
	p99.Must = atMost("ratio", 1.0, "≤ goqite's p99")
	p99.Note = fmt.Sprintf("ours: Pop wait=true batch 100; goqite: ReceiveAndWait polling every %s", goqitePoll)
	p50 := compare(p50s, "T6", "  push→delivery p50", "ms", "ours", "goqite")
	p50.Goal = atMost("ours", 1.0, "p50 ≤ 1 ms")
	return []Row{p99, p50}, nil
}

// pace calls push for message i at start + i/rate, for d, and returns
// how many it pushed. Each payload carries its intended time, so that a
// producer that falls behind shows in the latencies.
func pace(ctx context.Context, d time.Duration, push func(i int, body []byte) error) (int, error) {
	n := int(d.Seconds() * t6Rate)
	start := time.Now().Add(5 * time.Millisecond)
	for i := range n {
		at := start.Add(time.Duration(i) * time.Second / t6Rate)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if err := push(i, payload(i, at.UnixNano())); err != nil {
			return i, err
		}
	}
	return n, nil
}

// latencyOf is how long ago the payload's intended send time was.
func latencyOf(body []byte, now time.Time) (time.Duration, error) {
	_, t, ok := payloadFields(body)
	if !ok {
		return 0, fmt.Errorf("payload without a time: %.40s", body)
	}
	return now.Sub(time.Unix(0, t)), nil
}

func oursPaced(ctx context.Context, e *env, d time.Duration) ([]time.Duration, error) {
	o, err := e.openOurs(ctx, "t6-ours", e.sync)
	if err != nil {
		return nil, err
	}
	defer o.close()
	want := int(d.Seconds() * t6Rate)
	lat := make([]time.Duration, 0, want)
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	err = parallel(2, func(w int) error {
		if w == 0 {
			_, err := pace(ctx, d, func(_ int, body []byte) error { return o.push(ctx, benchQueue, "", body) })
			return err
		}
		for len(lat) < want {
			res, err := o.b.Pop(ctx, broker.PopRequest{Queue: benchQueue, Batch: 100, Wait: true, Timeout: time.Second})
			if err != nil {
				return err
			}
			now := time.Now()
			for _, m := range res.Messages {
				l, err := latencyOf(m.Payload, now)
				if err != nil {
					return err
				}
				lat = append(lat, l)
			}
			if len(res.Messages) > 0 {
				if err := o.ackAll(ctx, "", res); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return lat, err
}

func goqitePaced(ctx context.Context, e *env, d time.Duration) ([]time.Duration, error) {
	g, err := e.openGoqite(ctx, "t6-goqite", e.sync)
	if err != nil {
		return nil, err
	}
	defer g.close()
	want := int(d.Seconds() * t6Rate)
	lat := make([]time.Duration, 0, want)
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	err = parallel(2, func(w int) error {
		if w == 0 {
			_, err := pace(ctx, d, func(_ int, body []byte) error { return g.q.Send(ctx, goqite.Message{Body: body}) })
			return err
		}
		for len(lat) < want {
			m, err := g.q.ReceiveAndWait(ctx, goqitePoll)
			if err != nil {
				return err
			}
			l, err := latencyOf(m.Body, time.Now())
			if err != nil {
				return err
			}
			lat = append(lat, l)
			if err := g.q.Delete(ctx, m.ID); err != nil {
				return err
			}
		}
		return nil
	})
	return lat, err
}

// T7: pop+ack latency with a deep backlog against a shallow one.

const t7Partitions = 100

func caseT7(ctx context.Context, e *env) ([]Row, error) {
	deep := e.size(1_000_000, 30_000)
	const shallow = 1_000
	ops := e.size(2_000, 200)
	part := func(i int) string { return fmt.Sprintf("p%03d", i%t7Partitions) }
	open := func(name string, pending int) (*ours, error) {
		o, err := e.openOurs(ctx, name, e.sync)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if err := o.fill(ctx, benchQueue, pending, part); err != nil {
			o.close()
			return nil, err
		}
		e.log.Info("T7 filled", "pending", pending, "took", time.Since(start))
		return o, nil
	}
	big, err := open("t7-deep", deep)
	if err != nil {
		return nil, err
	}
	defer big.close()
	small, err := open("t7-shallow", shallow)
	if err != nil {
		return nil, err
	}
	defer small.close()
	p50s := Samples{}
	measure := func(name string, o *ours, refill bool) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			lat := make([]time.Duration, 0, ops)
			taken := 0 // since the last refill
			for range ops {
				if refill && taken == shallow/2 {
					// Back up to the backlog (untimed): the shallow queue
					// stays between half and all of it.
					if err := o.fill(ctx, benchQueue, taken, part); err != nil {
						return 0, err
					}
					taken = 0
				}
				t := time.Now()
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
				lat = append(lat, time.Since(t))
				taken++
			}
			if refill && taken > 0 { // back to the backlog this repetition started with
				if err := o.fill(ctx, benchQueue, taken, part); err != nil {
					return 0, err
				}
			}
			p50s[name] = append(p50s[name], percentile(lat, 0.5))
			return percentile(lat, 0.99), nil
		}}
	}
	deepName, shallowName := fmt.Sprintf("%dk pending", deep/1000), "1k pending"
	s, err := interleave(ctx, e, e.reps, measure(deepName, big, false), measure(shallowName, small, true))
	if err != nil {
		return nil, err
	}
	r := compare(s, "T7", fmt.Sprintf("pop+ack p99, %s vs 1k pending, %d partitions", deepName, t7Partitions), "ms", deepName, shallowName)
	r.Must, r.Goal = atMost("ratio", 1.5, "≤ 1.5× at 1k"), atMost("ratio", 1.2, "≤ 1.2×")
	r.Note = fmt.Sprintf("%d pop(1)+ack a repetition", ops)
	p50 := compare(p50s, "T7", "  pop+ack p50", "ms", deepName, shallowName)
	// What the queue page and GET /api/v1/resources/queues/:queue read:
	// the partitions' counts of messages and the group's lag.
	describe := Samples{}
	for range e.reps {
		for _, v := range []struct {
			name string
			o    *ours
		}{{deepName, big}, {shallowName, small}} {
			lat := make([]time.Duration, 0, 20)
			for range 20 {
				t := time.Now()
				if _, err := v.o.b.Queue(ctx, benchQueue); err != nil {
					return nil, err
				}
				lat = append(lat, time.Since(t))
			}
			describe[v.name] = append(describe[v.name], percentile(lat, 0.5))
		}
	}
	d := compare(describe, "T7", "  describe the queue p50 (its page and API)", "ms", deepName, shallowName)
	d.Note = "counts kept by the writer (migration 0010); they had been counted on each look"
	return []Row{r, p50, d}, nil
}
