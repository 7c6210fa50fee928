package views_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

	"github.com/lazarus-dlq/lazarus/views"
)

func doc(t *testing.T, c templ.Component) (*goquery.Document, string) {
	t.Helper()
	var b bytes.Buffer
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	d, err := goquery.NewDocumentFromReader(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return d, b.String()
}

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>`

func list(canOperate bool, rows ...views.DeadLetterRow) views.DeadLetterList {
	return views.DeadLetterList{
		Page:  views.Page{Title: "Dead letters", Now: now, Session: views.Session{User: "u", Role: "viewer", CanOperate: canOperate}},
		Queue: "orders", ListURL: "/queues/orders/dead-letters", RefreshURL: "/queues/orders/dead-letters",
		Rows: rows, Matching: int64(len(rows)), MatchingKnown: true,
	}
}

func row(id, errText string) views.DeadLetterRow {
	return views.DeadLetterRow{ID: id, ShortID: views.ShortID(id), TxID: "tx-" + id, Partition: "p", Group: "billing", Error: errText, Retries: 3,
		FailedAt: now.Add(-5 * time.Minute), URL: "/queues/orders/dead-letters/" + id, ReplayURL: "/r", DeleteURL: "/d"}
}

func TestDeadLetterListControlsFollowTheRole(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		canOperate bool
		want       int
	}{{"ViewerSeesNoControls", false, 0}, {"OperatorSeesThem", true, 1}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := doc(t, views.DeadLettersView(list(tc.canOperate, row("a", "boom"), row("b", "bang"))))
			if n := d.Find(`[data-testid="dl-row"]`).Length(); n != 2 {
				t.Fatalf("%d rows", n)
			}
			for _, sel := range []string{`[data-testid="bulkbar"]`, `[data-testid="row-replay"]`, `[data-testid="row-delete"]`, `input[data-row]`} {
				got := d.Find(sel).Length()
				if (got > 0) != (tc.want > 0) {
					t.Errorf("%s: %d elements", sel, got)
				}
			}
		})
	}
}

func TestUntrustedTextIsEscaped(t *testing.T) {
	t.Parallel()
	r := row("a", hostile)
	r.TxID = hostile
	_, html := doc(t, views.DeadLettersView(list(true, r)))
	detail := views.DeadLetterDetail{Page: views.Page{Now: now}, ID: "a", Queue: "q", Error: hostile, TxID: hostile, TraceID: hostile,
		Payload: views.MakePayload([]byte(`{"x":"`+strings.ReplaceAll(hostile, `"`, `\"`)+`"}`), 0)}
	_, html2 := doc(t, views.DeadLetterView(detail))
	for name, h := range map[string]string{"list": html, "detail": html2} {
		if strings.Contains(h, "<script>alert") || strings.Contains(h, "<img src=x") {
			t.Errorf("%s: hostile markup rendered as HTML", name)
		}
		if !strings.Contains(h, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: hostile text not shown escaped", name)
		}
	}
}

func TestEmptyStatesSayWhatTheyMean(t *testing.T) {
	t.Parallel()
	d, _ := doc(t, views.DeadLettersView(list(true)))
	if got := d.Find(`[data-testid="empty"] h2`).Text(); got != "No dead letters: nothing failed here" {
		t.Fatalf("empty list says %q", got)
	}
	filtered := list(true)
	filtered.Chips = []views.Chip{{Label: "error contains: x", RemoveURL: "/"}}
	d, _ = doc(t, views.DeadLettersView(filtered))
	if got := d.Find(`[data-testid="empty"] h2`).Text(); got != "No dead letters match these filters" {
		t.Fatalf("empty filtered list says %q", got)
	}
	d, _ = doc(t, views.OverviewView(views.Overview{Page: views.Page{Now: now}}))
	if d.Find(`[data-testid="no-queues"]`).Length() != 1 {
		t.Fatal("overview without queues has no empty state")
	}
}

func TestFragmentHasNoLayout(t *testing.T) {
	t.Parallel()
	_, whole := doc(t, views.DeadLettersView(list(true, row("a", "x"))))
	_, frag := doc(t, views.DeadLettersContent(list(true, row("a", "x"))))
	if !strings.Contains(whole, "<html") || strings.Contains(frag, "<html") || strings.Contains(frag, "<header") {
		t.Fatal("whole page and fragment are mixed up")
	}
}

func TestBulkConfirmSaysHowManyAndAsksToTypeAboveAThousand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		count int64
		typed bool
	}{{3, false}, {1000, false}, {1001, true}}
	for _, tc := range cases {
		v := views.BulkConfirm{Action: "delete", Count: tc.count, Queue: "orders", PostURL: "/x", TypeQueue: tc.count > 1000, Where: "all that match group=\"billing\""}
		d, _ := doc(t, views.BulkConfirmDialog(v))
		summary := d.Find(`[data-testid="confirm-summary"]`).Text()
		if !strings.Contains(summary, views.Count(tc.count)+" dead letter") || !strings.Contains(summary, "orders") {
			t.Errorf("%d: summary %q", tc.count, summary)
		}
		_, disabled := d.Find(`[data-testid="confirm-go"]`).Attr("disabled")
		if typed := d.Find(`[data-testid="confirm-queue"]`).Length() == 1; typed != tc.typed || disabled != tc.typed {
			t.Errorf("%d: typed confirmation %v, button disabled %v", tc.count, typed, disabled)
		}
	}
}

func TestMakePayload(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                   string
		raw                    string
		limit                  int
		pretty                 string
		isJSON, truncated, bin bool
	}{
		{"JSONIsIndentedExactly", `{"b":1,"a":12345678901234567890}`, 0, "{\n  \"b\": 1,\n  \"a\": 12345678901234567890\n}", true, false, false},
		{"NotJSON", `plain text`, 0, `plain text`, false, false, false},
		{"Null", `null`, 0, `null`, true, false, false},
		{"Truncated", `["` + strings.Repeat("x", 100) + `"]`, 10, "[\n  \"xxxxx", true, true, false},
		{"InvalidUTF8", "\xff\xfe", 0, `"\xff\xfe"`, false, false, true},
		{"CutOnARuneBoundary", `"ééééé"`, 4, `"é`, true, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := views.MakePayload([]byte(tc.raw), tc.limit)
			if p.Pretty != tc.pretty || p.IsJSON != tc.isJSON || p.Truncated != tc.truncated || p.Binary != tc.bin || p.Size != len(tc.raw) {
				t.Fatalf("%+v", p)
			}
		})
	}
}

