package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Search in dead letters (issue 14): free text in payloads and error
// texts, and filters on payload fields. Both are answered from the
// store's full-text indexes (db: FTS4, unicode61 words with "_" a
// letter): what a user types is parsed here into values the store binds
// as parameters, never into SQL or into the index's query language.

// TextIndexState is the state of full-text indexes a store keeps apart
// from its database and brings up to date after the commits (SQLite's
// search file, beside the database file; PostgreSQL keeps its indexes in
// its tables, changed in the same transactions, and has none).
type TextIndexState struct {
	// Bytes is the size of the indexes' file on disk, its write-ahead
	// log included.
	Bytes int64
	// Behind is how many dead letters are filed and not in the indexes
	// yet: a search waits for them.
	Behind int64
	// Failing is set while the indexes cannot be brought up to date (a
	// full disk, a damaged file: the log says which); searches then
	// fail as unavailable.
	Failing bool
}

// Limits of search input.
const (
	MaxSearchText   = 256 // bytes of free text
	MaxFieldFilters = 8   // field filters in one query
	MaxFieldFilter  = 512 // bytes of one field filter
	maxPathSegments = 32
)

// MatchCap is how many index matches of one full-text condition (free
// text, or a field filter's words) a list looks up one by one, at most.
// Up to it, the matches are the candidates (found by id or seq, all of
// them: exact and complete). Words that match more are common: the list
// then reads a window of the newest dead letters in order instead (as
// FieldScan), where they are found quickly, checking membership in their
// newest MatchCap matches; it says so (DLQPage.MatchCapped).
const MatchCap = 2000

// FieldScan is how many of the newest dead letters (of the other
// filters, from the page's position) a list reads at most for one page
// when nothing narrows it by the index: a field filter with no word to
// look up (a range, a bool, null, !=, a number that is not an integer),
// or common words. Its cost is bounded at any depth, and a page that read
// that many without filling up says so (DLQPage.Scanned) and goes on
// below the window (DLQPage.Next).
const FieldScan = 5000

// SearchCount is how far a list with free text or field filters counts
// its matches for its total: more are shown as "1,000+"
// (DLQPage.TotalCapped).
const SearchCount = 1000

// The limits narrow works with (tests make them small).
var matchCap, fieldScan = MatchCap, FieldScan

// FieldFilter is a condition on a payload field: path op value.
type FieldFilter struct {
	Source string // as typed, trimmed
	// Path is the field's JSON path in SQLite's syntax, built from
	// validated segments: $."card"."brand", $."tags"[0].
	Path  string
	Op    string // =, !=, >, >=, <, <=, contains
	Value any    // int64, float64, string, bool or nil (JSON null)
	// Words is a full-text expression (TextMatch's form) a payload holds
	// whenever the filter holds: the index narrows by it first. Empty
	// when the filter implies no word.
	Words string
}

// fieldOps are the operators, longest first (">=" before ">").
var fieldOps = []string{"!=", ">=", "<=", "=", ">", "<"}

