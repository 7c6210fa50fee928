package db

import (
	"context"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// NewestSeq is the newest message's seq, for keepSeqFloor.
func (sqliteDialect) NewestSeq(ctx context.Context, t *sqlcore.Tx) (int64, error) {
	var top int64
	err := t.QueryRow(ctx, `SELECT MAX(seq) FROM messages`).Scan(&top)
	return top, err
}

// NewestSeq is 0: PostgreSQL's seqs keep growing by themselves.
func (pgDialect) NewestSeq(context.Context, *sqlcore.Tx) (int64, error) { return 0, nil }

// KeepSeqFloor writes nothing on PostgreSQL (see sqlcore.Tx.KeepSeqFloor).
func (pgDialect) KeepSeqFloor(context.Context, *sqlcore.Tx, int64, int64) error { return nil }

// KeepSeqFloor writes or moves the placeholder row.
func (sqliteDialect) KeepSeqFloor(ctx context.Context, t *sqlcore.Tx, seq, createdAt int64) error {
	_, err := t.Exec(ctx, `INSERT INTO messages (seq, partition_id, transaction_id, payload, trace_id, created_at) VALUES (?1, 0, '', x'', '', ?2)
		ON CONFLICT (partition_id, transaction_id) DO UPDATE SET seq = excluded.seq, created_at = excluded.created_at WHERE excluded.seq > messages.seq`, seq, createdAt)
	return err
}
