package db

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
// whatever the database's locale (pgTsvector, pgTsquery).

// payloadWords is the text dead_letter_payloads indexes of message m's
// payload: its object keys and its string and number values, decoded.
const payloadWords = `(SELECT COALESCE(group_concat(
		CASE WHEN typeof(j.key) = 'text' THEN j.key ELSE '' END || ' ' ||
		CASE WHEN j.type IN ('text', 'integer', 'real') THEN j.atom ELSE '' END, ' '), '')
	FROM json_tree(m.payload) j)`

// IndexDeadLetter is sqlcore.Tx's indexDeadLetter on SQLite (FTS4).
func (sqliteDialect) IndexDeadLetter(ctx context.Context, t *sqlcore.Tx, d *broker.DeadLetter) error {
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
func (d *sqliteStore) RebuildTextIndex(ctx context.Context) error {
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
func (sqliteDialect) PayloadIndexedInPart([]byte) bool { return false }

// sqliteNumber is a JSON number as SQLite's json_tree gives it as text:
// an integer in decimal (one too big for 64 bits is a real), a real with
// 15 significant digits when they read back as the same number (else 17),
// with a fraction always (100.0) and an exponent below 1e-4 and from 1e17
// (1.5e-07, 1.0e+20). (SQLite reads a few numbers of 15 digits and more
// one unit in the last place apart from Go, and writes those with 17
// digits of its own: their words differ.)
func sqliteNumber(n string) string {
	if !strings.ContainsAny(n, ".eE") {
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return n
	}
	if f == 0 {
		f = 0 // -0.0 is 0.0
	}
	s := strconv.FormatFloat(f, 'e', 14, 64)
	if g, _ := strconv.ParseFloat(s, 64); g != f {
		s = strconv.FormatFloat(f, 'e', 16, 64)
	}
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	neg := strings.HasPrefix(mant, "-")
	digits := strings.TrimRight(strings.Replace(strings.TrimPrefix(mant, "-"), ".", "", 1), "0")
	if digits == "" {
		digits = "0"
	}
	var out string
	if e < -4 || e >= 17 {
		out = digits[:1] + "." + digits[1:]
		if len(digits) == 1 {
			out += "0"
		}
		sign := "+"
		if e < 0 {
			sign, e = "-", -e
		}
		out += fmt.Sprintf("e%s%02d", sign, e)
	} else if e < 0 {
		out = "0." + strings.Repeat("0", -e-1) + digits
	} else {
		whole, frac := digits, ""
		if len(digits) > e+1 {
			whole, frac = digits[:e+1], digits[e+1:]
		} else {
			whole += strings.Repeat("0", e+1-len(digits))
		}
		if frac == "" {
			frac = "0"
		}
		out = whole + "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}
