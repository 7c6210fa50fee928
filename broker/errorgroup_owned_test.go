package broker

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// A person's note and link are checked before anything is written: a
// link that passes is an absolute http or https URL with a host (it
// becomes a link in pages), a note that passes is UTF-8 without control
// characters but line breaks and tabs, and whatever fails is ErrInvalid.
func FuzzStateChangeCheck(f *testing.F) {
	for _, s := range [][2]string{
		{"PSP rejects test cards", "https://jira.example/PAY-1432"},
		{"<script>alert(1)</script>", "javascript:alert(1)"},
		{"line one\nline two\ttab", "http://x.example"},
		{"bell\a", "HTTPS://X.EXAMPLE/a?b=c#d"},
		{"\xff\xfe", "//evil.example/"},
		{"", "data:text/html,<b>x</b>"},
		{"", "https:opaque"},
		{"", " https://x.example"},
		{"", "http://"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, note, link string) {
		c := StateChange{Queue: "q", Fingerprint: "fp", State: GroupAcknowledged, Note: &note, Link: &link, Actor: "ana"}
		err := c.check()
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q %q: %v, want ErrInvalid", note, link, err)
			}
			return
		}
		if link != "" {
			u, perr := url.Parse(link)
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Fatalf("link %q passed", link)
			}
			if l := strings.ToLower(strings.TrimSpace(link)); !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
				t.Fatalf("link %q passed without an http or https prefix", link)
			}
		}
		if !utf8.ValidString(note) || len(note) > MaxGroupNote {
			t.Fatalf("note %q passed", note)
		}
		for _, r := range note {
			if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
				t.Fatalf("note %q with %U passed", note, r)
			}
		}
	})
}

// The evidence of a resolve counts since the state began, pending over
// the whole life; a resolve with copies pending or failed again since is
// refused unless forced.
func TestResolveNeedsItsEvidence(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	g := OwnedErrorGroup{State: GroupAcknowledged, ChangedAt: now.Add(-time.Hour),
		Life:  Funnel{Filed: 400, Replayed: 320, Succeeded: 312, FailedAgain: 8},
		Since: Funnel{Replayed: 8, FailedAgain: 8}}
	if r, s, f, p := g.Evidence(); r != 312 || s != 312 || f != 0 || p != 0 {
		t.Fatalf("evidence %d %d %d %d, want 312 replayed, 312 succeeded since it was acknowledged", r, s, f, p)
	}
	to, why, err := StateChange{State: GroupResolved, Actor: "ana"}.apply(g, now)
	if err != nil || to.State != GroupResolved || !strings.Contains(why, "evidence: 312 replayed, 312 succeeded, 0 failed again, 0 pending") {
		t.Fatalf("resolve: %+v %q %v", to, why, err)
	}
	g.Life.FailedAgain++
	if _, _, err := (StateChange{State: GroupResolved, Actor: "ana"}).apply(g, now); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "1 failed again") {
		t.Fatalf("a copy failed again since: %v, want ErrConflict", err)
	}
	if to, why, err := (StateChange{State: GroupResolved, Force: true, Actor: "ana"}).apply(g, now); err != nil || to.State != GroupResolved || !strings.Contains(why, "forced") {
		t.Fatalf("forced: %+v %q %v", to, why, err)
	}
}
