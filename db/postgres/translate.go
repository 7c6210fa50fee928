package postgres

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The statements of sqlcore.Tx are written in SQLite's dialect, in forms
// PostgreSQL shares where there is one (docs/postgres.md, "The
// PostgreSQL statements"). translated translates one for PostgreSQL, once per
// distinct text (kept in queries). It runs in go generate, which writes
// the catalog the PostgreSQL store reads (catalog.go; how it is made
// and read: statements.go), and at run time only for the functions
// that build their text then (builtAtRunTime):
//
//   - its own PostgreSQL text when one was given beside it
//     (sqlcore.PGQuery), for a statement that no rule below translates;
//   - parameters: ?NNN is $NNN, and a bare ? the next number after the
//     highest so far, as SQLite numbers them;
//   - a list bound as a JSON array of integers, IN (SELECT value FROM
//     json_each(?)), reads the array's elements as bigint;
//   - scalar MAX(a, b) and MIN(a, b) are GREATEST and LEAST; instr is
//     strpos; CAST(x AS INTEGER) is to BIGINT, AS BLOB to BYTEA; a blob
//     x'…' is bytea's '\x…'; group_concat is string_agg; LIMIT -1 is
//     LIMIT ALL; temp.T is pg_temp.T; CROSS JOIN t ON is JOIN t ON; a
//     unary + before a column (SQLite's way to keep a condition off an
//     index) goes.
//
// Text inside quotes and comments (-- and /* */) is copied as it is:
// the rules see the statement with them set aside (mask), so none of
// them needs to know about quotes.

// rules are the rules of translated that a regular expression says, in
// order.
var rules = []struct {
	re *regexp.Regexp
	to string
}{
	{regexp.MustCompile(`\(SELECT value FROM json_each\((\?\d*)\)\)`), "(SELECT value::bigint FROM json_array_elements_text(${1}::json) AS value)"},
	// SQLite takes CROSS JOIN ... ON as an inner join in the order
	// written (a hint to its planner); PostgreSQL's is JOIN.
	{regexp.MustCompile(`CROSS JOIN (\w+(?:\s+\w+)?)\s+ON\b`), "JOIN $1 ON"},
	// A unary + before a column keeps SQLite's planner off its index; it
	// means nothing else, and PostgreSQL has none for text.
	// (At the start too: a fragment of a condition, sqlcore.Frag.)
	{regexp.MustCompile(`(^\s*|\b(?:WHERE|AND|OR|ON|NOT)\s+|\(\s*)\+(\w+\.\w+)`), "$1$2"},
	// A search window's matches (matchInRange) are tested row by row,
	// by the index's key, for the dead letters of the window as the list
	// reads them in order (a subplan: OFFSET 0 keeps it one): as a join,
	// PostgreSQL's planner, which cannot tell how many rows a match
	// finds, takes each match in turn and scans the window for it, a
	// cost of the window's size squared.
	{regexp.MustCompile(`d\.seq IN \(SELECT docid FROM dead_letter_payloads WHERE match\((\?\d*), dead_letter_payloads\) AND docid BETWEEN (\?\d*) AND (\?\d*)\)`),
		"EXISTS (SELECT 1 FROM dead_letter_payloads WHERE match($1, dead_letter_payloads) AND docid BETWEEN $2 AND $3 AND docid = d.seq OFFSET 0)"},
	{regexp.MustCompile(`d\.id IN \(SELECT docid FROM dead_letter_errors WHERE match\((\?\d*), dead_letter_errors\) AND docid BETWEEN (\?\d*) AND (\?\d*)\)`),
		"EXISTS (SELECT 1 FROM dead_letter_errors WHERE match($1, dead_letter_errors) AND docid BETWEEN $2 AND $3 AND docid = d.id OFFSET 0)"},
	{regexp.MustCompile(`\binstr\(`), "strpos("},
	{regexp.MustCompile(` AS INTEGER\)`), " AS BIGINT)"},
	{regexp.MustCompile(` AS BLOB\)`), " AS BYTEA)"},
	{regexp.MustCompile(`\bLIMIT -1\b`), "LIMIT ALL"},
	{regexp.MustCompile(`\btemp\.`), "pg_temp."},
}

// queries holds each statement translated: SQLite text -> PostgreSQL
// text.
var queries sync.Map

// statement is a statement translated: its text and, when it leaves
// out some of the parameters SQLite's text numbered (SQLite lets ?1 go
// unused; PostgreSQL cannot type a parameter it never sees), which of
// the arguments it takes, in order.
type statement struct {
	text string
	args []int // nil: all of them
	// stores: the statement inserts or updates rows (INSERT, UPDATE),
	// whose strings are bound as they are (textAndArgs).
	stores bool
}

