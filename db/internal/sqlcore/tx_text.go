package sqlcore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"

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
// payloads of their messages that keep no other dead letter. It must run
// before the rows go (FTS4 reads an external-content row's text to
// remove its words).
func (t *Tx) unindexDeadLetters(ctx context.Context, ids string) error {
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

// unindexQueue removes a queue's dead letters from the full-text indexes
// (before they and their messages go).
func (t *Tx) unindexQueue(ctx context.Context, queueID int64) error {
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

// matchIn is the set of docids of an index that match a bound
// expression (an FTSMatch), the newest (highest docid) first, at most a
// bound number when the filter has a MatchCap (noCap: no limit).
func matchIn(index string) string {
	return `(SELECT docid FROM ` + index + ` WHERE match(?, ` + index + `) ORDER BY docid DESC LIMIT ?)`
}

// matchInRange is the set of docids of an index that match a bound
// expression (an FTSMatch) within a bound docid range (FTS4 takes docid
// range constraints along with MATCH): all of a window's matches.
func matchInRange(index string) string {
	return `(SELECT docid FROM ` + index + ` WHERE match(?, ` + index + `) AND docid BETWEEN ? AND ?)`
}

// NoCap is the bound of a LIMIT that takes every row: SQLite's -1 is an
// error in PostgreSQL.
const NoCap = math.MaxInt64

// fieldOps are the SQL comparisons of broker.FieldFilter's operators:
// only these strings reach the SQL text.
var fieldOps = map[string]string{"=": "=", "!=": "<>", ">": ">", ">=": ">=", "<": "<", "<=": "<="}

// searchConds adds f's free-text and field conditions. Every user value
// (match expressions, JSON paths, values) is a bound parameter; the SQL
// text is made of constants and fieldOps only.
func searchConds(f broker.Filter, add func(cond string, args ...any)) {
	limit := int64(NoCap)
	if f.MatchCap > 0 {
		limit = int64(f.MatchCap)
	}
	// errors and payloads are the conditions "in the index's matches" of
	// the error texts (by id) and of the payloads (by seq): the newest
	// MatchCap at most, or all of those in the window's range.
	errs := func(m string) (string, []any) {
		return `d.id IN ` + matchIn("dead_letter_errors"), []any{FTSMatch(m), limit}
	}
	payloads := func(m string) (string, []any) {
		return `d.seq IN ` + matchIn("dead_letter_payloads"), []any{FTSMatch(m), limit}
	}
	if w := f.Window; w != nil {
		errs = func(m string) (string, []any) {
			return `d.id IN ` + matchInRange("dead_letter_errors"), []any{FTSMatch(m), w.MinID, w.MaxID}
		}
		payloads = func(m string) (string, []any) {
			return `d.seq IN ` + matchInRange("dead_letter_payloads"), []any{FTSMatch(m), w.MinSeq, w.MaxSeq}
		}
		if w.Above != nil {
			add(`(d.failed_at, d.id) < (?, ?)`, MS(w.Above.At), w.Above.ID)
		}
	}
	if f.ErrorWords != "" {
		// Words every error text holding f.ErrorContains holds: its
		// candidates (the text itself is checked by Where).
		c, a := errs(f.ErrorWords)
		add(c, a...)
	}
	if f.Text != "" {
		ec, ea := errs(f.Text)
		pc, pa := payloads(f.Text)
		add(`(`+ec+` OR `+pc+`)`, append(ea, pa...)...)
	}
	var conds []string
	var condArgs []any
	for _, ff := range f.Fields {
		if ff.Words != "" {
			c, a := payloads(ff.Words)
			add(c, a...)
		}
		cond, args := fieldCond(ff)
		conds = append(conds, "("+cond+")")
		condArgs = append(condArgs, args...)
	}
	if len(conds) > 0 {
		// m.payload: the message's, or the dead letter's own once
		// retention removed the message (migration 0020), parsed once a
		// row for every field filter (SQLite's JSONB; PostgreSQL's
		// jsonb, NULL for a payload it cannot read: migrations_pg,
		// "Search"): a parse is most of a filter's cost.
		add(`EXISTS (SELECT 1 FROM (SELECT jsonb(COALESCE((SELECT x.payload FROM messages x WHERE x.seq = d.seq), d.payload)) AS payload) m WHERE `+strings.Join(conds, " AND ")+`)`, condArgs...)
	}
	if f.Floor != nil {
		add(`(d.failed_at, d.id) >= (?, ?)`, MS(f.Floor.At), f.Floor.ID)
	}
}

// fieldCond is the exact test of a field filter on m.payload. Types
// count: a string is never equal to, above or below a number; != holds
// for a field that is there with another value; a path that is not
// there meets no filter.
//
// It is written for both stores: PostgreSQL has json_type, json_extract
// and json_each of SQLite's JSON paths too (migrations_pg, "Search"),
// whose values are text (bytewise ordered, as SQLite's BINARY), so a
// number is compared as CAST(... AS NUMERIC), taken only from a number
// (PostgreSQL may test the conditions of an AND in any order).
func fieldCond(ff broker.FieldFilter) (string, []any) {
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
	cmp := func(op string, v any) (string, []any) {
		if _, ok := v.(string); ok {
			return `json_type(m.payload, ?) = 'text' AND json_extract(m.payload, ?) ` + op + ` ?`, []any{p, p, v}
		}
		return `CAST(CASE WHEN json_type(m.payload, ?) IN ('integer', 'real') THEN json_extract(m.payload, ?) END AS NUMERIC) ` + op + ` ?`, []any{p, p, v}
	}
	// eq is true or false, never NULL (!= is its negation).
	eq := func() (string, []any) {
		switch v := ff.Value.(type) {
		case bool, nil:
			return `COALESCE(json_type(m.payload, ?) = ?, FALSE)`, []any{p, literalType(v)}
		default:
			c, args := cmp("=", v)
			return `COALESCE(` + c + `, FALSE)`, args
		}
	}
	switch ff.Op {
	case "=":
		return eq()
	case "!=":
		c, args := eq()
		return `json_type(m.payload, ?) IS NOT NULL AND NOT ` + c, append([]any{p}, args...)
	case "contains":
		// An array holding the value, or a string holding it as text
		// (case-insensitive; its words are in the index: broker).
		var elem string
		var eargs []any
		switch v := ff.Value.(type) {
		case bool, nil:
			elem, eargs = `e.type = ?`, []any{literalType(v)}
		case string:
			elem, eargs = `e.type = 'text' AND e.value = ?`, []any{v}
		default:
			elem, eargs = `CAST(CASE WHEN e.type IN ('integer', 'real') THEN e.value END AS NUMERIC) = ?`, []any{v}
		}
		c := `CASE json_type(m.payload, ?) WHEN 'array' THEN EXISTS (SELECT 1 FROM json_each(m.payload, ?) e WHERE ` + elem + `)`
		args := append([]any{p, p}, eargs...)
		if s, ok := ff.Value.(string); ok {
			c += ` WHEN 'text' THEN instr(lower(json_extract(m.payload, ?)), lower(?)) > 0`
			args = append(args, p, s)
		}
		return c + ` ELSE FALSE END`, args
	default:
		op, ok := fieldOps[ff.Op]
		if !ok {
			return `FALSE`, nil // the broker's parser makes no other
		}
		return cmp(op, ff.Value)
	}
}

// TextMatches reads the index only (a count of docids).
func (t *Tx) TextMatches(ctx context.Context, match string, payloads bool, max int) (int64, error) {
	index := "dead_letter_errors"
	if payloads {
		index = "dead_letter_payloads"
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
	w, args := Where(f)
	if after != nil {
		w = AndWhere(w, "(d.failed_at, d.id) < (?, ?)")
		args = append(args, MS(after.At), after.ID)
	}
	var at, id int64
	err := t.QueryRow(ctx, `SELECT d.failed_at, d.id FROM dead_letters d`+w+` ORDER BY d.failed_at DESC, d.id DESC LIMIT 1 OFFSET ?`,
		append(args, n-1)...).Scan(&at, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return broker.Cursor{}, false, nil
	}
	if err != nil {
		return broker.Cursor{}, false, err
	}
	return broker.Cursor{At: fromMS(at), ID: id}, true, nil
}

// DeadLetterWindow walks the filter's index (failed_at DESC, id DESC)
// over the window and reads each row's seq.
func (t *Tx) DeadLetterWindow(ctx context.Context, f broker.Filter, above, floor *broker.Cursor) (broker.MatchWindow, error) {
	if f.Text != "" || len(f.Fields) > 0 || f.ErrorWords != "" || f.Floor != nil || f.Window != nil {
		return broker.MatchWindow{}, errors.New("dead letter window: the filter must select by columns only")
	}
	q, args := WindowQuery(f, above, floor)
	var out broker.MatchWindow
	err := t.QueryRow(ctx, q, args...).Scan(&out.Rows, &out.MinID, &out.MaxID, &out.MinSeq, &out.MaxSeq)
	return out, err
}

// WindowQuery is DeadLetterWindow's SQL.
func WindowQuery(f broker.Filter, above, floor *broker.Cursor) (string, []any) {
	w, args := Where(f)
	if above != nil {
		w = AndWhere(w, "(d.failed_at, d.id) < (?, ?)")
		args = append(args, MS(above.At), above.ID)
	}
	if floor != nil {
		w = AndWhere(w, "(d.failed_at, d.id) >= (?, ?)")
		args = append(args, MS(floor.At), floor.ID)
	}
	return `SELECT COUNT(*), COALESCE(MIN(d.id), 1), COALESCE(MAX(d.id), 0), COALESCE(MIN(d.seq), 1), COALESCE(MAX(d.seq), 0)
		FROM dead_letters d` + w, args
}

// AndWhere adds cond to a WHERE clause of where (maybe empty).
func AndWhere(w, cond string) string {
	if strings.TrimSpace(w) == "" {
		return " WHERE " + cond
	}
	return w + " AND " + cond
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
// tsvector is bounded (pgTsvectorCut); never on SQLite, whose FTS4 holds
// every word. A payload of fewer than tsvectorBudget/6 bytes cannot fill
// it (each byte of text costs 6 bytes of a tsvector at most: a word of
// one letter, padded, with its count and position) and is not read.
func (t *Tx) PayloadIndexedInPart(payload []byte) bool {
	return t.d.PayloadIndexedInPart(payload)
}
