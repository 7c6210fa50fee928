package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// foldEvery is how often, at most, a commit brings the counts kept for
// the queue page and API up to date (migration 0010).
const foldEvery = time.Second

// foldIdle brings the kept counts up to date when writes have stopped
// with some left to bring (a commit does it at most once a second, so
// the last second's would wait for the next write): a look then counts no
// traffic at all. It writes only when nothing else is.
func (d *DB) foldIdle() {
	d.wmu.Lock()
	// With busy false, no one is writing: the maps hold still.
	if d.busy || d.isClosed || len(d.waiting)+len(d.bulk) > 0 || len(d.unfolded)+len(d.unfoldedConsumers) == 0 || time.Since(d.foldedAt) < d.foldEvery {
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
func (d *DB) foldAtClose() {
	if len(d.unfolded)+len(d.unfoldedConsumers) == 0 {
		return
	}
	d.foldedAt = time.Time{}
	done := make(chan error, 1)
	d.commit([]writeRequest{{ctx: context.Background(), fn: func(broker.Tx) error { return nil }, done: done}})
	if err := <-done; err != nil {
		d.log.Warn("bring the counts up to date at close", "err", err)
	}
}

// foldCounts notes the partitions the transaction pushed to and the
// consumers it wrote and, when the counts were last brought up to date
// foldEvery ago or more, brings those of every partition and consumer
// noted since up to date, just before the commit (migration 0010). The
// counts are made from the rows, so a write rolled back counts nothing,
// and a partition or consumer left unfolded (a crash forgets which) is
// only read a little slower: a read counts what lies past its kept seq.
// The fold has a savepoint of its own: should it fail, the group commits
// without it and the next commit a second later tries again. broken is
// the error that must fail the whole group: the transaction is no longer
// to be trusted. exec runs the savepoint's statements on the
// transaction's connection. Both stores fold so, each process the rows
// it noted.
//
// On PostgreSQL, where writes marked broker.UpdateOptions.Concurrent run beside each
// other, only the rows the fold can lock without waiting are folded (a
// push holds its partition's row to its commit, a pop or an ack its
// consumer's); the others stay noted for the next fold (left).
//
// before, when not nil, runs just before a fold begins (not at all when
// none is due): the PostgreSQL store sends there the writes it kept and
// its ready mark, so that the fold reads what they changed and takes its
// row locks last (it never waits for one; the mark may).
func (d *DB) foldCounts(ctx context.Context, st *sqlcore.Tx, exec func(string) error, before func() error) (folded bool, left sqlcore.FoldLeft, broken error) {
	due := d.foldDue(st)
	for id := range st.PushedPartitions() {
		d.unfolded[id] = struct{}{}
	}
	for k := range st.SavedConsumers() {
		d.unfoldedConsumers[k] = struct{}{}
	}
	if !due {
		return false, left, nil
	}
	if before != nil {
		if err := before(); err != nil {
			return false, sqlcore.FoldLeft{}, err
		}
	}
	err, broken := savepoint(exec, func() (err error) {
		left, err = sqlcore.FoldRows(ctx, st, d.unfolded, d.unfoldedConsumers)
		return err
	})
	if broken != nil {
		return false, sqlcore.FoldLeft{}, fmt.Errorf("count messages: %w", broken)
	}
	if err != nil {
		d.log.Warn("bring the counts of the queue page up to date", "err", err)
		d.foldedAt = time.Now()
		return false, sqlcore.FoldLeft{}, nil
	}
	return true, left, nil
}

// foldDue reports whether foldCounts folds at the commit of st: when
// something is noted, by st or since the last fold, and the last fold was
// foldEvery ago or more.
func (d *DB) foldDue(st *sqlcore.Tx) bool {
	noted := len(d.unfolded)+len(d.unfoldedConsumers)+len(st.PushedPartitions())+len(st.SavedConsumers()) > 0
	return noted && time.Since(d.foldedAt) >= d.foldEvery
}

// foldCommitted forgets the notes a committed fold brought up to date:
// all but those it left.
func (d *DB) foldCommitted(left sqlcore.FoldLeft) {
	clear(d.unfolded)
	clear(d.unfoldedConsumers)
	for _, id := range left.Partitions {
		d.unfolded[id] = struct{}{}
	}
	for _, k := range left.Consumers {
		d.unfoldedConsumers[k] = struct{}{}
	}
	d.foldedAt = time.Now()
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
