package sqlcore

import (
	"context"

	"github.com/lazarus-dlq/lazarus/broker"
)

// RecentMessages reads messages newest first: one partition's by
// messages_partition_seq backwards, or every partition's by the primary
// key backwards (partition_id 0 is SQLite's seq floor row, never a
// message: keepSeqFloor); the time range is checked on the way, and the
// walk stops at p.Limit rows.
func (t *Tx) RecentMessages(ctx context.Context, p broker.RecentMessagesParams) ([]broker.Message, error) {
	q, args := RecentMessagesAllSQL, []any{p.FromMs, p.ToMs, p.Limit}
	if p.PartitionID != 0 {
		q, args = RecentMessagesSQL, []any{p.FromMs, p.ToMs, p.Limit, p.PartitionID}
	}
	rows, err := t.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanMessageHeads(rows)
}

// The statements of RecentMessages (their plans: tx_messagelist_test.go).
const (
	RecentMessagesSQL = `SELECT seq, partition_id, transaction_id, trace_id, created_at FROM messages
		WHERE partition_id = ?4 AND created_at >= ?1 AND created_at < ?2 ORDER BY seq DESC LIMIT ?3`
	RecentMessagesAllSQL = `SELECT seq, partition_id, transaction_id, trace_id, created_at FROM messages
		WHERE partition_id <> 0 AND created_at >= ?1 AND created_at < ?2 ORDER BY seq DESC LIMIT ?3`
)
