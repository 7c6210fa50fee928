// Package demo makes realistic traffic against a running broker, so that a
// newcomer sees what Lazarus is for within seconds: three queues with
// several tenant partitions each, three consumer groups, producers pushing
// JSON at the day's rhythm, and workers that complete most messages and
// fail some with the transient and permanent errors real systems produce,
// as often as the week of history says (rates.go: one source for both).
// The queues get short retry delays and few retries, so a message that
// cannot be taken is a dead letter within seconds; a triage every ten
// minutes replays the transient ones and deletes the hopeless ones, so
// that the dead letters waiting stay at what an hour files. Each queue's
// traffic opens with a small bad batch, so that there are dead letters
// to look at within seconds.
//
// It talks to the broker in-process (Push, Pop, AckBatch, ReplayWith,
// DeleteIDs, as actor demo) and never logs a payload or an error text
// taken from one: only counts.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"slices"
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
	// second across the three queues at the day's peak, rhythm's share
	// of it at other times). Tests raise it.
	Speed float64
	// Clock is the time the triage and the day's rhythm go by (default
	// time.Now); give it the broker's clock.
	Clock func() time.Time
	// ReportEvery is how often the counts are logged (default 10s).
	ReportEvery time.Duration
	// History: before the traffic starts, write a week of synthetic
	// history for the charts (WriteHistory), which a database with any
	// history of its own never gets. lazarus demo sets it.
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
	every      time.Duration // mean time between pushes at the day's peak
	produce    func(rng *rand.Rand, tenant string) (txid string, payload any)
	// bad makes a message of a burst, which main cannot take.
	bad      func(rng *rand.Rand, tenant string) (txid string, payload any)
	main     string             // the group whose work fails most
	handlers map[string]handler // group -> handler
}

// retryLimit is the queue's retryLimit option.
func (q queue) retryLimit() int { return q.options["retryLimit"].(int) }

// handler processes one message for one group: "" when it succeeded, else
// the error text, and whether the worker knows the failure is permanent
// (it then acks dlq at once rather than failed).
type handler func(ctx context.Context, rng *rand.Rand, d broker.Delivery) (errText string, permanent bool)

var tenants = []string{"acme-corp", "globex", "initech", "umbrella", "hooli"}

func queues() []queue {
	return []queue{
		{
			name:       "orders",
			options:    map[string]any{"leaseTime": 30, "retryLimit": 3, "retryDelay": 500},
			partitions: tenants,
			every:      200 * time.Millisecond,
			produce:    newOrder,
			bad:        badOrder,
			main:       groupBilling,
			handlers:   map[string]handler{groupBilling: billOrder, groupAnalytics: track},
		},
		{
			name:       "payments",
			options:    map[string]any{"leaseTime": 30, "retryLimit": 2, "retryDelay": 400},
			partitions: tenants,
			every:      250 * time.Millisecond,
			produce:    newPayment,
			bad:        badPayment,
			main:       groupBilling,
			handlers:   map[string]handler{groupBilling: chargePayment, groupAnalytics: track},
		},
		{
			name:       "emails",
			options:    map[string]any{"leaseTime": 30, "retryLimit": 2, "retryDelay": 200},
			partitions: tenants,
			every:      300 * time.Millisecond,
			produce:    newEmail,
			bad:        badEmail,
			main:       groupNotifier,
			handlers:   map[string]handler{groupNotifier: sendEmail, groupAnalytics: track},
		},
	}
}

// The bad batch each queue's traffic opens with: 3 to 7 messages.
const openMin, openSpan = 3, 5

// workersPerGroup is how many workers each group runs on each queue, so
// that partitions are worked on in parallel as in a real deployment.
const workersPerGroup = 2

