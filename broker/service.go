package broker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Broker applies the rules of SPEC.md to a Store.
type Broker struct {
	store Store
	clock Clock
	log   *slog.Logger

	mu      sync.Mutex // guards closed
	news    Notifier   // wakes waiting pops and job runners
	cache   *cache
	pending pendingStats
	closed  chan struct{}
	waiting atomic.Int64 // pops waiting for news now (Waiting)
	// concurrent: the store may run writes marked Concurrent beside
	// each other (ConcurrentStore); pushes, leases and acks are marked
	// while it says it does.
	concurrent ConcurrentStore

	restoreWindow time.Duration

	auditRetention time.Duration // KeepForever (<0): kept
	maintenance    maintenanceTotals
	archiver       Archiver // nil: none configured
	archive        archiveState
	onEvent        func(Event) // nil: nobody is told
	sender         Sender      // nil: notifications are kept pending
	sending        notifyState
	randMu         sync.Mutex  // guards rand
	rand           rand.Source // the canary's draws (nil: math/rand/v2's own)
	rowCosts       rowCosts    // what a job's row costs lately, by kind (jobpace.go)
	// traffic is when a push, an ack or a pop that leased messages was
	// last under way (noteTraffic), since started (a monotonic clock: a
	// step of the wall clock does not move it): jobs at the default pace
	// give way to it (jobpace.go).
	traffic atomic.Int64
	started time.Time
}

// Config configures a Broker.
type Config struct {
	Store  Store
	Clock  Clock        // default SystemClock
	Logger *slog.Logger // default slog.Default()
	// RestoreWindow is how long a deleted dead letter can be restored
	// (default RestoreWindow).
	RestoreWindow time.Duration
	// AuditRetention is how long audit entries are kept (Maintain deletes
	// older ones): 0 DefaultAuditRetention, KeepForever (any negative) for
	// ever.
	AuditRetention time.Duration
	// Archive receives the dead letters of the queues with
	// deadLetterArchive before they expire (nil: no archive directory;
	// such a queue's dead letters are then kept, and the failure said).
	Archive Archiver
	// Notifier carries the news that wakes waiting pops (default: a
	// LocalNotifier, this process only).
	Notifier Notifier
	// OnEvent is told the broker's events (a hold made or released…),
	// each once, after its transaction has committed, in commit order;
	// it must not block for long (nil: nobody is told).
	OnEvent func(Event)
	// Notify sends the notifications of the outbox (package notify's
	// Sender), from the process that leads (Run). nil: they are kept
	// pending, and a warning says so once.
	Notify Sender
	// Rand is where a canary's draws come from (tests give a seeded
	// one; nil: math/rand/v2's, seeded by the runtime from the system's
	// randomness). Only one number is taken of it per job.
	Rand rand.Source
}

// New returns a Broker over cfg.Store.
func New(cfg Config) *Broker {
	b := &Broker{store: cfg.Store, clock: cfg.Clock, log: cfg.Logger, news: cfg.Notifier, closed: make(chan struct{}), cache: newCache(), started: time.Now()}
	if b.news == nil {
		b.news = &LocalNotifier{}
	}
	if cs, ok := cfg.Store.(ConcurrentStore); ok {
		b.concurrent = cs
	}
	if b.clock == nil {
		b.clock = SystemClock
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	b.restoreWindow = cfg.RestoreWindow
	b.archiver = cfg.Archive
	b.onEvent = cfg.OnEvent
	b.sender = cfg.Notify
	b.sending.wake = make(chan struct{}, 1)
	b.rand = cfg.Rand
	if b.restoreWindow <= 0 {
		b.restoreWindow = RestoreWindow
	}
	b.auditRetention = cfg.AuditRetention
	if b.auditRetention == 0 {
		b.auditRetention = DefaultAuditRetention
	}
	return b
}

// Close wakes every waiting pop so that it can return.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
}

// now is the clock's time at millisecond precision: what is stored.
func (b *Broker) now() time.Time { return b.clock.Now().UTC().Truncate(time.Millisecond) }

// Waiting is how many pops wait for messages now (long-polls with
// nothing to hand out yet).
func (b *Broker) Waiting() int64 { return b.waiting.Load() }

// watch returns a channel closed at the next news of the queue.
func (b *Broker) watch(queue string) <-chan struct{} { return b.news.Watch(queue) }

// notify wakes the pops waiting on the queues, and the watchers of
// AnyNews.
func (b *Broker) notify(queues ...string) {
	b.news.Notify(append(queues[:len(queues):len(queues)], AnyNews)...)
}

// update runs fn in an ordinary write transaction and, once it has
// committed, wakes the waiters of the queues fn touched.
func (b *Broker) update(ctx context.Context, fn func(tx Tx, touched func(queue string)) error) error {
	return b.updateWith(ctx, UpdateOptions{}, func(tx Tx, _ UpdateOptions, touched func(string)) error {
		return fn(tx, touched)
	})
}

// updateWith is update with options; fn is told the options of the run
// it is in. A run marked Ephemeral or Concurrent whose fn comes to what
// it may not do so marked (a pop that must subscribe its group, an ack
// that settles a replayed copy) returns
// errPlainWrite: its writes roll back and fn runs once more in an
// ordinary write (Background kept).
func (b *Broker) updateWith(ctx context.Context, o UpdateOptions, fn func(tx Tx, o UpdateOptions, touched func(queue string)) error) error {
	err := b.updateStats(ctx, o, false, fn)
	if plain := (UpdateOptions{Background: o.Background}); o != plain && errors.Is(err, errPlainWrite) {
		err = b.updateStats(ctx, plain, false, fn)
	}
	return err
}

