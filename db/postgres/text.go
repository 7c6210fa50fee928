package postgres

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// IndexDeadLetter is sqlcore.Tx's indexDeadLetter on PostgreSQL: the words
// of the error text and of the payload (read as SQLite's statement reads
// it) are made in Go (tsvector, payloadText) and written as tsvectors.
func (dialect) IndexDeadLetter(ctx context.Context, t *sqlcore.Tx, d *broker.DeadLetter) error {
	if _, err := t.Exec(ctx, `INSERT INTO dead_letter_errors (docid, dead_letter_errors) VALUES (?, CAST(? AS tsvector))`,
		d.ID, tsvector(d.Error)); err != nil {
		return fmt.Errorf("index the error text: %w", err)
	}
	var payload []byte
	err := t.QueryRow(ctx, `SELECT COALESCE((SELECT x.payload FROM messages x WHERE x.seq = ?1), (SELECT o.payload FROM dead_letters o WHERE o.id = ?2))
		WHERE NOT EXISTS (SELECT 1 FROM dead_letters o WHERE o.seq = ?1 AND o.id <> ?2)`, d.Seq, d.ID).Scan(&payload)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && payload == nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index the payload: %w", err)
	}
	if _, err := t.Exec(ctx, `INSERT INTO dead_letter_payloads (docid, dead_letter_payloads) VALUES (?, CAST(? AS tsvector))`,
		d.Seq, tsvector(payloadText(payload))); err != nil {
		return fmt.Errorf("index the payload: %w", err)
	}
	return nil
}

// RebuildTextIndex indexes every dead letter's error text and payload
// again, from nothing (rebuildTextIndex), in one write transaction.
func (d *Store) RebuildTextIndex(ctx context.Context) error {
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error { return rebuildTextIndex(ctx, tx.(*sqlcore.Tx)) })
	if err != nil {
		return fmt.Errorf("rebuild the text index: %w", err)
	}
	return nil
}

// rebuildBatch is how many dead letters (or messages) rebuildTextIndex
// reads, then indexes, at a time.
const rebuildBatch = 500

// rebuildTextIndex is RebuildTextIndex on PostgreSQL, in the write
// transaction t: both indexes emptied, then filled again from
// dead_letters and messages a batch at a time, the words made in Go as
// indexDeadLetter makes them (FTS4's 'optimize' has no counterpart: a
// GIN index needs none).
func rebuildTextIndex(ctx context.Context, t *sqlcore.Tx) error {
	for _, s := range []string{`DELETE FROM dead_letter_errors`, `DELETE FROM dead_letter_payloads`} {
		if _, err := t.Exec(ctx, s); err != nil {
			return err
		}
	}
	// fill writes with insert the words of the (docid, text) rows of
	// read, a batch at a time, in docid order.
	fill := func(insert, read string, words func([]byte) string) error {
		for after := int64(0); ; {
			rows, err := t.Query(ctx, read, after, rebuildBatch)
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
			if _, err := t.Exec(ctx, insert, string(list)); err != nil {
				return err
			}
		}
	}
	if err := fill(`INSERT INTO dead_letter_errors (docid, dead_letter_errors)
		SELECT CAST(e ->> 0 AS BIGINT), CAST(e ->> 1 AS tsvector) FROM json_array_elements(CAST(? AS json)) e`, `SELECT id, error FROM dead_letters WHERE id > ? ORDER BY id LIMIT ?`,
		func(b []byte) string { return tsvector(string(b)) }); err != nil {
		return err
	}
	// A message's payload is indexed once, however many groups gave up
	// on it: the message's, or a dead letter's own once retention
	// removed the message.
	return fill(`INSERT INTO dead_letter_payloads (docid, dead_letter_payloads)
		SELECT CAST(e ->> 0 AS BIGINT), CAST(e ->> 1 AS tsvector) FROM json_array_elements(CAST(? AS json)) e`, `SELECT s.seq, COALESCE((SELECT x.payload FROM messages x WHERE x.seq = s.seq),
			(SELECT o.payload FROM dead_letters o WHERE o.seq = s.seq AND o.payload IS NOT NULL LIMIT 1))
		FROM (SELECT DISTINCT seq FROM dead_letters WHERE seq > ? ORDER BY seq LIMIT ?) s ORDER BY s.seq`,
		func(b []byte) string { return tsvector(payloadText(b)) })
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

// tsvector is the tsvector (as text) of the words of s, each with its
// positions, cut to fit (tsvectorCut).
func tsvector(s string) string {
	v, _ := tsvectorCut(s)
	return v
}

// tsvectorCut is tsvector, and whether it holds only part of the
// words of s: a tsvector PostgreSQL would refuse ("string is too long
// for tsvector") is cut where it would pass tsvectorBudget, so that
// indexing never refuses a dead letter (its ack would fail, and the
// message could never be dead-lettered). Its size is counted as
// PostgreSQL counts it: each distinct word's bytes and, with positions,
// the word padded to an even length, two bytes for their count and two
// for each. Once the budget is spent no word or position is added.
func tsvectorCut(s string) (string, bool) {
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

// PayloadIndexedInPart: whether the tsvector of payload is cut.
func (dialect) PayloadIndexedInPart(payload []byte) bool {
	if len(payload) < tsvectorBudget/6 {
		return false
	}
	_, cut := tsvectorCut(payloadText(payload))
	return cut
}

// tsquery is the tsquery (as text) of a match expression of
// broker.TextMatch's form: each "quoted phrase" its words one after the
// other (<->), every phrase there (&). A word outside quotes is a phrase
// of its own. A phrase that ends in * ends in a prefix (its last word:
// 'w':*), as FTS4 reads "w*" (broker.ErrorWords makes such).
func tsquery(match string) string {
	var b strings.Builder
	phrase := func(s string) {
		prefix := strings.HasSuffix(s, "*")
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
			if prefix {
				b.WriteString(":*")
			}
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
			word(sqlcore.SQLiteNumber(string(v)))
		}
		ended()
	}
}

// UnindexDeadLetters and UnindexQueue delete the rows of the GIN-indexed
// tables in the transaction that removes the dead letters, under its row
// locks (sqlcore's statements).
func (dialect) UnindexDeadLetters(ctx context.Context, t *sqlcore.Tx, ids string) error {
	return sqlcore.UnindexDeadLetters(ctx, t, ids)
}

func (dialect) UnindexQueue(ctx context.Context, t *sqlcore.Tx, queueID int64) error {
	return sqlcore.UnindexQueue(ctx, t, queueID)
}

// AwaitTextIndex returns at once: PostgreSQL's indexes change in the
// transactions of the dead letters they index.
func (dialect) AwaitTextIndex(context.Context, *sqlcore.Tx) error { return nil }
