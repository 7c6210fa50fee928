package views_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/views"
)

// FuzzMakePayload feeds the payload pretty-printer whatever a producer
// could have stored, cut at any limit (0: the full view). Seeds are in
// testdata/fuzz/FuzzMakePayload; `go test` runs them, `go tool task fuzz`
// explores further.
func FuzzMakePayload(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte, limit uint16) {
		p := views.MakePayload(raw, int(limit))
		checkPayload(t, raw, int(limit), p)
		// The bounded indenter writes what json.Indent writes (but for the
		// trailing white space json.Indent keeps). Only where that is cheap:
		// json.Indent of a deep payload takes long.
		if p.IsJSON && !p.Truncated && (len(raw) <= 1024 || len(p.Pretty) <= 1<<20 && p.Pretty != string(raw)) {
			var want bytes.Buffer
			if err := json.Indent(&want, raw, "", "  "); err != nil {
				t.Fatalf("json.Indent: %v", err)
			}
			if w := strings.TrimRight(want.String(), " \t\r\n"); want.Len() <= len(raw)+views.MaxIndent && p.Pretty != w {
				t.Fatalf("pretty form differs from json.Indent's:\n got %q\nwant %q", p.Pretty, w)
			}
		}
	})
}

// checkPayload asserts what the dead letter page relies on.
func checkPayload(t *testing.T, raw []byte, limit int, p views.Payload) {
	t.Helper()
	valid := utf8.Valid(raw)
	if p.Size != len(raw) {
		t.Fatalf("Size %d, want %d", p.Size, len(raw))
	}
	if p.Binary == valid {
		t.Fatalf("Binary %v for input that is valid UTF-8: %v", p.Binary, valid)
	}
	if wantJSON := valid && json.Valid(raw); p.IsJSON != wantJSON {
		t.Fatalf("IsJSON %v, want %v", p.IsJSON, wantJSON)
	}
	if !utf8.ValidString(p.Raw) || !utf8.ValidString(p.Pretty) {
		t.Fatalf("not valid UTF-8: raw %q pretty %q", p.Raw, p.Pretty)
	}
	// Nothing shown reorders the page.
	if shownText := views.Reveal(p.Pretty) + views.Reveal(p.Raw); strings.ContainsAny(shownText, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069") {
		t.Fatalf("bidi controls left in %q", shownText)
	}
	// What is shown of the raw text is the start of it (escaped when it is
	// not text).
	shown := string(raw)
	if p.Binary {
		shown = strconv.QuoteToASCII(string(raw))
	}
	if !strings.HasPrefix(shown, p.Raw) {
		t.Fatalf("Raw %q is not the start of %q", p.Raw, shown)
	}
	if limit > 0 {
		if len(p.Raw) > limit || len(p.Pretty) > limit {
			t.Fatalf("limit %d: raw %d bytes, pretty %d bytes", limit, len(p.Raw), len(p.Pretty))
		}
		if p.Truncated && p.Limit != limit {
			t.Fatalf("truncated at %d, says %d", limit, p.Limit)
		}
	} else {
		if p.Truncated {
			t.Fatal("the full view is truncated")
		}
		// The indented form of a small, deeply nested payload stays within
		// bounds: it may not blow a 10 KB payload up into 200 MB.
		if len(p.Pretty) > len(raw)+views.MaxIndent {
			t.Fatalf("pretty form is %d bytes for a %d-byte payload", len(p.Pretty), len(raw))
		}
	}
	if !p.Truncated {
		if p.Raw != shown {
			t.Fatalf("not truncated, but Raw %q is not %q", p.Raw, shown)
		}
		if !p.IsJSON && p.Pretty != p.Raw {
			t.Fatalf("not JSON, but Pretty %q differs from Raw %q", p.Pretty, p.Raw)
		}
		if p.IsJSON {
			// Indenting keeps numbers, key order and strings exactly.
			if got, want := compact(t, []byte(p.Pretty)), compact(t, raw); got != want {
				t.Fatalf("pretty form changed the JSON:\n got %s\nwant %s", got, want)
			}
		}
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return out.String()
}
