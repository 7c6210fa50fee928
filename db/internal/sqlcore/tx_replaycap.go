package sqlcore

import (
	"context"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The replay cap (migration 0026): each copy's row of replays keeps its
// depth along the dlq: chain.

// ReplayCounts probes replays' primary key once a seq.
func (t *Tx) ReplayCounts(ctx context.Context, seqs []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(seqs))
	if len(seqs) == 0 {
		return out, nil
	}
	rows, err := t.Query(ctx, ReplayCountsSQL, IntsJSON(seqs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var n int
		if err := rows.Scan(&seq, &n); err != nil {
			return nil, err
		}
		out[seq] = n
	}
	return out, rows.Err()
}

const ReplayCountsSQL = `SELECT r.copy_seq, r.depth FROM replays r WHERE r.copy_seq IN (SELECT value FROM json_each(?))`

// capCond is the condition of broker.Filter.Cap on a dead letter d: its
// message's depth (a probe of replays' primary key) against its queue's
// max_replays (a probe of queues').
func capCond(c int) string {
	at := `EXISTS (SELECT 1 FROM replays r JOIN queues q ON q.id = d.queue_id WHERE r.copy_seq = d.seq AND q.max_replays > 0 AND r.depth >= q.max_replays)`
	if c == broker.CapAt {
		return at
	}
	return "NOT " + at
}
