package broker

import (
	"strings"
	"unicode/utf8"
)

// NoErrorText is the fingerprint of an error with no text on its first
// line: a group of its own that can be shown and filtered by.
const NoErrorText = "(no error text)"

// MaxFingerprint is the longest fingerprint, in runes.
const MaxFingerprint = 200

// fingerprintInput is how much of an error's first line is read, in
// bytes: enough for any fingerprint of MaxFingerprint runes that people
// tell apart, and a bound on the work done for every dead letter filed.
const fingerprintInput = 4096

// Fingerprint is the signature of an error text that its error group is
// known by: the first line, trimmed, with runs of white space made one
// space and what differs from one failure of the same cause to the next
// masked:
//
//   - decimal numbers (30000, 1.5, -3; digits at the start of a word, as
//     in 30s, or 4 and more after a letter, as in user12345) → <n>; a few
//     digits after letters (v1, utf8, sha256, http2) are part of a word
//   - UUIDs → <uuid>; 0x… and words of 8 and more hex digits with at least
//     one digit → <hex>
//   - RFC 3339 / ISO 8601 timestamps and dates → <ts>
//   - quoted values ('…', "…", `…`) → "<q>" in the same quotes; a quote
//     opens only after a non-word character and closes only before one, so
//     the apostrophe of "can't" quotes nothing
//   - e-mail addresses → <email>
//   - in a URL, path segments that look like ids (a digit, other than an
//     API version like v1, or a long token of mixed-case letters) → <id>;
//     the scheme, the host and the other segments are kept
//   - long words of letters and digits mixed (ch_3Nk2Lk…: 20 and more) → <id>
//
// Words, punctuation and hosts are kept. The result is at most
// MaxFingerprint runes; an empty first line gives NoErrorText.
// Fingerprint(Fingerprint(s)) == Fingerprint(s).
//
// It is a hand-written scanner rather than a list of regular
// expressions: it runs inside the write transaction of every dead letter
// filed, and one pass over the line that allocates only its result costs
// a fraction of what a dozen regexp passes (each a scan and an allocation
// of its own) would; the rules' order (a timestamp before a number, an
// e-mail before a word, a URL's segments apart from its host) is plain
// code instead of alternations whose precedence is easy to get wrong.
// BenchmarkFingerprint measures it: 1.7 µs and 2 allocations for a
// 216-byte error with a URL id, a UUID, a timestamp and a quoted value
// (both scans), where a dozen regexp.ReplaceAllString passes doing about
// the same took 23 µs and 45 allocations (2 cores, load 3).
func Fingerprint(errText string) string {
	line, _, _ := strings.Cut(errText, "\n")
	if len(line) > fingerprintInput {
		cut := fingerprintInput
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut]
	}
	line = strings.TrimSpace(strings.ToValidUTF8(line, "\uFFFD"))
	if line == "" {
		return NoErrorText
	}
	// One scan masks nearly every line for good; what a mask leaves next
	// to its neighbours can, rarely, make a new word that a second scan
	// masks further (a quote that now closes before a mask). A second
	// scan, nearly always the same, checks it: the fingerprint is a
	// fixed point, as group counts need (a fingerprint filed and one
	// computed again from it must be the same group).
	fp := fpCapFingerprint(fpScanFingerprint(line))
	for range 4 {
		next := fpCapFingerprint(fpScanFingerprint(fp))
		if next == fp {
			break
		}
		fp = next
	}
	if fp == "" {
		return NoErrorText
	}
	return fp
}

// fpCapFingerprint cuts fp to MaxFingerprint runes, and trims it.
func fpCapFingerprint(fp string) string {
	n := 0
	for i := range fp {
		if n == MaxFingerprint {
			fp = fp[:i]
			break
		}
		n++
	}
	return strings.TrimSpace(fp)
}

// fpIsWord reports whether c is part of a word: ASCII letters and digits,
// '_', and every byte of a non-ASCII character (never split).
func fpIsWord(c byte) bool {
	return c == '_' || c >= 0x80 || fpIsDigit(c) || fpIsLetter(c)
}

