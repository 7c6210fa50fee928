package db

import (
	"context"
	"time"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// ImportSeq is one above the highest of messages, the placeholder moved
// one above it.
func (sqliteDialect) ImportSeq(ctx context.Context, t *sqlcore.Tx, now time.Time) (int64, error) {
	var top int64
	if err := t.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages`).Scan(&top); err != nil {
		return 0, err
	}
	if err := t.KeepSeqFloor(ctx, top+2, sqlcore.MS(now)); err != nil {
		return 0, err
	}
	return top + 1, nil
}

// ImportSeq is drawn from messages' identity sequence.
func (pgDialect) ImportSeq(ctx context.Context, t *sqlcore.Tx, _ time.Time) (int64, error) {
	var next int64
	err := t.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('messages', 'seq'))`).Scan(&next)
	return next, err
}
