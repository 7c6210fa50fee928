package postgres

import (
	"context"
	"fmt"
	"time"
)

// The processes of one database count themselves: each holds a session
// advisory lock (memberLock) shared, on a connection of its own, for
// as long as it runs, and counts the holders every memberEvery. A
// process that finds itself alone writes as the one writer: its hot
// writes (broker.UpdateOptions.Concurrent) take the writer's lock exclusively, as
// every other write does, and need no row locks. One that finds others
// takes it shared for them, with the row locks (rowLocks). Both
// are correct whatever the count says, since a write that holds the
// lock exclusively never runs beside one that holds it shared: a process
// that joins writes beside the others with row locks from its first
// write, and one that has not counted it yet still writes alone. So a
// count that is wrong or late (a connection broken, a process vanished
// whose session the server has not ended yet) costs only speed: a
// process that cannot count takes itself for one among others.
//
// A process that was alone counts one that joins up to memberEvery
// late, and writes alone meanwhile: the newcomer's writes wait for each
// of its writes to commit, however long (an ack filing a thousand dead
// letters: P4 in docs/performance.md). So a process that joins tells
// the others once it holds the lock (joinChannel, heard on the
// notifier's listening connection): each takes itself for one among
// others from its next write (joined), without waiting for its next
// count. A count that was under way as the news came is not believed
// when it says alone.

// memberLock is the key of the lock every process holds shared.
const memberLock = 0x4c617a61_72757304

// memberEvery is how often a process counts the processes (but in
// tests: openPostgres).
const memberEvery = time.Second

// count keeps this process counted and counts the processes, until ctx
// ends: p.alone says whether it was the only one at the last count
// (never, with neverAlone: Options.NeverAlone); it counts every every.
func (p *Store) count(ctx context.Context, neverAlone bool, every time.Duration) {
	for ctx.Err() == nil {
		p.countOn(ctx, neverAlone, every)
		p.alone.Store(false)
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// countOn holds the lock on a connection of its own and counts, until
// the connection fails or ctx ends.
func (p *Store) countOn(ctx context.Context, neverAlone bool, every time.Duration) {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return
	}
	conn := c.Hijack() // the lock's: out of the pool for good
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*memberEvery)
		defer cancel()
		conn.Close(cctx)
	}()
	// A process that vanishes without closing the connection is counted
	// until the server ends its session: idle this long (it counts every
	// memberEvery), or the TCP keepalives (sessionParams) before
	// PostgreSQL 14.
	_, _ = conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = '%dms'", (10*every).Milliseconds()))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, int64(memberLock)); err != nil {
		return
	}
	// Counted from here: the others are told (a notification lost costs
	// only speed, until their next count).
	_, _ = conn.Exec(ctx, `SELECT pg_notify($1, $2)`, joinChannel, p.news.self)
	// A count that stops leaves this process not knowing who listens: it
	// sends its news again.
	defer p.news.setOthers(true)
	after := stuckAfter
	if p.idleFromURL {
		var err error
		if after, err = stuckFor(ctx, conn); err != nil {
			return
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var stuck stuckWriters
	fenceFailed := false
	for {
		var n, listeners int64
		p.countMu.Lock()
		joins := p.joins
		p.countMu.Unlock()
		qctx, cancel := context.WithTimeout(ctx, 5*memberEvery)
		listening := p.news.listening.Load()
		// A bigint key is two oids: its high and low 32 bits (the
		// members' and the listeners' share the high ones).
		err := conn.QueryRow(qctx, `SELECT COUNT(*) FILTER (WHERE objid::bigint = $2), COUNT(*) FILTER (WHERE objid::bigint = $3)
			FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid::bigint = $1 AND objsubid = 1`,
			int64(memberLock>>32), int64(memberLock&0xffffffff), int64(listenLock&0xffffffff)).Scan(&n, &listeners)
		cancel()
		if err != nil {
			return
		}
		p.news.heard(n, listeners, listening, p.news.listening.Load())
		p.countMu.Lock()
		p.alone.Store(n == 1 && !neverAlone && p.joins == joins)
		p.countMu.Unlock()
		// A paused process's write that the server does not end holds
		// up every write: ended once found stuck long enough (fence.go).
		if after > 0 {
			stuck = p.fenceOnce(ctx, conn, stuck, after, &fenceFailed)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// joined is told that another process joined the database (its
// notification on joinChannel): this process is not alone, whatever its
// last count said, until it counts again.
func (p *Store) joined() {
	p.countMu.Lock()
	p.joins++
	p.alone.Store(false)
	p.countMu.Unlock()
}
