package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
)

// rowNames are the queues of the overview's table, in order.
func rowNames(doc *goquery.Document) []string {
	var out []string
	doc.Find(`[data-testid="queues"] tbody tr`).Each(func(_ int, r *goquery.Selection) {
		id, _ := r.Attr("data-testid")
		out = append(out, strings.TrimPrefix(id, "queue-"))
	})
	return out
}

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// The overview pages its queues (50 a page), sorts them by health (the
// default: thresholds past, then dead letters), by dead letters or by
// name, filters them by a part of the name and hides the empty ones,
// all in the URL; every queue counts in the tiles whatever the page;
// dead letters and failures say how they moved against 24 h ago, and
// each sparkline its scale.
func TestOverviewPagesSortsAndFiltersQueues(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for i := range 57 {
		s.configure(fmt.Sprintf("q-%02d", i), `{}`)
	}
	for i := range 3 {
		s.fail("orders", "", "billing", fmt.Sprintf("ord-%d", i), `{}`, "card declined")
	}
	s.fail("payments", "", "billing", "pay-0", `{}`, "timeout")
	s.clock.Advance(25 * time.Hour)
	for i := 3; i < 5; i++ {
		s.fail("orders", "", "billing", fmt.Sprintf("ord-%d", i), `{}`, "card declined")
	}
	for i := range 12 {
		s.fail("zeta", "", "billing", fmt.Sprintf("zeta-%d", i), `{}`, "no such customer")
	}
	b, _ := s.loggedIn(broker.RoleViewer)

	r := b.get("/").want(http.StatusOK)
	doc := r.doc()
	names := rowNames(doc)
	if len(names) != 50 || strings.Join(names[:4], " ") != "zeta orders payments q-00" || names[49] != "q-46" {
		t.Fatalf("first page by health: %d rows %v", len(names), names)
	}
	if got := r.testid("tile-queues"); !strings.Contains(got, "60") {
		t.Fatalf("queues tile %q", got)
	}
	if got := squash(r.testid("tile-depth")); !strings.Contains(got, "18") || !strings.Contains(got, "▲ 14 vs 24 h ago") {
		t.Fatalf("depth tile %q", got)
	}
	if got := squash(r.testid("queue-shown")); got != "queues 1–50 of 60" {
		t.Fatalf("shown: %q", got)
	}
	orders := doc.Find(`[data-testid="queue-orders"]`)
	if got := squash(orders.Find(`[data-testid="queue-depth-delta"]`).Text()); got != "▲ 2 vs 24 h ago" {
		t.Fatalf("orders' delta %q", got)
	}
	// zeta was made within the day: nothing to compare with 24 h ago.
	if got := squash(doc.Find(`[data-testid="queue-zeta"] [data-testid="queue-depth-delta"]`).Text()); got != "new" {
		t.Fatalf("zeta's delta %q, want new", got)
	}
	if got := orders.Find(`[data-testid="sparkline-scale"] span`).Map(func(_ int, s *goquery.Selection) string { return s.Text() }); strings.Join(got, " ") != "5 0" {
		t.Fatalf("orders' sparkline scale %q", got)
	}
	if got := squash(orders.Find(`[data-testid="queue-failures"]`).Text()); !strings.HasPrefix(got, "100.0 %") || !strings.Contains(got, "= the 24 h before") {
		t.Fatalf("orders' failures %q", got)
	}
	if got := squash(orders.Find(`[data-testid="queue-replays"]`).Text()); got != "–" {
		t.Fatalf("orders' replays %q", got)
	}
	next, ok := doc.Find(`[data-testid="queue-next"]`).Attr("href")
	if !ok || doc.Find(`[data-testid="queue-prev"]`).Length() != 0 {
		t.Fatal("the first page has no next link, or a previous one")
	}
	doc = b.get(next).want(http.StatusOK).doc()
	if names := rowNames(doc); len(names) != 10 || names[0] != "q-47" || doc.Find(`[data-testid="queue-next"]`).Length() != 0 || doc.Find(`[data-testid="queue-prev"]`).Length() != 1 {
		t.Fatalf("second page (%s): %v", next, names)
	}

	for _, c := range []struct {
		query string
		want  string
	}{
		{"sort=name&per=3", "orders payments q-00"},
		{"sort=dead-letters&empty=hide", "zeta orders payments"},
		{"q=PAY", "payments"},
		{"q=q-1&sort=name&per=2&page=3", "q-14 q-15"},
		{"q=nothing-like-it", ""},
	} {
		doc := b.get("/?" + c.query).want(http.StatusOK).doc()
		if got := strings.Join(rowNames(doc), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.query, got, c.want)
		}
		if got := doc.Find(`[data-testid="tile-queues"] .value`).Text(); got != "60" {
			t.Errorf("%s: the queues tile says %q", c.query, got)
		}
	}
	doc = b.get("/?q=PAY&empty=hide").want(http.StatusOK).doc()
	if _, on := doc.Find(`[data-testid="hide-empty"]`).Attr("checked"); !on || doc.Find(`[data-testid="queue-filter"]`).AttrOr("value", "") != "PAY" {
		t.Fatal("the form does not show the filter and toggle of the URL")
	}
	if got := squash(doc.Find(`[data-testid="queue-shown"]`).Text()); !strings.Contains(got, "1 of 60 queues match") {
		t.Fatalf("filtered: %q", got)
	}
	if got := doc.Find(`[data-testid="no-queue-matches"]`).Length(); got != 0 {
		t.Fatal("a filter that matches says nothing matches")
	}
	if got := b.get("/?q=nothing-like-it").want(http.StatusOK).testid("no-queue-matches"); !strings.Contains(got, "No queue matches") {
		t.Fatalf("no match: %q", got)
	}
	b.get("/?sort=age").want(http.StatusBadRequest)
	b.get("/?per=201").want(http.StatusBadRequest)
	b.get("/?page=0").want(http.StatusBadRequest)
}

