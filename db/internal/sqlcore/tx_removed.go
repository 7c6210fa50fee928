package sqlcore

import (
	"context"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Deleted dead letters kept for a restore window, and the sweeps of the
// history replays and deletes keep (migration 0018).

// keepRemoved copies the dead letters ids (a JSON array) whole into
// removed_dead_letters, before DeleteDeadLetters removes them.
func (t *Tx) keepRemoved(ctx context.Context, ids string, r *broker.Removal) error {
	_, err := t.Exec(ctx, `INSERT INTO removed_dead_letters (dead_letter_id, seq, queue_id, partition_id, group_id, error, error_bytes, retry_count, failed_at,
			transaction_id, trace_id, fingerprint, how, at, actor, job_id, restore_until, payload, pushed_at, consumer_version)
		SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, d.error, d.error_bytes, d.retry_count, d.failed_at,
			d.transaction_id, d.trace_id, d.fingerprint, ?, ?, ?, ?, ?, d.payload, d.pushed_at, d.consumer_version
		FROM dead_letters d WHERE d.id IN (SELECT value FROM json_each(?)) ORDER BY d.id`,
		r.How, MS(r.At), r.Actor, r.JobID, MS(r.RestoreUntil), ids)
	return err
}

const removedCols = `r.id, r.seq, r.queue_id, r.partition_id, r.group_id, r.error, r.error_bytes, r.retry_count, r.failed_at,
	r.transaction_id, r.trace_id, r.fingerprint, r.how, r.at, r.actor, r.job_id, r.restore_until, r.restored_at, r.restored_by,
	COALESCE(m.created_at, r.pushed_at), r.payload, r.consumer_version`

// RestorableQuery is Restorable's query.
func RestorableQuery(seq, groupID, jobID int64, now time.Time, limit int) (string, []any) {
	q := `SELECT ` + removedCols + ` FROM removed_dead_letters r LEFT JOIN messages m ON m.seq = r.seq
		WHERE r.restore_until > ? AND r.restored_at = 0
		AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.seq = r.seq AND d.group_id = r.group_id)`
	args := []any{MS(now)}
	if jobID != 0 {
		q += ` AND r.job_id = ? AND r.job_id > 0 ORDER BY r.id LIMIT ?`
		args = append(args, jobID, limit)
	} else {
		q += ` AND r.seq = ?`
		args = append(args, seq)
		if groupID != 0 {
			q += ` AND r.group_id = ?`
			args = append(args, groupID)
		}
		q += ` ORDER BY r.id`
	}
	return q, args
}

// Restorable reads by removed_dead_letters_seq (a message's) or
// removed_dead_letters_job (a job's), joined to the message for its
// time (the row's own, and its payload, once retention removed the
// message: migration 0020); a row whose (seq, group) is a dead letter
// again is left out.
func (t *Tx) Restorable(ctx context.Context, seq, groupID, jobID int64, now time.Time, limit int) ([]broker.RemovedDeadLetter, error) {
	q, args := RestorableQuery(seq, groupID, jobID, now, limit)
	rows, err := t.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.RemovedDeadLetter
	for rows.Next() {
		var r broker.RemovedDeadLetter
		d := &r.DeadLetter
		var failed, at, until, restored, created int64
		if err := rows.Scan(&r.ID, &d.Seq, &d.QueueID, &d.PartitionID, &d.GroupID, &d.Error, &d.ErrorBytes, &d.RetryCount, &failed,
			&d.TransactionID, &d.TraceID, &d.Fingerprint, &r.How, &at, &r.Actor, &r.JobID, &until, &restored, &r.RestoredBy, &created, &d.Payload, &d.ConsumerVersion); err != nil {
			return nil, err
		}
		d.FailedAt, d.CreatedAt, r.At = FromMS(failed), FromMS(created), FromMS(at)
		r.RestoreUntil, r.RestoredAt = optionalMS(until), optionalMS(restored)
		out = append(out, r)
	}
	return out, rows.Err()
}

// CountRestorable counts by removed_dead_letters_job.
func (t *Tx) CountRestorable(ctx context.Context, jobID int64, now time.Time) (int64, time.Time, error) {
	var n, until int64
	err := t.QueryRow(ctx, `SELECT COUNT(*), COALESCE(MAX(r.restore_until), 0) FROM removed_dead_letters r
		WHERE r.job_id = ? AND r.job_id > 0 AND r.restore_until > ? AND r.restored_at = 0
		AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.seq = r.seq AND d.group_id = r.group_id)`, jobID, MS(now)).Scan(&n, &until)
	if err != nil || until == 0 {
		return n, time.Time{}, err
	}
	return n, FromMS(until), nil
}

// MarkRestored writes removed_dead_letters by primary key; the error
// text goes (the dead letter has it again).
func (t *Tx) MarkRestored(ctx context.Context, ids []int64, now time.Time, actor string) error {
	_, err := t.Exec(ctx, `UPDATE removed_dead_letters SET restored_at = ?, restored_by = ?, restore_until = 0, error = '' WHERE id IN (SELECT value FROM json_each(?))`,
		MS(now), actor, IntsJSON(ids))
	return err
}

// returnToErrorGroup upserts error_groups by its key.
func (t *Tx) returnToErrorGroup(ctx context.Context, queueID, groupID int64, fingerprint string, n int64, failedAt time.Time, errText string) error {
	_, err := t.Exec(ctx, `INSERT INTO error_groups (queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at, sample_error)
		VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)
		ON CONFLICT (queue_id, group_id, fingerprint) DO UPDATE SET
			dead_letters = error_groups.dead_letters + excluded.dead_letters,
			first_failed_at = min(error_groups.first_failed_at, excluded.first_failed_at),
			sample_error = CASE WHEN excluded.last_failed_at > error_groups.last_failed_at THEN excluded.sample_error ELSE error_groups.sample_error END,
			last_failed_at = max(error_groups.last_failed_at, excluded.last_failed_at)`,
		queueID, groupID, fingerprint, n, MS(failedAt), errText)
	return err
}

// EndRestoreWindows walks removed_dead_letters_window from its oldest end.
func (t *Tx) EndRestoreWindows(ctx context.Context, now time.Time, limit int) (int64, error) {
	// The payload a row kept for its message (retention, migration 0020)
	// goes with the error text: only a restore needed it.
	res, err := t.Exec(ctx, `UPDATE removed_dead_letters SET error = '', restore_until = 0, payload = NULL
		WHERE id IN (SELECT id FROM removed_dead_letters WHERE restore_until > 0 AND restore_until <= ? ORDER BY restore_until LIMIT ?)`, MS(now), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// SweepHistory takes each table from its oldest end: rows are written in
// time order, so the oldest ids are the oldest rows, and a walk from
// there stops at the first one that is young enough (no index on the
// times is needed). The walk of replays goes on from afterCopy, past the
// rows it keeps; it returns where to go on (0: it is done).
func (t *Tx) SweepHistory(ctx context.Context, before time.Time, limit int, afterCopy int64) (int64, int64, error) {
	cut := MS(before)
	var total int64
	// Replays, with their edits, outcomes and the attempts of the
	// messages they copied, walked by copy_seq from afterCopy. A copy for
	// one group that some group has not passed yet keeps its row (the
	// pop needs it to pass the copy by), and so does a copy that is a
	// dead letter (kept, or deleted and still restorable): the replay
	// cap counts its replays by its row (replays.depth). The walk goes
	// on past the rows it keeps.
	rows, err := t.Query(ctx, `SELECT r.copy_seq, r.at,
			r.group_id > 0 AND EXISTS (SELECT 1 FROM messages m JOIN consumers c ON c.partition_id = m.partition_id
				WHERE m.seq = r.copy_seq AND c.group_id <> r.group_id AND c.cursor < r.copy_seq)
			OR EXISTS (SELECT 1 FROM dead_letters d WHERE d.seq = r.copy_seq)
			OR EXISTS (SELECT 1 FROM removed_dead_letters x WHERE x.seq = r.copy_seq AND x.restore_until > 0 AND x.restored_at = 0)
		FROM replays r WHERE r.copy_seq > ? ORDER BY r.copy_seq LIMIT ?`, afterCopy, limit)
	if err != nil {
		return 0, 0, err
	}
	var seqs []int64
	var next int64
	examined := 0
	for rows.Next() {
		var seq, at int64
		var kept bool
		if err := rows.Scan(&seq, &at, &kept); err != nil {
			rows.Close()
			return 0, 0, err
		}
		examined++
		if at >= cut {
			examined = -1 // young enough: the walk ends here
			break
		}
		if !kept {
			seqs = append(seqs, seq)
		}
		next = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	if examined < limit {
		next = 0 // the walk reached a young row or the end
	}
	if len(seqs) > 0 {
		list := IntsJSON(seqs)
		for _, s := range []string{
			`DELETE FROM attempts WHERE seq IN (SELECT r.seq FROM replays r WHERE r.copy_seq IN (SELECT value FROM json_each(?1)))
				AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.seq = attempts.seq AND d.group_id = attempts.group_id)`,
			LoseOutcomesSQL,
			`DELETE FROM replay_outcomes WHERE copy_seq IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM replay_edits WHERE copy_seq IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM replays WHERE copy_seq IN (SELECT value FROM json_each(?1))`,
		} {
			if _, err := t.Exec(ctx, s, list); err != nil {
				return 0, 0, err
			}
		}
		total += int64(len(seqs))
	}
	// Deleted dead letters' records (their restore window is long over),
	// and the attempts of their messages in their group.
	ids, err := t.QueryIDs(ctx, `SELECT id FROM (SELECT id, at, restore_until FROM removed_dead_letters ORDER BY id LIMIT ?) x WHERE at < ? AND restore_until = 0`, limit, cut)
	if err != nil {
		return 0, 0, err
	}
	if len(ids) > 0 {
		list := IntsJSON(ids)
		for _, s := range []string{
			`DELETE FROM attempts WHERE (seq, group_id) IN (SELECT r.seq, r.group_id FROM removed_dead_letters r WHERE r.id IN (SELECT value FROM json_each(?1)))
				AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.seq = attempts.seq AND d.group_id = attempts.group_id)`,
			`DELETE FROM removed_dead_letters WHERE id IN (SELECT value FROM json_each(?1))`,
		} {
			if _, err := t.Exec(ctx, s, list); err != nil {
				return 0, 0, err
			}
		}
		total += int64(len(ids))
	}
	// Finished jobs, with their outcomes (their copies' rows went with
	// the replays above, or go when those do).
	jobs, err := t.QueryIDs(ctx, `SELECT id FROM jobs WHERE finished_at > 0 AND finished_at < ? ORDER BY id LIMIT ?`, cut, limit)
	if err != nil {
		return 0, 0, err
	}
	if len(jobs) > 0 {
		list := IntsJSON(jobs)
		for _, s := range []string{
			`DELETE FROM job_outcomes WHERE job_id IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))`,
		} {
			if _, err := t.Exec(ctx, s, list); err != nil {
				return 0, 0, err
			}
		}
		total += int64(len(jobs))
	}
	return total, next, nil
}

// optionalMS is a time kept as Unix milliseconds, 0 for none (zero).
func optionalMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return FromMS(v)
}
