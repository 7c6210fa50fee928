package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// "Error contains" with a rare or absent text reads a window of the
// newest dead letters a page, on the list and in the API, never the
// whole queue (issue 30: a 500 after 15 s at 600,000): the page says so
// and links to the next window, which goes on until the text is found;
// text with whole words it bounds is found from the index in one page.
// The form says which box is fast. (Not parallel: it makes the search's
// limits small, for every test of the process.)
func TestErrorContainsReadsInWindows(t *testing.T) {
	defer broker.SetSearchLimits(5, 10)()
	s := setup(t)
	for n := range 30 {
		text := "upstream timeout (504)"
		if n == 3 {
			text = "the needle: found, in a haystack"
		}
		s.fail("payments", "", "", fmt.Sprintf("pay-%d", n), fmt.Sprintf(`{"n":%d}`, n), text)
		s.clock.Advance(time.Second)
	}
	b, _ := s.loggedIn(broker.RoleViewer)

	// The list: an empty first window, said so, and Search further.
	path := "/queues/payments/dead-letters?" + url.Values{"error": {"needle"}}.Encode()
	var windows int
	for range 5 {
		doc := b.get(path).want(http.StatusOK).doc()
		windows++
		rows := doc.Find(`[data-testid="dl-row"]`)
		if rows.Length() > 0 {
			if rows.Length() != 1 || !strings.Contains(rows.Text(), "pay-3") {
				t.Fatalf("window %d: rows %q, want pay-3's", windows, rows.Text())
			}
			if doc.Find(`[data-testid="empty"]`).Length() != 0 {
				t.Errorf("window %d: an empty note beside its row", windows)
			}
			break
		}
		// The empty window says what it searched, not that nothing
		// matches, and offers to go on.
		want := "None of the newest 10 dead letters match these filters"
		if windows > 1 {
			want = "None of the next 10 dead letters match these filters"
		}
		if h := doc.Find(`[data-testid="empty"] h2`).Text(); h != want {
			t.Errorf("window %d: empty heading %q, want %q", windows, h, want)
		}
		if further, _ := doc.Find(`[data-testid="empty-search-further"]`).Attr("href"); further == "" {
			t.Errorf("window %d: the empty window offers no Search further", windows)
		}
		note := doc.Find(`[data-testid="search-note"]`).Text()
		if !strings.Contains(note, "checked the 10 newest dead letters") || !strings.Contains(note, "Payload or error has") {
			t.Errorf("window %d: search note %q; want what it checked and what is fast", windows, note)
		}
		next, ok := doc.Find(`[data-testid="search-further"]`).Attr("href")
		if !ok {
			t.Fatalf("window %d: no Search further link in %q", windows, doc.Find("#dl").Text())
		}
		path = next
	}
	if windows != 3 {
		t.Errorf("found the needle in window %d, want 3 (30 dead letters, windows of 10)", windows)
	}
	// One match, from the index: "1 dead letter matches".
	doc := b.get("/queues/payments/dead-letters?" + url.Values{"error": {"the needle: found,"}}.Encode()).want(http.StatusOK).doc()
	if got := strings.Join(strings.Fields(doc.Find(`[data-testid="matching"]`).Text()), " "); got != "1 dead letter matches these filters." {
		t.Errorf("one match: %q", got)
	}
	// The form says which box reads in windows and which is fast.
	doc = b.get("/queues/payments/dead-letters").want(http.StatusOK).doc()
	if h := doc.Find(`[data-testid="hint-error"]`).Text(); !strings.Contains(h, "any part") || !strings.Contains(h, "a page") {
		t.Errorf("Error contains hint %q", h)
	}
	if h := doc.Find(`[data-testid="hint-q"]`).Text(); !strings.Contains(h, "fast") {
		t.Errorf("Payload or error has hint %q", h)
	}

	// The API: the same window, as field filters have it.
	type list struct {
		Messages    []deadLetter `json:"messages"`
		Total       int64        `json:"total"`
		TotalCapped bool         `json:"totalCapped"`
		TotalIn     int          `json:"totalIn"`
		Scanned     int          `json:"scanned"`
		Window      *struct {
			Rows int  `json:"rows"`
			More bool `json:"more"`
		} `json:"window"`
		Next string `json:"next"`
	}
	var l list
	s.call("GET", "/api/v1/dlq?"+url.Values{"queue": {"payments"}, "error": {"absent"}}.Encode(), "").want(http.StatusOK).decode(&l)
	if len(l.Messages) != 0 || l.Total != 0 || !l.TotalCapped || l.TotalIn != 10 || l.Scanned != 10 || l.Window == nil || !l.Window.More || l.Next == "" {
		t.Errorf("API, error=absent: %+v; want an empty window of 10 with more below, and next", l)
	}
	// Whole words the text bounds: from the index, one page, exact total.
	l = list{}
	s.call("GET", "/api/v1/dlq?"+url.Values{"queue": {"payments"}, "error": {"the needle: found,"}}.Encode(), "").want(http.StatusOK).decode(&l)
	if len(l.Messages) != 1 || l.Messages[0].TransactionID != "pay-3" || l.Total != 1 || l.TotalCapped || l.Window != nil || l.Next != "" {
		t.Errorf("API, error=%q: %+v; want pay-3 from the index, total 1", "the needle: found,", l)
	}
}

