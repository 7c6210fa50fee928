package db

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

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

// indexDeadLetter adds dead letter d (just inserted, with its ID) to the
// full-text indexes: its error text, and its message's payload unless
// another dead letter of the message has it there already. It reads
// dead_letters and the message, writes both indexes.
func (t *storeTx) indexDeadLetter(ctx context.Context, d *broker.DeadLetter) error {
	return t.d.indexDeadLetter(ctx, t, d)
}

// indexDeadLetter is storeTx.indexDeadLetter on SQLite (FTS4).
func (sqliteDialect) indexDeadLetter(ctx context.Context, t *storeTx, d *broker.DeadLetter) error {
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

// indexDeadLetter is storeTx.indexDeadLetter on PostgreSQL: the words
// of the error text and of the payload (read as SQLite's statement reads
// it) are made in Go (pgTsvector, payloadText) and written as tsvectors.
func (pgDialect) indexDeadLetter(ctx context.Context, t *storeTx, d *broker.DeadLetter) error {
	if _, err := t.exec(ctx, `INSERT INTO dead_letter_errors (docid, dead_letter_errors) VALUES (?, CAST(? AS tsvector))`,
		d.ID, pgTsvector(d.Error)); err != nil {
		return fmt.Errorf("index the error text: %w", err)
	}
	var payload []byte
	err := t.queryRow(ctx, `SELECT COALESCE((SELECT x.payload FROM messages x WHERE x.seq = ?1), (SELECT o.payload FROM dead_letters o WHERE o.id = ?2))
		WHERE NOT EXISTS (SELECT 1 FROM dead_letters o WHERE o.seq = ?1 AND o.id <> ?2)`, d.Seq, d.ID).Scan(&payload)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && payload == nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index the payload: %w", err)
	}
	if _, err := t.exec(ctx, `INSERT INTO dead_letter_payloads (docid, dead_letter_payloads) VALUES (?, CAST(? AS tsvector))`,
		d.Seq, pgTsvector(payloadText(payload))); err != nil {
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
// expression (an ftsMatch), the newest (highest docid) first, at most a
// bound number when the filter has a MatchCap (noCap: no limit).
func matchIn(index string) string {
	return `(SELECT docid FROM ` + index + ` WHERE match(?, ` + index + `) ORDER BY docid DESC LIMIT ?)`
}

// matchInRange is the set of docids of an index that match a bound
// expression (an ftsMatch) within a bound docid range (FTS4 takes docid
// range constraints along with MATCH): all of a window's matches.
func matchInRange(index string) string {
	return `(SELECT docid FROM ` + index + ` WHERE match(?, ` + index + `) AND docid BETWEEN ? AND ?)`
}

// noCap is the bound of a LIMIT that takes every row: SQLite's -1 is an
// error in PostgreSQL.
const noCap = math.MaxInt64

// fieldOps are the SQL comparisons of broker.FieldFilter's operators:
// only these strings reach the SQL text.
var fieldOps = map[string]string{"=": "=", "!=": "<>", ">": ">", ">=": ">=", "<": "<", "<=": "<="}

// searchConds adds f's free-text and field conditions. Every user value
// (match expressions, JSON paths, values) is a bound parameter; the SQL
// text is made of constants and fieldOps only.
func searchConds(f broker.Filter, add func(cond string, args ...any)) {
	limit := int64(noCap)
	if f.MatchCap > 0 {
		limit = int64(f.MatchCap)
	}
	// errors and payloads are the conditions "in the index's matches" of
	// the error texts (by id) and of the payloads (by seq): the newest
	// MatchCap at most, or all of those in the window's range.
	errs := func(m string) (string, []any) {
		return `d.id IN ` + matchIn("dead_letter_errors"), []any{ftsMatch(m), limit}
	}
	payloads := func(m string) (string, []any) {
		return `d.seq IN ` + matchIn("dead_letter_payloads"), []any{ftsMatch(m), limit}
	}
	if w := f.Window; w != nil {
		errs = func(m string) (string, []any) {
			return `d.id IN ` + matchInRange("dead_letter_errors"), []any{ftsMatch(m), w.MinID, w.MaxID}
		}
		payloads = func(m string) (string, []any) {
			return `d.seq IN ` + matchInRange("dead_letter_payloads"), []any{ftsMatch(m), w.MinSeq, w.MaxSeq}
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
		add(`(d.failed_at, d.id) >= (?, ?)`, ms(f.Floor.At), f.Floor.ID)
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
func (t *storeTx) TextMatches(ctx context.Context, match string, payloads bool, max int) (int64, error) {
	index := "dead_letter_errors"
	if payloads {
		index = "dead_letter_payloads"
	}
	var n int64
	err := t.queryRow(ctx, `SELECT COUNT(*) FROM (SELECT docid FROM `+index+` WHERE match(?, `+index+`) LIMIT ?) AS m`, ftsMatch(match), max).Scan(&n)
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
	if d.pg != nil {
		err := d.pgUpdate(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error { return tx.(*storeTx).pgRebuildTextIndex(ctx) })
		if err != nil {
			return fmt.Errorf("rebuild the text index: %w", err)
		}
		return nil
	}
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

// rebuildBatch is how many dead letters (or messages) pgRebuildTextIndex
// reads, then indexes, at a time.
const rebuildBatch = 500

// pgRebuildTextIndex is RebuildTextIndex on PostgreSQL, in the write
// transaction t: both indexes emptied, then filled again from
// dead_letters and messages a batch at a time, the words made in Go as
// indexDeadLetter makes them (FTS4's 'optimize' has no counterpart: a
// GIN index needs none).
func (t *storeTx) pgRebuildTextIndex(ctx context.Context) error {
	for _, s := range []string{`DELETE FROM dead_letter_errors`, `DELETE FROM dead_letter_payloads`} {
		if _, err := t.exec(ctx, s); err != nil {
			return err
		}
	}
	// fill writes into index the words of the (docid, text) rows of
	// read, a batch at a time, in docid order.
	fill := func(index, read string, words func([]byte) string) error {
		for after := int64(0); ; {
			rows, err := t.query(ctx, read, after, rebuildBatch)
			if err != nil {
				return err
			}
			var batch [][2]any
			last := after
			for rows.Next() {
				var doc int64
				var text []byte
				if err := rows.Scan(&doc, &text); err != nil {
					rows.Close()
					return err
				}
				if last = doc; text != nil {
					batch = append(batch, [2]any{doc, words(text)})
				}
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil || last == after {
				return err
			}
			after = last
			if len(batch) == 0 {
				continue
			}
			list, err := json.Marshal(batch)
			if err != nil {
				return err
			}
			if _, err := t.exec(ctx, `INSERT INTO `+index+` (docid, `+index+`)
				SELECT CAST(e ->> 0 AS BIGINT), CAST(e ->> 1 AS tsvector) FROM json_array_elements(CAST(? AS json)) e`, string(list)); err != nil {
				return err
			}
		}
	}
	if err := fill("dead_letter_errors", `SELECT id, error FROM dead_letters WHERE id > ? ORDER BY id LIMIT ?`,
		func(b []byte) string { return pgTsvector(string(b)) }); err != nil {
		return err
	}
	// A message's payload is indexed once, however many groups gave up
	// on it: the message's, or a dead letter's own once retention
	// removed the message.
	return fill("dead_letter_payloads", `SELECT s.seq, COALESCE((SELECT x.payload FROM messages x WHERE x.seq = s.seq),
			(SELECT o.payload FROM dead_letters o WHERE o.seq = s.seq AND o.payload IS NOT NULL LIMIT 1))
		FROM (SELECT DISTINCT seq FROM dead_letters WHERE seq > ? ORDER BY seq LIMIT ?) s ORDER BY s.seq`,
		func(b []byte) string { return pgTsvector(payloadText(b)) })
}

// ftsMatch is a full-text match expression (broker.TextMatch's form:
// "quoted phrases" of words) bound as a parameter: the expression itself
// for SQLite's FTS4 (its driver.Value), the same search as a tsquery for
// PostgreSQL (pgx writes a pgtype.TextValuer's text, for a parameter of a
// type it has no codec of, as tsquery).
type ftsMatch string

// Value is the expression for SQLite.
func (m ftsMatch) Value() (driver.Value, error) { return string(m), nil }

// TextValue is the expression as a tsquery for PostgreSQL (pgTsquery).
func (m ftsMatch) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: pgTsquery(string(m)), Valid: true}, nil
}

// The words of PostgreSQL's indexes are cut and folded as SQLite's
// unicode61 tokenizer with tokenchars "_-" and diacritics removed
// (migration 0015) does: a word is a run of letters, numbers, marks,
// private-use characters, _ and -; it is lowercased, a Latin letter with
// one diacritic is its base letter, and combining diacritics are
// dropped. Done in Go, it does not depend on the database's locale
// (lower() and [[:alnum:]] of the C locale know ASCII only), and needs no
// unaccent extension (a superuser's). PostgreSQL bounds what FTS4 does
// not: a word of more than maxLexeme bytes is cut there (on both sides,
// so it still matches), a tsvector holds less than 1 MiB of words and
// positions (MAXSTRPOS): Lazarus keeps it within tsvectorBudget, and the
// words past that in a huge payload are not found (the dead letter says
// it was indexed in part); positions stop at 16,383 and a word keeps its
// first 256 (phrases past them are not found, their words are).
const (
	maxLexeme      = 2046
	tsvectorBudget = 1<<20 - 64<<10 // PostgreSQL's 1 MiB - 1, less a margin
	maxPosition    = 1<<14 - 1
	maxPositions   = 256
)

// diacriticsFrom are the lowercase Latin letters with one diacritic
// (Unicode's canonical decompositions), diacriticsTo their base letters,
// rune for rune.
const (
	diacriticsFrom = "àáâãäåçèéêëìíîïñòóôõöùúûüýÿāăąćĉċčďēĕėęě" +
		"ĝğġģĥĩīĭįĵķĺļľńņňōŏőŕŗřśŝşšţťũūŭůűųŵŷźżž" +
		"ơưǎǐǒǔǧǩǫǰǵǹȁȃȅȇȉȋȍȏȑȓȕȗșțȟȧȩȯȳḁḃḅḇḋḍḏḑḓ" +
		"ḙḛḟḡḣḥḧḩḫḭḱḳḵḷḻḽḿṁṃṅṇṉṋṕṗṙṛṟṡṣṫṭṯṱṳṵṷṽṿẁ" +
		"ẃẅẇẉẋẍẏẑẓẕẖẗẘẙạảẹẻẽỉịọỏụủỳỵỷỹ"
	diacriticsTo = "aaaaaaceeeeiiiinooooouuuuyyaaaccccdeeeee" +
		"gggghiiiijklllnnnooorrrssssttuuuuuuwyzzz" +
		"ouaiougkojgnaaeeiioorruusthaeoyabbbddddd" +
		"eefghhhhhikkklllmmmnnnnpprrrssttttuuuvvw" +
		"wwwwxxyzzzhtwyaaeeeiioouuyyyy"
)

// baseLetter maps diacriticsFrom to diacriticsTo.
var baseLetter = func() map[rune]rune {
	from, to := []rune(diacriticsFrom), []rune(diacriticsTo)
	if len(from) != len(to) {
		panic("db: diacriticsFrom and diacriticsTo differ in length")
	}
	m := make(map[rune]rune, len(from))
	for i, r := range from {
		m[r] = to[i]
	}
	return m
}()

// isTokenRune reports whether r belongs to a word (unicode61: all but
// punctuation, symbols, separators and other, private use aside; and the
// token characters _ and -).
func isTokenRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || unicode.Is(unicode.Co, r)
}

// ftsTokens calls fn with each word of s, folded.
func ftsTokens(s string, fn func(string)) {
	var b []byte
	flush := func() {
		if len(b) > 0 {
			fn(string(b))
			b = b[:0]
		}
	}
	for _, r := range s {
		if !isTokenRune(r) {
			flush()
			continue
		}
		r = unicode.ToLower(r)
		if base, ok := baseLetter[r]; ok {
			r = base
		} else if r >= 0x300 && r <= 0x36F { // combining diacritical marks
			continue
		}
		if len(b)+utf8.RuneLen(r) <= maxLexeme {
			b = utf8.AppendRune(b, r)
		}
	}
	flush()
}

// quoteLexeme writes w as a quoted lexeme of a tsvector or tsquery.
func quoteLexeme(b *strings.Builder, w string) {
	b.WriteByte('\'')
	for _, c := range []byte(w) {
		if c == '\'' || c == '\\' {
			b.WriteByte(c)
		}
		b.WriteByte(c)
	}
	b.WriteByte('\'')
}

// pgTsvector is the tsvector (as text) of the words of s, each with its
// positions, cut to fit (pgTsvectorCut).
func pgTsvector(s string) string {
	v, _ := pgTsvectorCut(s)
	return v
}

// pgTsvectorCut is pgTsvector, and whether it holds only part of the
// words of s: a tsvector PostgreSQL would refuse ("string is too long
// for tsvector") is cut where it would pass tsvectorBudget, so that
// indexing never refuses a dead letter (its ack would fail, and the
// message could never be dead-lettered). Its size is counted as
// PostgreSQL counts it: each distinct word's bytes and, with positions,
// the word padded to an even length, two bytes for their count and two
// for each. Once the budget is spent no word or position is added.
func pgTsvectorCut(s string) (string, bool) {
	var order []string
	at := map[string][]int{}
	size, pos, cut := 0, 0, false
	ftsTokens(s, func(w string) {
		if cut {
			return
		}
		pos++
		p := min(pos, maxPosition)
		ps, seen := at[w]
		if len(ps) > 0 && (len(ps) >= maxPositions || ps[len(ps)-1] == p) {
			return // a position PostgreSQL would not keep
		}
		cost := 2 // one more position
		if !seen {
			cost = len(w) + len(w)%2 + 2 + 2
		}
		if size+cost > tsvectorBudget {
			cut = true
			return
		}
		size += cost
		if !seen {
			order = append(order, w)
		}
		at[w] = append(ps, p)
	})
	var b strings.Builder
	for i, w := range order {
		if i > 0 {
			b.WriteByte(' ')
		}
		quoteLexeme(&b, w)
		for j, p := range at[w] {
			if j == 0 {
				b.WriteByte(':')
			} else {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(p))
		}
	}
	return b.String(), cut
}

// PayloadIndexedInPart reports whether the full-text index holds only
// part of payload's words (broker.SearchTx): on PostgreSQL, whose
// tsvector is bounded (pgTsvectorCut); never on SQLite, whose FTS4 holds
// every word. A payload of fewer than tsvectorBudget/6 bytes cannot fill
// it (each byte of text costs 6 bytes of a tsvector at most: a word of
// one letter, padded, with its count and position) and is not read.
func (t *storeTx) PayloadIndexedInPart(payload []byte) bool {
	return t.d.payloadIndexedInPart(payload)
}

// payloadIndexedInPart is false: FTS4 holds every word.
func (sqliteDialect) payloadIndexedInPart([]byte) bool { return false }

// payloadIndexedInPart: whether the tsvector of payload is cut.
func (pgDialect) payloadIndexedInPart(payload []byte) bool {
	if len(payload) < tsvectorBudget/6 {
		return false
	}
	_, cut := pgTsvectorCut(payloadText(payload))
	return cut
}

// pgTsquery is the tsquery (as text) of a match expression of
// broker.TextMatch's form: each "quoted phrase" its words one after the
// other (<->), every phrase there (&). A word outside quotes is a phrase
// of its own.
func pgTsquery(match string) string {
	var b strings.Builder
	phrase := func(s string) {
		n := 0
		ftsTokens(s, func(w string) {
			switch {
			case n > 0:
				b.WriteString(" <-> ")
			case b.Len() > 0:
				b.WriteString(" & ")
			}
			if n == 0 {
				b.WriteByte('(')
			}
			quoteLexeme(&b, w)
			n++
		})
		if n > 0 {
			b.WriteByte(')')
		}
	}
	for i, part := range strings.Split(match, `"`) {
		if i%2 == 1 {
			phrase(part)
			continue
		}
		for _, w := range strings.Fields(part) {
			phrase(w)
		}
	}
	return b.String()
}

// payloadText is the text payloadWords makes of a payload, as SQLite's
// json_tree walks it: every object key, and every string (decoded) and
// number (as SQLite writes it), in the order they come. What follows a
// syntax error is left out (the broker takes JSON payloads only).
func payloadText(payload []byte) string {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var b strings.Builder
	word := func(s string) {
		b.WriteString(s)
		b.WriteByte(' ')
	}
	// open are the containers open, innermost last: whether each is an
	// object, and whether its next token is a key.
	type container struct{ object, key bool }
	var open []container
	ended := func() { // a value ended: in an object, a key comes next
		if n := len(open); n > 0 && open[n-1].object {
			open[n-1].key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return b.String()
		}
		if n := len(open); n > 0 && open[n-1].key {
			if k, ok := tok.(string); ok {
				word(k)
				open[n-1].key = false
				continue
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				open = append(open, container{object: v == '{', key: v == '{'})
				continue
			}
			open = open[:len(open)-1]
		case string:
			word(v)
		case json.Number:
			word(sqliteNumber(string(v)))
		}
		ended()
	}
}

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