// errPlainWrite stops a write marked Ephemeral or Concurrent that comes to
// what it may not do so marked; updateWith runs it again unmarked.
var errPlainWrite = errors.New("write must run unmarked")

// updateStats is update; flush writes the pending counts in any case.
//
// The stats fn adds are written in its transaction, or, when they move no
// depth, may join the pending counts (see StatsDelay) once it commits.
// fn may run more than once (Store.Update): what it changes in memory
// (the pending counts, the lookup cache) is applied once the transaction
// has committed, in commit order (TxScope), and the later functions of
// the same transaction see it meanwhile through the transaction's state.
func (b *Broker) updateStats(ctx context.Context, o UpdateOptions, flush bool, fn func(tx Tx, o UpdateOptions, touched func(queue string)) error) error {
	var queues []string
	err := b.store.Update(ctx, o, func(tx Tx) error {
		queues = queues[:0]
		scope, st, err := scopeOf(tx)
		if err != nil {
			return err
		}
		if scope.Foreign() {
			// Another process changed what the cache may hold: what it
			// holds is stale whatever this transaction does.
			b.cache.invalidate()
			scope.handled = true
		}
		cached := newCacheTx(tx, b.cache, st)
		acc := &statsTx{Tx: cached}
		if err := fn(acc, o, func(q string) { queues = append(queues, q) }); err != nil {
			return err
		}
		now := b.now()
		switch {
		case !flush && acc.countOnly() && st.mayDefer(&b.pending, now):
			// The later functions of this transaction count them as
			// pending at once (a change of depth among them writes them
			// first); the others once it has committed.
			if deferred := acc.entries(now); len(deferred) > 0 {
				st.deferCounts(deferred, now)
				if err := afterCommit(tx, func() { b.pending.add(deferred, 1, now) }); err != nil {
					return err
				}
			}
		case o.Ephemeral || o.Concurrent:
			// The counts waiting in memory go with a commit that waits
			// for the disk, not with a lease that need not; nor with a
			// write beside others, whose row locks they would widen (an
			// ack holds its consumer, then its group's counts; a push
			// holding another group's counts would wait for a consumer).
			if err := acc.flush(ctx, now); err != nil {
				return err
			}
		default:
			taken := st.visible(&b.pending)
			if err := acc.flushWith(ctx, taken, now); err != nil {
				return err
			}
			st.tookAll()
			// Out of memory once committed, by value: those deferred
			// by the earlier functions of this transaction join the
			// pending counts first (commit order), and leave with them.
			if len(taken) > 0 {
				if err := afterCommit(tx, func() { b.pending.add(taken, -1, now) }); err != nil {
					return err
				}
			}
		}
		if !cached.staged() {
			return nil // nothing for the cache: no callback a transaction
		}
		return afterCommit(tx, cached.commit)
	})
	if err == nil && len(queues) > 0 {
		b.notify(queues...)
	}
	return err
}

// FlushStats writes the counts waiting in memory (see StatsDelay); Run
// calls it every StatsDelay and at its stop. Reads do not need it: they add
// the waiting counts themselves.
func (b *Broker) FlushStats(ctx context.Context) error {
	if b.pending.empty() {
		return nil
	}
	return b.updateStats(ctx, UpdateOptions{}, true, func(Tx, UpdateOptions, func(string)) error { return nil })
}

// hot marks o Concurrent for a store that runs such writes beside each
// other now, and leaves it as it is for one that does not (a write that
// must be run again unmarked costs a store with one writer for nothing).
// The store decides again as the write begins: a write marked may still
// run alone, and one not marked always does.
func (b *Broker) hot(o UpdateOptions) UpdateOptions {
	if b.concurrent != nil && b.concurrent.ConcurrentWrites() {
		o.Concurrent = true
	}
	return o
}

// isNotFound reports whether err is (or wraps) ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// queueOrCreate returns the named queue, creating it with default options.
func queueOrCreate(ctx context.Context, tx QueueTx, name string, now time.Time) (Queue, error) {
	q, err := tx.QueueByName(ctx, name)
	if err == nil || !isNotFound(err) {
		return q, err
	}
	q = Queue{Name: name, Options: DefaultOptions(), CreatedAt: now}
	return q, tx.CreateQueue(ctx, &q)
}

// partitionOrCreate returns the named partition of q, creating it.
func partitionOrCreate(ctx context.Context, tx PartitionTx, q Queue, name string, now time.Time) (Partition, error) {
	p, err := tx.PartitionByName(ctx, q.ID, name)
	if err == nil || !isNotFound(err) {
		return p, err
	}
	p = Partition{QueueID: q.ID, Name: name, UUID: NewUUID(now), CreatedAt: now}
	return p, tx.CreatePartition(ctx, &p)
}

func audit(ctx context.Context, tx AuditTx, now time.Time, actor, action, queue, group string, count int, detail string) error {
	return tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: actor, Action: action, Queue: queue, Group: group, Count: count, Detail: detail,
		Broker: action == AuditDeadLetter || actor == BrokerActor})
}