func fpIsDigit(c byte) bool  { return c >= '0' && c <= '9' }
func fpIsLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func fpIsHex(c byte) bool    { return fpIsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }
func fpIsSpace(c byte) bool  { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// fpScanFingerprint masks line (trimmed, valid UTF-8, one line) once.
//
// Whether a place starts a word is read from what was written before it,
// not from the input: a mask ends in '>', so what follows one is a word
// of its own, as it will be when the fingerprint is scanned again.
func fpScanFingerprint(line string) string {
	var b strings.Builder
	b.Grow(min(len(line), MaxFingerprint*2))
	last := func() byte {
		if b.Len() == 0 {
			return ' '
		}
		return b.String()[b.Len()-1]
	}
	// noClose[q]: no valid closing quote q follows the place a search for
	// one started, so none follows any later place either (each search is
	// then done once: linear in the line).
	var noClose [256]bool
	s := line
	for i := 0; i < len(s); {
		if b.Len() > MaxFingerprint*4 { // more than the cap can keep
			break
		}
		c := s[i]
		if fpIsSpace(c) {
			for i < len(s) && fpIsSpace(s[i]) {
				i++
			}
			b.WriteByte(' ')
			continue
		}
		if fpIsWord(last()) {
			// Inside a word: what is left of it after a part written as
			// it is, which is a number (fpMaskedDigits) or ends it.
			if fpIsDigit(c) {
				b.WriteString("<n>")
				i += fpDigitsAt(s[i:])
				continue
			}
			b.WriteByte(c)
			i++
			continue
		}
		if (c == '"' || c == '\'' || c == '`') && !noClose[c] {
			if j := fpClosingQuote(s, i); j > 0 {
				b.WriteByte(c)
				b.WriteString("<q>")
				b.WriteByte(c)
				i = j + 1
				continue
			}
			noClose[c] = true
		}
		if n := fpTimestampAt(s[i:]); n > 0 {
			b.WriteString("<ts>")
			i += n
			continue
		}
		if n := fpUuidAt(s[i:]); n > 0 {
			b.WriteString("<uuid>")
			i += n
			continue
		}
		if n := fpHex0xAt(s[i:]); n > 0 {
			b.WriteString("<hex>")
			i += n
			continue
		}
		if n := fpEmailAt(s[i:]); n > 0 {
			b.WriteString("<email>")
			i += n
			continue
		}
		if n := fpSchemeAt(s[i:]); n > 0 {
			i += fpWriteURL(&b, s[i:], n)
			continue
		}
		if c == '-' && i+1 < len(s) && fpIsDigit(s[i+1]) {
			b.WriteString("<n>")
			i += 1 + fpNumberAt(s[i+1:])
			continue
		}
		if fpIsWord(c) {
			i += fpWriteWord(&b, s[i:])
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// fpClosingQuote returns the index of the quote closing the one at s[i]:
// the next same quote that is followed by a non-word character or the
// end, with something between; -1 if there is none.
func fpClosingQuote(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == q && (j+1 == len(s) || !fpIsWord(s[j+1])) {
			if j == i+1 {
				return -1 // "" quotes nothing
			}
			return j
		}
	}
	return -1
}

// fpWordEnd is the length of the word at the start of s.
func fpWordEnd(s string) int {
	n := 0
	for n < len(s) && fpIsWord(s[n]) {
		n++
	}
	return n
}

// fpDigitsAt is the number of digits at the start of s.
func fpDigitsAt(s string) int {
	n := 0
	for n < len(s) && fpIsDigit(s[n]) {
		n++
	}
	return n
}

// fpNumberAt is the length of the decimal number at the start of s (which
// starts with a digit): digits, and a '.' and digits.
func fpNumberAt(s string) int {
	n := fpDigitsAt(s)
	if n+1 < len(s) && s[n] == '.' && fpIsDigit(s[n+1]) {
		n += 1 + fpDigitsAt(s[n+1:])
	}
	return n
}

// fpMaskedDigits is where, in the word w, the first run of digits that is
// a number starts (len(w) if none): digits after a letter are part of
// the word when there are at most 3 of them (v1, utf8, sha256, http2),
// digits after '_' or another non-letter are a number (ord_123).
func fpMaskedDigits(w string) int {
	for i := 1; i < len(w); i++ {
		if !fpIsDigit(w[i]) || fpIsDigit(w[i-1]) {
			continue
		}
		if d := fpDigitsAt(w[i:]); d > 3 || !fpIsLetter(w[i-1]) {
			return i
		}
	}
	return len(w)
}

// fpWriteWord writes the start of the word at the start of s, masked, and
// returns how much of s it took: a number, or the part of the word
// before its first number (fpMaskedDigits), or the whole word.
func fpWriteWord(b *strings.Builder, s string) int {
	w := s[:fpWordEnd(s)]
	if fpHexID(w) {
		b.WriteString("<hex>")
		return len(w)
	}
	if fpMixedID(w) {
		b.WriteString("<id>")
		return len(w)
	}
	if fpIsDigit(w[0]) {
		b.WriteString("<n>")
		return fpNumberAt(s)
	}
	// The part before a number is what a second scan sees as a word.
	v := w[:fpMaskedDigits(w)]
	switch {
	case fpHexID(v):
		b.WriteString("<hex>")
	case fpMixedID(v):
		b.WriteString("<id>")
	default:
		b.WriteString(v)
	}
	return len(v)
}

// fpHexID: 8 and more hex digits, at least one a digit and one a letter
// (digits only are a number).
func fpHexID(w string) bool {
	if len(w) < 8 {
		return false
	}
	digit, letter := false, false
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !fpIsHex(c) {
			return false
		}
		if fpIsDigit(c) {
			digit = true
		} else {
			letter = true
		}
	}
	return digit && letter
}

// fpMixedID: a long token of ASCII letters, digits and '_' with both
// letters and digits (ch_3Nk2LkXyZ…, base62 ids).
func fpMixedID(w string) bool {
	if len(w) < 20 {
		return false
	}
	digit, letter := false, false
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case fpIsDigit(c):
			digit = true
		case fpIsLetter(c):
			letter = true
		case c == '_':
		default:
			return false
		}
	}
	return digit && letter
}

