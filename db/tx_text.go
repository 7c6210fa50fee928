package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Search in dead letters (migration 0015): dead_letter_errors indexes each
// dead letter's error text (docid = its id; the text is read from
// dead_letters), dead_letter_payloads the words of each dead-lettered
// message's payload (docid = its seq; once, however many groups gave up
// on it). Both live and die with the dead letters, in the transactions
// that file and remove them: InsertDeadLetter, DeleteDeadLetters (replay
// and delete, one and bulk) and DeleteQueue. No other statement adds or
// removes a dead letter.

// payloadWords is the text dead_letter_payloads indexes of message m's
// payload: its object keys and its string and number values, decoded.
const payloadWords = `(SELECT COALESCE(group_concat(
		CASE WHEN typeof(j.key) = 'text' THEN j.key ELSE '' END || ' ' ||
		CASE WHEN j.type IN ('text', 'integer', 'real') THEN j.atom ELSE '' END, ' '), '')
	FROM json_tree(m.payload) j)`

// indexDeadLetter adds dead letter d (just inserted, with its ID) to the
// full-text indexes: its error text, and its message's payload unless
// another dead letter of the message has it there already. It reads
// dead_letters and the message, writes both indexes.
func (t *storeTx) indexDeadLetter(ctx context.Context, d *broker.DeadLetter) error {
	if _, err := t.exec(ctx, `INSERT INTO dead_letter_errors (docid, error) VALUES (?, ?)`, d.ID, d.Error); err != nil {
		return fmt.Errorf("index the error text: %w", err)
	}
	// The payload is the message's, or, once retention removed the
	// message, the dead letter's own (a restore: migration 0020).
	if _, err := t.exec(ctx, `INSERT INTO dead_letter_payloads (docid, text)
		SELECT ?1, `+payloadWords+` FROM (SELECT COALESCE((SELECT x.payload FROM messages x WHERE x.seq = ?1),
			(SELECT o.payload FROM dead_letters o WHERE o.id = ?2)) AS payload) m
		WHERE m.payload IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dead_letters o WHERE o.seq = ?1 AND o.id <> ?2)`, d.Seq, d.ID); err != nil {
		return fmt.Errorf("index the payload: %w", err)
	}
	return nil
}

// unindexDeadLetters removes the dead letters ids (a JSON array, rows
// still there) from the full-text indexes: their error texts, and the
// payloads of their messages that keep no other dead letter. It must run
// before the rows go (FTS4 reads an external-content row's text to
// remove its words).
func (t *storeTx) unindexDeadLetters(ctx context.Context, ids string) error {
	if _, err := t.exec(ctx, `DELETE FROM dead_letter_errors WHERE docid IN (SELECT value FROM json_each(?))`, ids); err != nil {
		return fmt.Errorf("unindex error texts: %w", err)
	}
	if _, err := t.exec(ctx, `DELETE FROM dead_letter_payloads WHERE docid IN (
		SELECT d.seq FROM dead_letters d WHERE d.id IN (SELECT value FROM json_each(?1))
		AND NOT EXISTS (SELECT 1 FROM dead_letters o WHERE o.seq = d.seq AND o.id NOT IN (SELECT value FROM json_each(?1))))`, ids); err != nil {
		return fmt.Errorf("unindex payloads: %w", err)
	}
	return nil
}

// unindexQueue removes a queue's dead letters from the full-text indexes
// (before they and their messages go).
func (t *storeTx) unindexQueue(ctx context.Context, queueID int64) error {
	for _, s := range []string{
		`DELETE FROM dead_letter_errors WHERE docid IN (SELECT id FROM dead_letters WHERE queue_id = ?)`,
		`DELETE FROM dead_letter_payloads WHERE docid IN (SELECT seq FROM dead_letters WHERE queue_id = ?)`,
	} {
		if _, err := t.exec(ctx, s, queueID); err != nil {
			return fmt.Errorf("unindex the queue's dead letters: %w", err)
		}
	}
	return nil
}

