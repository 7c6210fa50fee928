package views_test

import (
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/views"
)

func manualHold(release bool) views.HoldNote {
	h := views.HoldNote{ID: 7, Queue: "orders", Group: "billing", Reason: "gateway down " + hostile, By: "user:ana",
		Since: now.Add(-3 * time.Minute), Waiting: 12}
	if release {
		h.ReleaseURL = "/holds/7/release"
	}
	return h
}

func holdForm(operate bool, back string) views.HoldForm {
	if !operate {
		return views.HoldForm{}
	}
	return views.HoldForm{PostURL: "/queues/orders/holds", Queue: "orders", Back: back, Groups: []string{"billing", "shipping"}, CSRFToken: "tok"}
}

func testText(d *goquery.Document, id string) string {
	return strings.Join(strings.Fields(d.Find(`[data-testid="`+id+`"]`).Text()), " ")
}

// The banner says what is held, by whom, why, since when and what waits;
// the reason is text, never markup; an operator's Release asks once,
// saying what it lets go; a viewer sees the banner without it.
func TestHoldBannerSaysWhoWhySinceAndWhatWaits(t *testing.T) {
	t.Parallel()
	for _, operate := range []bool{false, true} {
		l := list(operate, row("a", "boom"))
		l.Holds = []views.HoldNote{manualHold(operate)}
		l.HoldForm = holdForm(operate, "/queues/orders/dead-letters?group=billing")
		d, html := doc(t, views.DeadLettersView(l))
		if strings.Contains(html, "<script>alert") || strings.Contains(html, "<img src=x") {
			t.Fatal("the hold's reason rendered as markup")
		}
		banner := d.Find(`[data-testid="hold-banner"]`)
		if banner.Length() != 1 {
			t.Fatalf("operate %v: %d banners", operate, banner.Length())
		}
		for id, want := range map[string]string{"hold-by": "user:ana", "hold-reason": "gateway down <script>", "hold-since": "3 min ago", "hold-waiting": "12 messages waiting"} {
			if got := testText(d, id); !strings.Contains(got, want) {
				t.Errorf("operate %v: %s = %q, want %q in it", operate, id, got, want)
			}
		}
		if !strings.Contains(banner.Text(), "group billing of queue orders are held") {
			t.Errorf("the banner does not say what is held: %q", banner.Text())
		}
		release := d.Find(`[data-testid="release-button"]`)
		holdButtons := d.Find(`[data-testid="hold-button"]`).Length()
		dialog := d.Find(`[data-testid="hold-dialog"]`).Length()
		if !operate {
			if release.Length()+holdButtons+dialog != 0 {
				t.Errorf("a viewer sees %d Release, %d Hold buttons and %d dialogs", release.Length(), holdButtons, dialog)
			}
			continue
		}
		form := release.Closest("form")
		if q, _ := form.Attr("data-confirm"); q != "Release the hold of group billing of queue orders? The 12 messages waiting will be delivered." {
			t.Errorf("Release asks %q", q)
		}
		if a, _ := form.Attr("hx-post"); a != "/holds/7/release" {
			t.Errorf("Release posts to %q", a)
		}
		if next, _ := form.Find(`input[name="next"]`).Attr("value"); next != "/queues/orders/dead-letters?group=billing" {
			t.Errorf("Release leads back to %q", next)
		}
		if dialog != 1 {
			t.Errorf("%d hold dialogs", dialog)
		}
	}
}

// A hold the circuit breaker made says so, and when it probes next.
func TestBreakerHoldSaysCircuitBreaker(t *testing.T) {
	t.Parallel()
	h := views.HoldNote{ID: 8, Queue: "orders", Group: "billing", Breaker: true, Reason: "circuit breaker: 20 failures in a row, last error: timeout",
		By: "lazarus", Since: now.Add(-time.Minute), Waiting: 3, ProbeAt: now.Add(12 * time.Second), Probes: 2, ReleaseURL: "/holds/8/release"}
	v := views.QueueDetail{Page: views.Page{Now: now, Session: views.Session{User: "u", CanOperate: true}}, Name: "orders", URL: "/queues/orders",
		Groups: []views.GroupRow{{Name: "billing", Hold: &h}, {Name: "shipping"}}, Holds: []views.HoldNote{h}, HoldForm: holdForm(true, "/queues/orders")}
	d, _ := doc(t, views.QueueView(v))
	banner := strings.Join(strings.Fields(d.Find(`[data-testid="hold-banner"]`).Text()), " ")
	for _, want := range []string{"The circuit breaker held group billing of queue orders", "circuit breaker: 20 failures in a row", "3 messages waiting", "Next probe in 12 s (2 probes so far)."} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner %q lacks %q", banner, want)
		}
	}
	if got := testText(d, "hold-by"); got != "" {
		t.Errorf("a breaker's hold names a person: %q", got)
	}
	badge := d.Find(`[data-testid="group-billing"] [data-testid="hold-badge"]`)
	if !strings.Contains(badge.Text(), "circuit breaker") {
		t.Errorf("billing's badge: %q", badge.Text())
	}
	if d.Find(`[data-testid="group-shipping"] [data-testid="hold-badge"]`).Length() != 0 {
		t.Error("shipping, not held, has a badge")
	}
	// billing is held: its row offers no second Hold; shipping's does,
	// and so does the whole queue.
	if d.Find(`[data-testid="group-billing"] [data-testid="hold-button"]`).Length() != 0 {
		t.Error("billing, held, offers Hold")
	}
	sh := d.Find(`[data-testid="group-shipping"] [data-testid="hold-button"]`)
	if g, ok := sh.Attr("data-hold-group"); !ok || g != "shipping" {
		t.Errorf("shipping's Hold holds %q (%v)", g, ok)
	}
	if n := d.Find(`h2 [data-testid="hold-button"]`).Length(); n != 1 {
		t.Errorf("%d Hold buttons for the whole queue", n)
	}
}