// fpTimestampAt is the length of the date or timestamp at the start of s
// (YYYY-MM-DD, then optionally [T ]hh:mm[:ss[.fff]] and Z or ±hh[:]mm),
// 0 if there is none.
func fpTimestampAt(s string) int {
	if !fpPattern(s, "dddd-dd-dd") {
		return 0
	}
	n := 10
	if len(s) > n+1 && (s[n] == 'T' || s[n] == 't' || s[n] == ' ') && fpPattern(s[n+1:], "dd:dd") {
		n += 6
		if fpPattern(s[n:], ":dd") {
			n += 3
			if len(s) > n+1 && (s[n] == '.' || s[n] == ',') && fpIsDigit(s[n+1]) {
				n += 1 + fpDigitsAt(s[n+1:])
			}
		}
		switch {
		case len(s) > n && (s[n] == 'Z' || s[n] == 'z'):
			n++
		case len(s) > n && (s[n] == '+' || s[n] == '-') && fpPattern(s[n+1:], "dd:dd"):
			n += 6
		case len(s) > n && (s[n] == '+' || s[n] == '-') && fpPattern(s[n+1:], "dddd"):
			n += 5
		}
	}
	if n < len(s) && fpIsWord(s[n]) {
		return 0 // 2024-01-01abc is not a date
	}
	return n
}

// fpPattern reports whether s starts with p, where 'd' in p is any digit.
func fpPattern(s, p string) bool {
	if len(s) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == 'd' {
			if !fpIsDigit(s[i]) {
				return false
			}
		} else if s[i] != p[i] {
			return false
		}
	}
	return true
}

// fpUuidAt is 36 if s starts with a UUID (8-4-4-4-12 hex digits) that is
// not followed by a word character, else 0.
func fpUuidAt(s string) int {
	if len(s) < 36 {
		return 0
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return 0
			}
		default:
			if !fpIsHex(s[i]) {
				return 0
			}
		}
	}
	if len(s) > 36 && fpIsWord(s[36]) {
		return 0
	}
	return 36
}

