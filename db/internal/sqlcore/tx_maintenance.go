package sqlcore

import "context"

// Maintenance mode (broker.MaintenanceTx): the messages pushed since the
// push scope was turned on are those above the highest seq then, read by
// the messages' primary key. The same texts run on both stores.

// TopSeq reads the highest seq of messages (SQLite's placeholder row
// included: the next message's seq is above it too).
func (t *Tx) TopSeq(ctx context.Context) (int64, error) {
	var top int64
	err := t.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages`).Scan(&top)
	return top, err
}

// CountMessagesAfterSQL counts the messages above a seq, by the primary
// key's range (its plan: tx_maintenance_test.go); partition 0 is SQLite's
// placeholder row (keepSeqFloor).
const CountMessagesAfterSQL = `SELECT COUNT(*) FROM messages WHERE seq > ? AND partition_id <> 0`

// CountMessagesAfter reads messages by the primary key's range.
func (t *Tx) CountMessagesAfter(ctx context.Context, seq int64) (int64, error) {
	var n int64
	err := t.QueryRow(ctx, CountMessagesAfterSQL, seq).Scan(&n)
	return n, err
}
