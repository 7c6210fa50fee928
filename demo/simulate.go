package demo

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Simulate runs the demo's traffic on cfg.Broker for span as Run makes it
// (the same producers, workers, opening batch and triage, as actor demo),
// but stepped minute by minute of the broker's clock instead of on
// timers, and deterministic by cfg.Seed (0: DefaultHistorySeed): each
// minute, the producers push what they would at that time of day; the
// workers take all there is, second by second for six seconds (a retry
// waits 200 to 500 ms); the clock goes on to the next minute; the triage
// runs every ten minutes. cfg.Clock must be the broker's clock, and
// advance must move it forward by its argument; after each minute, each
// (when not nil) is called with the clock's time. It configures the demo
// queues first. For tests and screenshots: an hour takes seconds.
func Simulate(ctx context.Context, cfg Config, span time.Duration, advance func(time.Duration), each func(time.Time) error) error {
	if cfg.Broker == nil || cfg.Clock == nil || advance == nil {
		return errors.New("demo: Simulate needs a broker, its clock and a way to advance it")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = DefaultHistorySeed
	}
	d := &runner{b: cfg.Broker, log: cfg.Logger, speed: 1, now: cfg.Clock}
	qs := queues()
	for _, q := range qs {
		if err := d.configure(ctx, q); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	for m := range int(span / time.Minute) {
		now := cfg.Clock()
		for _, q := range qs {
			var items []broker.PushItem
			if m == 0 {
				open, err := d.makeItems(rng, q.name, openMin+rng.IntN(openSpan), q.bad)
				if err != nil {
					return err
				}
				items = open
			}
			for range poisson(rng, float64(time.Minute)/(float64(q.every)*meanBatch)*rhythm(now)) {
				it, err := d.makePush(rng, q)
				if err != nil {
					return err
				}
				items = append(items, it...)
			}
			if len(items) > 0 && !d.push(ctx, q.name, items) {
				return ctx.Err()
			}
		}
		for range 6 {
			for _, q := range qs {
				for _, group := range slices.Sorted(maps.Keys(q.handlers)) { // one order: the seed's draws
					for {
						res, err := d.b.Pop(ctx, broker.PopRequest{Queue: q.name, Group: group, Batch: 5})
						if err != nil {
							return err
						}
						if len(res.Messages) == 0 {
							break
						}
						d.settle(ctx, rng, q.name, group, q.handlers[group], res.Messages, nil)
					}
				}
			}
			advance(time.Second)
		}
		advance(time.Minute - 6*time.Second)
		if (m+1)%int(triageEvery/time.Minute) == 0 {
			d.triage(ctx, cfg.Clock())
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if each != nil {
			if err := each(cfg.Clock()); err != nil {
				return err
			}
		}
	}
	return nil
}