// Bidi controls in untrusted text are shown as escapes, never applied:
// "invoice-<RLO>fdp.exe" would read "invoice-exe.pdf". Copy buttons copy
// the text as it is.
func TestRevealShowsBidiControls(t *testing.T) {
	t.Parallel()
	if got := views.Reveal("invoice-\u202efdp.exe"); got != `invoice-\u202efdp.exe` {
		t.Errorf("Reveal: %q", got)
	}
	all := "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
	if got := views.Reveal(all); got != `\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069` {
		t.Errorf("Reveal: %q", got)
	}
	if plain := "שלום — plain text, \u200f kept"; views.Reveal(plain) != plain {
		t.Errorf("Reveal changed %q", plain)
	}
	rtl := "invoice-\u202efdp.exe"
	r := row("a", rtl)
	r.TxID = rtl
	d, _ := doc(t, views.DeadLettersView(list(true, r)))
	detail := views.DeadLetterDetail{Page: views.Page{Now: now}, ID: "a", Queue: "q", Error: rtl, TxID: rtl, TraceID: rtl,
		Payload: views.MakePayload([]byte(`{"file":"`+rtl+`"}`), 0)}
	d2, _ := doc(t, views.DeadLetterView(detail))
	for name, d := range map[string]*goquery.Document{"list": d, "detail": d2} {
		if text := d.Find("body").Text(); strings.ContainsRune(text, '\u202e') || !strings.Contains(text, `invoice-\u202efdp.exe`) {
			t.Errorf("%s: the override is applied, or not shown", name)
		}
	}
	if got, _ := d2.Find(`[data-testid="fact-tx"] [data-copy]`).Attr("data-copy"); got != rtl {
		t.Errorf("copy button copies %q", got)
	}
}

// A small payload nested deep would indent to hundreds of megabytes: the
// preview stops at its limit, the full view shows it as sent.
func TestMakePayloadBoundsDeepNesting(t *testing.T) {
	t.Parallel()
	raw := []byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))
	start := time.Now()
	p := views.MakePayload(raw, views.PayloadPreview)
	if !p.IsJSON || !p.Truncated || len(p.Pretty) > views.PayloadPreview || p.Raw != string(raw) || p.Limit != views.PayloadPreview {
		t.Fatalf("preview: json %v truncated %v pretty %d bytes limit %d", p.IsJSON, p.Truncated, len(p.Pretty), p.Limit)
	}
	full := views.MakePayload(raw, 0)
	if full.Truncated || full.Pretty != string(raw) {
		t.Fatalf("full view: truncated %v, pretty %d bytes", full.Truncated, len(full.Pretty))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestFormatting(t *testing.T) {
	t.Parallel()
	if got := views.Count(1234567); got != "1,234,567" {
		t.Errorf("Count: %s", got)
	}
	if got := views.Ago(now.Add(-90*time.Minute), now); got != "1 h 30 min ago" {
		t.Errorf("Ago: %s", got)
	}
	if got := views.FirstLine("first\nsecond", 100); got != "first …" {
		t.Errorf("FirstLine: %q", got)
	}
	if got := views.Plural(1, "dead letter", "dead letters"); got != "1 dead letter" {
		t.Errorf("Plural: %s", got)
	}
}

// A payload that is one base64 string says its decoded size and gives
// its bytes in hex, as does one that is not text; words, JSON and short
// strings are not taken for base64.
func TestMakePayloadDecodesBase64(t *testing.T) {
	for raw, want := range map[string]int{
		`"iVBORw0KGgoAAAANSUhEUg=="`: 16,
		` "aGVsbG8sIHdvcmxkIQ" `:     13,
		`"ordercancelledbyuser"`:     -1,
		`"Order 12 cancelled"`:       -1,
		`"aGk="`:                     -1,
		`{"a":"aGVsbG8sIHdvcmxkIQ"}`: -1,
		"\xff\xfe\x00binary":         9,
	} {
		p := views.MakePayload([]byte(raw), 0)
		got := -1
		if p.Decoded != nil {
			got = p.Decoded.Size
		}
		if got != want {
			t.Errorf("%q: decoded size %d, want %d", raw, got, want)
		}
	}
	p := views.MakePayload([]byte(`"iVBORw0KGgoAAAANSUhEUg=="`), 0)
	if !p.Decoded.Base64 || !strings.HasPrefix(p.Decoded.Hex, "00000000  89 50 4e 47 0d 0a 1a 0a  00 00 00 0d 49 48 44 52  |.PNG........IHDR|") {
		t.Fatalf("hex %q", p.Decoded.Hex)
	}
}
