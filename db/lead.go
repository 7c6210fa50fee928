package db

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lazarus-dlq/lazarus/broker"
)

// pgLeadLock is the key of the session advisory lock the leading process
// holds (Lead).
const pgLeadLock = 0x4c617a61_72757303

// leadRetry is how often a process that does not lead tries again, and
// how often the leader checks that its lock's connection is alive.
const leadRetry = time.Second

// Lead runs fn while this process leads the database's background work
// (bulk jobs, maintenance), until ctx ends: on SQLite, at once, as the
// one process of its file; on PostgreSQL, while it holds a session
// advisory lock on a connection of its own. Of the processes on one
// database, one leads at a time; when the leader dies its connection
// closes, the lock goes with it, and another takes the lead within about
// leadRetry. fn's context ends when the lead is lost (the connection
// broke) or ctx ends; Lead then tries to lead again, and returns once
// ctx has ended and fn has returned.
func (d *sqliteStore) Lead(ctx context.Context, fn func(context.Context)) { fn(ctx) }

// Lead runs fn while this process leads: see sqliteStore.Lead.
func (d *pgStore) Lead(ctx context.Context, fn func(context.Context)) {
	for ctx.Err() == nil {
		lctx, cancel := context.WithCancel(ctx)
		if lost, ok := pgTakeLead(lctx, d.pool); ok {
			var wg sync.WaitGroup
			wg.Go(func() {
				select {
				case <-lost:
					if lctx.Err() == nil {
						d.log.Warn("lost the lead of the background work (its connection broke); another process takes it")
					}
				case <-lctx.Done():
				}
				cancel()
			})
			d.leading.Store(true)
			d.log.Info("this process leads the background work (bulk jobs, maintenance)")
			fn(lctx)
			d.leading.Store(false)
			cancel()
			wg.Wait()
			<-lost // the lock's connection is closed: another may lead
			continue
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(leadRetry):
		}
	}
}

// Leading reports whether this process leads the background work now
// (Lead): maintenance runs only in the leader. A SQLite store's one
// process always leads.
func (d *sqliteStore) Leading() bool { return true }

// Leading reports whether this process leads the background work now
// (Lead).
func (d *pgStore) Leading() bool { return d.leading.Load() }

// pgTakeLead tries the lead lock on a connection of its own; ok when
// taken, and then lost is closed once the connection is found broken or
// ctx has ended, and the connection closed (which releases the lock).
func pgTakeLead(ctx context.Context, pool *pgxpool.Pool) (lost <-chan struct{}, ok bool) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false
	}
	// Tried on a connection of the pool, which goes back to it when
	// another leads: a follower tries every leadRetry, and must not open
	// a connection each time.
	var got bool
	if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(pgLeadLock)).Scan(&got); err != nil || !got {
		c.Release()
		return nil, false
	}
	conn := c.Hijack() // the lock's: out of the pool for good
	// Should this process stop answering without closing its connection
	// (a machine lost, a VM paused), the server ends the session once it
	// has stood idle this long, the lock with it; while it leads, it
	// pings every leadRetry. PostgreSQL before 14 has no such setting:
	// there the TCP keepalives (pgSessionParams) end it, later.
	_, _ = conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = '%dms'", (10*leadRetry).Milliseconds()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*leadRetry)
			defer cancel()
			conn.Close(cctx)
		}()
		t := time.NewTicker(leadRetry)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, cancel := context.WithTimeout(ctx, 5*leadRetry)
				err := conn.Ping(pctx)
				cancel()
				if err != nil {
					return
				}
			}
		}
	}()
	return done, true
}

// A DB leads the broker's background work (broker.Run) through Lead and
// Leading.
var _ broker.Leader = (*DB)(nil)