// ParseFieldFilter reads a filter on a payload field: a path (names
// separated by dots, array indexes as [n]: card.brand, items[0].sku), an
// operator (= != > >= < <= contains) and a value: a JSON literal
// (250, 12.5, "ord_123", true, false, null) or else the rest of the
// text, taken as a string (amex). Its errors are ErrInvalid and name the
// filter.
func ParseFieldFilter(s string) (FieldFilter, error) {
	s = strings.TrimSpace(s)
	f := FieldFilter{Source: s}
	bad := func(format string, args ...any) (FieldFilter, error) {
		return FieldFilter{}, errorf(ErrInvalid, "field filter %q: %s", truncate(s, 64), fmt.Sprintf(format, args...))
	}
	if len(s) > MaxFieldFilter {
		return bad("longer than %d bytes", MaxFieldFilter)
	}
	if !utf8.ValidString(s) {
		return bad("not UTF-8")
	}
	// The path runs to the first space or operator character.
	end := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune("=!<>", r) })
	if end <= 0 {
		return bad("want path op value, like orderId = ord_123")
	}
	path, err := jsonPath(s[:end])
	if err != nil {
		return bad("%v", err)
	}
	f.Path = path
	rest := strings.TrimLeftFunc(s[end:], unicode.IsSpace)
	for _, op := range fieldOps {
		if strings.HasPrefix(rest, op) {
			f.Op, rest = op, rest[len(op):]
			break
		}
	}
	if f.Op == "" {
		word, after, _ := strings.Cut(rest, " ")
		if !strings.EqualFold(word, "contains") {
			return bad("the operator must be one of = != > >= < <= contains")
		}
		f.Op, rest = "contains", after
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return bad("a value is missing after %s", f.Op)
	}
	if strings.ContainsRune("=!<>", rune(rest[0])) {
		return bad("two operators; a value starting with %c goes in quotes", rest[0])
	}
	f.Value, err = literal(rest)
	if err != nil {
		return bad("%v", err)
	}
	switch f.Value.(type) {
	case bool, nil:
		if f.Op != "=" && f.Op != "!=" && f.Op != "contains" {
			return bad("%s compares numbers or strings, not %s", f.Op, rest)
		}
	}
	// A string equal to the value, an array holding it, or (contains) a
	// string holding it: its words are in the payload's words. So is an
	// integer's decimal form (the index holds numbers as SQLite writes
	// them: 1000, 1000.0). Other numbers (12.50 is 12.5) and the rest
	// name no word for certain.
	if f.Op == "=" || f.Op == "contains" {
		switch v := f.Value.(type) {
		case string:
			f.Words = TextMatch(v, false)
		case int64:
			f.Words = TextMatch(strconv.FormatInt(v, 10), false)
		}
	}
	return f, nil
}

// jsonPath validates a dotted path and writes it as a SQLite JSON path
// with every name quoted. Names are letters, digits and _ - $ @ : (no
// quote, dot, bracket or space can reach the path).
func jsonPath(s string) (string, error) {
	var b strings.Builder
	b.WriteString("$")
	n := 0
	for i := 0; i < len(s); {
		if n++; n > maxPathSegments {
			return "", fmt.Errorf("a path has at most %d parts", maxPathSegments)
		}
		if s[i] == '[' {
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return "", fmt.Errorf("an index [ is not closed")
			}
			idx := s[i+1 : i+j]
			k, err := strconv.Atoi(idx)
			if err != nil || k < 0 || k > 1_000_000 || idx != strconv.Itoa(k) {
				return "", fmt.Errorf("an index must be a whole number like [0]")
			}
			fmt.Fprintf(&b, "[%d]", k)
			i += j + 1
			if i < len(s) && s[i] == '.' {
				i++
				if i == len(s) {
					return "", fmt.Errorf("a path must not end with a dot")
				}
			}
			continue
		}
		j := i
		for j < len(s) && s[j] != '.' && s[j] != '[' {
			j++
		}
		name := s[i:j]
		if name == "" {
			return "", fmt.Errorf("a path has an empty name")
		}
		for _, r := range name {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-$@:", r) {
				return "", fmt.Errorf("a field name has letters, digits and _ - $ @ : only")
			}
		}
		b.WriteString(`."` + name + `"`)
		i = j
		if i < len(s) && s[i] == '.' {
			i++
			if i == len(s) {
				return "", fmt.Errorf("a path must not end with a dot")
			}
		}
	}
	return b.String(), nil
}

// literal reads a JSON number, string, true, false or null; anything
// else is a bare word, the string itself.
func literal(s string) (any, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "null":
		return nil, nil
	}
	if s[0] == '"' {
		var v string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("the value %s is not a JSON string", truncate(s, 64))
		}
		return v, nil
	}
	if c := s[0]; c == '-' || (c >= '0' && c <= '9') {
		var n json.Number
		if err := json.Unmarshal([]byte(s), &n); err == nil {
			if i, err := n.Int64(); err == nil {
				return i, nil
			}
			if f, err := n.Float64(); err == nil && !math.IsInf(f, 0) {
				return f, nil
			}
		}
	}
	return s, nil
}