// counts are the demo's running totals, logged now and then.
type counts struct {
	pushed, duplicates, completed, failed, deadLettered, dropped, replayed, deleted atomic.Int64
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
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	d := &runner{b: cfg.Broker, log: cfg.Logger, speed: cfg.Speed, now: cfg.Clock}
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
	seed := rand.Uint64() // the live traffic differs from run to run
	stream := uint64(0)
	rng := func() *rand.Rand { stream++; return rand.New(rand.NewPCG(seed, stream)) }
	for _, q := range qs {
		r := rng()
		wg.Go(func() { d.produce(ctx, r, q) })
		for group, h := range q.handlers {
			for range workersPerGroup {
				r := rng()
				wg.Go(func() { d.work(ctx, r, q.name, group, h) })
			}
		}
	}
	wg.Go(func() { d.triageEvery(ctx) })
	wg.Go(func() { d.report(ctx, cfg.ReportEvery) })
	wg.Wait()
	d.logCounts("demo traffic stopped")
	return nil
}

type runner struct {
	b     *broker.Broker
	log   *slog.Logger
	speed float64
	now   func() time.Time
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

// produce pushes q's messages (makePush) at its rate at the time of day:
// q.every apart at the day's peak, on average.
func (d *runner) produce(ctx context.Context, rng *rand.Rand, q queue) {
	// It opens with a small bad batch (openMin to openMin+openSpan-1
	// messages: under the depth alert), so that the dead letters have
	// something to show within seconds; then the week's rates.
	items, err := d.makeItems(rng, q.name, openMin+rng.IntN(openSpan), q.bad)
	if err != nil {
		d.log.Error("demo payload", "queue", q.name, "err", err)
		return
	}
	if !d.push(ctx, q.name, items) {
		return
	}
	for {
		mean := float64(q.every) * meanBatch / (d.speed * rhythm(d.now()))
		if !sleep(ctx, time.Duration(mean*(0.5+rng.Float64()))) {
			return
		}
		if !d.pushSome(ctx, rng, q) {
			return
		}
	}
}

// meanBatch is the messages a push of pushSome makes on average, bursts
// aside: one, or 2 to 5 one time in ten.
const meanBatch = 0.9 + 0.1*3.5

// pushSome makes one push of q's producer; false when ctx ended.
func (d *runner) pushSome(ctx context.Context, rng *rand.Rand, q queue) bool {
	items, err := d.makePush(rng, q)
	if err != nil {
		d.log.Error("demo payload", "queue", q.name, "err", err)
		return false
	}
	return d.push(ctx, q.name, items)
}

// makePush makes the items of one push of q's producer: mostly one
// message, sometimes a small batch, now and then the retry of a message
// already sent, and about burstsPerDay times a day (at the day's average
// traffic) a burst its main worker cannot take.
func (d *runner) makePush(rng *rand.Rand, q queue) ([]broker.PushItem, error) {
	n, mk := 1, q.produce
	if rng.IntN(10) == 0 {
		n = 2 + rng.IntN(4)
	}
	if rng.Float64() < burstsPerDay*float64(q.every)*meanBatch/(24*float64(time.Hour)*meanRhythm) {
		n, mk = burstMin+rng.IntN(burstSpan), q.bad
	}
	items, err := d.makeItems(rng, q.name, n, mk)
	if err == nil && rng.IntN(50) == 0 {
		items = append(items, items[0]) // the producer timed out and sent it again
	}
	return items, err
}

// makeItems makes n messages of queue with mk, each to a tenant.
func (d *runner) makeItems(rng *rand.Rand, queue string, n int, mk func(*rand.Rand, string) (string, any)) ([]broker.PushItem, error) {
	items := make([]broker.PushItem, 0, n+1)
	for range n {
		tenant := tenants[rng.IntN(len(tenants))]
		txid, payload := mk(rng, tenant)
		body, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("demo payload of %s: %w", queue, err)
		}
		items = append(items, broker.PushItem{Queue: queue, Partition: tenant, Payload: body, TransactionID: txid, TraceID: traceID(rng)})
	}
	return items, nil
}

// push pushes items of queue; false when ctx ended.
func (d *runner) push(ctx context.Context, queue string, items []broker.PushItem) bool {
	res, err := d.b.Push(ctx, items)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		d.log.Warn("demo push failed", "queue", queue, "err", err)
		return sleep(ctx, time.Second)
	}
	for _, r := range res {
		if r.Status == broker.StatusDuplicate {
			d.n.duplicates.Add(1)
		} else {
			d.n.pushed.Add(1)
		}
	}
	return true
}

