package views

import (
	"bytes"
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

// MakePayload prepares a payload for the page: indented when it is JSON,
// cut to limit bytes (0: no limit), and escaped when it is not valid text.
// It never fails: whatever a producer sent, the page can show.
func MakePayload(raw []byte, limit int) Payload {
	p := Payload{Size: len(raw)}
	if !utf8.Valid(raw) {
		p.Binary = true
		raw = []byte(strconv.QuoteToASCII(string(raw)))
	}
	p.IsJSON = !p.Binary && json.Valid(raw)
	pretty := raw
	if p.IsJSON {
		var b bytes.Buffer
		// Indent keeps numbers and key order exactly as sent.
		if err := json.Indent(&b, raw, "", "  "); err == nil {
			pretty = b.Bytes()
		}
	}
	p.Raw, p.Pretty = cutBytes(raw, limit), cutBytes(pretty, limit)
	p.Truncated = len(p.Raw) < len(raw) || len(p.Pretty) < len(pretty)
	return p
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