// TextMatch turns user text into a full-text match expression: every
// word, and every "quoted phrase", must be there (case-insensitive,
// whole words). Only letters, digits, _ and - make words; everything
// else (the index's operators: OR, NEAR, *, ^, :, parentheses, quotes)
// separates them, and each word goes in as a quoted phrase token, so nothing typed
// is an operator. With words (unquoted) only, quotes are ignored: the
// text is one phrase. Empty when there is no word.
func TextMatch(text string, phrases bool) string {
	var parts []string
	add := func(chunk string) {
		words := slices.DeleteFunc(strings.FieldsFunc(chunk, func(r rune) bool { return !isWordRune(r) }), func(w string) bool { return !isWord(w) })
		if len(words) > 0 {
			parts = append(parts, `"`+strings.Join(words, " ")+`"`)
		}
	}
	if !phrases {
		add(text)
		return strings.Join(parts, " ")
	}
	for i, chunk := range strings.Split(text, `"`) {
		if i%2 == 1 {
			add(chunk) // inside quotes: one phrase
			continue
		}
		for _, w := range strings.FieldsFunc(chunk, func(r rune) bool { return !isWordRune(r) }) {
			add(w)
		}
	}
	return strings.Join(parts, " ")
}

// isWordRune: the index's word characters (unicode61 with "_" and "-"
// token characters: letters, digits, marks, _ and -).
func isWordRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// isWord reports whether w has a letter or a digit (a lone - is none).
func isWord(w string) bool {
	return strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// parseSearch validates q's free text and field filters into f.
func (q DLQQuery) parseSearch(f *Filter) error {
	if q.Text != "" {
		if len(q.Text) > MaxSearchText {
			return errorf(ErrInvalid, "search text is longer than %d bytes", MaxSearchText)
		}
		if f.Text = TextMatch(q.Text, true); f.Text == "" {
			return errorf(ErrInvalid, "search text %q has no word to search for", truncate(q.Text, 64))
		}
	}
	if len(q.Fields) > MaxFieldFilters {
		return errorf(ErrInvalid, "at most %d field filters", MaxFieldFilters)
	}
	for _, s := range q.Fields {
		ff, err := ParseFieldFilter(s)
		if err != nil {
			return err
		}
		f.Fields = append(f.Fields, ff)
	}
	return nil
}

// Indexed reports whether f has a full-text condition (Text, or a field
// filter's Words): unless f has a Floor (a window read in order), the
// index then names the candidates (at most MatchCap a condition in a
// list), and the store looks them up by id or seq.
func (f Filter) Indexed() bool {
	if f.Text != "" {
		return true
	}
	for _, ff := range f.Fields {
		if ff.Words != "" {
			return true
		}
	}
	return false
}

// ByIndex reports whether the dead letters of f are found by walking a
// full-text index (an export's and a bulk action's chunks): f has a
// full-text condition (Indexed), or an error text's words (ErrorWords).
func (f Filter) ByIndex() bool {
	return f.Indexed() || f.ErrorWords != ""
}

// scansFields reports whether f has a field filter that the index cannot
// narrow, and nothing else does: it is then checked on a window of the
// newest FieldScan rows.
func (f Filter) scansFields() bool {
	return len(f.Fields) > 0 && !f.Indexed()
}

// scansError reports whether f has an error text to hold (ErrorContains)
// that no index narrows (no rare ErrorWords, no full-text condition, no
// transactionId): it is then checked on a window of the newest
// FieldScan rows, as a field filter the index cannot narrow, never on a
// whole queue (for a rare text, every row of it).
func (f Filter) scansError() bool {
	return f.ErrorContains != "" && f.ErrorWords == "" && f.TransactionID == "" && !f.Indexed()
}

// ErrorWords returns a full-text expression (TextMatch's form, each word
// a phrase of its own) of the words of s that every error text holding
// s (ErrorContains: any part of the text, any case) holds; empty when
// there are none. A word of s is one there only when s bounds it on both
// sides: "timeout" is part of "ReadTimeoutError", but " timeout," is the
// word timeout wherever it is. The last word, when s bounds it before
// only ("connection refused"), begins a word there: when s bounds no
// whole word, it is looked up as a prefix ("refused*": refused,
// refusedByPeer), when it has minErrorPrefix characters at least (a
// shorter one names too many words of the index); beside whole words it
// would only cost the reading of its words' matches (FTS4 reads every
// match of each word: "order 123456 already" reads 123456's, not those
// of every word starting with already). Only words of ASCII letters, digits, _ and - after (and
// before) ASCII separators are taken: the index and both stores' lower()
// fold those alike, so that the index's matches hold every error text
// that holds s (the store checks s on them exactly). Words are not
// joined into phrases: PostgreSQL's index keeps no positions past its
// 16,383rd word.
func ErrorWords(s string) string {
	rs := []rune(s)
	ascii := func(r rune) bool { return r < utf8.RuneSelf }
	seen := map[string]bool{}
	var parts []string
	prefix := ""
	for i := 0; i < len(rs); {
		if !isWordRune(rs[i]) {
			i++
			continue
		}
		j := i
		plain := true
		for j < len(rs) && isWordRune(rs[j]) {
			plain = plain && ascii(rs[j])
			j++
		}
		w := strings.ToLower(string(rs[i:j]))
		if j == len(rs) && j-i >= minErrorPrefix {
			w += "*" // a prefix
		}
		bounded := i > 0 && ascii(rs[i-1]) && (j < len(rs) && ascii(rs[j]) || strings.HasSuffix(w, "*"))
		switch {
		case !plain || !bounded || !isWord(w) || seen[w]:
		case strings.HasSuffix(w, "*"):
			prefix = `"` + w + `"`
		default:
			seen[w] = true
			parts = append(parts, `"`+w+`"`)
		}
		i = j
	}
	if len(parts) == 0 {
		return prefix
	}
	return strings.Join(parts, " ")
}

// minErrorPrefix is the fewest characters of a word ErrorWords looks up
// as a prefix.
const minErrorPrefix = 3

// SearchText returns up to limit dead letters, across every queue and
// group, whose payload or error text holds every word and "quoted
// phrase" of text (case-insensitive, whole words; no operators), newest
// failure first. Text with no words, or over MaxSearchText bytes, is
// ErrInvalid.
func (b *Broker) SearchText(ctx context.Context, text string, limit int) ([]DeadLetter, error) {
	if limit < 1 || limit > MaxPageSize {
		return nil, errorf(ErrInvalid, "limit must be between 1 and %d", MaxPageSize)
	}
	page, err := b.DeadLetters(ctx, DLQQuery{Text: text, Limit: limit})
	return page.Items, err
}

// narrow readies f for one page of a list from after. Each full-text
// condition is counted in its index (up to MatchCap+1): when all are
// rare, their matches are the candidates, looked up one by one (the
// store's plan); when one is common, or a field filter has no words, the
// page reads the window of the newest FieldScan dead letters of the
// other filters from after instead (f.Floor, f.Window), in order, and
// looks each condition up in the index within the window's ids and seqs
// only: every match of the window is found, whatever other queues or
// groups hold. A common field equality drops its words (the exact test
// implies them). An error text (ErrorContains) is checked exactly on
// the matches of its ErrorWords in the error texts' index when they are
// rare, else in the window as a field filter is: never on a whole queue
// (a rare text's rows are every row of it). capped reports a common
// condition.
func narrow(ctx context.Context, tx DeadLetterTx, f *Filter, after *Cursor) (capped bool, err error) {
	if f.Text == "" && len(f.Fields) == 0 && f.ErrorContains == "" {
		return false, nil
	}
	f.MatchCap = matchCap
	common := func(match string, payloads bool) (bool, error) {
		n, err := tx.TextMatches(ctx, match, payloads, matchCap+1)
		if err != nil {
			return false, fmt.Errorf("count text matches: %w", err)
		}
		return n > int64(matchCap), nil
	}
	if f.Text != "" {
		// In either index: the condition is an OR of both.
		for _, payloads := range []bool{false, true} {
			c, err := common(f.Text, payloads)
			if err != nil {
				return false, err
			}
			capped = capped || c
		}
	}
	fields := make([]FieldFilter, len(f.Fields))
	copy(fields, f.Fields)
	for i, ff := range fields {
		if ff.Words == "" {
			continue
		}
		c, err := common(ff.Words, true)
		if err != nil {
			return false, err
		}
		if c && ff.Op == "=" {
			fields[i].Words = "" // checked exactly in the window
		} else {
			capped = capped || c
		}
	}
	f.Fields = fields
	if f.ErrorContains != "" && f.TransactionID == "" {
		// Words the error text must hold narrow by the error texts'
		// index when they are rare; else the text is checked in a window.
		if f.ErrorWords = ErrorWords(f.ErrorContains); f.ErrorWords != "" {
			c, err := common(f.ErrorWords, false)
			if err != nil {
				return false, err
			}
			if c {
				f.ErrorWords = ""
			}
		}
	}
	if capped || f.scansFields() || f.scansError() {
		base := f.base()
		c, ok, err := tx.DeadLetterPosition(ctx, base, after, fieldScan)
		if err != nil {
			return false, fmt.Errorf("find the scan window: %w", err)
		}
		var floor *Cursor
		if ok {
			floor = &c
		}
		w, err := tx.DeadLetterWindow(ctx, base, after, floor)
		if err != nil {
			return false, fmt.Errorf("read the scan window: %w", err)
		}
		w.Above, f.Floor, f.Window = after, floor, &w
	}
	return capped, nil
}

// base is f without its search: the other filters, whose dead letters
// a window holds.
func (f Filter) base() Filter {
	f.Text, f.Fields, f.MatchCap, f.Floor, f.Window = "", nil, 0, nil, nil
	f.ErrorContains, f.ErrorWords = "", ""
	return f
}

// SearchWindow is the part of a list a page of a search read in order:
// the dead letters of the other filters (queue, group, time range...)
// strictly below From (nil: from the newest), Rows of them, down to To
// (nil: to the oldest). More says there are dead letters of the other
// filters below To: the search did not read them (the next page does).
type SearchWindow struct {
	From, To *Cursor
	Rows     int
	More     bool
}

// windowTotal counts, up to max, f's matches (f has a Window) in the
// newest window of its other filters, whatever window f's page reads: a
// total that does not change from page to page. rows is, when the
// window is not the whole list (capped then), how many dead letters it
// holds; else 0 and the count is the filter's.
func windowTotal(ctx context.Context, tx DeadLetterTx, f Filter, max int) (n int64, capped bool, rows int, err error) {
	base := f.base()
	if f.Window.Above != nil {
		c, ok, err := tx.DeadLetterPosition(ctx, base, nil, fieldScan)
		if err != nil {
			return 0, false, 0, fmt.Errorf("find the newest window: %w", err)
		}
		f.Floor = nil
		if ok {
			f.Floor = &c
		}
		w, err := tx.DeadLetterWindow(ctx, base, nil, f.Floor)
		if err != nil {
			return 0, false, 0, fmt.Errorf("read the newest window: %w", err)
		}
		f.Window = &w
	}
	more := false
	if f.Floor != nil {
		if _, more, err = tx.DeadLetterPosition(ctx, base, f.Floor, 1); err != nil {
			return 0, false, 0, fmt.Errorf("look below the window: %w", err)
		}
	}
	if n, err = tx.CountDeadLettersUpTo(ctx, f, max+1); err != nil {
		return 0, false, 0, fmt.Errorf("count dead letters: %w", err)
	}
	if more {
		rows = f.Window.Rows
	}
	return min(n, int64(max)), n > int64(max) || more, rows, nil
}

// searchWindow describes f's window (nil: none), reading whether there
// are dead letters below it.
func searchWindow(ctx context.Context, tx DeadLetterTx, f Filter) (*SearchWindow, error) {
	if f.Window == nil {
		return nil, nil
	}
	w := &SearchWindow{From: f.Window.Above, To: f.Floor, Rows: f.Window.Rows}
	if f.Floor != nil {
		_, ok, err := tx.DeadLetterPosition(ctx, f.base(), f.Floor, 1)
		if err != nil {
			return nil, err
		}
		w.More = ok
	}
	return w, nil
}
