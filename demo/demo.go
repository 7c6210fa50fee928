// Package demo makes realistic traffic against a running broker, so that a
// newcomer sees what Lazarus is for within seconds: three queues with
// several tenant partitions each, three consumer groups, producers pushing
// JSON at a modest rate, and workers that complete most messages and fail
// some with the transient and permanent errors real systems produce. The
// queues get short retry delays and few retries, so dead letters pile up
// at once.
//
// It talks to the broker in-process (Push, Pop, AckBatch) and never logs a
// payload or an error text taken from one: only counts.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Config configures the demo.
type Config struct {
	Broker *broker.Broker
	Logger *slog.Logger // default slog.Default()
	// Speed multiplies the push rate (default 1: about 12 messages a
	// second across the three queues). Tests raise it.
	Speed float64
	// ReportEvery is how often the counts are logged (default 10s).
	ReportEvery time.Duration
	// History: before the traffic starts, write a week of synthetic
	// history for the charts (WriteHistory), which a database with any
	// history of its own never gets. Serve sets it on the first start of
	// a database that lazarus demo created.
	History bool
	// Seed of the synthetic history (0: DefaultHistorySeed).
	Seed uint64
}

// actor is who the demo's configure calls are recorded as in the audit trail.
const actor = "demo"

// Groups of the demo.
const (
	groupBilling   = "billing"
	groupAnalytics = "analytics"
	groupNotifier  = "notifier"
)

// queue is one demo queue: its options, its partitions (tenants), what its
// producer pushes, and how each group that reads it handles a message.
type queue struct {
	name       string
	options    map[string]any
	partitions []string
	every      time.Duration // mean time between pushes
	produce    func(tenant string) (txid string, payload any)
	handlers   map[string]handler // group -> handler
}

// handler processes one message for one group: "" when it succeeded, else
// the error text, and whether the worker knows the failure is permanent
// (it then acks dlq at once rather than failed).
type handler func(ctx context.Context, d broker.Delivery) (errText string, permanent bool)

var tenants = []string{"acme-corp", "globex", "initech", "umbrella", "hooli"}

func queues() []queue {
	return []queue{
		{
			name:       "orders",
			options:    map[string]any{"leaseTime": 30, "retryLimit": 3, "retryDelay": 500},
			partitions: tenants,
			every:      200 * time.Millisecond,
			produce:    newOrder,
			handlers:   map[string]handler{groupBilling: billOrder, groupAnalytics: track},
		},
		{
			name:       "payments",
			options:    map[string]any{"leaseTime": 30, "retryLimit": 2, "retryDelay": 400},
			partitions: tenants,
			every:      250 * time.Millisecond,
			produce:    newPayment,
			handlers:   map[string]handler{groupBilling: chargePayment, groupAnalytics: track},
		},
		{
			name:       "emails",
			options:    map[string]any{"leaseTime": 30, "retryLimit": 2, "retryDelay": 200},
			partitions: tenants,
			every:      300 * time.Millisecond,
			produce:    newEmail,
			handlers:   map[string]handler{groupNotifier: sendEmail, groupAnalytics: track},
		},
	}
}

// workersPerGroup is how many workers each group runs on each queue, so
// that partitions are worked on in parallel as in a real deployment.
const workersPerGroup = 2

// counts are the demo's running totals, logged now and then.
type counts struct {
	pushed, duplicates, completed, failed, deadLettered, dropped atomic.Int64
}

// Run configures the demo queues and makes traffic until ctx is cancelled.
// It returns nil then, once every producer and worker has stopped; it
// returns an error only when the queues cannot be configured.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Broker == nil {
		return errors.New("demo: broker is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Speed <= 0 {
		cfg.Speed = 1
	}
	if cfg.ReportEvery <= 0 {
		cfg.ReportEvery = 10 * time.Second
	}
	d := &runner{b: cfg.Broker, log: cfg.Logger, speed: cfg.Speed}
	qs := queues()
	for _, q := range qs {
		if err := d.configure(ctx, q); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	if cfg.History {
		start := time.Now()
		h, err := writeHistory(ctx, d.b, qs, cfg.Seed)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			// The traffic runs without it: the charts start flat.
			cfg.Logger.Error("demo history not written", "err", err)
		case h.Until.IsZero():
			cfg.Logger.Info("demo history not written: the database has a history of its own")
		default:
			cfg.Logger.Info("demo history written", "from", h.From, "until", h.Until, "took", time.Since(start).Round(time.Millisecond).String())
		}
	}
	cfg.Logger.Info("demo traffic started", "queues", len(qs), "partitions_per_queue", len(tenants),
		"groups", []string{groupBilling, groupAnalytics, groupNotifier})

	var wg sync.WaitGroup
	for _, q := range qs {
		wg.Go(func() { d.produce(ctx, q) })
		for group, h := range q.handlers {
			for range workersPerGroup {
				wg.Go(func() { d.work(ctx, q.name, group, h) })
			}
		}
	}
	wg.Go(func() { d.report(ctx, cfg.ReportEvery) })
	wg.Wait()
	d.logCounts("demo traffic stopped")
	return nil
}

