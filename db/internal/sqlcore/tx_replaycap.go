package sqlcore

import (
	"context"
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