// translated is query in PostgreSQL's dialect, as the translator makes it.
func translated(query string) string { return translateStatement(query).text }

// translateStatement is query translated (or as sqlcore.PGQuery gave it), once per
// distinct text.
func translateStatement(query string) *statement {
	if q, ok := queries.Load(query); ok {
		return q.(*statement)
	}
	// The rules see the statement's code only: its literals, quoted
	// names and comments are set aside (mask) and put back after.
	var m string
	var kept []string
	if strings.IndexByte(query, 0) >= 0 {
		// No SQL of the stores holds a NUL (mask marks with them): taken as it
		// is, for PostgreSQL to refuse.
		q := &statement{text: query}
		queries.Store(query, q)
		return q
	}
	if given, ok := sqlcore.PGGiven.Load(query); ok {
		m, kept = mask(given.(string))
	} else {
		m, kept = mask(query)
		m = translate(m)
		for i, k := range kept {
			if k[0] == 'x' || k[0] == 'X' { // SQLite's blob x'…' is bytea's '\x…'
				kept[i] = `'\x` + k[2:len(k)-1] + `'::bytea`
			}
		}
	}
	q := numberParams(m)
	q.stores = stores.MatchString(m)
	q.text = unmask(q.text, kept)
	queries.Store(query, q)
	return q
}

// stores finds an INSERT or an UPDATE in a statement's code.
var stores = regexp.MustCompile(`(?i)\b(?:INSERT|UPDATE)\b`)

// mask sets aside the string literals, quoted names and comments of q:
// each is replaced by a NUL, its index and a NUL (no SQL of the stores holds a
// NUL), so that no rule reads or rewrites inside them.
func mask(q string) (string, []string) {
	var b strings.Builder
	var kept []string
	for i := 0; i < len(q); i++ {
		end := -1
		switch {
		case (q[i] == 'x' || q[i] == 'X') && i+1 < len(q) && q[i+1] == '\'' && (i == 0 || !isIdent(q[i-1])):
			end = skipQuoted(q, i+1) // a blob, x'…'
		case q[i] == '\'' || q[i] == '"':
			end = skipQuoted(q, i)
		case strings.HasPrefix(q[i:], "--"):
			if nl := strings.IndexByte(q[i:], '\n'); nl >= 0 {
				end = i + nl - 1
			} else {
				end = len(q) - 1
			}
		case strings.HasPrefix(q[i:], "/*"):
			if c := strings.Index(q[i+2:], "*/"); c >= 0 {
				end = i + 2 + c + 1
			} else {
				end = len(q) - 1
			}
		}
		if end < 0 {
			b.WriteByte(q[i])
			continue
		}
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(len(kept)))
		b.WriteByte(0)
		kept = append(kept, q[i:end+1])
		i = end
	}
	return b.String(), kept
}

// unmask puts back what mask set aside.
func unmask(q string, kept []string) string {
	if len(kept) == 0 {
		return q
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(q, 0)
		if i < 0 {
			b.WriteString(q)
			return b.String()
		}
		j := strings.IndexByte(q[i+1:], 0) + i + 1
		n, _ := strconv.Atoi(q[i+1 : j])
		b.WriteString(q[:i])
		b.WriteString(kept[n])
		q = q[j+1:]
	}
}

// textAndArgs are the PostgreSQL text of query (a SQLite text, stmt) and
// the arguments it takes (bind).
func textAndArgs(query string, args []any) (string, []any, error) {
	s, err := stmt(query)
	if err != nil {
		return "", nil, err
	}
	text, args := s.bind(args)
	return text, args, nil
}

// bind is s's text and the arguments of args it takes. In a statement
// that stores no row (a read, a DELETE), each string is bound as
// PostgreSQL's text can hold it (text): a NUL or bytes that are not
// UTF-8 would make PostgreSQL refuse the whole statement, where SQLite
// runs it. Such a string there comes from a stranger's filter or name
// (what the store writes was checked before): it then matches what
// text made of it, as on SQLite, or nothing (a name, a transactionId:
// their checks refuse both). A statement that stores (INSERT, UPDATE)
// binds its strings as they are, for PostgreSQL to refuse what it cannot
// keep rather than keep it changed.
func (s *statement) bind(args []any) (string, []any) {
	texts := texts
	if s.stores {
		texts = func(a []any) []any { return a }
	}
	if s.args == nil {
		return s.text, texts(args)
	}
	out := make([]any, 0, len(s.args))
	for _, j := range s.args {
		if j >= len(args) {
			break // too few: the driver says so, rather than bind NULL
		}
		out = append(out, args[j])
	}
	return s.text, texts(out)
}

