package sqlcore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The circuit breaker (broker.BreakerTx): group_breakers keeps the count
// of failed tries in a row of each (queue, group) whose queue has
// holdAfterFailures on (migrations 0032 / pg 0009), and the breaker's
// hold keeps its probe in holds.probe_*. The same texts run on both
// stores.

// breakerResetSQL puts a count back to 0, and writes nothing (locks no
// row on PostgreSQL) when it is 0 already: the statement of every
// completed ack of a queue with the breaker on.
const breakerResetSQL = `UPDATE group_breakers SET streak = 0 WHERE queue_id = ? AND group_id = ? AND streak <> 0`

// AddBreakerTries upserts the (queue, group)'s row: its count, last
// error and time, RETURNING the count.
func (t *Tx) AddBreakerTries(ctx context.Context, b broker.BreakerTries) (int64, error) {
	if b.Failures == 0 {
		if !b.Reset {
			return t.streak(ctx, b.QueueID, b.GroupID)
		}
		_, err := t.Exec(ctx, breakerResetSQL, b.QueueID, b.GroupID)
		return 0, err
	}
	var streak int64
	err := t.QueryRow(ctx, `INSERT INTO group_breakers (queue_id, group_id, streak, last_error, last_at) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (queue_id, group_id) DO UPDATE SET
			streak = CASE WHEN ?6 = 1 THEN excluded.streak ELSE group_breakers.streak + excluded.streak END,
			last_error = excluded.last_error, last_at = excluded.last_at
		RETURNING streak`,
		b.QueueID, b.GroupID, int64(b.Failures), t.d.Text(b.LastError), MS(b.At), B2I(b.Reset)).Scan(&streak)
	return streak, err
}

func (t *Tx) streak(ctx context.Context, queueID, groupID int64) (int64, error) {
	n, _, err := t.Breaker(ctx, queueID, groupID)
	return n, err
}

// ResetBreaker runs breakerResetSQL.
func (t *Tx) ResetBreaker(ctx context.Context, queueID, groupID int64) error {
	_, err := t.Exec(ctx, breakerResetSQL, queueID, groupID)
	return err
}

// Breaker reads the row by its primary key.
func (t *Tx) Breaker(ctx context.Context, queueID, groupID int64) (int64, string, error) {
	var streak int64
	var last string
	err := t.QueryRow(ctx, `SELECT streak, last_error FROM group_breakers WHERE queue_id = ? AND group_id = ?`, queueID, groupID).Scan(&streak, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	return streak, last, err
}

// SaveHoldProbe updates the probe columns of the hold's row.
func (t *Tx) SaveHoldProbe(ctx context.Context, h broker.Hold) error {
	var at int64
	if !h.ProbeAt.IsZero() {
		at = MS(h.ProbeAt)
	}
	_, err := t.Exec(ctx, `UPDATE holds SET probe_at = ?, probe_partition_id = ?, probe_seq = ?, probes = ? WHERE id = ?`,
		at, h.ProbePartitionID, h.ProbeSeq, h.Probes, h.ID)
	return err
}
