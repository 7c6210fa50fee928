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

// memberLock is the key of the lock every process holds shared.
const memberLock = 0x4c617a61_72757304

// memberEvery is how often a process counts the processes.
const memberEvery = time.Second

// count keeps this process counted and counts the processes, until ctx
// ends: p.alone says whether it was the only one at the last count
// (never, with neverAlone: Options.NeverAlone).
func (p *Store) count(ctx context.Context, neverAlone bool) {
	for ctx.Err() == nil {
		p.countOn(ctx, neverAlone)
		p.alone.Store(false)
		select {
		case <-ctx.Done():
		case <-time.After(memberEvery):
		}
	}
}

// countOn holds the lock on a connection of its own and counts, until
// the connection fails or ctx ends.
func (p *Store) countOn(ctx context.Context, neverAlone bool) {
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
	_, _ = conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = '%dms'", (10*memberEvery).Milliseconds()))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, int64(memberLock)); err != nil {
		return
	}
	after := stuckAfter
	if p.idleFromURL {
		var err error
		if after, err = stuckFor(ctx, conn); err != nil {
			return
		}
	}
	t := time.NewTicker(memberEvery)
	defer t.Stop()
	var stuck stuckWriters
	fenceFailed := false
	for {
		var n int
		qctx, cancel := context.WithTimeout(ctx, 5*memberEvery)
		// A bigint key is two oids: its high and low 32 bits.
		err := conn.QueryRow(qctx, `SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`,
			int64(memberLock>>32), int64(memberLock&0xffffffff)).Scan(&n)
		cancel()
		if err != nil {
			return
		}
		p.alone.Store(n == 1 && !neverAlone)
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
