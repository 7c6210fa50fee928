package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// FoldLock, on PostgreSQL, locks the rows of the partitions ids and consumers keys
// that no other transaction holds (FOR UPDATE SKIP LOCKED: a fold never
// waits, so it takes part in no deadlock), and returns those it locked,
// and those it did not as left. A row gone (its queue deleted) is in
// neither.
func (dialect) FoldLock(ctx context.Context, t *sqlcore.Tx, ids []int64, keys [][2]int64) (lockedIDs []int64, lockedKeys [][2]int64, left sqlcore.FoldLeft, err error) {
	if len(ids) > 0 {
		if lockedIDs, err = t.QueryIDs(ctx, `SELECT id FROM partitions WHERE id = ANY(?::bigint[]) ORDER BY id FOR UPDATE SKIP LOCKED`, ids); err != nil {
			return nil, nil, sqlcore.FoldLeft{}, err
		}
		locked := make(map[int64]bool, len(lockedIDs))
		for _, id := range lockedIDs {
			locked[id] = true
		}
		for _, id := range ids {
			if !locked[id] {
				left.Partitions = append(left.Partitions, id)
			}
		}
	}
	if len(keys) > 0 {
		parts, groups := make([]int64, len(keys)), make([]int64, len(keys))
		for i, k := range keys {
			parts[i], groups[i] = k[0], k[1]
		}
		rows, err := t.Query(ctx, `SELECT c.partition_id, c.group_id FROM consumers c
			JOIN unnest(?::bigint[], ?::bigint[]) AS k(partition_id, group_id) ON c.partition_id = k.partition_id AND c.group_id = k.group_id
			ORDER BY c.partition_id, c.group_id FOR UPDATE OF c SKIP LOCKED`, parts, groups)
		if err != nil {
			return nil, nil, sqlcore.FoldLeft{}, err
		}
		locked := map[[2]int64]bool{}
		for rows.Next() {
			var k [2]int64
			if err := rows.Scan(&k[0], &k[1]); err != nil {
				rows.Close()
				return nil, nil, sqlcore.FoldLeft{}, err
			}
			locked[k] = true
			lockedKeys = append(lockedKeys, k)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, nil, sqlcore.FoldLeft{}, err
		}
		for _, k := range keys {
			if !locked[k] {
				left.Consumers = append(left.Consumers, k)
			}
		}
	}
	return lockedIDs, lockedKeys, left, nil
}

// leadLock is the key of the session advisory lock the leading process
// holds (Lead).
const leadLock = 0x4c617a61_72757303

// leadRetry is how often a process that does not lead tries again, and
// how often the leader checks that its lock's connection is alive.
const leadRetry = time.Second

// Lead runs fn while this process leads: see db/sqlite's Store.Lead.
func (d *Store) Lead(ctx context.Context, fn func(context.Context)) {
	for ctx.Err() == nil {
		lctx, cancel := context.WithCancel(ctx)
		if lost, ok := takeLead(lctx, d.pool); ok {
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
// (Lead).
func (d *Store) Leading() bool { return d.leading.Load() }

// takeLead tries the lead lock on a connection of its own; ok when
// taken, and then lost is closed once the connection is found broken or
// ctx has ended, and the connection closed (which releases the lock).
func takeLead(ctx context.Context, pool *pgxpool.Pool) (lost <-chan struct{}, ok bool) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false
	}
	// Tried on a connection of the pool, which goes back to it when
	// another leads: a follower tries every leadRetry, and must not open
	// a connection each time.
	var got bool
	if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(leadLock)).Scan(&got); err != nil || !got {
		c.Release()
		return nil, false
	}
	conn := c.Hijack() // the lock's: out of the pool for good
	// Should this process stop answering without closing its connection
	// (a machine lost, a VM paused), the server ends the session once it
	// has stood idle this long, the lock with it; while it leads, it
	// pings every leadRetry. PostgreSQL before 14 has no such setting:
	// there the TCP keepalives (sessionParams) end it, later.
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
