package sqlcore

import (
	"context"
	"slices"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A dead letter's history (broker.HistoryTx): the failed attempts before
// the last, the lineage of replays in both directions, and the deleted
// dead letters of a message. Every read is by a primary key or an index
// of one message; the writes are one statement per failed ack.

// InsertAttempt writes one row of attempts (seq, group_id, attempt),
// with its wait in milliseconds (wait_ms, -1 when a.WaitKnown is false):
// an attempt of the same number is overwritten (a retried transaction
// writes it again with the same values). On PostgreSQL the error is
// stored as postgres.text has it, and so is the consumer version
// (consumer_version, empty for none).
func (t *Tx) InsertAttempt(ctx context.Context, seq, groupID int64, a broker.Attempt) error {
	a.Error, a.ConsumerVersion = t.d.Text(a.Error), t.d.Text(a.ConsumerVersion)
	wait := int64(-1)
	if a.WaitKnown {
		wait = a.Wait.Milliseconds()
	}
	_, err := t.Exec(ctx, `INSERT INTO attempts (seq, group_id, attempt, at, error, error_bytes, wait_ms, consumer_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (seq, group_id, attempt) DO UPDATE SET at = excluded.at, error = excluded.error, error_bytes = excluded.error_bytes, wait_ms = excluded.wait_ms,
			consumer_version = excluded.consumer_version`,
		seq, groupID, a.Attempt, MS(a.At), a.Error, a.ErrorBytes, wait, a.ConsumerVersion)
	return err
}

const DeleteAttemptsQuery = `DELETE FROM attempts WHERE seq = ? AND group_id = ?`

// DeleteAttempts deletes the attempts of (seq, group_id), by the primary
// key's prefix.
func (t *Tx) DeleteAttempts(ctx context.Context, seq, groupID int64) error {
	_, err := t.Exec(ctx, DeleteAttemptsQuery, seq, groupID)
	return err
}

const AttemptsQuery = `SELECT attempt, at, error, error_bytes, wait_ms, consumer_version FROM attempts WHERE seq = ? AND group_id = ? ORDER BY attempt DESC LIMIT ?`

// Attempts reads the latest limit attempts of (seq, group_id) by the
// primary key, newest first, and returns them oldest first; a wait_ms
// of -1 (recorded before migration 0025) is a wait not known.
func (t *Tx) Attempts(ctx context.Context, seq, groupID int64, limit int) ([]broker.Attempt, error) {
	rows, err := t.Query(ctx, AttemptsQuery, seq, groupID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Attempt
	for rows.Next() {
		var a broker.Attempt
		var at, wait int64
		if err := rows.Scan(&a.Attempt, &at, &a.Error, &a.ErrorBytes, &wait, &a.ConsumerVersion); err != nil {
			return nil, err
		}
		a.At = FromMS(at)
		if wait >= 0 {
			a.Wait, a.WaitKnown = time.Duration(wait)*time.Millisecond, true
		}
		out = append(out, a)
	}
	slices.Reverse(out)
	return out, rows.Err()
}

// MessageRefQuery: the message, or once retention removed it, what one
// of its dead letters (kept or deleted) or its replays kept of it
// (migration 0020). PostgreSQL asks for an alias of each subquery in
// FROM (SQLite's plan names them as it numbers them: tx_history_test.go).
var MessageRefQuery = PGQuery(`SELECT x.created_at, x.transaction_id, q.id, q.name, p.id, p.name, x.removed
	FROM (SELECT m.created_at, m.transaction_id, m.partition_id, 0 AS removed FROM messages m WHERE m.seq = ?1
		UNION ALL SELECT * FROM (SELECT d.pushed_at, d.transaction_id, d.partition_id, 1 FROM dead_letters d WHERE d.seq = ?1 AND d.pushed_at > 0 LIMIT 1)
		UNION ALL SELECT * FROM (SELECT r.pushed_at, r.transaction_id, r.partition_id, 1 FROM removed_dead_letters r WHERE r.seq = ?1 AND r.pushed_at > 0 LIMIT 1)
		UNION ALL SELECT * FROM (SELECT c.original_at, c.original_txid, c.partition_id, 1 FROM replays c WHERE c.seq = ?1 AND c.original_at > 0 LIMIT 1)
		LIMIT 1) x
	JOIN partitions p ON p.id = x.partition_id JOIN queues q ON q.id = p.queue_id`,
	`SELECT x.created_at, x.transaction_id, q.id, q.name, p.id, p.name, x.removed
	FROM (SELECT m.created_at, m.transaction_id, m.partition_id, 0 AS removed FROM messages m WHERE m.seq = ?1
		UNION ALL SELECT * FROM (SELECT d.pushed_at, d.transaction_id, d.partition_id, 1 FROM dead_letters d WHERE d.seq = ?1 AND d.pushed_at > 0 LIMIT 1) xd
		UNION ALL SELECT * FROM (SELECT r.pushed_at, r.transaction_id, r.partition_id, 1 FROM removed_dead_letters r WHERE r.seq = ?1 AND r.pushed_at > 0 LIMIT 1) xr
		UNION ALL SELECT * FROM (SELECT c.original_at, c.original_txid, c.partition_id, 1 FROM replays c WHERE c.seq = ?1 AND c.original_at > 0 LIMIT 1) xc
		LIMIT 1) x
	JOIN partitions p ON p.id = x.partition_id JOIN queues q ON q.id = p.queue_id`)

// MessageRef reads a message's row by its primary key, without its
// payload, with its partition and queue (ErrNotFound); a message that
// retention removed is read from what its dead letters (by
// UNIQUE(seq, group_id)), deleted dead letters' records (by
// removed_dead_letters_seq) or replays (by replays_seq) kept of it.
// It locks nothing.
func (t *Tx) MessageRef(ctx context.Context, seq int64) (broker.MessageRef, error) {
	m := broker.MessageRef{Seq: seq}
	var created int64
	err := t.QueryRow(ctx, MessageRefQuery, seq).Scan(&created, &m.TransactionID, &m.QueueID, &m.Queue, &m.PartitionID, &m.Partition, &m.Removed)
	m.CreatedAt = FromMS(created)
	return m, notFound(err, "message")
}

// LineageQuery follows replays back from a copy: each hop by the primary
// key of replays (copy_seq), the original's message by its own.
const LineageQuery = `WITH RECURSIVE chain (copy_seq, seq, group_id, job_id, actor, at, edited, original_at, partition_id, n) AS (
		SELECT copy_seq, seq, group_id, job_id, actor, at, edited, original_at, partition_id, 1 FROM replays WHERE copy_seq = ?1
		UNION ALL
		SELECT r.copy_seq, r.seq, r.group_id, r.job_id, r.actor, r.at, r.edited, r.original_at, r.partition_id, c.n + 1
		FROM chain c JOIN replays r ON r.copy_seq = c.seq WHERE c.n < ?2
	)
	SELECT c.copy_seq, COALESCE(cm.created_at, c.at), c.seq, COALESCE(m.created_at, NULLIF(c.original_at, 0)),
		COALESCE(q.name, ''), c.group_id, COALESCE(g.name, ''), c.job_id, c.actor, c.at, c.edited
	FROM chain c
	LEFT JOIN messages cm ON cm.seq = c.copy_seq
	LEFT JOIN messages m ON m.seq = c.seq
	LEFT JOIN partitions p ON p.id = COALESCE(m.partition_id, cm.partition_id, NULLIF(c.partition_id, 0))
	LEFT JOIN queues q ON q.id = p.queue_id
	LEFT JOIN groups g ON g.id = c.group_id AND c.group_id > 0
	ORDER BY c.n`

// Lineage reads the chain of replays back from copySeq (lineageQuery),
// nearest first, at most limit hops.
func (t *Tx) Lineage(ctx context.Context, copySeq int64, limit int) ([]broker.ReplayHop, error) {
	rows, err := t.Query(ctx, LineageQuery, copySeq, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.ReplayHop
	for rows.Next() {
		var h broker.ReplayHop
		var copyCreated, created *int64
		var at int64
		if err := rows.Scan(&h.CopySeq, &copyCreated, &h.Seq, &created, &h.Queue, &h.GroupID, &h.Group, &h.JobID, &h.Actor, &at, &h.Edited); err != nil {
			return nil, err
		}
		if copyCreated != nil {
			h.CopyID = broker.MessageID(FromMS(*copyCreated), h.CopySeq)
		}
		if created != nil {
			h.OriginalID = broker.MessageID(FromMS(*created), h.Seq)
		}
		h.At = FromMS(at)
		out = append(out, h)
	}
	return out, rows.Err()
}

// CopiesQuery reads the copies of a message by replays_seq, each with its
// message (for its id), its outcomes by replay_outcomes' primary key
// (copy_seq, group_id) and its dead letter in each of those groups by
// dead_letters' unique (seq, group_id). A copy retention removed is
// still listed: it was made at r.at (its push time), its transactionId
// is its dead letters' (” when it has none left).
const CopiesQuery = `SELECT r.copy_seq, COALESCE(m.created_at, r.at),
		COALESCE(m.transaction_id, (SELECT x.transaction_id FROM dead_letters x WHERE x.seq = r.copy_seq LIMIT 1),
			(SELECT x.transaction_id FROM removed_dead_letters x WHERE x.seq = r.copy_seq LIMIT 1), ''),
		r.group_id, COALESCE(rg.name, ''), r.job_id, r.actor, r.at, r.edited,
		o.group_id, COALESCE(og.name, ''), COALESCE(o.outcome, 0), COALESCE(o.settled_at, 0), d.id IS NOT NULL
	FROM (SELECT * FROM replays WHERE seq = ?1 ORDER BY copy_seq LIMIT ?2) r
	LEFT JOIN messages m ON m.seq = r.copy_seq
	LEFT JOIN groups rg ON rg.id = r.group_id AND r.group_id > 0
	LEFT JOIN replay_outcomes o ON o.copy_seq = r.copy_seq
	LEFT JOIN groups og ON og.id = o.group_id
	LEFT JOIN dead_letters d ON d.seq = o.copy_seq AND d.group_id = o.group_id
	ORDER BY r.copy_seq, og.name`

// CopiesOf reads copiesQuery: one row per copy and group.
func (t *Tx) CopiesOf(ctx context.Context, seq int64, limit int) ([]broker.ReplayCopy, error) {
	rows, err := t.Query(ctx, CopiesQuery, seq, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.ReplayCopy
	for rows.Next() {
		var c broker.ReplayCopy
		var created, at, settled int64
		var o broker.CopyOutcome
		var gid *int64
		if err := rows.Scan(&c.CopySeq, &created, &c.TransactionID, &c.GroupID, &c.Group, &c.JobID, &c.Actor, &at, &c.Edited,
			&gid, &o.Group, &o.Outcome, &settled, &o.DeadLetter); err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || out[n-1].CopySeq != c.CopySeq {
			c.CopyID, c.At = broker.MessageID(FromMS(created), c.CopySeq), FromMS(at)
			out = append(out, c)
		}
		if gid != nil {
			o.GroupID = *gid
			if settled != 0 {
				o.SettledAt = FromMS(settled)
			}
			last := &out[len(out)-1]
			last.Outcomes = append(last.Outcomes, o)
		}
	}
	return out, rows.Err()
}

const DeletionsQuery = `SELECT r.id, r.seq, r.group_id, COALESCE(g.name, ''), r.how, r.at, r.actor, r.job_id, r.restore_until, r.restored_at, r.restored_by, r.failed_at, r.retry_count
	FROM removed_dead_letters r LEFT JOIN groups g ON g.id = r.group_id
	WHERE r.seq = ? ORDER BY r.id`

// DeletionsOf reads removed_dead_letters by removed_dead_letters_seq.
func (t *Tx) DeletionsOf(ctx context.Context, seq int64) ([]broker.RemovedDeadLetter, error) {
	rows, err := t.Query(ctx, DeletionsQuery, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.RemovedDeadLetter
	for rows.Next() {
		var r broker.RemovedDeadLetter
		d := &r.DeadLetter
		var at, until, restored, failed int64
		if err := rows.Scan(&r.ID, &d.Seq, &d.GroupID, &d.Group, &r.How, &at, &r.Actor, &r.JobID, &until, &restored, &r.RestoredBy, &failed, &d.RetryCount); err != nil {
			return nil, err
		}
		r.At, d.FailedAt = FromMS(at), FromMS(failed)
		r.RestoreUntil, r.RestoredAt = optionalMS(until), optionalMS(restored)
		out = append(out, r)
	}
	return out, rows.Err()
}