// numbered is text, in PostgreSQL's dialect but for its parameters,
// still written as SQLite writes them (? and ?NNN), with those numbered
// as PostgreSQL's ($1, $2, ...; numberParams): the one change the store
// makes to a text at run time, for Store.ExecUncatalogued's. Nothing else of the text
// is read (quotes and comments are set aside first).
func numbered(text string) *statement {
	m, kept := mask(text)
	q := numberParams(m)
	q.stores = stores.MatchString(m)
	q.text = unmask(q.text, kept)
	return q
}

// texts is args with each string text (a copy when one changes:
// the caller's slice is its own); the rest (bytes: payloads) as they are.
func texts(args []any) []any {
	copied := false
	for i, a := range args {
		v, ok := a.(string)
		if !ok {
			continue
		}
		if t := text(v); t != v {
			if !copied {
				args, copied = slices.Clone(args), true
			}
			args[i] = t
		}
	}
	return args
}

// translate applies the rules of translated but the parameters', to a
// statement whose literals and comments are masked.
func translate(q string) string {
	q = scalarMinMax(q)
	q = groupConcat(q)
	for _, r := range rules {
		q = r.re.ReplaceAllString(q, r.to)
	}
	return q
}

// closing is the index of the parenthesis that closes the one open at i
// (i just past an opening one), or -1.
func closing(q string, i int) int {
	depth := 1
	for j := i; j < len(q); j++ {
		switch q[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// skipQuoted is the index of the quote that ends the literal opened at i.
func skipQuoted(q string, i int) int {
	quote := q[i]
	for j := i + 1; j < len(q); j++ {
		if q[j] == quote {
			if j+1 < len(q) && q[j+1] == quote {
				j++
				continue
			}
			return j
		}
	}
	return len(q) - 1
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.'
}

// scalarMinMax turns MAX(a, b) and MIN(a, b), with two arguments or
// more, into GREATEST and LEAST; the aggregates of one argument stay.
func scalarMinMax(q string) string {
	for _, f := range [][2]string{{"MAX(", "GREATEST("}, {"MIN(", "LEAST("}, {"max(", "GREATEST("}, {"min(", "LEAST("}} {
		q = replaceCalls(q, f[0], f[1])
	}
	return q
}

func replaceCalls(q, name, to string) string {
	for i := 0; i < len(q); i++ {
		if strings.HasPrefix(q[i:], name) && (i == 0 || !isIdent(q[i-1])) {
			start := i + len(name)
			end := closing(q, start)
			if end > 0 && topLevelComma(q[start:end]) {
				q = q[:i] + to + q[start:]
				i += len(to) - 1
			}
		}
	}
	return q
}

// groupConcat turns SQLite's group_concat(x[, sep]) into string_agg(x,
// sep), whose separator is not optional (SQLite's is a comma).
func groupConcat(q string) string {
	const name = "group_concat("
	for i := strings.Index(q, name); i >= 0; i = strings.Index(q, name) {
		start := i + len(name)
		end := closing(q, start)
		if end < 0 {
			return q
		}
		args := q[start:end]
		if !topLevelComma(args) {
			args += ", ','"
		}
		q = q[:i] + "string_agg(" + args + ")" + q[end+1:]
	}
	return q
}

// topLevelComma reports whether s has a comma outside parentheses.
func topLevelComma(s string) bool {
	depth := 0
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				return true
			}
		}
	}
	return false
}

// numberParams turns SQLite's parameters (?NNN and ?) into PostgreSQL's
// ($NNN): a bare ? is one more than the highest number before it. When
// some numbers are never used, the others are numbered again from 1 and
// the statement notes which arguments it takes.
func numberParams(q string) *statement {
	if !strings.Contains(q, "?") {
		return &statement{text: q}
	}
	text, used := numberParamsAs(q, nil)
	highest := 0
	for n := range used {
		highest = max(highest, n)
	}
	if len(used) == highest {
		return &statement{text: text}
	}
	// Number them again, densely: $k is the k-th number used.
	order := make([]int, 0, len(used))
	for n := 1; n <= highest; n++ {
		if used[n] {
			order = append(order, n)
		}
	}
	renumber := map[int]int{}
	args := make([]int, len(order))
	for k, n := range order {
		renumber[n] = k + 1
		args[k] = n - 1
	}
	text, _ = numberParamsAs(q, renumber)
	return &statement{text: text, args: args}
}

// numberParamsAs writes q with $NNN parameters, numbered through
// renumber when given, and returns the numbers SQLite's text used.
func numberParamsAs(q string, renumber map[int]int) (string, map[int]bool) {
	used := map[int]bool{}
	var b strings.Builder
	b.Grow(len(q) + 8)
	highest := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			n := highest + 1
			if j > i+1 {
				n, _ = strconv.Atoi(q[i+1 : j])
			}
			highest = max(highest, n)
			used[n] = true
			if renumber != nil {
				n = renumber[n]
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), used
}
