package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// dlqWindowList is GET /api/v1/dlq's answer with the search's window.
type dlqWindowList struct {
	Messages    []deadLetter `json:"messages"`
	Total       int64        `json:"total"`
	TotalCapped bool         `json:"totalCapped"`
	TotalIn     int          `json:"totalIn"`
	Scanned     int          `json:"scanned"`
	Next        string       `json:"next"`
	Window      *struct {
		From, To string
		Rows     int
		More     bool
	} `json:"window"`
}

// fillN files n dead letters in queue, payload {"n": i}, through the broker.
func fillN(s *bundle, queue string, n int) {
	t, b := s.t, s.broker
	t.Helper()
	ctx := context.Background()
	s.configure(queue, `{"retryLimit":0,"retryDelay":0}`)
	for i := 0; i < n; i += 500 {
		var items []broker.PushItem
		for j := i; j < min(i+500, n); j++ {
			items = append(items, broker.PushItem{Queue: queue, TransactionID: fmt.Sprintf("t-%d", j), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, j))})
		}
		if _, err := b.Push(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	for done := 0; done < n; {
		res, err := b.Pop(ctx, broker.PopRequest{Queue: queue, Batch: 100})
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("pop: %v", err)
		}
		for _, d := range res.Messages {
			if _, err := b.Ack(ctx, broker.Ack{TransactionID: d.TransactionID, PartitionID: d.PartitionUUID, LeaseID: d.LeaseID, Status: broker.AckDLQ, Error: "boom", Group: d.Group}); err != nil {
				t.Fatal(err)
			}
		}
		done += len(res.Messages)
	}
}

// A field filter the index cannot narrow, on more dead letters than one
// window (FieldScan): the total is the newest window's and says so
// (totalCapped, totalIn), "next" goes on as after=, page after page,
// until every match is found; the page shows "N+ in the newest 5,000"
// with Search further, and the Export menu no count.
func TestDLQSearchWindowTotalAndNext(t *testing.T) {
	t.Parallel()
	s := setup(t)
	n := broker.FieldScan + 5
	fillN(s, "big", n)
	base := url.Values{"queue": {"big"}, "field": {"n >= 0"}, "limit": {"1000"}}
	var l dlqWindowList
	s.call("GET", "/api/v1/dlq?"+base.Encode(), "").want(http.StatusOK).decode(&l)
	if l.Total != broker.SearchCount || !l.TotalCapped || l.TotalIn != broker.FieldScan || l.Window == nil || !l.Window.More || l.Next == "" {
		t.Fatalf("first page: total %d capped %v in %d window %+v next %q; want the window's count, capped, in %d, and a next",
			l.Total, l.TotalCapped, l.TotalIn, l.Window, l.Next, broker.FieldScan)
	}
	seen := map[string]bool{}
	for range 20 {
		for _, m := range l.Messages {
			if seen[m.TransactionID] {
				t.Fatalf("%s twice", m.TransactionID)
			}
			seen[m.TransactionID] = true
		}
		if l.Next == "" {
			break
		}
		q := base
		q.Set("after", l.Next)
		l = dlqWindowList{}
		s.call("GET", "/api/v1/dlq?"+q.Encode(), "").want(http.StatusOK).decode(&l)
	}
	if len(seen) != n {
		t.Errorf("followed next to %d dead letters, want %d", len(seen), n)
	}
	s.call("GET", "/api/v1/dlq?queue=big&after=x", "").wantError(http.StatusBadRequest, "after")
	s.call("GET", "/api/v1/dlq?queue=big&after=1-2&offset=3", "").wantError(http.StatusBadRequest, "after and offset")

	b, _ := s.loggedIn(broker.RoleOperator)
	doc := b.get("/queues/big/dead-letters?" + url.Values{"field": {"n >= 0"}}.Encode()).want(http.StatusOK).doc()
	if got := strings.Join(strings.Fields(doc.Find(`[data-testid="matching"]`).Text()), " "); got != "1,000+ in the newest 5,000 dead letters searched — Search further" {
		t.Errorf("the list's count: %q", got)
	}
	if href, _ := doc.Find(`[data-testid="search-further"]`).Attr("href"); !strings.Contains(href, "after=") {
		t.Errorf("Search further goes to %q, want the next page", href)
	}
	if got := strings.Join(strings.Fields(doc.Find(`[data-testid="export"] p`).Text()), " "); strings.Contains(got, "(") || !strings.Contains(got, "Every dead letter this filter matches, payloads included") {
		t.Errorf("the export menu: %q; want no count of a window", got)
	}
	// A filter whose window is the whole list: an exact total.
	fillN(s, "small", 3)
	l = dlqWindowList{}
	s.call("GET", "/api/v1/dlq?queue=small&field="+url.QueryEscape("n >= 1"), "").want(http.StatusOK).decode(&l)
	if l.Total != 2 || l.TotalCapped || l.TotalIn != 0 || l.Window == nil || l.Window.More || l.Next != "" {
		t.Errorf("small: %+v; want 2, exact, a window with nothing below", l)
	}
}
