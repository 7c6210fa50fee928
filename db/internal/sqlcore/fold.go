package sqlcore

import (
	"context"
	"encoding/json"
)

// FoldLeft are the partitions and consumers a fold passed by, locked by
// another write (PostgreSQL only): still to be folded.
type FoldLeft struct {
	Partitions []int64
	Consumers  [][2]int64
}

// FoldRows brings the counts of the noted partitions and consumers up to
// date from their rows. It relies on two rules: whatever removes a
// partition's messages lowers, in its own transaction, the counts that
// had counted them (retention's SweepMessages: partitions.messages by
// the removed seqs up to counted_seq, each consumer's passed by those up
// to its passed_seq; removed seqs above them are simply never counted),
// and a consumer's cursor only moves forward (one that moved back is
// counted again from its partition's start; retention moves cursors
// forward only).
//
// On PostgreSQL it first locks the rows it folds, in a statement of its
// own, skipping those another write holds (postgres.dialect.foldLock): the fold's
// statements then run on a snapshot taken once the locks are held, so
// they see every message of a partition up to its last seq and every
// consumer's cursor as it stands.
func FoldRows(ctx context.Context, st *Tx, unfolded map[int64]struct{}, unfoldedConsumers map[[2]int64]struct{}) (left FoldLeft, err error) {
	ids := make([]int64, 0, len(unfolded))
	for id := range unfolded {
		ids = append(ids, id)
	}
	keys := make([][2]int64, 0, len(unfoldedConsumers))
	for k := range unfoldedConsumers {
		keys = append(keys, k)
	}
	if ids, keys, left, err = st.d.FoldLock(ctx, st, ids, keys); err != nil {
		return FoldLeft{}, err
	}
	if len(ids) > 0 {
		// SET reads the row as it was: both use the old counted_seq.
		if _, err := st.Exec(ctx, `UPDATE partitions SET
			messages = messages + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = partitions.id AND m.seq > partitions.counted_seq),
			counted_seq = COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = partitions.id), counted_seq)
			WHERE id IN (SELECT value FROM json_each(?))`, IntsJSON(ids)); err != nil {
			return FoldLeft{}, err
		}
	}
	if len(keys) == 0 {
		return left, nil
	}
	list, err := json.Marshal(keys)
	if err != nil {
		return FoldLeft{}, err
	}
	if _, err = st.Exec(ctx, foldConsumersSQL, string(list)); err != nil {
		return FoldLeft{}, err
	}
	return left, nil
}

// foldConsumersSQL brings the passed counts of the consumers listed (a
// JSON array of [partition, group]) up to date. PostgreSQL reads the
// pairs with json_array_elements and casts their elements, which ->>
// gives as text.
var foldConsumersSQL = PGQuery(`UPDATE consumers SET
		passed = CASE WHEN consumers.cursor > consumers.passed_seq
			THEN passed + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq > consumers.passed_seq AND m.seq <= consumers.cursor)
			ELSE (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq <= consumers.cursor) END,
		passed_seq = cursor
		FROM json_each(?) j WHERE consumers.partition_id = j.value ->> 0 AND consumers.group_id = j.value ->> 1 AND consumers.cursor <> consumers.passed_seq`,
	`UPDATE consumers SET
		passed = CASE WHEN consumers.cursor > consumers.passed_seq
			THEN passed + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq > consumers.passed_seq AND m.seq <= consumers.cursor)
			ELSE (SELECT COUNT(*) FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq <= consumers.cursor) END,
		passed_seq = cursor
		FROM json_array_elements(?::json) j(value)
		WHERE consumers.partition_id = (j.value ->> 0)::bigint AND consumers.group_id = (j.value ->> 1)::bigint AND consumers.cursor <> consumers.passed_seq`)
