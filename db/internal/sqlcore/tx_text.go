package sqlcore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"

	"github.com/lazarus-dlq/lazarus/broker"
)

// indexDeadLetter adds dead letter d (just inserted, with its ID) to the
// full-text indexes: its error text, and its message's payload unless
// another dead letter of the message has it there already. It reads
// dead_letters and the message, writes both indexes.
func (t *Tx) indexDeadLetter(ctx context.Context, d *broker.DeadLetter) error {
	return t.d.IndexDeadLetter(ctx, t, d)
}

// unindexDeadLetters removes the dead letters ids (a JSON array, rows
// still there) from the full-text indexes: their error texts, and the
// payloads of their messages that keep no other dead letter. It runs
// before the rows go (Dialect.UnindexDeadLetters).
func (t *Tx) unindexDeadLetters(ctx context.Context, ids string) error {
	return t.d.UnindexDeadLetters(ctx, t, ids)
}

// UnindexDeadLetters is Dialect.UnindexDeadLetters of a store that keeps
// its full-text indexes in the transactions of the dead letters
// (PostgreSQL): their rows are deleted there and then.
func UnindexDeadLetters(ctx context.Context, t *Tx, ids string) error {
	if _, err := t.Exec(ctx, `DELETE FROM dead_letter_errors WHERE docid IN (SELECT value FROM json_each(?))`, ids); err != nil {
		return fmt.Errorf("unindex error texts: %w", err)
	}
	if _, err := t.Exec(ctx, `DELETE FROM dead_letter_payloads WHERE docid IN (
		SELECT d.seq FROM dead_letters d WHERE d.id IN (SELECT value FROM json_each(?1))
		AND NOT EXISTS (SELECT 1 FROM dead_letters o WHERE o.seq = d.seq AND o.id NOT IN (SELECT value FROM json_each(?1))))`, ids); err != nil {
		return fmt.Errorf("unindex payloads: %w", err)
	}
	return nil
}

// awaitText waits until the full-text indexes hold every dead letter
// committed before (Dialect.AwaitTextIndex), before a read of them; a
// read marked settled does not wait.
func (t *Tx) awaitText(ctx context.Context) error {
	if t.settled {
		return nil
	}
	if err := t.d.AwaitTextIndex(ctx, t); err != nil {
		return err
	}
	t.awaited = true
	return nil
}

// unindexQueue removes a queue's dead letters from the full-text indexes
// (before they and their messages go: Dialect.UnindexQueue).
func (t *Tx) unindexQueue(ctx context.Context, queueID int64) error {
	return t.d.UnindexQueue(ctx, t, queueID)
}

// UnindexQueue is Dialect.UnindexQueue of a store that keeps its
// full-text indexes in the transactions of the dead letters.
func UnindexQueue(ctx context.Context, t *Tx, queueID int64) error {
	for _, s := range []string{
		`DELETE FROM dead_letter_errors WHERE docid IN (SELECT id FROM dead_letters WHERE queue_id = ?)`,
		`DELETE FROM dead_letter_payloads WHERE docid IN (SELECT seq FROM dead_letters WHERE queue_id = ?)`,
	} {
		if _, err := t.Exec(ctx, s, queueID); err != nil {
			return fmt.Errorf("unindex the queue's dead letters: %w", err)
		}
	}
	return nil
}

