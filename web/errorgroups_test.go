package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// The list shows its queue's error groups; a group is a filter of the
// page (with its chip), of GET /api/v1/dlq and of the bulk confirmation
// its buttons open.
func TestErrorGroupsFilterTheListAndTheAPI(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	s.fail("orders", "acme", "billing", "ord-4", `{"total":3}`, "upstream timeout after 45s")
	const fp = "upstream timeout after <n>s"

	op, _ := s.loggedIn(broker.RoleOperator)
	doc := op.get("/queues/orders/dead-letters").want(http.StatusOK).doc()
	groups := doc.Find(`[data-testid="error-group"]`)
	if groups.Length() != 2 || strings.TrimSpace(groups.First().Find(`[data-testid="error-group-filter"]`).Text()) != fp ||
		strings.TrimSpace(groups.First().Find(`[data-testid="error-group-count"]`).Text()) != "3" {
		t.Fatalf("error groups: %d, first %q", groups.Length(), groups.First().Text())
	}
	if sample := groups.First().Find(`[data-testid="error-group-sample"]`).Text(); sample != "upstream timeout after 45s" {
		t.Fatalf("sample %q: want the newest error", sample)
	}
	if groups.First().Find(`[data-testid="sparkline"]`).Length() != 1 {
		t.Fatal("no trend")
	}
	href, _ := groups.First().Find(`[data-testid="error-group-filter"]`).Attr("href")
	page := op.get(href).want(http.StatusOK).doc()
	if n := page.Find(`[data-testid="dl-row"]`).Length(); n != 3 {
		t.Fatalf("%s: %d rows, want the group's 3", href, n)
	}
	if chip := page.Find(`[data-testid="chip"]`).Text(); !strings.Contains(chip, "error group") || !strings.Contains(chip, fp) {
		t.Fatalf("chip %q", chip)
	}
	if page.Find(`[data-testid="error-group"].current`).Length() != 1 {
		t.Fatal("the group filtered by is not marked")
	}
	// Replay this group… opens the usual confirmation, counting the group.
	replay, _ := groups.First().Find(`[data-testid="group-replay"]`).Attr("hx-get")
	confirm := op.get(replay).want(http.StatusOK).doc()
	if got := confirm.Find(`[data-testid="confirm-summary"]`).Text(); !strings.Contains(got, "3") || !strings.Contains(got, fp) {
		t.Fatalf("confirmation of %s: %q", replay, got)
	}
	// Within a consumer group, the panel and the buttons are the group's.
	billing := op.get("/queues/orders/dead-letters?group=billing").want(http.StatusOK).doc()
	replay, _ = billing.Find(`[data-testid="group-replay"]`).First().Attr("hx-get")
	if got := op.get(replay).want(http.StatusOK).doc().Find(`[data-testid="confirm-summary"]`).Text(); !strings.Contains(got, "2") {
		t.Fatalf("confirmation of %s: %q, want billing's 2", replay, got)
	}
	// Other filters do not narrow the kept counts: the panel says so.
	if doc.Find(`[data-testid="error-groups-scope"]`).Length() != 0 {
		t.Fatal("a note on the unfiltered list")
	}
	narrowed := op.get("/queues/orders/dead-letters?partition=acme").want(http.StatusOK).doc()
	if note := narrowed.Find(`[data-testid="error-groups-scope"]`).Text(); !strings.Contains(note, "whole queue orders") {
		t.Fatalf("note with a partition filter: %q", note)
	}
	// A group name too long to be a fingerprint is refused.
	op.get("/queues/orders/dead-letters?fingerprint=" + strings.Repeat("x", 1000)).want(http.StatusBadRequest)
	// A viewer sees the groups, not the buttons.
	viewer, _ := s.loggedIn(broker.RoleViewer)
	if d := viewer.get("/queues/orders/dead-letters").want(http.StatusOK).doc(); d.Find(`[data-testid="error-group"]`).Length() != 2 || d.Find(`[data-testid="group-replay"]`).Length() != 0 {
		t.Fatal("a viewer's panel")
	}

	var list struct {
		Items []struct {
			Fingerprint string `json:"fingerprint"`
		} `json:"messages"`
		Total int `json:"total"`
	}
	s.call("GET", "/api/v1/dlq?queue=orders&fingerprint="+url.QueryEscape(fp), "").want(http.StatusOK).decode(&list)
	if len(list.Items) != 3 || list.Total != 3 || list.Items[0].Fingerprint != fp {
		t.Fatalf("GET /api/v1/dlq by fingerprint: %+v", list)
	}
	s.call("GET", "/api/v1/dlq?fingerprint="+url.QueryEscape(fp), "").want(http.StatusBadRequest)

	body, _ := json.Marshal(map[string]any{"wait": true, "filter": map[string]any{"queue": "orders", "consumerGroup": "billing", "fingerprint": fp}})
	var res map[string]any
	s.call("POST", "/api/v1/dlq/delete", string(body)).want(http.StatusOK).decode(&res)
	s.call("GET", "/api/v1/dlq?queue=orders&fingerprint="+url.QueryEscape(fp), "").want(http.StatusOK).decode(&list)
	if list.Total != 1 {
		t.Fatalf("after deleting billing's group: %d left, want analytics' 1 (%v)", list.Total, res)
	}
}

// The overview lists each queue's 3 biggest error groups, linked to
// their dead letters; /metrics the 10 biggest per queue.
func TestTopErrorGroupsOnTheOverviewAndMetrics(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	for i := range 12 {
		for j := 0; j <= i%4; j++ {
			s.fail("orders", "acme", "billing", fmt.Sprintf("ord-%d-%d", i, j), `{}`, fmt.Sprintf("kind %c failed for order %d", 'a'+rune(i), 1000+j))
		}
	}
	viewer, _ := s.loggedIn(broker.RoleViewer)
	row := viewer.get("/").want(http.StatusOK).doc().Find(`[data-testid="queue-orders"] [data-testid="queue-error-group"]`)
	if row.Length() != 3 || !strings.HasPrefix(strings.TrimSpace(row.First().Text()), "4 kind d failed for order <n>") {
		t.Fatalf("overview's error groups: %d, first %q", row.Length(), row.First().Text())
	}
	href, _ := row.First().Attr("href")
	if n := viewer.get(href).want(http.StatusOK).doc().Find(`[data-testid="dl-row"]`).Length(); n != 4 {
		t.Fatalf("%s: %d rows, want the group's 4", href, n)
	}

	fams := scrape(t, s, nil)
	if got, ok := metricValue(t, fams, "lazarus_error_group_dead_letters", map[string]string{"queue": "orders", "fingerprint": "kind d failed for order <n>"}); !ok || got != 4 {
		t.Fatalf("lazarus_error_group_dead_letters of kind d = %v (found %v), want 4", got, ok)
	}
	if n := len(fams["lazarus_error_group_dead_letters"].GetMetric()); n != 10 {
		t.Fatalf("%d error group series, want 10 of the queue's 12 groups", n)
	}
}
