package sqlite

import (
	"context"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Search in dead letters (migration 0015): dead_letter_errors indexes each
// dead letter's error text (docid = its id; the text is read from
// dead_letters), dead_letter_payloads the words of each dead-lettered
// message's payload (docid = its seq; once, however many groups gave up
// on it). Both live and die with the dead letters, in the transactions
// that file and remove them: InsertDeadLetter, DeleteDeadLetters (replay
// and delete, one and bulk) and DeleteQueue. No other statement adds or
// removes a dead letter.
//
// On PostgreSQL the two indexes are tables of tsvectors (migrations_pg,
// "Search"), each in a column named after its table as FTS4's hidden
// column is, so that a match is written match(?, index) on both stores
// (SQLite's function form of "index MATCH ?", which its planner takes as
// the same index constraint; PostgreSQL's match is words @@ query). Their
// words are cut and folded in Go as unicode61 cuts and folds them,
// whatever the database's locale (postgres.tsvector, postgres.tsquery).

// payloadWords is the text dead_letter_payloads indexes of message m's
// payload: its object keys and its string and number values, decoded.
const payloadWords = `(SELECT COALESCE(group_concat(
		CASE WHEN typeof(j.key) = 'text' THEN j.key ELSE '' END || ' ' ||
		CASE WHEN j.type IN ('text', 'integer', 'real') THEN j.atom ELSE '' END, ' '), '')
	FROM json_tree(m.payload) j)`

// IndexDeadLetter is sqlcore.Tx's indexDeadLetter on SQLite (FTS4).
func (dialect) IndexDeadLetter(ctx context.Context, t *sqlcore.Tx, d *broker.DeadLetter) error {
	if _, err := t.Exec(ctx, `INSERT INTO dead_letter_errors (docid, error) VALUES (?, ?)`, d.ID, d.Error); err != nil {
		return fmt.Errorf("index the error text: %w", err)
	}
	// The payload is the message's, or, once retention removed the
	// message, the dead letter's own (a restore: migration 0020).
	if _, err := t.Exec(ctx, `INSERT INTO dead_letter_payloads (docid, text)
		SELECT ?1, `+payloadWords+` FROM (SELECT COALESCE((SELECT x.payload FROM messages x WHERE x.seq = ?1),
			(SELECT o.payload FROM dead_letters o WHERE o.id = ?2)) AS payload) m
		WHERE m.payload IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dead_letters o WHERE o.seq = ?1 AND o.id <> ?2)`, d.Seq, d.ID); err != nil {
		return fmt.Errorf("index the payload: %w", err)
	}
	return nil
}

// RebuildTextIndex indexes every dead letter's error text and payload
// again, from nothing, as migration 0015 does: for tools that write dead
// letters with SQL of their own (bench's generator). It is one write
// transaction, as long as the dead letters make it.
func (d *Store) RebuildTextIndex(ctx context.Context) error {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("rebuild the text index: %w", err)
	}
	defer tx.Rollback()
	for _, s := range []string{
		`INSERT INTO dead_letter_errors (dead_letter_errors) VALUES ('rebuild')`,
		`DELETE FROM dead_letter_payloads`,
		`INSERT INTO dead_letter_payloads (docid, text) SELECT m.seq, ` + payloadWords + ` FROM (SELECT d.seq, COALESCE((SELECT x.payload FROM messages x WHERE x.seq = d.seq), MAX(d.payload)) AS payload
			FROM dead_letters d GROUP BY d.seq) m WHERE m.payload IS NOT NULL`,
		`INSERT INTO dead_letter_payloads (dead_letter_payloads) VALUES ('optimize')`,
		`INSERT INTO dead_letter_errors (dead_letter_errors) VALUES ('optimize')`,
	} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("rebuild the text index: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("rebuild the text index: %w", err)
	}
	return nil
}

// PayloadIndexedInPart is false: FTS4 holds every word.
func (dialect) PayloadIndexedInPart([]byte) bool { return false }

// FileDeadLetters files a dead letter at a time (sqlcore.FileEach):
// SQLite's statements cost no round trip.
func (dialect) FileDeadLetters(ctx context.Context, t *sqlcore.Tx, ds []*broker.DeadLetter) ([]bool, error) {
	return sqlcore.FileEach(ctx, t, ds)
}

// InsertAudits writes an entry at a time (sqlcore.InsertEachAudit).
func (dialect) InsertAudits(ctx context.Context, t *sqlcore.Tx, as []broker.AuditEntry) error {
	return sqlcore.InsertEachAudit(ctx, t, as)
}