// matchIn is the set of docids of an index that match a bound
// expression, the newest (highest docid) first, at most a bound number
// when the filter has a MatchCap (-1: no limit).
func matchIn(index string) string {
	return `(SELECT docid FROM ` + index + ` WHERE ` + index + ` MATCH ? ORDER BY docid DESC LIMIT ?)`
}

// matchInRange is the set of docids of an index that match a bound
// expression within a bound docid range (FTS4 takes docid range
// constraints along with MATCH): all of a window's matches.
func matchInRange(index string) string {
	return `(SELECT docid FROM ` + index + ` WHERE ` + index + ` MATCH ? AND docid BETWEEN ? AND ?)`
}

// fieldOps are the SQL comparisons of broker.FieldFilter's operators:
// only these strings reach the SQL text.
var fieldOps = map[string]string{"=": "=", "!=": "<>", ">": ">", ">=": ">=", "<": "<", "<=": "<="}

// searchConds adds f's free-text and field conditions. Every user value
// (match expressions, JSON paths, values) is a bound parameter; the SQL
// text is made of constants and fieldOps only.
func searchConds(f broker.Filter, add func(cond string, args ...any)) {
	limit := -1
	if f.MatchCap > 0 {
		limit = f.MatchCap
	}
	// errors and payloads are the conditions "in the index's matches" of
	// the error texts (by id) and of the payloads (by seq): the newest
	// MatchCap at most, or all of those in the window's range.
	errs := func(m string) (string, []any) { return `d.id IN ` + matchIn("dead_letter_errors"), []any{m, limit} }
	payloads := func(m string) (string, []any) { return `d.seq IN ` + matchIn("dead_letter_payloads"), []any{m, limit} }
	if w := f.Window; w != nil {
		errs = func(m string) (string, []any) {
			return `d.id IN ` + matchInRange("dead_letter_errors"), []any{m, w.MinID, w.MaxID}
		}
		payloads = func(m string) (string, []any) {
			return `d.seq IN ` + matchInRange("dead_letter_payloads"), []any{m, w.MinSeq, w.MaxSeq}
		}
		if w.Above != nil {
			add(`(d.failed_at, d.id) < (?, ?)`, ms(w.Above.At), w.Above.ID)
		}
	}
	if f.Text != "" {
		ec, ea := errs(f.Text)
		pc, pa := payloads(f.Text)
		add(`(`+ec+` OR `+pc+`)`, append(ea, pa...)...)
	}
	for _, ff := range f.Fields {
		if ff.Words != "" {
			c, a := payloads(ff.Words)
			add(c, a...)
		}
		cond, args := fieldCond(ff)
		// m.payload: the message's, or the dead letter's own once
		// retention removed the message (migration 0020).
		add(`EXISTS (SELECT 1 FROM (SELECT COALESCE((SELECT x.payload FROM messages x WHERE x.seq = d.seq), d.payload) AS payload) m WHERE `+cond+`)`, args...)
	}
	if f.Floor != nil {
		add(`(d.failed_at, d.id) >= (?, ?)`, ms(f.Floor.At), f.Floor.ID)
	}
}

// fieldCond is the exact test of a field filter on m.payload. Types
// count: a string is never equal to, above or below a number; != holds
// for a field that is there with another value; a path that is not
// there meets no filter.
func fieldCond(ff broker.FieldFilter) (string, []any) {
	p := ff.Path
	typeOf := func(v any) string {
		switch v.(type) {
		case string:
			return `json_type(m.payload, ?) = 'text'`
		case bool, nil:
			return ``
		default:
			return `json_type(m.payload, ?) IN ('integer', 'real')`
		}
	}
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
	eq := func() (string, []any) {
		switch v := ff.Value.(type) {
		case bool, nil:
			return `json_type(m.payload, ?) = ?`, []any{p, literalType(v)}
		default:
			return typeOf(v) + ` AND json_extract(m.payload, ?) = ?`, []any{p, p, v}
		}
	}
	switch ff.Op {
	case "=":
		return eq()
	case "!=":
		c, args := eq()
		return `json_type(m.payload, ?) IS NOT NULL AND NOT (` + c + `)`, append([]any{p}, args...)
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
			elem, eargs = `e.type IN ('integer', 'real') AND e.value = ?`, []any{v}
		}
		c := `CASE json_type(m.payload, ?) WHEN 'array' THEN EXISTS (SELECT 1 FROM json_each(m.payload, ?) e WHERE ` + elem + `)`
		args := append([]any{p, p}, eargs...)
		if s, ok := ff.Value.(string); ok {
			c += ` WHEN 'text' THEN instr(lower(json_extract(m.payload, ?)), lower(?)) > 0`
			args = append(args, p, s)
		}
		return c + ` ELSE 0 END`, args
	default:
		op, ok := fieldOps[ff.Op]
		if !ok {
			return `0`, nil // the broker's parser makes no other
		}
		return typeOf(ff.Value) + ` AND json_extract(m.payload, ?) ` + op + ` ?`, []any{p, p, ff.Value}
	}
}