// work is one worker of group on queue: pop a batch, handle each message,
// ack them all in one call.
func (d *runner) work(ctx context.Context, rng *rand.Rand, queueName, group string, h handler) {
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
		d.settle(ctx, rng, queueName, group, h, res.Messages, func() {
			time.Sleep(time.Duration(5+rng.IntN(25)) * time.Millisecond) // the work itself
		})
	}
}

// settle handles msgs (work, between messages, is the work itself) and
// acks them all in one call.
func (d *runner) settle(ctx context.Context, rng *rand.Rand, queueName, group string, h handler, msgs []broker.Delivery, work func()) {
	acks := make([]broker.Ack, len(msgs))
	for i, m := range msgs {
		a := broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckCompleted}
		if ctx.Err() != nil {
			// Stopping: hand the rest back at once, no retry spent.
			a.Status = broker.AckRetry
			acks[i] = a
			continue
		}
		if work != nil {
			work()
		}
		errText, permanent := handle(ctx, h, rng, m)
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
		return
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

// triageEvery runs the triage every triageEvery of the clock (checked
// each second, so that an injected clock that jumps is followed).
func (d *runner) triageEvery(ctx context.Context) {
	next := d.now().Add(triageEvery)
	for sleep(ctx, time.Second) {
		if now := d.now(); !now.Before(next) {
			d.triage(ctx, now)
			next = now.Add(triageEvery)
		}
	}
}

// triage does what the on-call engineer's routine does with the dead
// letters waiting at now in the demo's queues and groups (never another
// queue's: serve --demo runs on the user's database), through the
// broker's own calls as actor demo (ReplayWith, DeleteIDs: audited as
// anyone's): those of an
// upstream's failure that are triageReplayAfter old are replayed, the
// hopeless that are triageDeleteAfter old deleted (each group's own).
func (d *runner) triage(ctx context.Context, now time.Time) {
	var replay []broker.DeadLetter
	del := map[string][]string{} // group -> message ids
	for _, dq := range queues() {
		q := broker.DLQQuery{Queue: dq.name, To: now.Add(-triageReplayAfter), Limit: 500}
		for ctx.Err() == nil {
			page, err := d.b.DeadLetters(ctx, q)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Warn("demo triage: list dead letters", "queue", dq.name, "err", err)
				}
				return
			}
			for _, dl := range page.Items {
				switch {
				case dq.handlers[dl.Group] == nil:
				case transientError(dl.Error):
					replay = append(replay, dl)
				case !dl.FailedAt.After(now.Add(-triageDeleteAfter)):
					del[dl.Group] = append(del[dl.Group], dl.MessageID())
				}
			}
			if page.Next == nil {
				break
			}
			q.After = page.Next
		}
	}
	// One by one, to the group that gave up on it only (a bulk replay by
	// id replays the message for every group that has a dead letter of it).
	for _, dl := range replay {
		_, err := d.b.ReplayWith(ctx, dl.MessageID(), broker.ReplayOptions{Actor: actor, Mode: broker.ReplayOwnGroup, Group: dl.Group})
		switch {
		case err == nil:
			d.n.replayed.Add(1)
		case ctx.Err() != nil:
			return
		default:
			d.log.Warn("demo triage: replay", "err", err)
		}
	}
	for _, group := range slices.Sorted(maps.Keys(del)) {
		res, err := d.b.DeleteIDs(ctx, del[group], group, actor)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("demo triage: delete", "group", group, "err", err)
		}
		d.n.deleted.Add(int64(res.Done))
	}
}

// handle runs h, turning a panic into the failure a worker would report:
// the panic and its stack.
func handle(ctx context.Context, h handler, rng *rand.Rand, m broker.Delivery) (errText string, permanent bool) {
	defer func() {
		if r := recover(); r != nil {
			errText, permanent = panicText(r), false
		}
	}()
	return h(ctx, rng, m)
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
		"dropped", d.n.dropped.Load(),
		"replayed", d.n.replayed.Load(),
		"deleted", d.n.deleted.Load())
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
