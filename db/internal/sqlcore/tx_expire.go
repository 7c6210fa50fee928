package sqlcore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Dead letters that expire (broker.ExpiryTx, migration 0021).

// DueDeadLettersSQL walks dead_letters_queue (queue_id, failed_at DESC,
// id DESC) backwards from the queue's oldest dead letter: the limit
// oldest that failed before the cut, with no sort.
const DueDeadLettersSQL = `SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, d.fingerprint
	FROM dead_letters d
	WHERE d.queue_id = ?1 AND d.failed_at < ?2 ORDER BY d.failed_at, d.id LIMIT ?3`

// DueDeadLetters reads dead_letters by dead_letters_queue, oldest first.
func (t *Tx) DueDeadLetters(ctx context.Context, queueID int64, before time.Time, limit int) ([]broker.DeadLetterKey, error) {
	rows, err := t.Query(ctx, DueDeadLettersSQL, queueID, MS(before), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.DeadLetterKey
	for rows.Next() {
		var k broker.DeadLetterKey
		if err := rows.Scan(&k.ID, &k.Seq, &k.QueueID, &k.PartitionID, &k.GroupID, &k.Fingerprint); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// MarkExpiredSQL finds the records of an expiry by their messages
// (removed_dead_letters_seq), then by the dead letters' ids, and cuts
// them to what the page of an expired dead letter says: the error text
// and the payload a record took from its message (migration 0020) go;
// the push time (pushed_at) stays, it names the message.
const MarkExpiredSQL = `UPDATE removed_dead_letters SET retention = ?3, error = '', payload = NULL
	WHERE seq IN (SELECT value FROM json_each(?1)) AND dead_letter_id IN (SELECT value FROM json_each(?2)) AND how = 'expired'`

// ExpiredAttemptsSQL deletes the failed attempts of the expired dead
// letters' (message, group) pairs, by attempts' primary key; ?1 is a
// JSON array of [seq, group] arrays (pairsJSON), which PostgreSQL reads
// with json_array_elements.
var ExpiredAttemptsSQL = PGQuery(`DELETE FROM attempts WHERE (seq, group_id) IN
	(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1))`,
	`DELETE FROM attempts WHERE (seq, group_id) IN
	(SELECT (j.value ->> 0)::bigint, (j.value ->> 1)::bigint FROM json_array_elements(?1::json) j(value))`)

// MarkExpired writes removed_dead_letters (retention, error) and deletes
// from attempts.
func (t *Tx) MarkExpired(ctx context.Context, keys []broker.DeadLetterKey, retention time.Duration) error {
	if len(keys) == 0 {
		return nil
	}
	seqs, ids := make([]int64, len(keys)), make([]int64, len(keys))
	pairs := make([][2]int64, len(keys))
	for i, k := range keys {
		seqs[i], ids[i], pairs[i] = k.Seq, k.ID, [2]int64{k.Seq, k.GroupID}
	}
	if _, err := t.Exec(ctx, MarkExpiredSQL, IntsJSON(seqs), IntsJSON(ids), int64(retention/time.Second)); err != nil {
		return err
	}
	_, err := t.Exec(ctx, ExpiredAttemptsSQL, pairsJSON(pairs))
	return err
}

// pairsJSON writes pairs as a JSON array of two-element arrays.
func pairsJSON(pairs [][2]int64) string {
	b := make([]byte, 0, 24*len(pairs)+2)
	b = append(b, '[')
	for i, p := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, p[0], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, p[1], 10)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// ExpiryRulesSQL reads a message's expired records by
// removed_dead_letters_seq.
const ExpiryRulesSQL = `SELECT id, retention FROM removed_dead_letters WHERE seq = ? AND how = 'expired'`

// ExpiryRules reads removed_dead_letters by removed_dead_letters_seq.
func (t *Tx) ExpiryRules(ctx context.Context, seq int64) (map[int64]time.Duration, error) {
	rows, err := t.Query(ctx, ExpiryRulesSQL, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]time.Duration{}
	for rows.Next() {
		var id, secs int64
		if err := rows.Scan(&id, &secs); err != nil {
			return nil, err
		}
		out[id] = time.Duration(secs) * time.Second
	}
	return out, rows.Err()
}

// updateExpiryAuditSQL sets an expiry's audit entry by the primary key.
const updateExpiryAuditSQL = `UPDATE audit SET count = ?2, detail = ?3 WHERE id = ?1 AND action = 'dead_letters_expired'`

// UpdateExpiryAudit writes audit (one row, by its primary key).
func (t *Tx) UpdateExpiryAudit(ctx context.Context, id int64, count int, detail string) error {
	res, err := t.Exec(ctx, updateExpiryAuditSQL, id, count, detail)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("expiry audit entry %d: %w", id, broker.ErrNotFound)
	}
	return nil
}
