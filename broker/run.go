package broker

import (
	"context"
	"sync"
	"time"
)

// Leader says which of the processes over one store leads the background
// work (Run): maintenance and the bulk jobs run in one process at a
// time. The store provides it: the one process of a store of one
// process always leads; of several processes over one store, one leads
// at a time, and another takes over once it is gone.
type Leader interface {
	// Lead runs fn while this process leads, until ctx ends: fn's
	// context ends when the lead is lost or ctx ends. Lead then tries to
	// lead again (fn runs again when it does), and returns once ctx has
	// ended and fn has returned.
	Lead(ctx context.Context, fn func(context.Context))
	// Leading reports whether this process leads now.
	Leading() bool
}

// soleLeader is the Leader of a store that has one process: it always
// leads.
type soleLeader struct{}

func (soleLeader) Lead(ctx context.Context, fn func(context.Context)) { fn(ctx) }
func (soleLeader) Leading() bool                                      { return true }

// RunConfig configures Run.
type RunConfig struct {
	// Leader says when this process leads (nil: the broker's Store, when
	// it is a Leader; else this process always leads, as the one process
	// of its store).
	Leader Leader
	// MaintenanceEvery is how often Maintain runs while this process
	// leads (0: DefaultMaintenanceEvery; --maintenance-every).
	MaintenanceEvery time.Duration
	// OnLead, when set, runs each time this process takes the lead,
	// before the jobs do (serve warns there of queues it cannot archive).
	OnLead func(ctx context.Context)
	// MaintainTicks and FlushTicks, when set, stand for the tickers of
	// MaintenanceEvery and StatsDelay: a test moves the schedule by hand.
	MaintainTicks, FlushTicks <-chan time.Time
	// NotifyTicks, when set, stands for the ticker of NotifyPoll, and
	// NotifyGather for the timer of the sending's wait once a commit woke
	// it (a value ends each wait).
	NotifyTicks, NotifyGather <-chan time.Time
}

// Run does the broker's background work until ctx ends, and returns once
// all of it has stopped:
//
//   - while this process leads (cfg.Leader): the bulk jobs (RunJobs:
//     those a restart or the death of the last leader interrupted first,
//     from where they stopped), Maintain when it takes the lead and
//     then every MaintenanceEvery, each followed by CheckThresholds, and
//     the sending of notifications (SendNotifications: woken by the
//     commits of this process that wrote some, a moment after them so
//     that a burst goes in one pass, and every NotifyPoll);
//   - in every process: the counts waiting in memory (StatsDelay) written
//     every StatsDelay.
//
// When ctx ends, the jobs stop between chunks (a chunk in flight commits
// with its progress, or rolls back whole: the next leader goes on from
// the last chunk that committed), then the maintenance schedule stops
// (a run in flight stops between its chunks) and the last counts are
// written. So a caller stops everything else that writes through the
// broker (requests, the demo) before it ends ctx, and closes the store
// only once Run has returned.
//
// Maintenance that fails is logged ("maintenance"), and so is a task
// that took longer than MaintenanceEvery ("maintenance falls behind");
// counts that cannot be written are logged ("write stats", "write stats
// at shutdown"). Run once at a time on a broker.
func (b *Broker) Run(ctx context.Context, cfg RunConfig) {
	leader := cfg.Leader
	if leader == nil {
		leader = soleLeader{}
		if l, ok := b.store.(Leader); ok {
			leader = l
		}
	}
	every := cfg.MaintenanceEvery
	if every <= 0 {
		every = DefaultMaintenanceEvery
	}
	maintainC, flushC := cfg.MaintainTicks, cfg.FlushTicks
	if maintainC == nil {
		t := time.NewTicker(every)
		defer t.Stop()
		maintainC = t.C
	}
	if flushC == nil {
		t := time.NewTicker(StatsDelay)
		defer t.Stop()
		flushC = t.C
	}
	// The schedule outlives ctx until the jobs have stopped, so that the
	// last counts are written after their last chunk.
	loopCtx, stopLoop := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoop()
	led := make(chan struct{}, 1) // this process took the lead: maintain now
	var loop sync.WaitGroup
	loop.Go(func() { b.maintainLoop(loopCtx, every, maintainC, flushC, led, leader.Leading) })
	leader.Lead(ctx, func(ctx context.Context) {
		select {
		case led <- struct{}{}:
		default:
		}
		if cfg.OnLead != nil {
			cfg.OnLead(ctx)
		}
		var sending sync.WaitGroup
		sending.Go(func() { b.notifyLoop(ctx, cfg.NotifyTicks, cfg.NotifyGather) })
		b.RunJobs(ctx)
		sending.Wait()
	})
	stopLoop()
	loop.Wait()
}

// maintainLoop runs Maintain when this process takes the lead (led) and
// at each tick of maintainC while leading says it leads, and writes the
// counts waiting in this process's memory at each tick of flushC, until
// ctx ends; then it writes the last counts (every other writer has
// stopped by then). A task that took longer than every falls behind: it
// is logged. Ticks that come while a run goes on are dropped (the
// tickers keep one).
func (b *Broker) maintainLoop(ctx context.Context, every time.Duration, maintainC, flushC <-chan time.Time, led <-chan struct{}, leading func() bool) {
	log := b.log
	for {
		select {
		case <-ctx.Done():
			if err := b.FlushStats(context.WithoutCancel(ctx)); err != nil {
				log.Error("write stats at shutdown", "err", err)
			}
			return
		case <-flushC:
			if err := b.FlushStats(ctx); err != nil && ctx.Err() == nil {
				log.Error("write stats", "err", err)
			}
			continue
		case <-maintainC:
		case <-led:
		}
		if !leading() {
			continue
		}
		rep, err := b.Maintain(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error("maintenance", "err", err)
		}
		for _, t := range rep.Tasks {
			if t.Took > every {
				log.Warn("maintenance falls behind: a task took longer than the interval", "task", t.Task, "took", t.Took.String(), "every", every.String(), "removed", t.Removed)
			}
		}
		if _, err := b.CheckThresholds(ctx); err != nil && ctx.Err() == nil {
			log.Error("check thresholds", "err", err)
		}
	}
}