// The fragments of the full-text conditions (searchConds): a dead
// letter's id (its error text) or seq (its payload) among an index's
// matches of a bound expression (an FTSMatch): the newest (highest
// docid) first, at most a bound number (NoCap: no limit); or, in a
// window, all of those within a bound docid range (FTS4 takes docid
// range constraints along with MATCH).
const (
	ftsErrors          Frag = `d.id IN (SELECT docid FROM dead_letter_errors WHERE match(?, dead_letter_errors) ORDER BY docid DESC LIMIT ?)`
	ftsPayloads        Frag = `d.seq IN (SELECT docid FROM dead_letter_payloads WHERE match(?, dead_letter_payloads) ORDER BY docid DESC LIMIT ?)`
	ftsErrorsInRange   Frag = `d.id IN (SELECT docid FROM dead_letter_errors WHERE match(?, dead_letter_errors) AND docid BETWEEN ? AND ?)`
	ftsPayloadsInRange Frag = `d.seq IN (SELECT docid FROM dead_letter_payloads WHERE match(?, dead_letter_payloads) AND docid BETWEEN ? AND ?)`
	fragOpen           Frag = `(`
	fragOr             Frag = ` OR `
	fragClose          Frag = `)`
	// m.payload: the message's, or the dead letter's own once retention
	// removed the message (migration 0020), parsed once a row for every
	// field filter (SQLite's JSONB; PostgreSQL's jsonb, NULL for a
	// payload it cannot read: migrations_pg, "Search"): a parse is most
	// of a filter's cost. The fields' conditions follow, then fragClose.
	fieldsOfPayload Frag = `EXISTS (SELECT 1 FROM (SELECT jsonb(COALESCE((SELECT x.payload FROM messages x WHERE x.seq = d.seq), d.payload)) AS payload) m WHERE `
)

// NoCap is the bound of a LIMIT that takes every row: SQLite's -1 is an
// error in PostgreSQL.
const NoCap = math.MaxInt64

// The fragments of a field filter's test (fieldCond).
const (
	fieldText    Frag = `json_type(m.payload, ?) = 'text' AND json_extract(m.payload, ?)`
	fieldNumber  Frag = `CAST(CASE WHEN json_type(m.payload, ?) IN ('integer', 'real') THEN json_extract(m.payload, ?) END AS NUMERIC)`
	fieldEq      Frag = ` = ?`
	fieldGt      Frag = ` > ?`
	fieldGe      Frag = ` >= ?`
	fieldLt      Frag = ` < ?`
	fieldLe      Frag = ` <= ?`
	fieldLiteral Frag = `COALESCE(json_type(m.payload, ?) = ?, FALSE)`
	fragCoalesce Frag = `COALESCE(`
	fragOrFalse  Frag = `, FALSE)`
	fieldThere   Frag = `json_type(m.payload, ?) IS NOT NULL AND NOT `
	// contains: an array holding the value (one of elem…), or a string
	// holding it as text.
	fieldContains     Frag = `CASE json_type(m.payload, ?) WHEN 'array' THEN EXISTS (SELECT 1 FROM json_each(m.payload, ?) e WHERE `
	elemLiteral       Frag = `e.type = ?`
	elemText          Frag = `e.type = 'text' AND e.value = ?`
	elemNumber        Frag = `CAST(CASE WHEN e.type IN ('integer', 'real') THEN e.value END AS NUMERIC) = ?`
	fieldContainsText Frag = ` WHEN 'text' THEN instr(lower(json_extract(m.payload, ?)), lower(?)) > 0`
	fieldContainsEnd  Frag = ` ELSE FALSE END`
	fragFalse         Frag = `FALSE`
)

// fieldOps are the SQL comparisons of broker.FieldFilter's ordering
// operators (= and != are fieldCond's own): only these fragments reach
// the SQL text.
var fieldOps = map[string]Frag{">": fieldGt, ">=": fieldGe, "<": fieldLt, "<=": fieldLe}

