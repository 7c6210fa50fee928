package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// F3N: what the notifications' outbox costs F3's ack path (issue 33).
// F3's failing run (5 % of the messages failing twice into the DLQ,
// popped one at a time) with no channel or rule (a), with a channel and a
// rule that match nothing (b: queue pattern "nomatch*"), and with a rule
// sending error_group.new and error_group.regressed of F3's queue to a
// channel whose Sender does nothing (c), all interleaved in one run.
// F3's failures share one error text, so one error group and one
// notification a run: each is measured again with a distinct error text
// for every failing message ("boom kind-" and a word of letters, since
// the fingerprint masks numbers), so that every dead letter starts an
// error group and (c) writes and sends a notification for each; there
// (c') is (c) without a Sender (Config.Notify nil: the rows stay
// pending), which parts the outbox's writing from its sending.
//
// Every variant runs the broker's Run beside the deliveries, so that
// (c)'s notifications are sent by the real sending loop, woken by the
// commits that wrote them, and the CPU measured includes their sending
// (with a Sender that does nothing, no network); the timed part ends
// once every notification written has been handed to the Sender. Run's
// maintenance is kept off (a Leader that leads but says it does not, and
// tickers that never fire), so that its run at the lead cannot fall into
// the timed part of one variant and not another.

func caseF3N(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 1_000)
	cpu := Samples{}
	deliveries, written, sent := map[string]int{}, map[string]int{}, map[string]int{}
	run := func(name, pattern string, distinct, send bool) variant {
		return statVariant(name, cpu, func(ctx context.Context) (runStat, error) {
			st, k, w, s, err := runF3N(ctx, e, n, pattern, distinct, send)
			deliveries[name], written[name], sent[name] = k, w, s
			return st, err
		})
	}
	const (
		a, b, c    = "(a) no rule", "(b) rule matching nothing", "(c) rule matching, no-op sender"
		am, bm, cm = "(a) no rule, many groups", "(b) rule matching nothing, many groups", "(c) rule matching, no-op sender, many groups"
		km         = "(c') rule matching, no sender, many groups"
	)
	_, err := interleave(ctx, e, e.reps,
		run(a, "", false, true), run(b, "nomatch*", false, true), run(c, benchQueue, false, true),
		run(am, "", true, true), run(bm, "nomatch*", true, true), run(cm, benchQueue, true, true),
		run(km, benchQueue, true, false))
	if err != nil {
		return nil, err
	}
	row := func(measure, ours, ref string, must, goal *Target) Row {
		r := compare(cpu, "F3N", measure, "µs", ours, ref)
		r.Must, r.Goal = must, goal
		r.Note = fmt.Sprintf("%d msgs, 5%% failing twice into the DLQ, popped 1 at a time; %d / %d deliveries; outbox rows written: %d (%s), %d (%s), handed to the Sender %d; CPU of the process (utime+stime) over the pops, acks and sending",
			n, deliveries[ours], deliveries[ref], written[ours], ours, written[ref], ref, sent[ours])
		return r
	}
	// (b) is the same ack path as (a) but for reading the rules at each
	// event, so within the noise; (c) is PERF's F3 goal for the outbox.
	must, goal := func() *Target { return atMost("ratio", 1.05, "≤ 1.05×") }, func() *Target { return atMost("ratio", 1.02, "≤ 1.02×") }
	rb := row("CPU a delivery, (b) a rule matching nothing vs (a) none, F3's one error group", b, a, must(), goal())
	rc := row("CPU a delivery, (c) a rule matching, no-op sender vs (a) none, F3's one error group", c, a, must(), goal())
	rbm := row("CPU a delivery, (b) vs (a), every dead letter a new error group", bm, am, must(), goal())
	rcm := row("CPU a delivery, (c) vs (a), every dead letter a new error group (a notification each)", cm, am, must(), goal())
	kept := row("  CPU a delivery, (c') a rule matching, no Sender (the rows kept pending) vs (a), every dead letter a new error group (info: the outbox without its sending)", km, am, nil, nil)
	many := compare(cpu, "F3N", "  CPU a delivery, (a) many error groups vs (a) one (info: the error groups' own cost)", "µs", am, a)
	many.Note = fmt.Sprintf("%d error groups a run vs 1; no rule", written[cm])
	return []Row{rb, rc, rbm, rcm, kept, many}, nil
}

