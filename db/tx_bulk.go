package db

import (
	"context"
	"errors"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// PushCopies inserts the copies on SQLite: one writer and no
// AUTOINCREMENT, so when every copy went in, their seqs are the last
// len(cs) ones, in that order.
func (sqliteDialect) PushCopies(ctx context.Context, t *sqlcore.Tx, cs []broker.Copy, insertCopies string, now time.Time) error {
	n, last, err := t.Insert(ctx, "seq", insertCopies, sqlcore.MS(now))
	if err != nil {
		return err
	}
	if _, err := t.Exec(ctx, `DELETE FROM temp.copies_in`); err != nil {
		return err
	}
	if n == int64(len(cs)) {
		for i := range cs {
			cs[i].CopySeq, cs[i].CopyCreatedAt, cs[i].Inserted = last-n+1+int64(i), now, true
			t.Pushed(cs[i].PartitionID)
		}
		return nil
	}
	// Some were replayed before: each copy is looked up (those made now
	// carry now as their time).
	for i := range cs {
		c := &cs[i]
		m, err := t.MessageByTransaction(ctx, c.PartitionID, c.TransactionID)
		if err != nil {
			return err
		}
		// LastInsertId is this statement's only when it inserted a row.
		c.CopySeq, c.CopyCreatedAt, c.Inserted = m.Seq, m.CreatedAt, n > 0 && m.Seq > last-n
		if c.Inserted {
			t.Pushed(c.PartitionID)
		}
	}
	return nil
}

// PushCopies runs insert (pushCopies' INSERT of copies_in) on
// PostgreSQL, where a row ON CONFLICT DO NOTHING still draws a seq from
// the identity's sequence, so the seqs inserted cannot be told from
// their count and the highest: they are read back (RETURNING), each
// copy found by its partition and transactionId. A copy not returned was
// pushed before and is looked up by that index (not Inserted).
func (pgDialect) PushCopies(ctx context.Context, t *sqlcore.Tx, cs []broker.Copy, insert string, now time.Time) error {
	type key struct {
		partition int64
		txid      string
	}
	rows, err := t.Query(ctx, insert+` RETURNING seq, partition_id, transaction_id`, sqlcore.MS(now))
	if err != nil {
		return err
	}
	made := map[key]int64{}
	for rows.Next() {
		var seq int64
		var k key
		if err := rows.Scan(&seq, &k.partition, &k.txid); err != nil {
			rows.Close()
			return err
		}
		made[k] = seq
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if _, err := t.Exec(ctx, `DELETE FROM temp.copies_in`); err != nil {
		return err
	}
	for i := range cs {
		c := &cs[i]
		if seq, ok := made[key{c.PartitionID, c.TransactionID}]; ok {
			c.CopySeq, c.CopyCreatedAt, c.Inserted = seq, now, true
			t.Pushed(c.PartitionID)
			continue
		}
		m, err := t.MessageByTransaction(ctx, c.PartitionID, c.TransactionID)
		if err != nil {
			return err
		}
		c.CopySeq, c.CopyCreatedAt, c.Inserted = m.Seq, m.CreatedAt, false
	}
	return nil
}

// ExpectOutcomes is ExpectReplayOutcomes on SQLite: the pairs not noted
// yet counted first, then noted.
func (sqliteDialect) ExpectOutcomes(ctx context.Context, t *sqlcore.Tx, jobID int64, list string) error {
	if jobID != 0 {
		if _, err := t.Exec(ctx, countNewOutcomesSQL, jobID, list); err != nil {
			return err
		}
	}
	_, err := t.Exec(ctx, expectOutcomesSQL, jobID, list)
	return err
}

// ExpectOutcomes is ExpectReplayOutcomes on PostgreSQL: one statement.
func (pgDialect) ExpectOutcomes(ctx context.Context, t *sqlcore.Tx, jobID int64, list string) error {
	_, err := t.Exec(ctx, pgExpectOutcomesSQL, jobID, list)
	return err
}

// The statements of ExpectReplayOutcomes, over a JSON array of
// [copy_seq, group_id] pairs: on SQLite, countNewOutcomesSQL then
// expectOutcomesSQL; on PostgreSQL, pgExpectOutcomesSQL, which reads the
// array with json_array_elements and casts the elements (->> gives them
// as text), and counts for a job only (job 0 is a single replay).
const (
	countNewOutcomesSQL = `INSERT INTO job_outcomes (job_id, group_id, replayed)
		SELECT ?1, x.group_id, COUNT(*) FROM (SELECT DISTINCT j.value ->> 0 AS copy_seq, j.value ->> 1 AS group_id FROM json_each(?2) j) x
		WHERE NOT EXISTS (SELECT 1 FROM replay_outcomes o WHERE o.copy_seq = x.copy_seq AND o.group_id = x.group_id)
		GROUP BY x.group_id
		ON CONFLICT (job_id, group_id) DO UPDATE SET replayed = job_outcomes.replayed + excluded.replayed`
	expectOutcomesSQL = `INSERT INTO replay_outcomes (copy_seq, group_id, job_id)
		SELECT j.value ->> 0, j.value ->> 1, ?1 FROM json_each(?2) j WHERE true ON CONFLICT DO NOTHING`
	pgExpectOutcomesSQL = `WITH noted AS (
			INSERT INTO replay_outcomes (copy_seq, group_id, job_id)
			SELECT (j.value ->> 0)::bigint, (j.value ->> 1)::bigint, ?1::bigint FROM json_array_elements(?2::json) j(value)
			ON CONFLICT DO NOTHING
			RETURNING group_id)
		INSERT INTO job_outcomes (job_id, group_id, replayed)
		SELECT ?1::bigint, n.group_id, COUNT(*) FROM noted n WHERE ?1::bigint <> 0 GROUP BY n.group_id
		ON CONFLICT (job_id, group_id) DO UPDATE SET replayed = job_outcomes.replayed + excluded.replayed`
)