// searchConds adds f's free-text and field conditions to s. Every user
// value (match expressions, JSON paths, values) is a bound parameter;
// the SQL text is made of fragments only.
func searchConds(s *Stmt, f broker.Filter) {
	limit := int64(NoCap)
	if f.MatchCap > 0 {
		limit = int64(f.MatchCap)
	}
	// errs and payloads add the conditions "in the index's matches" of
	// the error texts (by id) and of the payloads (by seq): the newest
	// MatchCap at most, or all of those in the window's range.
	errs := func(m string) (Frag, []any) { s.ReadsText(); return ftsErrors, []any{FTSMatch(m), limit} }
	payloads := func(m string) (Frag, []any) { s.ReadsText(); return ftsPayloads, []any{FTSMatch(m), limit} }
	if w := f.Window; w != nil {
		errs = func(m string) (Frag, []any) {
			s.ReadsText()
			return ftsErrorsInRange, []any{FTSMatch(m), w.MinID, w.MaxID}
		}
		payloads = func(m string) (Frag, []any) {
			s.ReadsText()
			return ftsPayloadsInRange, []any{FTSMatch(m), w.MinSeq, w.MaxSeq}
		}
		if w.Above != nil {
			s.Cond(dlBefore, MS(w.Above.At), w.Above.ID)
		}
	}
	if f.ErrorWords != "" {
		// Words every error text holding f.ErrorContains holds: its
		// candidates (the text itself is checked by Where).
		c, a := errs(f.ErrorWords)
		s.Cond(c, a...)
	}
	if f.Text != "" {
		ef, ea := errs(f.Text)
		pf, pa := payloads(f.Text)
		s.Cond(fragOpen)
		s.Add(ef, ea...)
		s.Add(fragOr)
		s.Add(pf, pa...)
		s.Add(fragClose)
	}
	for _, ff := range f.Fields {
		if ff.Words != "" {
			pf, pa := payloads(ff.Words)
			s.Cond(pf, pa...)
		}
	}
	if len(f.Fields) > 0 {
		s.Cond(fieldsOfPayload)
		for i, ff := range f.Fields {
			if i > 0 {
				s.Add(FragAnd)
			}
			s.Add(fragOpen)
			fieldCond(s, ff)
			s.Add(fragClose)
		}
		s.Add(fragClose)
	}
	if f.Floor != nil {
		s.Cond(dlFrom, MS(f.Floor.At), f.Floor.ID)
	}
}

// fieldCond adds the exact test of a field filter on m.payload to s.
// Types count: a string is never equal to, above or below a number; !=
// holds for a field that is there with another value; a path that is
// not there meets no filter.
//
// It is written for both stores: PostgreSQL has json_type, json_extract
// and json_each of SQLite's JSON paths too (migrations_pg, "Search"),
// whose values are text (bytewise ordered, as SQLite's BINARY), so a
// number is compared as CAST(... AS NUMERIC), taken only from a number
// (PostgreSQL may test the conditions of an AND in any order).
func fieldCond(s *Stmt, ff broker.FieldFilter) {
	p := ff.Path
	// A JSON true, false or null is told by its type alone.
	literalType := func(v any) string {
		switch v {
		case true:
			return "true"
		case false:
			return "false"
		}
		return "null"
	}
	// cmp compares the field with a string or a number; it is NULL for a
	// field of another type, or none.
	cmp := func(op Frag, v any) {
		if _, ok := v.(string); ok {
			s.Add(fieldText, p, p)
		} else {
			s.Add(fieldNumber, p, p)
		}
		s.Add(op, v)
	}
	// eq is true or false, never NULL (!= is its negation).
	eq := func() {
		switch v := ff.Value.(type) {
		case bool, nil:
			s.Add(fieldLiteral, p, literalType(v))
		default:
			s.Add(fragCoalesce)
			cmp(fieldEq, v)
			s.Add(fragOrFalse)
		}
	}
	switch ff.Op {
	case "=":
		eq()
	case "!=":
		s.Add(fieldThere, p)
		eq()
	case "contains":
		// An array holding the value, or a string holding it as text
		// (case-insensitive; its words are in the index: broker).
		s.Add(fieldContains, p, p)
		switch v := ff.Value.(type) {
		case bool, nil:
			s.Add(elemLiteral, literalType(v))
		case string:
			s.Add(elemText, v)
		default:
			s.Add(elemNumber, v)
		}
		s.Add(fragClose)
		if v, ok := ff.Value.(string); ok {
			s.Add(fieldContainsText, p, v)
		}
		s.Add(fieldContainsEnd)
	default:
		op, ok := fieldOps[ff.Op]
		if !ok {
			s.Add(fragFalse) // the broker's parser makes no other
			return
		}
		cmp(op, ff.Value)
	}
}

