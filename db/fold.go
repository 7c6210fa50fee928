package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
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
func (d *DB) foldCounts(ctx context.Context, st *storeTx, exec func(string) error) (folded bool, broken error) {
	for id := range st.pushedTo {
		d.unfolded[id] = struct{}{}
	}
	for k := range st.saved {
		d.unfoldedConsumers[k] = struct{}{}
	}
	if len(d.unfolded)+len(d.unfoldedConsumers) == 0 || time.Since(d.foldedAt) < d.foldEvery {
		return false, nil
	}
	err, broken := savepoint(exec, func() error { return foldRows(ctx, st, d.unfolded, d.unfoldedConsumers) })
	if broken != nil {
		return false, fmt.Errorf("count messages: %w", broken)
	}
	if err != nil {
		d.log.Warn("bring the counts of the queue page up to date", "err", err)
		d.foldedAt = time.Now()
		return false, nil
	}
	return true, nil
}

// foldRows brings the counts of the noted partitions and consumers up to
// date from their rows. It relies on two rules: whatever removes a
// partition's messages lowers, in its own transaction, the counts that
// had counted them (retention's SweepMessages: partitions.messages by
// the removed seqs up to counted_seq, each consumer's passed by those up
// to its passed_seq; removed seqs above them are simply never counted),
// and a consumer's cursor only moves forward (one that moved back is
// counted again from its partition's start; retention moves cursors
// forward only).
func foldRows(ctx context.Context, st *storeTx, unfolded map[int64]struct{}, unfoldedConsumers map[[2]int64]struct{}) error {
	if len(unfolded) > 0 {
		ids := make([]int64, 0, len(unfolded))
		for id := range unfolded {
			ids = append(ids, id)
		}
		// SET reads the row as it was: both use the old counted_seq.
		if _, err := st.exec(ctx, `UPDATE partitions SET
			messages = messages + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = partitions.id AND m.seq > partitions.counted_seq),
			counted_seq = COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = partitions.id), counted_seq)
			WHERE id IN (SELECT value FROM json_each(?))`, intsJSON(ids)); err != nil {
			return err
		}
	}
	if len(unfoldedConsumers) == 0 {
		return nil
	}
	keys := make([][2]int64, 0, len(unfoldedConsumers))
	for k := range unfoldedConsumers {
		keys = append(keys, k)
	}
	list, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	_, err = st.exec(ctx, foldConsumersSQL, string(list))
	return err
}

// foldConsumersSQL brings the passed counts of the consumers listed (a
// JSON array of [partition, group]) up to date. PostgreSQL reads the
// pairs with json_array_elements and casts their elements, which ->>
// gives as text.
var foldConsumersSQL = pgQuery(`UPDATE consumers SET
		passed = CASE WHEN consumers.cursor > consumers.passed_seq
			THEN passed + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq > consumers.passed_seq AND m.seq <= consumers.cursor)
			ELSE (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq <= consumers.cursor) END,
		passed_seq = cursor
		FROM json_each(?) j WHERE consumers.partition_id = j.value ->> 0 AND consumers.group_id = j.value ->> 1 AND consumers.cursor <> consumers.passed_seq`,
	`UPDATE consumers SET
		passed = CASE WHEN consumers.cursor > consumers.passed_seq
			THEN passed + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq > consumers.passed_seq AND m.seq <= consumers.cursor)
			ELSE (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq <= consumers.cursor) END,
		passed_seq = cursor
		FROM json_array_elements(?::json) j(value)
		WHERE consumers.partition_id = (j.value ->> 0)::bigint AND consumers.group_id = (j.value ->> 1)::bigint AND consumers.cursor <> consumers.passed_seq`)
