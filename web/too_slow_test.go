package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A read that runs past its budget (the list's 15 s) is a 503 "This took
// too long" with Retry-After, on the page (saying what to narrow) and on
// the API (a JSON error), never a 500 (issue 30). The budget is made a
// nanosecond here, so that every read overruns it.
func TestAReadPastItsBudgetSaysItTookTooLong(t *testing.T) {
	s := setup(t)
	s.fail("payments", "", "", "pay-1", `{"n":1}`, "upstream timeout (504)")
	s.server.SetBudget(time.Nanosecond)
	b, _ := s.loggedIn(broker.RoleViewer)

	r := b.get("/queues/payments/dead-letters?" + url.Values{"error": {"imeou"}}.Encode()).want(http.StatusServiceUnavailable)
	if ra := r.header.Get("Retry-After"); ra != "30" {
		t.Errorf("page: Retry-After %q, want 30", ra)
	}
	doc := r.doc()
	page := doc.Find(`[data-testid="error-page"]`)
	if h := page.Find("h1").Text(); !strings.Contains(h, "503") || !strings.Contains(h, "This took too long") {
		t.Errorf("page heading %q, want 503 · This took too long", h)
	}
	for _, want := range []string{"nothing was changed", "Narrow it", "consumer group", "Payload or error has", "whole words"} {
		if !strings.Contains(page.Text(), want) {
			t.Errorf("page %q does not say %q", page.Text(), want)
		}
	}
	if strings.Contains(page.Text(), "Something went wrong") {
		t.Errorf("page %q reads as an internal error", page.Text())
	}

	r = s.call("GET", "/api/v1/dlq?"+url.Values{"queue": {"payments"}, "error": {"imeou"}}.Encode(), "")
	r.wantError(http.StatusServiceUnavailable, "took too long", "narrow it")
	if ra := r.header.Get("Retry-After"); ra != "30" {
		t.Errorf("API: Retry-After %q, want 30", ra)
	}
}
