package db

import (
	"context"
	"errors"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// foldIdle brings the kept counts up to date when writes have stopped
// with some left to bring (a commit does it at most once a second, so
// the last second's would wait for the next write): a look then counts no
// traffic at all. It writes only when nothing else is.
func (d *sqliteStore) foldIdle() {
	d.wmu.Lock()
	// With busy false, no one is writing: the maps hold still.
	if d.busy || d.isClosed || len(d.waiting)+len(d.bulk) > 0 || !d.folds.Pending() || time.Since(d.folds.FoldedAt) < d.folds.Every {
		d.wmu.Unlock()
		return
	}
	d.busy = true
	d.changed.Broadcast()
	d.wmu.Unlock()
	done := make(chan error, 1)
	d.commit([]writeRequest{{ctx: context.Background(), fn: func(broker.Tx) error { return nil }, done: done}})
	if err := <-done; err != nil {
		d.log.Warn("bring the counts up to date", "err", err)
	}
	d.release(true)
}

// foldAtClose brings the kept counts up to date one last time, so that
// after a clean restart no look counts the last second's traffic again.
// Nothing else writes any more.
func (d *sqliteStore) foldAtClose() {
	if !d.folds.Pending() {
		return
	}
	d.folds.FoldedAt = time.Time{}
	done := make(chan error, 1)
	d.commit([]writeRequest{{ctx: context.Background(), fn: func(broker.Tx) error { return nil }, done: done}})
	if err := <-done; err != nil {
		d.log.Warn("bring the counts up to date at close", "err", err)
	}
}

// FoldLock, on PostgreSQL, locks the rows of the partitions ids and consumers keys
// that no other transaction holds (FOR UPDATE SKIP LOCKED: a fold never
// waits, so it takes part in no deadlock), and returns those it locked,
// and those it did not as left. A row gone (its queue deleted) is in
// neither.
func (pgDialect) FoldLock(ctx context.Context, t *sqlcore.Tx, ids []int64, keys [][2]int64) (lockedIDs []int64, lockedKeys [][2]int64, left sqlcore.FoldLeft, err error) {
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