// TextMatches reads the index only (a count of docids).
func (t *storeTx) TextMatches(ctx context.Context, match string, payloads bool, max int) (int64, error) {
	index := "dead_letter_errors"
	if payloads {
		index = "dead_letter_payloads"
	}
	var n int64
	err := t.queryRow(ctx, `SELECT COUNT(*) FROM (SELECT docid FROM `+index+` WHERE `+index+` MATCH ? LIMIT ?)`, match, max).Scan(&n)
	return n, err
}

// DeadLetterPosition walks the filter's index (failed_at DESC, id DESC)
// and reads no row.
func (t *storeTx) DeadLetterPosition(ctx context.Context, f broker.Filter, after *broker.Cursor, n int) (broker.Cursor, bool, error) {
	if f.Text != "" || len(f.Fields) > 0 || f.Floor != nil || f.Window != nil {
		return broker.Cursor{}, false, errors.New("dead letter position: the filter must select by columns only")
	}
	w, args := where(f)
	if after != nil {
		w = andWhere(w, "(d.failed_at, d.id) < (?, ?)")
		args = append(args, ms(after.At), after.ID)
	}
	var at, id int64
	err := t.queryRow(ctx, `SELECT d.failed_at, d.id FROM dead_letters d`+w+` ORDER BY d.failed_at DESC, d.id DESC LIMIT 1 OFFSET ?`,
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
func (t *storeTx) DeadLetterWindow(ctx context.Context, f broker.Filter, above, floor *broker.Cursor) (broker.MatchWindow, error) {
	if f.Text != "" || len(f.Fields) > 0 || f.Floor != nil || f.Window != nil {
		return broker.MatchWindow{}, errors.New("dead letter window: the filter must select by columns only")
	}
	q, args := windowQuery(f, above, floor)
	var out broker.MatchWindow
	err := t.queryRow(ctx, q, args...).Scan(&out.Rows, &out.MinID, &out.MaxID, &out.MinSeq, &out.MaxSeq)
	return out, err
}

// windowQuery is DeadLetterWindow's SQL.
func windowQuery(f broker.Filter, above, floor *broker.Cursor) (string, []any) {
	w, args := where(f)
	if above != nil {
		w = andWhere(w, "(d.failed_at, d.id) < (?, ?)")
		args = append(args, ms(above.At), above.ID)
	}
	if floor != nil {
		w = andWhere(w, "(d.failed_at, d.id) >= (?, ?)")
		args = append(args, ms(floor.At), floor.ID)
	}
	return `SELECT COUNT(*), COALESCE(MIN(d.id), 1), COALESCE(MAX(d.id), 0), COALESCE(MIN(d.seq), 1), COALESCE(MAX(d.seq), 0)
		FROM dead_letters d` + w, args
}

// andWhere adds cond to a WHERE clause of where (maybe empty).
func andWhere(w, cond string) string {
	if strings.TrimSpace(w) == "" {
		return " WHERE " + cond
	}
	return w + " AND " + cond
}

// RebuildTextIndex indexes every dead letter's error text and payload
// again, from nothing, as migration 0015 does: for tools that write dead
// letters with SQL of their own (bench's generator). It is one write
// transaction, as long as the dead letters make it.
func (d *DB) RebuildTextIndex(ctx context.Context) error {
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
