package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An operator holds a group from a page: the form's reason, group and
// the page to come back to; that page then shows the banner, the
// overview and the queue page a badge, the dead letter's page the banner
// too; the group's pops get nothing. Release, through htmx, leads back
// with a full load and lets the messages go. The reason is text.
func TestOperatorHoldsAndReleasesFromThePages(t *testing.T) {
	t.Parallel()
	s := setup(t)
	dl := s.fail("orders", "", "billing", "tx-1", `{"n":1}`, "gateway timeout")
	s.push("orders", "eu-1", "tx-2", `{"n":2}`)
	s.push("orders", "eu-1", "tx-3", `{"n":3}`)
	b, u := s.loggedIn(broker.RoleOperator)
	back := "/queues/orders/dead-letters?group=billing"
	reason := `gateway down <script>alert(1)</script>`

	// No reason: refused, nothing held.
	b.post("/queues/orders/holds", url.Values{"group": {"billing"}, "reason": {"  "}, "next": {back}}).want(http.StatusBadRequest)
	// No CSRF token: refused.
	b.postRaw("/queues/orders/holds", url.Values{"group": {"billing"}, "reason": {reason}, "next": {back}}, nil).want(http.StatusForbidden)
	if hs, err := s.broker.Holds(s.ctx, broker.HoldFilter{}); err != nil || len(hs) != 0 {
		t.Fatalf("held after refusals: %+v %v", hs, err)
	}

	b.post("/queues/orders/holds", url.Values{"group": {"billing"}, "reason": {reason}, "next": {back}}).wantRedirect(back)
	s.call("GET", "/api/v1/pop/queue/orders?consumerGroup=billing", "").want(http.StatusNoContent)

	page := b.get(back).want(http.StatusOK)
	if strings.Contains(string(page.body), "<script>alert(1)") {
		t.Fatal("the reason rendered as markup")
	}
	for id, want := range map[string]string{"hold-by": "user:" + u.Name, "hold-reason": reason, "hold-waiting": "2 messages waiting", "flash": "Held group billing of queue orders"} {
		if got := page.testid(id); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q in it", id, got, want)
		}
	}
	release, _ := page.doc().Find(`[data-testid="release-button"]`).Closest("form").Attr("hx-post")
	if !strings.HasPrefix(release, "/holds/") {
		t.Fatalf("Release posts to %q", release)
	}
	if n := b.get("/queues/orders").want(http.StatusOK).doc().Find(`[data-testid="group-billing"] [data-testid="hold-badge"]`).Length(); n != 1 {
		t.Errorf("the queue page: %d badges on billing", n)
	}
	if n := b.get("/").want(http.StatusOK).doc().Find(`[data-testid="queue-orders"] [data-testid="hold-badge"]`).Length(); n != 1 {
		t.Errorf("the overview: %d badges on orders", n)
	}
	if got := b.get("/queues/orders/dead-letters/" + dl.ID + "?group=billing").want(http.StatusOK).testid("hold-reason"); got != reason {
		t.Errorf("the dead letter's page: reason %q", got)
	}

	// Holding again changes nothing, and says so.
	b.post("/queues/orders/holds", url.Values{"group": {"billing"}, "reason": {"again"}, "next": {back}}).wantRedirect(back)
	if got := b.get(back).testid("flash"); !strings.Contains(got, "was held already") {
		t.Errorf("a second hold says %q", got)
	}

	// A viewer sees the banner and no controls, and may not release.
	v, _ := s.loggedIn(broker.RoleViewer)
	vd := v.get(back).want(http.StatusOK).doc()
	if vd.Find(`[data-testid="hold-banner"]`).Length() != 1 || vd.Find(`[data-testid="release-button"], [data-testid="hold-button"], [data-testid="hold-dialog"]`).Length() != 0 {
		t.Error("a viewer: want the banner and no hold controls")
	}
	v.post(release, url.Values{"next": {back}}).want(http.StatusForbidden)

	// Release through htmx: a full load of the page it came from.
	r := b.postRaw(release, url.Values{"_csrf": {b.csrf()}, "next": {back}}, http.Header{"HX-Request": {"true"}}).want(http.StatusOK)
	if got := r.header.Get("HX-Redirect"); got != back {
		t.Fatalf("HX-Redirect %q, want %q", got, back)
	}
	after := b.get(back).want(http.StatusOK)
	if after.doc().Find(`[data-testid="hold-banner"]`).Length() != 0 {
		t.Error("the banner stays after the release")
	}
	if got := after.testid("flash"); !strings.Contains(got, "Released group billing of queue orders: 2 messages waiting delivered again") {
		t.Errorf("the release says %q", got)
	}
	var p popped
	s.call("GET", "/api/v1/pop/queue/orders?consumerGroup=billing&batch=10", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 2 {
		t.Errorf("after the release: %d messages popped, want 2", len(p.Messages))
	}
	// Released already: 404; a next of another site is not followed.
	b.post(release, url.Values{"next": {back}}).want(http.StatusNotFound)
	b.post("/queues/orders/holds", url.Values{"reason": {"whole queue"}, "next": {"//evil.example/x"}}).wantRedirect("/queues/orders")
	for _, evil := range []string{"/\t/evil.example/x", "/\\evil.example/x", "https://evil.example/x", "/%0a/x\n"} {
		b.post("/queues/orders/holds", url.Values{"reason": {"whole queue"}, "next": {evil}}).wantRedirect("/queues/orders")
	}

	// The audit page filters by both actions.
	ad := b.get("/audit?action=" + broker.AuditHoldRelease).want(http.StatusOK).doc()
	for _, a := range []string{broker.AuditHold, broker.AuditHoldRelease} {
		if ad.Find(`[data-testid="audit-action"] option[value="`+a+`"]`).Length() != 1 {
			t.Errorf("the audit filter has no %s", a)
		}
	}
	if n := ad.Find(`[data-testid="audit-row"]`).Length(); n != 1 {
		t.Errorf("%d hold_release entries, want 1", n)
	}
}