// runF3N is one run of F3N: a broker with a no-op Sender (none unless
// send: the notifications stay pending) and, when
// pattern is not "", a channel and a rule sending error_group.new and
// error_group.regressed of the queues pattern matches; F3's failing
// deliveries, with one error text or (distinct) one for each failing
// message. It returns the run's stat, the deliveries, and how many
// notifications were written to the outbox and handed to the Sender.
func runF3N(ctx context.Context, e *env, n int, pattern string, distinct, send bool) (st runStat, delivered, written, sent int, err error) {
	path := e.path("f3n")
	defer removeDB(path)
	d, err := db.OpenWith(ctx, path, db.Options{Sync: e.sync})
	if err != nil {
		return st, 0, 0, 0, err
	}
	defer d.Close()
	sender := &nopSender{handed: make(chan struct{}, 1)}
	var raised atomic.Int64 // error_group.new and .regressed of the queue
	cfg := broker.Config{Store: d, OnEvent: func(ev broker.Event) {
		if ev.Queue == benchQueue && (ev.Kind == broker.EventErrorGroupNew || ev.Kind == broker.EventErrorGroupRegressed) {
			raised.Add(1)
		}
	}}
	if send {
		cfg.Notify = sender
	}
	b := broker.New(cfg)
	defer b.Close()
	o := &ours{db: d, b: b, path: path}
	opts := map[string]json.RawMessage{"retryLimit": json.RawMessage("1"), "retryDelay": json.RawMessage("0")}
	if _, err := b.Configure(ctx, benchQueue, opts, "bench"); err != nil {
		return st, 0, 0, 0, err
	}
	if pattern != "" {
		ch, err := b.CreateChannel(ctx, broker.Channel{Kind: broker.ChannelWebhook, Name: "bench", URL: "https://hooks.example.com/bench"}, "bench")
		if err != nil {
			return st, 0, 0, 0, err
		}
		if _, err := b.CreateRule(ctx, broker.Rule{ChannelID: ch.ID, Queue: pattern,
			Events: []string{broker.EventErrorGroupNew, broker.EventErrorGroupRegressed}}, "bench"); err != nil {
			return st, 0, 0, 0, err
		}
	}
	if err := o.fill(ctx, benchQueue, n, nil); err != nil {
		return st, 0, 0, 0, err
	}
	rctx, stop := context.WithCancel(ctx)
	never := make(chan time.Time)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		b.Run(rctx, broker.RunConfig{Leader: benchLeader{}, MaintainTicks: never, FlushTicks: never})
	}()
	var errOf func(int) string
	if distinct {
		errOf = func(idx int) string { return "boom kind-" + letters(idx) }
	}
	sw := startStopwatch()
	delivered, err = consumeFailing(ctx, o, n, 1, 20, errOf)
	if err == nil && pattern == benchQueue && send {
		// Every notification written is sent before the clock stops.
		want := raised.Load()
		for sender.sent.Load() < want && ctx.Err() == nil {
			select {
			case <-sender.handed:
			case <-ctx.Done():
			}
		}
	}
	st = sw.stop(delivered)
	stop()
	<-ran
	if err != nil {
		return st, delivered, 0, 0, err
	}
	for before := int64(0); ; {
		page, err := b.Deliveries(ctx, broker.DeliveryQuery{Before: before, Limit: broker.MaxDeliveryPage})
		if err != nil {
			return st, delivered, 0, 0, err
		}
		written += len(page.Items)
		if page.Next == 0 {
			break
		}
		before = page.Next
	}
	if pattern == benchQueue && int64(written) != raised.Load() {
		return st, delivered, written, 0, fmt.Errorf("%d notifications written for %d events", written, raised.Load())
	}
	return st, delivered, written, int(sender.sent.Load()), ctx.Err()
}

// nopSender is a Sender that sends nothing and counts what it was handed
// (handed: a token after each, for whoever waits for them).
type nopSender struct {
	sent   atomic.Int64
	handed chan struct{}
}

func (s *nopSender) Send(context.Context, broker.Channel, broker.Notification) error {
	s.sent.Add(1)
	select {
	case s.handed <- struct{}{}:
	default:
	}
	return nil
}

// benchLeader leads (Run's jobs and sending of notifications run) but
// says it does not, so that Run's maintenance never runs.
type benchLeader struct{}

func (benchLeader) Lead(ctx context.Context, fn func(context.Context)) { fn(ctx) }
func (benchLeader) Leading() bool                                      { return false }

// letters spells i in the letters a to z, at least three of them: a word
// the fingerprint keeps (it masks numbers).
func letters(i int) string {
	var b []byte
	for k := 0; k < 3 || i > 0; k++ {
		b = append(b, byte('a'+i%26))
		i /= 26
	}
	return string(b)
}
