package sqlcore

import (
	"context"
)

// CopyGroups reads replays (migration 0018) by its primary key, copy_seq,
// for each seq given: the copies replayed to one group only (group_id >
// 0), with that group. It writes and locks nothing beyond the
// transaction's snapshot; seqs that are no such copy are left out (none:
// an empty map). A pop calls it only for messages whose transactionId has
// an own-group copy's shape, a few at a time.
func (t *Tx) CopyGroups(ctx context.Context, seqs []int64) (map[int64]int64, error) {
	out := map[int64]int64{}
	if len(seqs) == 0 {
		return out, nil
	}
	rows, err := t.Query(ctx, CopyGroupsQuery, IntsJSON(seqs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, group int64
		if err := rows.Scan(&seq, &group); err != nil {
			return nil, err
		}
		out[seq] = group
	}
	return out, rows.Err()
}

// CopyGroupsQuery probes replays for each seq of a JSON array, in the
// array's order (CROSS JOIN: the list leads). PostgreSQL reads the
// array's elements as bigint.
var CopyGroupsQuery = PGQuery(`SELECT r.copy_seq, r.group_id FROM json_each(?) j CROSS JOIN replays r ON r.copy_seq = j.value WHERE r.group_id > 0`,
	`SELECT r.copy_seq, r.group_id FROM json_array_elements_text(?::json) j(value) JOIN replays r ON r.copy_seq = j.value::bigint WHERE r.group_id > 0`)