// fpHex0xAt is the length of the 0x… hex number at the start of s, 0 if
// there is none.
func fpHex0xAt(s string) int {
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !fpIsHex(s[2]) {
		return 0
	}
	n := 2
	for n < len(s) && fpIsHex(s[n]) {
		n++
	}
	if n < len(s) && fpIsWord(s[n]) {
		return 0
	}
	return n
}

func fpIsEmailLocal(c byte) bool {
	return fpIsDigit(c) || fpIsLetter(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

// fpEmailAt is the length of the e-mail address at the start of s (a local
// part, '@', a domain with a dot and letters after it), 0 if none.
func fpEmailAt(s string) int {
	at := 0
	for at < len(s) && fpIsEmailLocal(s[at]) {
		at++
	}
	if at == 0 || at >= len(s) || s[at] != '@' {
		return 0
	}
	n, dot := at+1, -1
	for n < len(s) && (fpIsDigit(s[n]) || fpIsLetter(s[n]) || s[n] == '-' || s[n] == '.') {
		if s[n] == '.' {
			dot = n
		}
		n++
	}
	for n > at+1 && s[n-1] == '.' { // a full stop after the address
		n--
		dot = strings.LastIndexByte(s[:n], '.')
	}
	if dot <= at+1 || dot == n-1 || !fpIsLetter(s[n-1]) {
		return 0
	}
	return n
}

// fpSchemeAt is the length of "scheme://" at the start of s, 0 if none.
func fpSchemeAt(s string) int {
	if len(s) == 0 || !fpIsLetter(s[0]) {
		return 0
	}
	n := 1
	for n < len(s) && n <= 16 && (fpIsLetter(s[n]) || fpIsDigit(s[n]) || s[n] == '+' || s[n] == '.' || s[n] == '-') {
		n++
	}
	if strings.HasPrefix(s[n:], "://") {
		return n + 3
	}
	return 0
}

// fpIsSegment: a character of a URL's host or path segment.
func fpIsSegment(c byte) bool {
	if c <= ' ' {
		return false
	}
	return !strings.ContainsRune(`/?#"'`+"`"+`<>()[]{},;:|\`, rune(c))
}

// fpWriteURL writes the URL at the start of s, whose scheme and "://" are
// its first n bytes, with the path segments that look like ids masked;
// it returns the URL's length. A port (host:8080) stays with the host;
// the query string is left to the rest of the scan.
func fpWriteURL(b *strings.Builder, s string, n int) int {
	b.WriteString(s[:n])
	i := n
	for i < len(s) && (fpIsSegment(s[i]) || s[i] == ':') {
		i++
	}
	b.WriteString(s[n:i])
	for i < len(s) && s[i] == '/' {
		b.WriteByte('/')
		i++
		j := i
		for j < len(s) && fpIsSegment(s[j]) {
			j++
		}
		for j > i && s[j-1] == '.' { // a full stop after the URL
			j--
		}
		if seg := s[i:j]; fpIdSegment(seg) {
			b.WriteString("<id>")
		} else {
			b.WriteString(seg)
		}
		i = j
	}
	return i
}

// fpIdSegment: a path segment that names one thing rather than a kind: it
// has a digit (v1, v2 and v1.2 are API versions, kept), or it is a long
// token of mixed-case letters.
func fpIdSegment(seg string) bool {
	if seg == "" {
		return false
	}
	if len(seg) >= 2 && len(seg) <= 5 && (seg[0] == 'v' || seg[0] == 'V') && fpDigitsAt(seg[1:]) > 0 {
		d := 1 + fpDigitsAt(seg[1:])
		if d == len(seg) || (seg[d] == '.' && d+1 < len(seg) && fpDigitsAt(seg[d+1:]) == len(seg)-d-1) {
			return false
		}
	}
	upper, lower := false, false
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case fpIsDigit(c):
			return true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		}
	}
	return len(seg) >= 16 && upper && lower
}