// A bulk action and an export by "Error contains" look its words up in
// the index; a text with no whole word, over more dead letters than a
// window, is refused with a 400 saying what to type (the API's dry run
// and action, the export, and the page's confirmation), and changes
// nothing (issue 30). (Not parallel: it makes the search's limits small.)
func TestBulkAndExportByErrorTextUseTheIndexOrSayWhy(t *testing.T) {
	defer broker.SetSearchLimits(5, 10)()
	s := setup(t)
	for n := range 30 {
		text := "upstream timeout (504)"
		if n == 3 {
			text = "the needle: found, in a haystack"
		}
		s.fail("payments", "", "", fmt.Sprintf("pay-%d", n), fmt.Sprintf(`{"n":%d}`, n), text)
		s.clock.Advance(time.Second)
	}
	var c struct {
		Matching int64 `json:"matching"`
	}
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"payments","error":"the needle: found,"},"dryRun":true}`).want(http.StatusOK).decode(&c)
	if c.Matching != 1 {
		t.Errorf("dry run by words: matching %d, want 1", c.Matching)
	}
	r := s.call("GET", "/api/v1/dlq/export?"+url.Values{"queue": {"payments"}, "error": {" timeout ("}, "format": {"ndjson"}}.Encode(), "").want(http.StatusOK)
	if lines := strings.Count(string(r.body), "\n"); lines != 29 {
		t.Errorf("export by words: %d lines, want 29", lines)
	}

	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"payments","error":"needle"},"dryRun":true}`).wantError(http.StatusBadRequest, "no whole word", "Payload or error has", "nothing was changed")
	s.call("POST", "/api/v1/dlq/replay", `{"filter":{"queue":"payments","error":"needle"}}`).wantError(http.StatusBadRequest, "no whole word")
	s.call("GET", "/api/v1/dlq/export?"+url.Values{"queue": {"payments"}, "error": {"needle"}}.Encode(), "").wantError(http.StatusBadRequest, "no whole word")
	op, _ := s.loggedIn(broker.RoleOperator)
	page := op.get("/queues/payments/dead-letters/confirm?" + url.Values{"action": {"delete"}, "all": {"1"}, "error": {"needle"}}.Encode()).want(http.StatusBadRequest)
	if !strings.Contains(string(page.body), "no whole word") {
		t.Errorf("the confirmation of a delete by %q: %s", "needle", page.body)
	}
	var l struct {
		Total int64 `json:"total"`
	}
	s.call("GET", "/api/v1/dlq?queue=payments", "").want(http.StatusOK).decode(&l)
	if l.Total != 30 {
		t.Errorf("%d dead letters after the refusals, want 30", l.Total)
	}
}
