package views

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Ago says how long before now t was, for people: "3 min ago".
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	if d < 5*time.Second {
		return "just now"
	}
	return Age(d) + " ago"
}

// Age says a duration the short way: "45 s", "12 min", "3 h", "5 d".
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 10*time.Hour && int(d.Minutes())%60 != 0:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	default:
		return fmt.Sprintf("%d d", int(d.Hours()/24))
	}
}

// Exact is a time in full, for hovering: RFC 3339 UTC with milliseconds.
func Exact(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// ISO is a time for <time datetime>.
func ISO(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Count writes a number with thousands separators: 1,234,567.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Plural is "1 dead letter" or "3 dead letters".
func Plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Count(n) + " " + many
}

// ShortID is an id cut for a list: its start (the time, in a UUIDv7) and
// its end (what tells neighbours apart).
func ShortID(id string) string {
	if len(id) == 36 {
		return id[:8] + "…" + id[len(id)-4:]
	}
	return Cut(id, 16)
}

// FirstLine is the first line of s, cut to n characters.
func FirstLine(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i] + " …"
	}
	return Cut(s, n)
}

// Cut shortens s to at most n runes, marking the cut.
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// bidiControls are the invisible characters that reorder the text after
// them: the explicit embeddings, overrides and isolates (U+202A-U+202E,
// U+2066-U+2069), the "Trojan Source" characters of CVE-2021-42574.
const bidiControls = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

var revealer = strings.NewReplacer(
	"\u202a", `\u202a`, "\u202b", `\u202b`, "\u202c", `\u202c`, "\u202d", `\u202d`, "\u202e", `\u202e`,
	"\u2066", `\u2066`, "\u2067", `\u2067`, "\u2068", `\u2068`, "\u2069", `\u2069`)

// Reveal writes the bidi controls of untrusted text as escapes (\u202e),
// the way JSON and Go would: shown, not applied. Otherwise a payload or an
// error could make the page read backwards: "invoice-\u202efdp.exe" shows
// as "invoice-exe.pdf", and the override runs on over what follows it on
// the line. Only for text on the page: copy buttons and form values keep
// the original.
func Reveal(s string) string {
	if !strings.ContainsAny(s, bidiControls) {
		return s
	}
	return revealer.Replace(s)
}

// Bytes says a size for people: "512 B", "1.5 KB", "3.2 MB".
func Bytes(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
	}
}

// PayloadPreview is how many bytes of a payload the page shows until asked.
const PayloadPreview = 64 << 10

// MaxIndent is how many bytes indenting may add to a payload in the full
// view. Indentation grows with the square of the depth: a 20 KB payload
// nested 10,000 deep would indent to 200 MB, so past this the pretty view
// shows it as sent.
const MaxIndent = 4 << 20

// MakePayload prepares a payload for the page: indented when it is JSON,
// cut to limit bytes (0: no limit), and escaped when it is not valid text.
// It never fails: whatever a producer sent, the page can show, in time
// and memory bounded by the payload's size and limit.
func MakePayload(raw []byte, limit int) Payload {
	p := Payload{Size: len(raw)}
	if b, ok := base64Payload(raw); ok {
		p.Decoded = decoded(b, true)
	}
	if !utf8.Valid(raw) {
		p.Decoded = decoded(raw, false)
		p.Binary = true
		raw = []byte(strconv.QuoteToASCII(string(raw)))
	}
	p.IsJSON = !p.Binary && json.Valid(raw)
	pretty, prettyCut := raw, false
	if p.IsJSON {
		budget := limit
		if limit <= 0 {
			budget = len(raw) + MaxIndent
		}
		var full bool
		pretty, full = indent(raw, budget)
		switch {
		case full && limit > 0:
			prettyCut = true
		case full:
			pretty = raw // too deep to indent in full: shown as sent
		}
	}
	p.Raw, p.Pretty = cutBytes(raw, limit), cutBytes(pretty, limit)
	p.Truncated = prettyCut || len(p.Raw) < len(raw) || len(p.Pretty) < len(pretty)
	if p.Truncated {
		p.Limit = limit
	}
	return p
}

// HexLimit is how many bytes of a base64 or binary payload its hex view
// shows.
const HexLimit = 4 << 10

// decoded is the hex view of b (its first HexLimit bytes).
func decoded(b []byte, fromBase64 bool) *DecodedPayload {
	d := &DecodedPayload{Base64: fromBase64, Size: len(b)}
	if len(b) > HexLimit {
		b, d.Cut = b[:HexLimit], true
	}
	d.Hex = hex.Dump(b)
	return d
}

// base64Payload decodes a payload that is one JSON string of base64
// (standard or URL alphabet, padded or not, strictly: the way binary data
// travels in JSON). Words are not taken for base64: the string must be
// at least 12 characters and hold upper and lower case letters and a
// digit or a sign of the alphabet, as encoded bytes do.
func base64Payload(raw []byte) ([]byte, bool) {
	t := strings.TrimSpace(string(raw))
	if len(t) < 14 || t[0] != '"' || t[len(t)-1] != '"' {
		return nil, false
	}
	var s string
	if json.Unmarshal([]byte(t), &s) != nil {
		return nil, false
	}
	var upper, lower, other bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= '0' && c <= '9', c == '+', c == '/', c == '-', c == '_', c == '=':
			other = true
		default:
			return nil, false
		}
	}
	if !upper || !lower || !other {
		return nil, false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.Strict().DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// indent indents valid JSON by two spaces, as json.Indent does (numbers,
// strings and key order stay exactly as sent), but stops once the output
// holds budget bytes and then reports full: json.Indent would build the
// whole indented form, however large, before the page cut it.
func indent(src []byte, budget int) (out []byte, full bool) {
	out = make([]byte, 0, min(budget, 2*len(src)+64))
	newline := func(depth int) {
		out = append(out, '\n')
		for i := 0; i < depth && len(out) <= budget; i++ {
			out = append(out, ' ', ' ')
		}
	}
	depth, open, inString, escaped := 0, false, false, false
	for _, c := range src {
		if len(out) > budget {
			return out, true
		}
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		// An object or array opened just before: indent its first value,
		// unless it closes at once ({} and [] stay on one line).
		if open && c != '}' && c != ']' {
			open = false
			depth++
			newline(depth)
		}
		switch c {
		case '"':
			inString = true
			out = append(out, c)
		case '{', '[':
			open = true
			out = append(out, c)
		case ',':
			out = append(out, c)
			newline(depth)
		case ':':
			out = append(out, c, ' ')
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				newline(depth)
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out, len(out) > budget
}

// cutBytes cuts b to at most limit bytes on a rune boundary (0: no limit).
func cutBytes(b []byte, limit int) string {
	if limit <= 0 || len(b) <= limit {
		return string(b)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut])
}

func userURL(id int64, action string) string {
	return "/admin/users/" + strconv.FormatInt(id, 10) + "/" + action
}

func tokenURL(userID, id int64) string {
	return userURL(userID, "tokens/"+strconv.FormatInt(id, 10)+"/revoke")
}

// ErrorCut says where an error text was cut to be kept and how long it
// was: "cut at 8 KiB of 23 KiB" (whole KiB, rounded up when not whole,
// so that a text just over the limit never reads "8 KiB of 8 KiB").
func ErrorCut(kept, sent int) string {
	kib := func(n int, up bool) string {
		if n < 1024 {
			return fmt.Sprintf("%d B", n)
		}
		k := n / 1024
		if up && n%1024 != 0 {
			k++
		}
		return fmt.Sprintf("%d KiB", k)
	}
	return "cut at " + kib(kept, false) + " of " + kib(sent, true)
}