// TextMatches reads the index only (a count of docids).
func (t *Tx) TextMatches(ctx context.Context, match string, payloads bool, max int) (int64, error) {
	index := "dead_letter_errors"
	if payloads {
		index = "dead_letter_payloads"
	}
	if err := t.awaitText(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := t.QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT docid FROM `+index+` WHERE match(?, `+index+`) LIMIT ?) AS m`, FTSMatch(match), max).Scan(&n)
	return n, err
}

// DeadLetterPosition walks the filter's index (failed_at DESC, id DESC)
// and reads no row.
func (t *Tx) DeadLetterPosition(ctx context.Context, f broker.Filter, after *broker.Cursor, n int) (broker.Cursor, bool, error) {
	if f.Text != "" || len(f.Fields) > 0 || f.ErrorWords != "" || f.Floor != nil || f.Window != nil {
		return broker.Cursor{}, false, errors.New("dead letter position: the filter must select by columns only")
	}
	s := deadLetterStmt(dlPositionHead, f)
	if after != nil {
		s.Cond(dlBefore, MS(after.At), after.ID)
	}
	s.Add(dlFirst)
	s.Add(fragOffset, n-1)
	var at, id int64
	err := t.QueryRowStmt(ctx, &s).Scan(&at, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return broker.Cursor{}, false, nil
	}
	if err != nil {
		return broker.Cursor{}, false, err
	}
	return broker.Cursor{At: FromMS(at), ID: id}, true, nil
}

// DeadLetterWindow walks the filter's index (failed_at DESC, id DESC)
// over the window and reads each row's seq.
func (t *Tx) DeadLetterWindow(ctx context.Context, f broker.Filter, above, floor *broker.Cursor) (broker.MatchWindow, error) {
	if f.Text != "" || len(f.Fields) > 0 || f.ErrorWords != "" || f.Floor != nil || f.Window != nil {
		return broker.MatchWindow{}, errors.New("dead letter window: the filter must select by columns only")
	}
	s := WindowStmt(f, above, floor)
	var out broker.MatchWindow
	err := t.QueryRowStmt(ctx, &s).Scan(&out.Rows, &out.MinID, &out.MaxID, &out.MinSeq, &out.MaxSeq)
	return out, err
}

// The heads of DeadLetterPosition's and DeadLetterWindow's statements.
const (
	dlPositionHead Frag = `SELECT d.failed_at, d.id FROM dead_letters d`
	dlWindowHead   Frag = `SELECT COUNT(*), COALESCE(MIN(d.id), 1), COALESCE(MAX(d.id), 0), COALESCE(MIN(d.seq), 1), COALESCE(MAX(d.seq), 0)
		FROM dead_letters d`
)

// WindowStmt is DeadLetterWindow's statement.
func WindowStmt(f broker.Filter, above, floor *broker.Cursor) Stmt {
	s := deadLetterStmt(dlWindowHead, f)
	if above != nil {
		s.Cond(dlBefore, MS(above.At), above.ID)
	}
	if floor != nil {
		s.Cond(dlFrom, MS(floor.At), floor.ID)
	}
	return s
}

// FTSMatch is a full-text match expression (broker.TextMatch's form:
// "quoted phrases" of words) bound as a parameter: the expression itself
// for SQLite's FTS4 (its driver.Value); the PostgreSQL store's executors
// bind the same search as a tsquery.
type FTSMatch string

// Value is the expression for SQLite.
func (m FTSMatch) Value() (driver.Value, error) { return string(m), nil }

// PayloadIndexedInPart reports whether the full-text index holds only
// part of payload's words (broker.SearchTx): on PostgreSQL, whose
// tsvector is bounded (postgres.tsvectorCut); never on SQLite, whose FTS4 holds
// every word. A payload of fewer than tsvectorBudget/6 bytes cannot fill
// it (each byte of text costs 6 bytes of a tsvector at most: a word of
// one letter, padded, with its count and position) and is not read.
func (t *Tx) PayloadIndexedInPart(payload []byte) bool {
	return t.d.PayloadIndexedInPart(payload)
}