// A queue's replay success is its replayed copies settled in 24 h that
// completed, of those that completed or failed again (as the tile); an
// empty queue's row has no delta and no sparkline scale; a queue
// untouched for longer than its buckets are kept did not grow (no ▲);
// a page past the last one says so and links to the first.
func TestOverviewReplaysDeltasAndPastTheLastPage(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	s.configure("empty", `{}`)
	s.fail("old", "", "g", "old-0", `{}`, "gone")
	s.fail("orders", "", "g", "ord-0", `{}`, "card declined")
	s.fail("orders", "", "g", "ord-1", `{}`, "card declined")
	s.clock.Advance(25 * time.Hour)
	// old's buckets gone, as after 90 days untouched (retention).
	q := `DELETE FROM stats_quarter WHERE queue_id = (SELECT id FROM queues WHERE name = 'old')`
	s.execOn(q, q)
	q = `DELETE FROM stats_hour WHERE queue_id = (SELECT id FROM queues WHERE name = 'old')`
	s.execOn(q, q)
	id := startReplay(t, s, `{"filter":{"queue":"orders"}}`)
	if _, err := s.broker.RunJob(s.ctx, id); err != nil {
		t.Fatal(err)
	}
	popAll(t, s, "orders", "g", func(i int) bool { return i == 0 }, "declined again")
	b, _ := s.loggedIn(broker.RoleViewer)

	r := b.get("/").want(http.StatusOK)
	doc := r.doc()
	orders := doc.Find(`[data-testid="queue-orders"]`)
	if got := squash(orders.Find(`[data-testid="queue-replays"]`).Text()); got != "50.0 %" {
		t.Fatalf("orders' replays %q, want 50.0 %%", got)
	}
	if got := squash(r.testid("tile-replays")); !strings.Contains(got, "50.0 %") {
		t.Fatalf("replays tile %q", got)
	}
	if got := squash(orders.Find(`[data-testid="queue-depth-delta"]`).Text()); got != "▼ 1 vs 24 h ago" {
		t.Fatalf("orders' delta %q", got)
	}
	empty := doc.Find(`[data-testid="queue-empty"]`)
	if empty.Length() != 1 || empty.Find(`[data-testid="queue-depth-delta"]`).Length() != 0 || empty.Find(`[data-testid="sparkline-scale"]`).Length() != 0 {
		t.Fatalf("the empty queue's row has a delta or a scale: %q", squash(empty.Text()))
	}
	if got := squash(doc.Find(`[data-testid="queue-old"] [data-testid="queue-depth-delta"]`).Text()); strings.Contains(got, "▲") {
		t.Fatalf("an untouched queue grew: %q", got)
	}

	for _, c := range []struct{ query, first string }{{"page=99", "/"}, {"q=o&per=1&page=99", "/?per=1&q=o"}} {
		past := b.get("/?" + c.query).want(http.StatusOK)
		if got := past.testid("past-last-page"); !strings.Contains(got, "past the last") {
			t.Fatalf("%s: %q", c.query, got)
		}
		if href, _ := past.doc().Find(`[data-testid="first-page"]`).Attr("href"); href != c.first || past.doc().Find(`[data-testid="no-queue-matches"]`).Length() != 0 {
			t.Fatalf("%s: first page %q", c.query, href)
		}
	}
}
