package broker

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestParseFieldFilter(t *testing.T) {
	for _, c := range []struct {
		in       string
		path, op string
		value    any
		words    string
	}{
		{`orderId = ord_123`, `$."orderId"`, "=", "ord_123", `"ord_123"`},
		{`  orderId=ord_123  `, `$."orderId"`, "=", "ord_123", `"ord_123"`},
		{`orderId = "ord 123"`, `$."orderId"`, "=", "ord 123", `"ord 123"`},
		{`amount > 100`, `$."amount"`, ">", int64(100), ""},
		{`amount>=1.5`, `$."amount"`, ">=", 1.5, ""},
		{`amount <= -2`, `$."amount"`, "<=", int64(-2), ""},
		{`amount < 1e3`, `$."amount"`, "<", 1000.0, ""},
		{`amount = 250`, `$."amount"`, "=", int64(250), `"250"`},
		{`amount = 2.5`, `$."amount"`, "=", 2.5, ""},
		{`card.brand = amex`, `$."card"."brand"`, "=", "amex", `"amex"`},
		{`card.brand != amex`, `$."card"."brand"`, "!=", "amex", ""},
		{`tags contains x`, `$."tags"`, "contains", "x", `"x"`},
		{`tags CONTAINS "a b"`, `$."tags"`, "contains", "a b", `"a b"`},
		{`items[0].sku = A-1`, `$."items"[0]."sku"`, "=", "A-1", `"A-1"`},
		{`[2] = 3`, `$[2]`, "=", int64(3), `"3"`},
		{`a[1][2] = true`, `$."a"[1][2]`, "=", true, ""},
		{`flag = false`, `$."flag"`, "=", false, ""},
		{`coupon = null`, `$."coupon"`, "=", nil, ""},
		{`coupon != null`, `$."coupon"`, "!=", nil, ""},
		{`name = "quo\"te"`, `$."name"`, "=", `quo"te`, `"quo te"`},
		{`name = 12abc`, `$."name"`, "=", "12abc", `"12abc"`},
		{`naïve = ü`, `$."naïve"`, "=", "ü", `"ü"`},
		{`x-y:z@$ = 1`, `$."x-y:z@$"`, "=", int64(1), `"1"`},
		{`note = a < b`, `$."note"`, "=", "a < b", `"a b"`},
		{`note = "> 1"`, `$."note"`, "=", "> 1", `"1"`},
	} {
		f, err := ParseFieldFilter(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if f.Path != c.path || f.Op != c.op || f.Value != c.value || f.Words != c.words {
			t.Errorf("%q = %q %q %#v words %q; want %q %q %#v %q", c.in, f.Path, f.Op, f.Value, f.Words, c.path, c.op, c.value, c.words)
		}
	}
	for _, in := range []string{``, `orderId`, `orderId =`, `= 1`, `orderId ~ 1`, `orderId like x`, `a..b = 1`, `a. = 1`, `.a = 1`,
		`a[ = 1`, `a[x] = 1`, `a[-1] = 1`, `a[01] = 1`, `a"b = 1`, `a'b = 1`, `a/b = 1`, `a\b = 1`, `active > true`, `x < null`,
		`x = "unterminated`, `amount >> 1`, `a == 1`, `a =< 1`, strings.Repeat("a.", 40) + "a = 1", strings.Repeat("x", MaxFieldFilter) + " = 1", "a = \xff"} {
		_, err := ParseFieldFilter(in)
		if !errors.Is(err, ErrInvalid) || (in != "" && !strings.Contains(err.Error(), "field filter")) {
			t.Errorf("%q: err = %v, want invalid naming the filter", in, err)
		}
	}
}

func TestTextMatch(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`ord_123`, `"ord_123"`},
		{`insufficient funds`, `"insufficient" "funds"`},
		{`"insufficient funds" card`, `"insufficient funds" "card"`},
		{`a OR b`, `"a" "OR" "b"`},
		{`a NEAR/3 b`, `"a" "NEAR" "3" "b"`},
		{`pre* -not col:val ^first (x)`, `"pre" "-not" "col" "val" "first" "x"`},
		{`"unclosed phrase`, `"unclosed phrase"`},
		{`""`, ``},
		{`***`, ``},
		{`- -- a-b`, `"a-b"`},
		{`café Ünïcode`, `"café" "Ünïcode"`},
	} {
		if got := TextMatch(c.in, true); got != c.want {
			t.Errorf("TextMatch(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

var (
	safePath  = regexp.MustCompile(`^\$(\."[\p{L}\p{N}_$@:-]+"|\[[0-9]+\])*$`)
	safeMatch = regexp.MustCompile(`^("[\p{L}\p{N}\p{Mn}_-]+( [\p{L}\p{N}\p{Mn}_-]+)*"( |$))*$`)
)

// Whatever is typed, a filter parses into a path of quoted names and
// indexes only, a known operator, a JSON value, and words that are
// quoted phrases of word characters only: nothing reaches SQL or the
// index's query language as syntax.
func FuzzParseFieldFilter(f *testing.F) {
	for _, s := range []string{`orderId = ord_123`, `amount > 100`, `card.brand = amex`, `tags contains x`, `a[0].b != null`,
		`x = "a\"b"`, `a = 1e309`, `a.b.c[3] <= -0.5`, `"x" = 1`, `a = OR NEAR *`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ff, err := ParseFieldFilter(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: %v is not ErrInvalid", s, err)
			}
			return
		}
		if !safePath.MatchString(ff.Path) {
			t.Fatalf("%q: path %q", s, ff.Path)
		}
		switch ff.Op {
		case "=", "!=", ">", ">=", "<", "<=", "contains":
		default:
			t.Fatalf("%q: op %q", s, ff.Op)
		}
		switch ff.Value.(type) {
		case string, int64, float64, bool, nil:
		default:
			t.Fatalf("%q: value %#v", s, ff.Value)
		}
		if !safeMatch.MatchString(ff.Words) {
			t.Fatalf("%q: words %q", s, ff.Words)
		}
	})
}

// Free text always becomes quoted phrases of word characters.
func FuzzTextMatch(f *testing.F) {
	for _, s := range []string{`ord_123`, `"a b" c`, `a OR b NEAR c*`, `"`, `col:x ^y -z`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, phrases := range []bool{true, false} {
			if m := TextMatch(s, phrases); !safeMatch.MatchString(m) {
				t.Fatalf("TextMatch(%q, %v) = %q", s, phrases, m)
			}
		}
	})
}

// ErrorWords takes the words an error text holding the text must hold:
// whole words it bounds, else the prefix it ends in; nothing else.
func TestErrorWords(t *testing.T) {
	for text, want := range map[string]string{
		"order 123456 already":   `"123456"`,
		"connection refused":     `"refused*"`,
		"connection re":          ``,
		": Timeout, after 30s":   `"timeout" "after"`,
		"timeout":                ``,
		"café timeout, ":         `"timeout"`,
		" naïve ":                ``,
		"(code 51) (code 51)":    `"code" "51"`,
		"ReadTimeoutError: x, y": `"x"`,
	} {
		if got := ErrorWords(text); got != want {
			t.Errorf("ErrorWords(%q) = %s, want %s", text, got, want)
		}
	}
}
