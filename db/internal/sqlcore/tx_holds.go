package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Holds (broker.HoldTx): the rows of holds, one a (queue, group, kind),
// group 0 for a hold of the whole queue (migrations 0032 / pg 0009). A
// pop of a pair the broker's cache does not know unheld reads HoldsOf:
// one statement on the UNIQUE (queue_id, group_id, kind) index. The same
// texts run on both stores.

// holdCols are the columns scanHold reads, in its order.
const holdCols = `h.id, h.queue_id, h.group_id, h.kind, h.reason, h.actor, h.since, h.probe_at, h.probe_partition_id, h.probe_seq, h.probes`

func scanHold(r interface{ Scan(...any) error }, names bool) (broker.Hold, error) {
	var h broker.Hold
	var kind string
	var since, probeAt int64
	dest := []any{&h.ID, &h.QueueID, &h.GroupID, &kind, &h.Reason, &h.Actor, &since, &probeAt, &h.ProbePartitionID, &h.ProbeSeq, &h.Probes}
	if names {
		dest = append(dest, &h.Queue, &h.Group)
	}
	if err := r.Scan(dest...); err != nil {
		return h, err
	}
	h.Kind, h.Since = broker.HoldKind(kind), FromMS(since)
	if probeAt != 0 {
		h.ProbeAt = FromMS(probeAt)
	}
	return h, nil
}

// InsertHold inserts the row ON CONFLICT (queue_id, group_id, kind) DO
// NOTHING; when it was there, h becomes the row there.
func (t *Tx) InsertHold(ctx context.Context, h *broker.Hold) (bool, error) {
	var probeAt int64
	if !h.ProbeAt.IsZero() {
		probeAt = MS(h.ProbeAt)
	}
	n, id, err := t.Insert(ctx, "id", `INSERT INTO holds (queue_id, group_id, kind, reason, actor, since, probe_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (queue_id, group_id, kind) DO NOTHING`, h.QueueID, h.GroupID, string(h.Kind), h.Reason, h.Actor, MS(h.Since), probeAt)
	if err != nil {
		return false, err
	}
	if n == 1 {
		h.ID = id
		return true, nil
	}
	row := t.QueryRow(ctx, `SELECT `+holdCols+` FROM holds h WHERE h.queue_id = ? AND h.group_id = ? AND h.kind = ?`, h.QueueID, h.GroupID, string(h.Kind))
	got, err := scanHold(row, false)
	if err != nil {
		return false, fmt.Errorf("the hold there: %w", err)
	}
	*h = got
	return false, nil
}

// holdsNamedSQL reads holds with their queue's name and their group's
// (empty for a hold of the whole queue).
const holdsNamedSQL = `SELECT ` + holdCols + `, q.name, COALESCE(g.name, '') FROM holds h JOIN queues q ON q.id = h.queue_id LEFT JOIN groups g ON g.id = h.group_id AND h.group_id <> 0`

// HoldByID reads one by its primary key.
func (t *Tx) HoldByID(ctx context.Context, id int64) (broker.Hold, error) {
	h, err := scanHold(t.QueryRow(ctx, holdsNamedSQL+` WHERE h.id = ?`, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return h, fmt.Errorf("hold %d: %w", id, broker.ErrNotFound)
	}
	return h, err
}

// HoldsOf reads the queue's holds (group 0) and the group's, by the
// UNIQUE index's prefix (queue_id, group_id).
func (t *Tx) HoldsOf(ctx context.Context, queueID, groupID int64) ([]broker.Hold, error) {
	rows, err := t.Query(ctx, `SELECT `+holdCols+` FROM holds h WHERE h.queue_id = ?1 AND h.group_id IN (0, ?2) ORDER BY h.id`, queueID, groupID)
	if err != nil {
		return nil, err
	}
	return scanHolds(rows, false)
}

// Holds lists the holds of queueID and groupID (0: any), by id.
func (t *Tx) Holds(ctx context.Context, queueID, groupID int64) ([]broker.Hold, error) {
	rows, err := t.Query(ctx, holdsNamedSQL+` WHERE (h.queue_id = ?1 OR ?1 = 0) AND (h.group_id = ?2 OR ?2 = 0) ORDER BY h.id`, queueID, groupID)
	if err != nil {
		return nil, err
	}
	return scanHolds(rows, true)
}

func scanHolds(rows Rows, names bool) ([]broker.Hold, error) {
	defer rows.Close()
	var out []broker.Hold
	for rows.Next() {
		h, err := scanHold(rows, names)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// DeleteHold deletes one by its primary key.
func (t *Tx) DeleteHold(ctx context.Context, id int64) error {
	res, err := t.Exec(ctx, `DELETE FROM holds WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("hold %d: %w", id, broker.ErrNotFound)
	}
	return nil
}
