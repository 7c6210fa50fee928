package db

import (
	"context"
	"encoding/json"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Set-based statements of the bulk actions: a chunk of dead letters is
// read, copied and removed with a few statements, whatever its size; the
// sets go in as JSON arrays (json_each), payloads never leave SQLite.

// The error comes whole: its line (broker.ErrorLine) is cut here, exactly
// as when it was counted (SQLite's text functions would stop at a NUL).
const deadLetterKeySelect = `SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, m.created_at, d.error
	FROM dead_letters d JOIN messages m ON m.seq = d.seq`

func scanKeys(ctx context.Context, t *storeTx, query string, args ...any) ([]broker.DeadLetterKey, error) {
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.DeadLetterKey
	for rows.Next() {
		var k broker.DeadLetterKey
		var created int64
		var errText string
		if err := rows.Scan(&k.ID, &k.Seq, &k.QueueID, &k.PartitionID, &k.GroupID, &created, &errText); err != nil {
			return nil, err
		}
		k.CreatedAt, k.Line = fromMS(created), broker.ErrorLine(errText)
		out = append(out, k)
	}
	return out, rows.Err()
}

func (t *storeTx) DeadLetterKeys(ctx context.Context, f broker.Filter, limit int) ([]broker.DeadLetterKey, error) {
	// No message joined: a delete needs no message's time (CreatedAt 0).
	w, args := where(f)
	return scanKeys(ctx, t, `SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, 0, d.error FROM dead_letters d`+w+`
		ORDER BY d.failed_at DESC, d.id DESC LIMIT ?`, append(args, limit)...)
}

func (t *storeTx) DeadLetterKeysOf(ctx context.Context, seqs []int64) ([]broker.DeadLetterKey, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	return scanKeys(ctx, t, deadLetterKeySelect+` WHERE d.seq IN (SELECT value FROM json_each(?)) ORDER BY d.seq, d.id`, intsJSON(seqs))
}

func (t *storeTx) PushCopies(ctx context.Context, cs []broker.Copy, now time.Time) error {
	// One prepared statement a copy, run in the order of cs: the copies
	// take their seqs in that order, and the payloads are copied inside
	// SQLite without passing through Go. (One INSERT … SELECT over the
	// whole list needed ORDER BY, which sorted the joined rows, payloads
	// and all, in memory: up to a chunk of the largest payloads.)
	for i := range cs {
		c := &cs[i]
		res, err := t.exec(ctx, `INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at)
			SELECT m.partition_id, ?2, m.payload, m.trace_id, ?3 FROM messages m WHERE m.seq = ?1
			ON CONFLICT (partition_id, transaction_id) DO NOTHING`, c.Seq, c.TransactionID, ms(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			if c.CopySeq, err = res.LastInsertId(); err != nil {
				return err
			}
			c.CopyCreatedAt, c.Inserted = now, true
			// A copy goes to its message's partition, which is the dead
			// letter's (c.PartitionID): the same by construction.
			t.pushed(c.PartitionID)
			continue
		}
		// Replayed before: the copy is there already.
		m, err := t.MessageByTransaction(ctx, c.PartitionID, c.TransactionID)
		if err != nil {
			return err
		}
		c.CopySeq, c.CopyCreatedAt, c.Inserted = m.Seq, m.CreatedAt, false
	}
	return nil
}

func (t *storeTx) ExpectReplayOutcomes(ctx context.Context, pairs [][2]int64) error {
	if len(pairs) == 0 {
		return nil
	}
	list, err := json.Marshal(pairs)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO replay_outcomes (copy_seq, group_id)
		SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?) j WHERE true ON CONFLICT DO NOTHING`, string(list))
	return err
}

// intsJSON is a JSON array of vs.
func intsJSON(vs []int64) string {
	b, _ := json.Marshal(vs) // a []int64 always marshals
	return string(b)
}
