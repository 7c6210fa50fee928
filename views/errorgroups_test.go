package views_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/views"
)

// Only an absolute http or https URL may become a group's href: a link
// is written by people.
func TestSafeLinkKeepsOnlyHTTP(t *testing.T) {
	t.Parallel()
	for link, want := range map[string]string{
		"https://tickets.example/PAY-1432":         "https://tickets.example/PAY-1432",
		"HTTP://tickets.example/x":                 "HTTP://tickets.example/x",
		"  https://t.example/a  ":                  "https://t.example/a",
		"javascript:alert(1)":                      "",
		"JavaScript://tickets.example/%0aalert(1)": "",
		"data:text/html,<script>alert(1)</script>": "",
		"//tickets.example/x":                      "",
		"/error-groups":                            "",
		"https:/nohost":                            "",
		"https://t.example/a b":                    "",
		"vbscript:msgbox":                          "",
		"":                                         "",
	} {
		if got := views.SafeLink(link); got != want {
			t.Errorf("SafeLink(%q) = %q, want %q", link, got, want)
		}
	}
}

// A group's page and a dead letter's banner show what people wrote as
// text: markup stays text, and a link that is not http(s) is never an
// href (shown as text on the group's page, left out of the banner).
func TestErrorGroupTextIsEscaped(t *testing.T) {
	t.Parallel()
	bad := "javascript:alert(document.cookie)"
	v := views.ErrorGroupDetail{Page: views.Page{Title: "g", Now: now, Session: views.Session{User: "ana", Role: "operator", CanOperate: true}},
		GroupState: views.GroupState{State: "acknowledged"}, ID: 7, Queue: "orders", Group: "billing", Fingerprint: hostile, Sample: hostile,
		Owner: hostile, Note: hostile + "\nline two", Link: views.SafeLink(bad), LinkRaw: bad, PostURL: "/error-groups/7/state", CSRFToken: "tok"}
	d, html := doc(t, views.ErrorGroupView(v))
	if d.Find("#page script, #page img").Length() != 0 || strings.Contains(html, "<script>alert(1)") {
		t.Fatal("markup from the note, sample or owner rendered")
	}
	if got := d.Find(`[data-testid="group-note"]`).Text(); got != hostile+"\nline two" {
		t.Fatalf("note %q", got)
	}
	d.Find("[href]").Each(func(_ int, a *goquery.Selection) {
		if h := a.AttrOr("href", ""); strings.HasPrefix(strings.ToLower(strings.TrimSpace(h)), "javascript") {
			t.Fatalf("an href %q", h)
		}
	})
	if got := d.Find(`[data-testid="group-link-text"]`).Text(); got != bad {
		t.Fatalf("the link as text %q", got)
	}
	if d.Find(`[data-testid="group-link"]`).Length() != 0 {
		t.Fatal("a javascript: link became a link")
	}

	k := views.KnownIssue{GroupState: views.GroupState{State: "ignored"}, URL: "/error-groups/7", NoteLine: hostile, Link: views.SafeLink(bad), Owner: hostile}
	d, html = doc(t, views.KnownIssueBanner(k))
	if d.Find("script, img").Length() != 0 || strings.Contains(html, "javascript:") || d.Find(`[data-testid="group-link"]`).Length() != 0 {
		t.Fatalf("banner: %s", html)
	}
	if got := d.Find(`[data-testid="known-note"]`).Text(); got != hostile {
		t.Fatalf("banner note %q", got)
	}
}

// Whatever people write as a note or link, the banner support reads
// shows the note as its text, and makes a link only of an http or https
// URL.
func FuzzKnownIssueBannerIsEscaped(f *testing.F) {
	for _, s := range [][2]string{
		{hostile, "javascript:alert(1)"},
		{"PAY-1432 <b>bold</b> & \"quotes\"", "https://tickets.example/PAY-1432?a=1&b=<2>"},
		{"</div><script>x</script>", "  JaVaScRiPt:alert(1)"},
		{"{{ .x }} ${x} `x`", "data:text/html,<script>alert(1)</script>"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, note, link string) {
		if !utf8.ValidString(note) || strings.ContainsAny(note, "\x00\r\n") {
			return // the broker refuses a note that is not UTF-8; the banner shows a note's first line
		}
		k := views.KnownIssue{GroupState: views.GroupState{State: "acknowledged"}, URL: "/error-groups/7", NoteLine: note, Link: views.SafeLink(link), Owner: "ana"}
		d, _ := doc(t, views.KnownIssueBanner(k))
		if d.Find("script, img, iframe, object, svg").Length() != 0 {
			t.Fatalf("markup from %q or %q rendered", note, link)
		}
		if got := d.Find(`[data-testid="known-note"]`).Text(); got != note {
			t.Fatalf("the note shows as %q, want %q", got, note)
		}
		d.Find("[href]").Each(func(_ int, a *goquery.Selection) {
			h := strings.ToLower(a.AttrOr("href", ""))
			if h != "/error-groups/7" && !strings.HasPrefix(h, "http://") && !strings.HasPrefix(h, "https://") {
				t.Fatalf("an href %q from the link %q", h, link)
			}
		})
	})
}
