package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// scalar reads one string, number or literal at the start of s, then
// only white space: what encoding/json's Valid says of s, for the
// scalars.
func scalar(s string) bool {
	sc := Scanner{B: []byte(s)}
	sc.Space()
	if sc.I == len(sc.B) {
		return false
	}
	var ok bool
	switch c := sc.B[sc.I]; {
	case c == '"':
		ok = sc.SkipString()
	case c == 't':
		ok = sc.Literal("true")
	case c == 'f':
		ok = sc.Literal("false")
	case c == 'n':
		ok = sc.Literal("null")
	case c == '-' || '0' <= c && c <= '9':
		ok = sc.Number()
	}
	return ok && sc.End()
}

// The tokens agree with encoding/json on valid and invalid scalars:
// strings with every escape, control characters, quotes and backslashes
// before, at and after the eighth byte (PlainEnd's word), bytes past
// ASCII; numbers of every shape; literals cut short.
func TestTokensAgreeWithEncodingJSON(t *testing.T) {
	long := strings.Repeat("abcdefgh", 3)
	cases := []string{
		`""`, `"a"`, `"` + long + `"`, `"` + long, `"` + long + `\"` + long + `"`,
		`"\"\\\/\b\f\n\r\t"`, `"\u00e9\uD834\uDD1E"`, `"\u00g9"`, `"\u00"`, `"\x"`, `"\`, `"abc\`,
		"\"a\tb\"", "\"" + long + "\x01\"", "\"" + long + "\x1f" + long + "\"", `"é` + long + `ü"`, "\"\xff\xfe\"",
		`"abcdefg"`, `"abcdefgh"`, `"abcdefg\""`, `"abcdefgh\\"`, `"abcdefg` + "\n" + `"`,
		`0`, `-0`, `12`, `-12.5e+3`, `1E9`, `0.0`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `-a`, `1.5e-07`,
		`true`, `false`, `null`, `tru`, `nul`, `fals`, `truex`, ` true `, "\t\r\n null \n", ` `, ``,
	}
	for _, c := range cases {
		if got, want := scalar(c), json.Valid([]byte(c)); got != want {
			t.Errorf("%q: scanner %v, encoding/json %v", c, got, want)
		}
	}
}

// Spaced says that white space was skipped, Escaped that a string had
// an escape; neither is set by input without them.
func TestSpacedAndEscaped(t *testing.T) {
	plain := Scanner{B: []byte(`"abc"`)}
	if !plain.SkipString() || !plain.End() || plain.Spaced || plain.Escaped {
		t.Fatalf("a plain string: %+v", plain)
	}
	s := Scanner{B: []byte(` "a\nb" `)}
	s.Space()
	if !s.SkipString() || !s.End() || !s.Spaced || !s.Escaped {
		t.Fatalf("a spaced, escaped string: %+v", s)
	}
	n := Scanner{B: []byte(`[ 1]`)}
	if !n.Next('[') || !n.Next('1') || !n.Spaced || !n.Next(']') || !n.End() {
		t.Fatalf("Next past white space: %+v", n)
	}
}

// PlainEnd finds the first byte to look at, within and past the first
// word, and with ascii the first byte past ASCII.
func TestPlainEnd(t *testing.T) {
	for _, c := range []struct {
		s     string
		ascii bool
		want  int
	}{
		{"abcdefghijkl", false, 12},
		{"abc\"", false, 3},
		{"abcdefghij\\k", false, 10},
		{"abcdefg\x00", false, 7},
		{"abcdefghé", false, 10},
		{"abcdefghé", true, 8},
		{"é", true, 0},
	} {
		if got := PlainEnd(c.s, 0, c.ascii); got != c.want {
			t.Errorf("PlainEnd(%q, ascii %v) = %d, want %d", c.s, c.ascii, got, c.want)
		}
		if got := PlainEnd([]byte(c.s), 0, c.ascii); got != c.want {
			t.Errorf("PlainEnd([]byte(%q), ascii %v) = %d, want %d", c.s, c.ascii, got, c.want)
		}
	}
}
