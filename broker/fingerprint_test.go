package broker_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The fingerprint rules, one error text each.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"upstream timeout after 30s: POST https://api.stripe.example/v1/charges/ch_3Nk2LkXyZ8qB1aC2d0eF", "upstream timeout after <n>s: POST https://api.stripe.example/v1/charges/<id>"},
		{"upstream timeout after 45s: POST https://api.stripe.example/v1/charges/ch_9Zz1AbCdEf2GhIjK3LmN", "upstream timeout after <n>s: POST https://api.stripe.example/v1/charges/<id>"},
		{"GET https://shop.example/api/v2/orders/12345/items?page=3 failed", "GET https://shop.example/api/v2/orders/<id>/items?page=<n> failed"},
		{"GET https://shop.example/users/aXbYcZdWeVfUgThS/avatar: 404", "GET https://shop.example/users/<id>/avatar: <n>"},
		{"dial https://db.internal:5432/: refused.", "dial https://db.internal:5432/: refused."},
		{"see https://docs.example/errors/e1234.", "see https://docs.example/errors/<id>."},
		{"retry 3 of 5 in 1.5s", "retry <n> of <n> in <n>s"},
		{"balance -3 below 30000", "balance <n> below <n>"},
		{"price 12.50, discount 0.25", "price <n>, discount <n>"},
		{"order 7d444840-9dc0-11d1-b245-5ffdce74fad2 not found", "order <uuid> not found"},
		{"ORDER 7D444840-9DC0-11D1-B245-5FFDCE74FAD2 NOT FOUND", "ORDER <uuid> NOT FOUND"},
		{"segfault at 0x7ffd5c3a and 0XDEADBEEF", "segfault at <hex> and <hex>"},
		{"commit 3f9a1c2e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 is missing", "commit <hex> is missing"},
		{"deadbeef is a word, cafe1234 is not", "deadbeef is a word, <hex> is not"},
		{"expired at 2024-03-01T12:34:56Z", "expired at <ts>"},
		{"expired at 2024-03-01T12:34:56.789+02:00 (now 2024-03-01 12:35:00)", "expired at <ts> (now <ts>)"},
		{"due 2026-12-01, late", "due <ts>, late"},
		{`field "email" must not be "bob@x"`, `field "<q>" must not be "<q>"`},
		{"unknown currency 'XYZ' in 'EUR,USD'", "unknown currency '<q>' in '<q>'"},
		{"can't parse `{\"a\": 1}` as json", "can't parse `<q>` as json"},
		{"it's the user's fault", "it's the user's fault"},
		{`empty "" stays`, `empty "" stays`},
		{`unclosed "quote here`, `unclosed "quote here`},
		{"no mailbox for alice.smith+tag@mail.example.com.", "no mailbox for <email>."},
		{"user42 and user12345 on utf8/sha256/http2, x86", "user42 and user<n> on utf8/sha256/http2, x86"},
		{"order ord_123 failed", "order ord_<n> failed"},
		{"charge ch_3Nk2LkXyZ8qB1aC2d0eF declined", "charge <id> declined"},
		{"panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\nmain.main()", "panic: runtime error: index out of range [<n>] with length <n>"},
		{"  \t spaced \t  out  \r\nsecond line", "spaced out"},
		{"", broker.NoErrorText},
		{"   \n stack", broker.NoErrorText},
		{"(no error text)", "(no error text)"},
		{"v1.2.3 released", "v1.<n> released"},
		{"dial tcp 10.0.3.7:5432: connect: connection refused", "dial tcp <n>.<n>:<n>: connect: connection refused"},
		{"HTTP 503 Service Unavailable", "HTTP <n> Service Unavailable"},
		{"Zahlung für Kunde 42 abgelehnt", "Zahlung für Kunde <n> abgelehnt"},
	} {
		if got := broker.Fingerprint(c.in); got != c.want {
			t.Errorf("Fingerprint(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if got := broker.Fingerprint(c.want); got != c.want {
			t.Errorf("Fingerprint(%q) = %q: not a fixed point", c.want, got)
		}
	}
}

// A long first line is cut to MaxFingerprint runes, whole runes.
func TestFingerprintIsCapped(t *testing.T) {
	t.Parallel()
	fp := broker.Fingerprint(strings.Repeat("é word ", 1000))
	if n := utf8.RuneCountInString(fp); n > broker.MaxFingerprint || n < broker.MaxFingerprint-1 || !utf8.ValidString(fp) {
		t.Fatalf("fingerprint of a long line: %d runes (valid %v), want %d", n, utf8.ValidString(fp), broker.MaxFingerprint)
	}
	if got := broker.Fingerprint(strings.Repeat("'", 100000)); utf8.RuneCountInString(got) > broker.MaxFingerprint {
		t.Fatalf("quotes: %d runes", utf8.RuneCountInString(got))
	}
}

// FuzzFingerprint: never panics, is a fixed point, valid UTF-8, one
// line, and at most MaxFingerprint runes.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{
		"upstream timeout after 30s: POST https://api.stripe.example/v1/charges/ch_3Nk2LkXyZ8qB1aC2d0eF",
		"'x 'deadbeef1", `"a" "b"`, "ab1cdeff12345z", "-1.5e3", "a@b.c", "http://h/a1/0x1", "2024-01-01T00:00:00Z",
		"7d444840-9dc0-11d1-b245-5ffdce74fad2", "\xff\xfe", "12345http://h/a1", "x'y' 'z'", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fp := broker.Fingerprint(s)
		if again := broker.Fingerprint(fp); again != fp {
			t.Fatalf("Fingerprint(%q) = %q, but Fingerprint of that = %q", s, fp, again)
		}
		if fp == "" || !utf8.ValidString(fp) || strings.ContainsAny(fp, "\n") || utf8.RuneCountInString(fp) > broker.MaxFingerprint {
			t.Fatalf("Fingerprint(%q) = %q: empty, invalid, several lines or too long", s, fp)
		}
	})
}

func BenchmarkFingerprint(b *testing.B) {
	errText := "upstream timeout after 30s: POST https://api.stripe.example/v1/charges/ch_3Nk2LkXyZ8qB1aC2d0eF (request 7d444840-9dc0-11d1-b245-5ffdce74fad2 at 2024-03-01T12:34:56Z, customer \"cus_123\")\n\tat charge.go:42\n\tat main.go:7"
	b.SetBytes(int64(len(errText)))
	b.ReportAllocs()
	for b.Loop() {
		broker.Fingerprint(errText)
	}
}
