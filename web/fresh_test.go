package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The page of a dead letter reloads itself in place after an action
// (dlq-changed, which every action answers with): after a replay that
// reload is the page of a dead letter that is gone, a 404 marked as a
// page of Lazarus's (Lazarus-Page), which app.js swaps in; its own page
// reloads itself too, so that a Restore shows the dead letter again.
func TestDeadLetterPageReloadsItselfAfterAnAction(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"a":1}`, false)
	self := "/queues/q/dead-letters/" + f.d.ID + "?group=billing"
	page := f.op.get(self).want(http.StatusOK).doc().Find(`#deadletter`)
	if page.AttrOr("hx-get", "") != self || page.AttrOr("hx-trigger", "") != "dlq-changed from:body" || page.AttrOr("hx-select", "") != "#deadletter" {
		t.Fatalf("the page's reload: hx-get %q, hx-trigger %q, hx-select %q", page.AttrOr("hx-get", ""), page.AttrOr("hx-trigger", ""), page.AttrOr("hx-select", ""))
	}
	if q := page.Find(`[data-testid="detail-delete"]`).AttrOr("data-confirm", ""); !strings.Contains(q, "brings it back within 24 hours") || strings.Contains(q, "for good?") {
		t.Fatalf("the delete's question: %q", q)
	}
	r := hx(f.op, "/queues/q/dead-letters/"+f.d.ID+"/replay", nil).want(http.StatusOK)
	if r.header.Get("HX-Trigger") != "dlq-changed" {
		t.Fatalf("HX-Trigger %q", r.header.Get("HX-Trigger"))
	}
	gone := hxGet(f.op, self).want(http.StatusNotFound)
	if gone.header.Get("Lazarus-Page") != "gone" {
		t.Fatalf("the gone page's Lazarus-Page header: %q", gone.header.Get("Lazarus-Page"))
	}
	doc := gone.doc()
	if doc.Find(`#deadletter`).AttrOr("hx-get", "") != self || doc.Find(`[data-testid="fate"]`).Length() != 1 || doc.Find(`[data-testid="detail-actions"]`).Length() != 0 {
		t.Fatalf("the reload after the replay: %s", gone.body)
	}
}

// In a view that names a consumer group, a replay goes to that group
// alone by default: a row's Replay in the group's list, the bulk
// dialog's choice, the dead letter's page and its Edit page (billing only
// first and primary). The replay to every group names the group that
// completed the message.
func TestReplayDefaultsToTheGroupOfTheView(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("q", "p", "billing", "tx-1", `{"a":1}`, "billing failed")
	var p popped
	s.call("GET", "/api/v1/pop/queue/q/partition/p?consumerGroup=analytics", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 1 {
		t.Fatalf("analytics popped %d", len(p.Messages))
	}
	s.ack(p.Messages[0], "completed", "").want(http.StatusOK)
	op, _ := s.loggedIn(broker.RoleOperator)

	list := op.get("/queues/q/dead-letters?group=billing").want(http.StatusOK).doc()
	own := url.Values{"group": {"billing"}, "mode": {"own"}}
	if got := list.Find(`[data-testid="row-replay"]`).AttrOr("hx-post", ""); got != "/queues/q/dead-letters/"+d.ID+"/replay?"+own.Encode() {
		t.Fatalf("a row's Replay in billing's list posts to %q", got)
	}
	if got := op.get("/queues/q/dead-letters").want(http.StatusOK).doc().Find(`[data-testid="row-replay"]`).AttrOr("hx-post", ""); got != "/queues/q/dead-letters/"+d.ID+"/replay" {
		t.Fatalf("a row's Replay in the list of every group posts to %q", got)
	}
	for _, q := range []string{"all=1&group=billing", "ids=" + d.ID + "&group=billing"} {
		c := op.get("/queues/q/dead-letters/confirm?action=replay&" + q).want(http.StatusOK).doc()
		if c.Find(`[data-testid="confirm-mode-own"][checked]`).Length() != 1 || c.Find(`[data-testid="confirm-mode-every"][checked]`).Length() != 0 {
			t.Fatalf("%s: billing only is not the default", q)
		}
		if got := c.Find(`[data-testid="confirm-untouched"]`).Text(); !strings.Contains(got, "analytics has none of these dead letters") {
			t.Fatalf("%s: the groups a replay to every group has process them again: %q", q, got)
		}
	}
	c := op.get("/queues/q/dead-letters/confirm?action=replay&all=1").want(http.StatusOK).doc()
	if c.Find(`[data-testid="confirm-mode-every"][checked]`).Length() != 1 {
		t.Fatal("without a group in the view, every group is not the default")
	}

	page := op.get("/queues/q/dead-letters/" + d.ID + "?group=billing").want(http.StatusOK).doc()
	first := page.Find(`[data-testid="detail-actions"] button`).First()
	if first.AttrOr("data-testid", "") != "detail-replay-own" || !first.HasClass("primary") || page.Find(`[data-testid="detail-replay"]`).HasClass("primary") {
		t.Fatalf("the page's first replay: %q, class %q", first.AttrOr("data-testid", ""), first.AttrOr("class", ""))
	}
	short := d.ID[:8] + "…" + d.ID[len(d.ID)-4:]
	if got := page.Find(`[data-testid="detail-replay"]`).AttrOr("data-confirm", ""); got != "Replay "+short+" to every group (billing, analytics)? analytics completed it already and processes it again." {
		t.Fatalf("the page's replay to every group asks %q", got)
	}
	edit := op.get("/queues/q/dead-letters/" + d.ID + "/edit?group=billing").want(http.StatusOK).doc()
	if !edit.Find(`[data-testid="edit-replay-own"]`).HasClass("primary") || edit.Find(`[data-testid="edit-replay-every"]`).HasClass("primary") {
		t.Fatal("the Edit page's main button is not the replay to billing only")
	}
	if got := edit.Find(`[data-testid="edit-replay-every"]`).AttrOr("data-confirm", ""); !strings.HasSuffix(got, "? analytics completed it already and processes it again.") {
		t.Fatalf("the Edit page's replay to every group asks %q", got)
	}
}
