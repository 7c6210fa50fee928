package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Traces (broker.TraceTx, migration 0029 and PostgreSQL's 0005): rows of
// message_traces, read by message_traces_seq. The same texts run on both
// stores.

// countDroppedTraceSQL adds one to the dropped count of the message's
// newest trace: the last of its (seq, id) index range.
const countDroppedTraceSQL = `UPDATE message_traces SET dropped = dropped + 1
WHERE id = (SELECT id FROM message_traces WHERE seq = ?1 ORDER BY seq DESC, id DESC LIMIT 1)`

// sweepTracesSQL deletes up to limit traces of messages that are gone
// and have no dead letter, live (dead_letters' unique (seq, group_id)) or
// removed (removed_dead_letters_seq).
const sweepTracesSQL = `DELETE FROM message_traces WHERE id IN (SELECT t.id FROM message_traces t
WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.seq = t.seq)
  AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.seq = t.seq)
  AND NOT EXISTS (SELECT 1 FROM removed_dead_letters r WHERE r.seq = t.seq)
ORDER BY t.id LIMIT ?1)`

// InsertTrace writes message_traces.
func (t *Tx) InsertTrace(ctx context.Context, tr broker.Trace) (int64, error) {
	names := []string{}
	if tr.Names != nil {
		names = tr.Names
	}
	nj, err := json.Marshal(names)
	if err != nil {
		return 0, fmt.Errorf("trace names: %w", err)
	}
	_, id, err := t.Insert(ctx, "id", `INSERT INTO message_traces (seq, queue_id, group_name, event_type, names, data, data_bytes, dropped, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)`, tr.Seq, tr.QueueID, tr.Group, tr.EventType, string(nj), tr.Data, tr.DataBytes, MS(tr.At))
	return id, err
}

// TraceCount counts the message's rows of message_traces_seq.
func (t *Tx) TraceCount(ctx context.Context, seq int64) (int, error) {
	var n int
	err := t.QueryRow(ctx, `SELECT COUNT(*) FROM message_traces WHERE seq = ?`, seq).Scan(&n)
	return n, err
}

// CountDroppedTrace updates the message's newest row of message_traces.
func (t *Tx) CountDroppedTrace(ctx context.Context, seq int64) error {
	_, err := t.Exec(ctx, countDroppedTraceSQL, seq)
	return err
}

// TracesOf reads the message's rows of message_traces_seq, oldest first.
func (t *Tx) TracesOf(ctx context.Context, seq int64, limit int) ([]broker.Trace, error) {
	rows, err := t.Query(ctx, `SELECT id, queue_id, group_name, event_type, names, data, data_bytes, dropped, created_at
FROM message_traces WHERE seq = ? ORDER BY seq, id LIMIT ?`, seq, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Trace
	for rows.Next() {
		tr := broker.Trace{Seq: seq}
		var names string
		var at int64
		if err := rows.Scan(&tr.ID, &tr.QueueID, &tr.Group, &tr.EventType, &names, &tr.Data, &tr.DataBytes, &tr.Dropped, &at); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(names), &tr.Names); err != nil {
			return nil, fmt.Errorf("trace names: %w", err)
		}
		tr.At = FromMS(at)
		out = append(out, tr)
	}
	return out, rows.Err()
}

// SweepTraces deletes rows of message_traces whose message and dead
// letters are gone, and returns how many.
func (t *Tx) SweepTraces(ctx context.Context, limit int) (int64, error) {
	res, err := t.Exec(ctx, sweepTracesSQL, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