// The overview marks a held queue on its name and a held group on its
// badge, the title saying who, why and since when.
func TestOverviewBadgesHeldQueuesAndGroups(t *testing.T) {
	t.Parallel()
	gh := manualHold(false)
	qh := views.HoldNote{ID: 9, Queue: "mail", Reason: "smtp relay down", By: "user:bo", Since: now.Add(-time.Hour), Waiting: 4}
	v := views.Overview{Page: views.Page{Now: now, Session: views.Session{User: "u"}}, Queues: []views.QueueRow{
		{Name: "orders", Groups: []views.GroupDepth{{Group: "billing", Depth: 3, Hold: &gh}, {Group: "shipping", Depth: 1}}},
		{Name: "mail", Hold: &qh},
		{Name: "free"},
	}}
	d, html := doc(t, views.OverviewView(v))
	if strings.Contains(html, "<script>alert") {
		t.Fatal("a hold's reason rendered as markup in a badge's title")
	}
	if n := d.Find(`[data-testid="queue-orders"] [data-testid="hold-badge"]`).Length(); n != 1 {
		t.Errorf("orders: %d badges, want billing's", n)
	}
	title, _ := d.Find(`[data-testid="queue-mail"] [data-testid="hold-badge"]`).Attr("title")
	if !strings.Contains(title, "held by user:bo 1 h ago: smtp relay down (4 waiting)") {
		t.Errorf("mail's badge title %q", title)
	}
	if n := d.Find(`[data-testid="queue-free"] [data-testid="hold-badge"]`).Length(); n != 0 {
		t.Errorf("free: %d badges", n)
	}
	if n := d.Find(`[data-testid="hold-button"], [data-testid="release-button"]`).Length(); n != 0 {
		t.Errorf("the overview has %d hold controls: badges only", n)
	}
}

// Each error group's Hold holds the list's consumer group with the error
// as its suggested reason; summed over several groups, the dialog asks
// which. The dialog's reason is required.
func TestErrorGroupRowsOfferHold(t *testing.T) {
	t.Parallel()
	l := list(true, row("a", "boom"))
	l.HoldForm = holdForm(true, "/queues/orders/dead-letters")
	l.ErrorGroups = []views.ErrorGroupRow{
		{Fingerprint: "gateway timeout", Count: 40, Hold: views.HoldTarget{Queue: "orders", Group: "billing", Reason: "error group: gateway timeout"}},
		{Fingerprint: "card declined", Count: 2, Hold: views.HoldTarget{Queue: "orders", Reason: "error group: card declined", AnyGroup: true}},
	}
	d, _ := doc(t, views.DeadLettersView(l))
	buttons := d.Find(`[data-testid="error-group"] [data-testid="hold-button"]`)
	if buttons.Length() != 2 {
		t.Fatalf("%d Hold buttons on 2 error groups", buttons.Length())
	}
	if g, ok := buttons.Eq(0).Attr("data-hold-group"); !ok || g != "billing" {
		t.Errorf("the first holds %q (%v)", g, ok)
	}
	if r, _ := buttons.Eq(0).Attr("data-hold-reason"); r != "error group: gateway timeout" {
		t.Errorf("the first suggests %q", r)
	}
	if _, ok := buttons.Eq(1).Attr("data-hold-group"); ok {
		t.Error("the second, of several groups, names one")
	}
	dialog := d.Find(`[data-testid="hold-dialog"]`)
	if a, _ := dialog.Find("form").Attr("action"); a != "/queues/orders/holds" {
		t.Errorf("the dialog posts to %q", a)
	}
	in := dialog.Find(`[data-testid="hold-reason-input"]`)
	if _, ok := in.Attr("required"); !ok {
		t.Error("the reason is not required")
	}
	var opts []string
	dialog.Find(`[data-testid="hold-group"] option`).Each(func(_ int, o *goquery.Selection) {
		v, _ := o.Attr("value")
		opts = append(opts, v)
	})
	if strings.Join(opts, ",") != "billing,shipping," {
		t.Errorf("the dialog's choices: %q", opts)
	}
	if d.Find(`#dl [data-testid="hold-dialog"]`).Length() != 0 {
		t.Error("the dialog is inside the part that refreshes itself")
	}
}
