package db

import (
	"context"

	"github.com/lazarus-dlq/lazarus/broker"
)

// ExportDeadLetters is ListDeadLetters' keyset page, cut by bytes: rows
// are read one at a time and the page ends after the row that brings the
// payloads and errors to maxBytes, so that a page of big payloads holds
// maxBytes and one row at most. The query is ListDeadLetters' (the same
// WHERE and ORDER BY, the same indexes: see TestExportPlans).
func (t *storeTx) ExportDeadLetters(ctx context.Context, f broker.Filter, after *broker.Cursor, limit int, maxBytes int64) ([]broker.DeadLetter, error) {
	q, args := exportQuery(f, after, limit)
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.DeadLetter
	var size int64
	for size < maxBytes && rows.Next() {
		var d broker.DeadLetter
		if err := scanDeadLetter(rows, &d); err != nil {
			return nil, err
		}
		size += int64(len(d.Payload) + len(d.Error))
		out = append(out, d)
	}
	return out, rows.Err()
}

// exportQuery is the SQL of a page of ExportDeadLetters.
func exportQuery(f broker.Filter, after *broker.Cursor, limit int) (string, []any) {
	w, args := where(f)
	if after != nil {
		if w == "" {
			w = " WHERE "
		} else {
			w += " AND "
		}
		w += "(d.failed_at, d.id) < (?, ?)"
		args = append(args, ms(after.At), after.ID)
	}
	return deadLetterSelect + w + ` ORDER BY d.failed_at DESC, d.id DESC LIMIT ?`, append(args, limit)
}
