package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Message retention (broker/retention.go, migration 0020): settle marks
// of completedRetentionSeconds and the chunked deletion of a partition's
// oldest messages.

// MarkSettled writes a settle mark (now, watermark) for each of up to
// limit partitions of the queue with an id above after, in id order,
// whose settled watermark (the lowest cursor of its consumers) is above
// its last mark's seq and whose last mark was written at or before
// now - slot, and that still has a message up to the watermark (an
// idle partition whose settled messages are gone gets no more marks);
// first it deletes their marks above the watermark or made before the
// queue's newest subscription that may read back (reads_back,
// migration 0023: a group subscribed since from the beginning or from a
// time; one that starts after everything pushed has its cursors at or
// past every earlier mark; one in the
// same millisecond, after the mark, whose cursor is behind it, goes
// by the watermark at the next run).
// It reads partitions (by their key, then queue_id), consumers by
// their key, subscriptions by their key prefix (queue_id) and
// settle_marks by theirs; writes settle_marks. It returns the marks written and the highest partition
// id it looked at (0: there are no more).
func (t *Tx) MarkSettled(ctx context.Context, queueID int64, now time.Time, slot time.Duration, after int64, limit int) (marked, last int64, err error) {
	ids, err := t.QueryIDs(ctx, PartitionsAfterSQL, queueID, after, limit)
	if err != nil {
		return 0, 0, err
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	list := IntsJSON(ids)
	// A mark above the watermark now (a group subscribed since, from
	// the beginning), or made before a group subscribed (which may have
	// read and settled its messages since, between two runs), no longer
	// says when every group had settled: it goes, and marks start again
	// from what every group has settled now.
	if _, err := t.Exec(ctx, DropMarksAboveSQL, list); err != nil {
		return 0, 0, err
	}
	res, err := t.Exec(ctx, MarkSettledSQL, MS(now), queueID, list, MS(now.Add(-slot)))
	if err != nil {
		return 0, 0, err
	}
	if marked, err = res.RowsAffected(); err != nil || len(ids) < limit {
		return marked, 0, err
	}
	return marked, ids[len(ids)-1], nil
}

// DueSettled returns, for each partition of the queue with a settle mark
// written at or before before, the highest such mark's seq (the
// messages up to it were settled by every group more than the retention
// ago). It reads settle_marks by settle_marks_due and locks nothing.
func (t *Tx) DueSettled(ctx context.Context, queueID int64, before time.Time) ([]broker.PartitionCut, error) {
	rows, err := t.Query(ctx, DueSettledSQL, queueID, MS(before))
	if err != nil {
		return nil, err
	}
	return scanCuts(rows)
}

// ExpiringPartitions returns the partitions of the queue whose oldest
// message was pushed before before (UpTo: that message's seq; the sweep
// goes on from there). It reads partitions by queue and each one's first
// message by messages_partition_seq (one index probe a partition) and
// locks nothing.
func (t *Tx) ExpiringPartitions(ctx context.Context, queueID int64, before time.Time) ([]broker.PartitionCut, error) {
	rows, err := t.Query(ctx, ExpiringPartitionsSQL, queueID, MS(before))
	if err != nil {
		return nil, err
	}
	return scanCuts(rows)
}

func scanCuts(rows Rows) ([]broker.PartitionCut, error) {
	defer rows.Close()
	var out []broker.PartitionCut
	for rows.Next() {
		var c broker.PartitionCut
		if err := rows.Scan(&c.PartitionID, &c.UpTo); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DropSettleMarks deletes the partition's settle marks with a seq at or
// below through (their messages are gone). Writes settle_marks by its
// key.
func (t *Tx) DropSettleMarks(ctx context.Context, partitionID, through int64) (int64, error) {
	res, err := t.Exec(ctx, DropSettleMarksSQL, partitionID, through)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// sweptConsumer is a consumers row as SweepMessages reads it.
type sweptConsumer struct {
	groupID, cursor, passedSeq, leaseLast, retrySeq, voidLast int64
	leaseID, voidID, acks                                     sql.NullString
}

// SweepMessages deletes the oldest messages of a partition: those with
// a seq up to s.UpTo, capped at the cursor of every consumer holding a
// live lease at s.Now (and with s.Settled, at the lowest cursor of all
// its consumers: nothing when it has none), pushed before s.Before when
// it is set (stopping at the first one that was not), s.Limit at most,
// oldest first. In the same transaction, before they go, each message's
// payload and push time are copied into its dead letters (payload NULL:
// not copied yet), and into the records of its deleted dead letters the
// push time always, the payload only while the record can be restored
// (an expired record's, or one whose restore window ended, stays cut);
// each
// consumer whose cursor was below the last seq deleted (Through) has
// the deleted seqs above its cursor counted as expired for its group
// (returned; the broker adds them to the stats; a copy replayed to
// another group only is none of its messages), its cursor moved to
// Through and what pointed into the range cleared (a retry waiting on
// a deleted message, acks of deleted messages, a lease or void lease
// whose batch ended in the range); the kept counts (migration 0010) are
// lowered by the deleted seqs they had counted (partitions.messages up
// to counted_seq, consumers.passed up to passed_seq); replayed copies
// among them still pending in a group are settled as expired
// (replay_outcomes.outcome 3) and leave their job's pending count
// (job_outcomes.expired). Their attempts go, but for a message with a
// dead letter (kept or deleted) in the attempt's group.
//
// It reads and writes messages (by messages_partition_seq and seq),
// consumers (by key prefix partition_id), partitions, dead_letters (by
// UNIQUE(seq, group_id)), removed_dead_letters (by
// removed_dead_letters_seq), replay_outcomes, job_outcomes, attempts.
// A partition that is not there, or has nothing due, deletes nothing
// (Removed 0), which is not an error.
func (t *Tx) SweepMessages(ctx context.Context, s broker.MessageSweep) (broker.SweptMessages, error) {
	var out broker.SweptMessages
	var queueID, countedSeq int64
	err := t.QueryRow(ctx, `SELECT queue_id, counted_seq FROM partitions WHERE id = ?`, s.PartitionID).Scan(&queueID, &countedSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.QueueID = queueID
	consumers, err := t.sweptConsumers(ctx, s.PartitionID)
	if err != nil {
		return out, err
	}
	if s.Settled && len(consumers) == 0 {
		return out, nil
	}
	if out.Bound, err = t.sweepBound(ctx, s, consumers); err != nil {
		return out, err
	}
	seqs, lastCreated, err := t.sweepRange(ctx, s, out.Bound)
	if err != nil || len(seqs) == 0 {
		return out, err
	}
	through := seqs[len(seqs)-1]
	out.Removed, out.Through = int64(len(seqs)), through
	list := IntsJSON(seqs)
	// below counts the deleted seqs at or below seq.
	below := func(seq int64) int64 {
		n := int64(0)
		for _, x := range seqs {
			if x <= seq {
				n++
			}
		}
		return n
	}
	if err := t.deleteSwept(ctx, list, through, lastCreated, s.Now); err != nil {
		return out, err
	}
	if n := below(countedSeq); n > 0 {
		if _, err := t.Exec(ctx, `UPDATE partitions SET messages = messages - ? WHERE id = ?`, n, s.PartitionID); err != nil {
			return out, err
		}
	}
	var ready bool
	if err := t.QueryRow(ctx, ReadyAfterSQL, s.PartitionID, through).Scan(&ready); err != nil {
		return out, err
	}
	// A copy replayed to one group only is no message of the others:
	// they would have passed it by, so it does not expire for them.
	only, err := t.copiesForOneGroup(ctx, list)
	if err != nil {
		return out, err
	}
	for _, c := range consumers {
		if err := t.sweepConsumer(ctx, s.PartitionID, c, through, below, only, ready, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// sweepBound is the highest seq SweepMessages may delete: s.UpTo, capped
// at the lowest cursor of the consumers holding a live lease at s.Now
// (their batch is still to be acked) and, with s.Settled, at every
// consumer's cursor (a message not passed by all is kept).
func (t *Tx) sweepBound(ctx context.Context, s broker.MessageSweep, consumers []sweptConsumer) (int64, error) {
	upTo := s.UpTo
	var leased sql.NullInt64
	if err := t.QueryRow(ctx, LeasedCursorSQL,
		s.PartitionID, MS(s.Now)).Scan(&leased); err != nil {
		return 0, err
	}
	if leased.Valid {
		upTo = min(upTo, leased.Int64)
	}
	for _, c := range consumers {
		if s.Settled {
			upTo = min(upTo, c.cursor)
		}
	}
	return upTo, nil
}

// sweepRange reads the seqs SweepMessages deletes, oldest first: up to
// upTo, s.Limit at most, stopping at the first message pushed at or
// after s.Before when it is set (seqs grow with push times); lastCreated
// is the push time of the last one (keepSeqFloor's).
func (t *Tx) sweepRange(ctx context.Context, s broker.MessageSweep, upTo int64) (seqs []int64, lastCreated int64, err error) {
	rows, err := t.Query(ctx, SweepRangeSQL, s.PartitionID, upTo, s.Limit)
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var seq, created int64
		if err := rows.Scan(&seq, &created); err != nil {
			rows.Close()
			return nil, 0, err
		}
		if !s.Before.IsZero() && created >= MS(s.Before) {
			break
		}
		seqs = append(seqs, seq)
		lastCreated = created
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return seqs, lastCreated, nil
}

// deleteSwept deletes the messages list names (a JSON array of seqs,
// through the last), after what must outlive them is kept: their
// payloads and push times copied into their dead letters and the
// records of deleted ones, their attempts dropped, the replay outcomes
// of those that are pending copies settled as expired. On SQLite, when
// through was the newest message, a placeholder keeps the next seq above
// it (keepSeqFloor), so that no seq is ever given twice.
func (t *Tx) deleteSwept(ctx context.Context, list string, through, lastCreated int64, now time.Time) error {
	for _, stmt := range []string{
		CopyToDeadLettersSQL,
		CopyToRemovedSQL,
		SweepAttemptsSQL,
	} {
		if _, err := t.Exec(ctx, stmt, list); err != nil {
			return err
		}
	}
	if err := t.expireOutcomes(ctx, list, now); err != nil {
		return fmt.Errorf("expire replay outcomes: %w", err)
	}
	// The newest message's seq, for keepSeqFloor (SQLite only: on
	// PostgreSQL seqs keep growing by themselves).
	top, err := t.d.NewestSeq(ctx, t)
	if err != nil {
		return err
	}
	if _, err := t.Exec(ctx, DeleteMessagesSQL, list); err != nil {
		return err
	}
	if top == through {
		return t.KeepSeqFloor(ctx, through+1, lastCreated)
	}
	return nil
}

// sweptConsumers reads the consumers of a partition by their key prefix.
func (t *Tx) sweptConsumers(ctx context.Context, partitionID int64) ([]sweptConsumer, error) {
	rows, err := t.Query(ctx, SweptConsumersSQL, partitionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sweptConsumer
	for rows.Next() {
		var c sweptConsumer
		if err := rows.Scan(&c.groupID, &c.cursor, &c.passedSeq, &c.leaseLast, &c.retrySeq, &c.voidLast, &c.leaseID, &c.voidID, &c.acks); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// sweepConsumer brings one consumer past the deleted range (through):
// passed lowered by the deleted seqs it had counted, and, when its
// cursor was below through, the expired ones counted, the cursor moved
// and the state that pointed into the range cleared.
func (t *Tx) sweepConsumer(ctx context.Context, partitionID int64, c sweptConsumer, through int64, below func(int64) int64, only map[int64]int64, ready bool, out *broker.SweptMessages) error {
	lower := below(c.passedSeq)
	if c.cursor >= through {
		if lower == 0 {
			return nil
		}
		_, err := t.Exec(ctx, `UPDATE consumers SET passed = passed - ? WHERE partition_id = ? AND group_id = ?`, lower, partitionID, c.groupID)
		return err
	}
	expired := below(through) - below(c.cursor)
	for seq, g := range only {
		if seq > c.cursor && g != c.groupID {
			expired--
		}
	}
	out.Expired = append(out.Expired, broker.GroupCount{GroupID: c.groupID, N: expired})
	leaseID, leaseLast := any(c.leaseID), c.leaseLast
	var leaseUntilZero bool
	if c.leaseLast <= through {
		leaseID, leaseLast, leaseUntilZero = nil, 0, true
	} else if !c.leaseID.Valid {
		leaseID = nil
	}
	retryClear := c.retrySeq != 0 && c.retrySeq <= through
	voidID, voidLast := any(c.voidID), c.voidLast
	if c.voidLast <= through || !c.voidID.Valid {
		voidID, voidLast = nil, 0
	}
	var acks any
	if c.acks.Valid && c.acks.String != "" {
		var list []broker.LeaseAck
		if err := json.Unmarshal([]byte(c.acks.String), &list); err != nil {
			return fmt.Errorf("consumer acks: %w", err)
		}
		kept := list[:0]
		for _, a := range list {
			if a.Seq > through {
				kept = append(kept, a)
			}
		}
		if len(kept) > 0 {
			b, err := json.Marshal(kept)
			if err != nil {
				return err
			}
			acks = string(b)
		}
	}
	_, err := t.Exec(ctx, `UPDATE consumers SET cursor = ?1, passed = passed - ?2, lease_id = ?3, lease_last = ?4,
		lease_until = CASE WHEN ?5 THEN 0 ELSE lease_until END,
		retry_seq = CASE WHEN ?6 THEN 0 ELSE retry_seq END, retries = CASE WHEN ?6 THEN 0 ELSE retries END,
		available_at = CASE WHEN ?6 THEN 0 ELSE available_at END,
		acks = ?7, void_lease_id = ?8, void_last = ?9, ready = ?10
		WHERE partition_id = ?11 AND group_id = ?12`,
		through, lower, leaseID, leaseLast, leaseUntilZero, retryClear, acks, voidID, voidLast, B2I(ready), partitionID, c.groupID)
	if err != nil {
		return err
	}
	if t.saved == nil {
		t.saved = map[[2]int64]struct{}{}
	}
	t.saved[[2]int64{partitionID, c.groupID}] = struct{}{}
	return nil
}

// copiesForOneGroup returns, of the seqs (a JSON array), the copies
// replayed to one group only, with that group (replays by key).
func (t *Tx) copiesForOneGroup(ctx context.Context, list string) (map[int64]int64, error) {
	rows, err := t.Query(ctx, CopiesForOneGroupSQL, list)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var seq, g int64
		if err := rows.Scan(&seq, &g); err != nil {
			return nil, err
		}
		out[seq] = g
	}
	return out, rows.Err()
}

// expireOutcomes settles as expired (outcome 3) the pending outcomes of
// the copies among seqs, and counts them into their jobs' expired and
// their error groups' lost.
func (t *Tx) expireOutcomes(ctx context.Context, list string, now time.Time) error {
	rows, err := t.Query(ctx, ExpireOutcomesSQL, MS(now), list)
	if err != nil {
		return err
	}
	counts := map[[2]int64]int64{}
	lost := map[int64]int64{}
	for rows.Next() {
		var k [2]int64
		var errorGroup int64
		if err := rows.Scan(&k[0], &k[1], &errorGroup); err != nil {
			rows.Close()
			return err
		}
		if k[0] > 0 {
			counts[k]++
		}
		if errorGroup > 0 {
			lost[errorGroup]++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if err := t.loseInErrorGroups(ctx, lost); err != nil {
		return err
	}
	for k, n := range counts {
		if _, err := t.Exec(ctx, `UPDATE job_outcomes SET expired = expired + ? WHERE job_id = ? AND group_id = ?`, n, k[0], k[1]); err != nil {
			return err
		}
	}
	return nil
}

// KeepSeqFloor keeps seqs growing once the message with the highest seq
// is deleted. SQLite gives a new row of a table without AUTOINCREMENT
// the highest rowid there plus one: with the newest messages gone, a
// push would get a seq again that cursors have passed, and that dead
// letters, replays and attempts still name. So one placeholder row
// (partition 0, which no partition is; an empty transactionId) holds seq: one
// above the highest deleted, a seq no message had and nothing names
// (at the deleted seq itself, the joins of dead letters to their
// messages would find it), pushed at createdAt (the deleted message's
// time, so that seqs stay in time order for the search's time windows).
// There is one at most (UNIQUE(partition_id, transaction_id)), moved up
// each time. No consumer reads partition 0 and no count includes it.
// (AUTOINCREMENT would do it too, at the price of a write of
// sqlite_sequence on every push and a rebuild of messages.)
//
// On PostgreSQL it writes nothing: seqs come from the identity column's
// sequence, which never gives a number twice, whatever rows are deleted
// (and no statement sets a message's seq itself), so there is no
// placeholder row there.
func (t *Tx) KeepSeqFloor(ctx context.Context, seq, createdAt int64) error {
	return t.d.KeepSeqFloor(ctx, t, seq, createdAt)
}

// The statements of retention (their plans: tx_retention_test.go).
const (
	PartitionsAfterSQL = `SELECT id FROM partitions WHERE queue_id = ? AND id > ? ORDER BY id LIMIT ?`
	DropMarksAboveSQL  = `DELETE FROM settle_marks WHERE partition_id IN (SELECT value FROM json_each(?))
		AND (seq > COALESCE((SELECT MIN(c.cursor) FROM consumers c WHERE c.partition_id = settle_marks.partition_id), 0)
			OR at < COALESCE((SELECT MAX(s.subscribed_at) FROM subscriptions s WHERE s.queue_id = settle_marks.queue_id AND s.reads_back = 1), 0))`
	MarkSettledSQL = `INSERT INTO settle_marks (partition_id, at, seq, queue_id)
		SELECT w.id, ?1, w.seq, ?2 FROM (
			SELECT j.value AS id, (SELECT MIN(c.cursor) FROM consumers c WHERE c.partition_id = j.value) AS seq,
				(SELECT s.seq FROM settle_marks s WHERE s.partition_id = j.value ORDER BY s.at DESC LIMIT 1) AS mark_seq,
				(SELECT s.at FROM settle_marks s WHERE s.partition_id = j.value ORDER BY s.at DESC LIMIT 1) AS mark_at
			FROM (SELECT value FROM json_each(?3)) j) w
		WHERE w.seq > 0 AND (w.mark_seq IS NULL OR (w.seq > w.mark_seq AND w.mark_at <= ?4))
			AND EXISTS (SELECT 1 FROM messages m WHERE m.partition_id = w.id AND m.seq <= w.seq)
		ON CONFLICT (partition_id, at) DO NOTHING`
	DueSettledSQL         = `SELECT partition_id, MAX(seq) FROM settle_marks WHERE queue_id = ? AND at <= ? GROUP BY partition_id ORDER BY partition_id`
	ExpiringPartitionsSQL = `SELECT x.id, x.seq FROM (
			SELECT p.id, (SELECT m.seq FROM messages m WHERE m.partition_id = p.id ORDER BY m.seq LIMIT 1) AS seq FROM partitions p WHERE p.queue_id = ?) x
		JOIN messages m ON m.seq = x.seq WHERE m.created_at < ? ORDER BY x.id`
	DropSettleMarksSQL   = `DELETE FROM settle_marks WHERE partition_id = ? AND seq <= ?`
	LeasedCursorSQL      = `SELECT MIN(cursor) FROM consumers WHERE partition_id = ? AND lease_id IS NOT NULL AND lease_until > ?`
	SweepRangeSQL        = `SELECT seq, created_at FROM messages WHERE partition_id = ? AND seq <= ? ORDER BY seq LIMIT ?`
	CopyToDeadLettersSQL = `UPDATE dead_letters SET payload = (SELECT m.payload FROM messages m WHERE m.seq = dead_letters.seq),
			pushed_at = (SELECT m.created_at FROM messages m WHERE m.seq = dead_letters.seq)
			WHERE seq IN (SELECT value FROM json_each(?1)) AND payload IS NULL`
	// A deleted dead letter's record keeps its message's payload only
	// while it can be restored (restore_until > 0, not restored): an
	// expired record (tx_expire.go) and one whose restore window
	// ended (EndRestoreWindows) had theirs cut on purpose, and get only
	// the push time, which their history needs.
	CopyToRemovedSQL = `UPDATE removed_dead_letters SET
			payload = CASE WHEN restore_until > 0 AND restored_at = 0
				THEN COALESCE(payload, (SELECT m.payload FROM messages m WHERE m.seq = removed_dead_letters.seq)) ELSE payload END,
			pushed_at = CASE WHEN pushed_at = 0
				THEN COALESCE((SELECT m.created_at FROM messages m WHERE m.seq = removed_dead_letters.seq), 0) ELSE pushed_at END
			WHERE seq IN (SELECT value FROM json_each(?1))
				AND (pushed_at = 0 OR (payload IS NULL AND restore_until > 0 AND restored_at = 0))`
	SweepAttemptsSQL = `DELETE FROM attempts WHERE seq IN (SELECT value FROM json_each(?1))
			AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.seq = attempts.seq AND d.group_id = attempts.group_id)
			AND NOT EXISTS (SELECT 1 FROM removed_dead_letters r WHERE r.seq = attempts.seq AND r.group_id = attempts.group_id)`
	DeleteMessagesSQL = `DELETE FROM messages WHERE seq IN (SELECT value FROM json_each(?))`
	ReadyAfterSQL     = `SELECT EXISTS (SELECT 1 FROM messages WHERE partition_id = ? AND seq > ?)`
	SweptConsumersSQL = `SELECT group_id, cursor, passed_seq, lease_last, retry_seq, void_last, lease_id, void_lease_id, acks
		FROM consumers WHERE partition_id = ?`
	CopiesForOneGroupSQL = `SELECT copy_seq, group_id FROM replays WHERE copy_seq IN (SELECT value FROM json_each(?)) AND group_id > 0`
	ExpireOutcomesSQL    = `UPDATE replay_outcomes SET outcome = 3, settled_at = ?
		WHERE copy_seq IN (SELECT value FROM json_each(?)) AND outcome = 0 RETURNING job_id, group_id, error_group`
)
