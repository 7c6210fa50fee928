package sqlcore

import (
	"context"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
)

// FileDeadLetters is broker.Tx's: the dialect's (a row at a time on
// SQLite, FileEach; in one statement on PostgreSQL).
func (t *Tx) FileDeadLetters(ctx context.Context, ds []*broker.DeadLetter) ([]bool, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	return t.d.FileDeadLetters(ctx, t, ds)
}

// InsertAudits is broker.Tx's: the dialect's (InsertEachAudit on
// SQLite, one statement on PostgreSQL).
func (t *Tx) InsertAudits(ctx context.Context, as []broker.AuditEntry) error {
	if len(as) == 0 {
		return nil
	}
	return t.d.InsertAudits(ctx, t, as)
}

// FileEach files ds one at a time, as the broker filed a dead letter
// before it filed an ack's together: a dead letter whose message the
// group has in its dead letters already is left as it is (its insert
// meets UNIQUE (seq, group_id) and does nothing), else filed.
func FileEach(ctx context.Context, t *Tx, ds []*broker.DeadLetter) ([]bool, error) {
	filed := make([]bool, len(ds))
	for i, d := range ds {
		ok, err := t.insertDeadLetter(ctx, d, true, true)
		if err != nil {
			return nil, fmt.Errorf("dead letter: %w", err)
		}
		filed[i] = ok
	}
	return filed, nil
}

// InsertEachAudit writes as one entry at a time (InsertAudit).
func InsertEachAudit(ctx context.Context, t *Tx, as []broker.AuditEntry) error {
	for i := range as {
		a := as[i]
		if err := t.InsertAudit(ctx, &a); err != nil {
			return err
		}
	}
	return nil
}