type runner struct {
	b     *broker.Broker
	log   *slog.Logger
	speed float64
	n     counts
}

func (d *runner) configure(ctx context.Context, q queue) error {
	raw := make(map[string]json.RawMessage, len(q.options))
	for k, v := range q.options {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("demo: option %s: %w", k, err)
		}
		raw[k] = b
	}
	if _, err := d.b.Configure(ctx, q.name, raw, actor); err != nil {
		return fmt.Errorf("demo: configure %s: %w", q.name, err)
	}
	return nil
}

// produce pushes q's messages at about its rate: mostly one at a time,
// sometimes a small burst, now and then a producer's retry of a message
// already sent (which the broker reports as a duplicate).
func (d *runner) produce(ctx context.Context, q queue) {
	var last broker.PushItem
	for {
		mean := float64(q.every) / d.speed
		if !sleep(ctx, time.Duration(mean*(0.5+rand.Float64()))) {
			return
		}
		n := 1
		if rand.IntN(10) == 0 {
			n = 2 + rand.IntN(4)
		}
		items := make([]broker.PushItem, 0, n+1)
		for range n {
			tenant := tenants[rand.IntN(len(tenants))]
			txid, payload := q.produce(tenant)
			body, err := json.Marshal(payload)
			if err != nil {
				d.log.Error("demo payload", "queue", q.name, "err", err)
				return
			}
			items = append(items, broker.PushItem{Queue: q.name, Partition: tenant, Payload: body, TransactionID: txid, TraceID: traceID()})
		}
		if last.TransactionID != "" && rand.IntN(50) == 0 {
			items = append(items, last) // the producer timed out and sent it again
		}
		last = items[0]
		res, err := d.b.Push(ctx, items)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.log.Warn("demo push failed", "queue", q.name, "err", err)
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		for _, r := range res {
			if r.Status == broker.StatusDuplicate {
				d.n.duplicates.Add(1)
			} else {
				d.n.pushed.Add(1)
			}
		}
	}
}

// work is one worker of group on queue: pop a batch, handle each message,
// ack them all in one call.
func (d *runner) work(ctx context.Context, queueName, group string, h handler) {
	for ctx.Err() == nil {
		res, err := d.b.Pop(ctx, broker.PopRequest{Queue: queueName, Group: group, Batch: 5, Wait: true, Timeout: 5 * time.Second})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.log.Warn("demo pop failed", "queue", queueName, "group", group, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		if len(res.Messages) == 0 {
			sleep(ctx, 50*time.Millisecond) // the broker is closing, or the wait timed out
			continue
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			a := broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckCompleted}
			if ctx.Err() != nil {
				// Stopping: hand the rest back at once, no retry spent.
				a.Status = broker.AckRetry
				acks[i] = a
				continue
			}
			errText, permanent := handle(ctx, h, m)
			switch {
			case errText == "":
			case permanent:
				a.Status, a.Error = broker.AckDLQ, errText
			default:
				a.Status, a.Error = broker.AckFailed, errText
			}
			acks[i] = a
		}
		// Work that was done is acked even when the demo is stopping, so
		// that its leases do not linger into the next start.
		ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		results, err := d.b.AckBatch(ackCtx, group, acks)
		cancel()
		if err != nil {
			d.log.Warn("demo ack failed", "queue", queueName, "group", group, "err", err)
			continue
		}
		for i, r := range results {
			// Acks behind a failure that gets retried are refused: those
			// messages come back with it (SPEC.md section 3).
			if !r.Success {
				continue
			}
			switch {
			case r.DLQ:
				d.n.deadLettered.Add(1)
			case r.Dropped:
				d.n.dropped.Add(1)
			case acks[i].Status == broker.AckCompleted:
				d.n.completed.Add(1)
			case acks[i].Status == broker.AckFailed:
				d.n.failed.Add(1)
			}
		}
	}
}

// handle runs h, turning a panic into the failure a worker would report:
// the panic and its stack.
func handle(ctx context.Context, h handler, m broker.Delivery) (errText string, permanent bool) {
	defer func() {
		if r := recover(); r != nil {
			errText, permanent = panicText(r), false
		}
	}()
	time.Sleep(time.Duration(5+rand.IntN(25)) * time.Millisecond) // the work itself
	return h(ctx, m)
}

func (d *runner) report(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.logCounts("demo traffic")
		}
	}
}

func (d *runner) logCounts(msg string) {
	d.log.Info(msg,
		"pushed", d.n.pushed.Load(),
		"duplicates", d.n.duplicates.Load(),
		"completed", d.n.completed.Load(),
		"failed", d.n.failed.Load(),
		"dead_lettered", d.n.deadLettered.Load(),
		"dropped", d.n.dropped.Load())
}

// sleep waits for d or until ctx is done; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// panicText is what a worker that recovers a panic reports: the panic
// value and the stack, as Go prints them.
func panicText(r any) string {
	return fmt.Sprintf("panic: %v [recovered]\n\n%s", r, debug.Stack())
}
