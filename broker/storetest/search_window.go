package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// searchPages follows a search's pages to the end and returns the n of
// every payload found, and each page's Scanned and MatchCapped.
func searchPages(s *bundle, q broker.DLQQuery) (found []int, scanned []int, capped bool) {
	s.t.Helper()
	q.Queue, q.WithTotal = "q", true
	for range 100 {
		page, err := s.b.DeadLetters(s.ctx, q)
		if err != nil {
			s.t.Fatalf("%+v: %v", q, err)
		}
		for _, d := range page.Items {
			var p struct{ N int }
			if err := json.Unmarshal(d.Payload, &p); err != nil {
				s.t.Fatal(err)
			}
			found = append(found, p.N)
		}
		scanned, capped = append(scanned, page.Scanned), capped || page.MatchCapped
		if page.Next == nil {
			return found, scanned, capped
		}
		q.After = page.Next
	}
	s.t.Fatal("more than 100 pages")
	return
}

// A search costs the same at any depth: common words and field filters
// with no word to look up read a window of the newest dead letters a page
// (FieldScan), say so, and go on below it page by page, finding every
// match; rare words are looked up, all of them, in one page; the words
// of common free text are read in windows too, and say so.
// (Not parallel: it makes the limits small.)
func testSearchWindowsAndCaps(t *testing.T, harness Harness) {
	defer broker.SetSearchLimits(5, 10)()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	var items []broker.PushItem
	for n := range 30 {
		brand := "visa"
		if n%3 == 0 {
			brand = "amex"
		}
		items = append(items, broker.PushItem{Queue: "q", TransactionID: fmt.Sprintf("t-%d", n),
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"brand":%q,"id":"o-%d"}`, n, brand, n))})
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	for range 30 { // one at a time: n is the filing order
		res := s.pop("q", "", 1)
		s.clock.Advance(time.Second)
		s.ack(res.Messages[0], broker.AckFailed, "declined")
	}
	desc := func(ns ...int) []int { slices.Sort(ns); slices.Reverse(ns); return ns }

	// A range: three windows of ten, the first holding the matches.
	found, scanned, capped := searchPages(s, broker.DLQQuery{Limit: 50, Fields: []string{"n > 25"}})
	if !slices.Equal(found, desc(26, 27, 28, 29)) || !slices.Equal(scanned, []int{10, 10, 10}) || capped {
		t.Errorf("n > 25: found %v, scanned %v, capped %v; want 29…26 over 3 windows of 10", found, scanned, capped)
	}
	// Pages of 2 of a range: full pages go on from their last row.
	if found, _, _ := searchPages(s, broker.DLQQuery{Limit: 2, Fields: []string{"n < 7"}}); !slices.Equal(found, desc(0, 1, 2, 3, 4, 5, 6)) {
		t.Errorf("n < 7 by 2: found %v", found)
	}
	// A common value (10 amex > 5): windows, every match found, exactly.
	var amex []int
	for n := 0; n < 30; n += 3 {
		amex = append(amex, n)
	}
	found, scanned, capped = searchPages(s, broker.DLQQuery{Limit: 50, Fields: []string{"brand = amex"}})
	if !slices.Equal(found, desc(amex...)) || len(scanned) != 3 || capped {
		t.Errorf("brand = amex: found %v, scanned %v, capped %v; want every amex over 3 windows", found, scanned, capped)
	}
	// A rare value: looked up, one page, no window.
	found, scanned, capped = searchPages(s, broker.DLQQuery{Limit: 50, Fields: []string{"id = o-7"}})
	if !slices.Equal(found, []int{7}) || !slices.Equal(scanned, []int{0}) || capped {
		t.Errorf("id = o-7: found %v, scanned %v, capped %v", found, scanned, capped)
	}
	found, scanned, _ = searchPages(s, broker.DLQQuery{Limit: 50, Text: "o-7"})
	if !slices.Equal(found, []int{7}) || !slices.Equal(scanned, []int{0}) {
		t.Errorf("text o-7: found %v, scanned %v", found, scanned)
	}
	// Common free text (20 visa > 5): windows, every match found (each
	// window looks the words up within its own ids and seqs), said so.
	var visa []int
	for n := range 30 {
		if n%3 != 0 {
			visa = append(visa, n)
		}
	}
	found, scanned, capped = searchPages(s, broker.DLQQuery{Limit: 50, Text: "visa"})
	if !slices.Equal(found, desc(visa...)) || len(scanned) != 3 || !capped {
		t.Errorf("text visa: found %v, scanned %v, capped %v; want every visa over 3 windows, capped", found, scanned, capped)
	}
	// Totals are counted up to SearchCount.
	page, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Limit: 1, WithTotal: true, Fields: []string{"id = o-7"}})
	if err != nil || page.Total != 1 || page.TotalCapped {
		t.Errorf("total of id = o-7: %+v, %v", page, err)
	}
}

// A capped search is complete within the window it reads, whatever other
// queues hold: queue a's three old matches are found although queue b
// has more (and newer) matches of the same words than MatchCap, and the
// total says it counted the window only. (Not parallel: small limits.)
func testSearchCappedKeepsToTheQueue(t *testing.T, harness Harness) {
	defer broker.SetSearchLimits(5, 10)()
	s := setup(t, harness)
	file := func(queue string, n int) {
		s.configure(queue, map[string]any{"retryLimit": 0})
		var items []broker.PushItem
		for i := range n {
			items = append(items, broker.PushItem{Queue: queue, TransactionID: fmt.Sprintf("%s-%d", queue, i),
				Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"brand":"visa"}`, i))})
		}
		if _, err := s.b.Push(s.ctx, items); err != nil {
			t.Fatal(err)
		}
		for range n {
			res := s.pop(queue, "", 1)
			s.clock.Advance(time.Second)
			s.ack(res.Messages[0], broker.AckFailed, "card declined")
		}
	}
	file("a", 3)
	file("b", 20)
	for _, q := range []broker.DLQQuery{{Text: "visa"}, {Text: "declined"}, {Fields: []string{"brand contains visa"}}, {Fields: []string{"brand = visa"}}} {
		q.Queue, q.Limit, q.WithTotal = "a", 50, true
		page, err := s.b.DeadLetters(s.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 3 || page.Total != 3 || page.TotalCapped {
			t.Errorf("queue a, %+v: %d items, total %d, capped %v; want all 3, exactly (the window holds the whole queue)", q, len(page.Items), page.Total, page.TotalCapped)
		}
		// Its pages of one: the total stays the queue's, exact.
		q.Limit = 1
		for range 3 {
			page, err := s.b.DeadLetters(s.ctx, q)
			if err != nil || len(page.Items) != 1 || page.Total != 3 || page.TotalCapped || page.TotalIn != 0 {
				t.Fatalf("queue a by 1, %+v: %+v, %v; want 1 item, total 3 exactly", q, page, err)
			}
			q.After = page.Next
		}
		q.Limit, q.After = 50, nil
		// Queue b (20 rows, windows of 10): every match over two windows.
		q.Queue = "b"
		var found int
		for range 10 {
			page, err := s.b.DeadLetters(s.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			found += len(page.Items)
			if page.Window == nil || !page.TotalCapped || page.Total != 10 || page.TotalIn != 10 {
				t.Errorf("queue b, %+v: window %+v, total %d, capped %v; want the window's 10, capped", q, page.Window, page.Total, page.TotalCapped)
			}
			if page.Next == nil {
				break
			}
			q.After = page.Next
		}
		if found != 20 {
			t.Errorf("queue b, %+v: found %d over the windows, want 20", q, found)
		}
	}
}

// A field filter read in a window counts the window's matches only, and
// says so: not an exact total of the whole queue.
func testSearchWindowTotal(t *testing.T, harness Harness) {
	defer broker.SetSearchLimits(5, 10)()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	var items []broker.PushItem
	for n := range 30 {
		items = append(items, broker.PushItem{Queue: "q", TransactionID: fmt.Sprintf("t-%d", n), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		res := s.pop("q", "", 1)
		s.clock.Advance(time.Second)
		s.ack(res.Messages[0], broker.AckFailed, "boom")
	}
	page, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Limit: 5, WithTotal: true, Fields: []string{"n >= 0"}})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 10 || !page.TotalCapped || page.TotalIn != 10 || page.Window == nil || page.Window.Rows != 10 || !page.Window.More {
		t.Errorf("n >= 0: total %d, capped %v, window %+v; want 10 in a window of 10 with more below, capped", page.Total, page.TotalCapped, page.Window)
	}
	tr, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Limit: 5, WithTotal: true, Fields: []string{"n >= 0"}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Page.Total != 10 || !tr.Page.TotalCapped || tr.Page.TotalIn != 10 || tr.Page.Window == nil {
		t.Errorf("triage n >= 0: total %d, capped %v, window %+v; want 10, capped, a window", tr.Page.Total, tr.Page.TotalCapped, tr.Page.Window)
	}
}

// A word that every payload holds (issue 37: EUR in a million payloads)
// is read in windows of the newest dead letters, newest first: pages of
// 4 of windows of 10 find every dead letter once, in order, and say
// they read windows; the first page is the 4 newest. The store reads the
// word's index from the newest entry down to the window (SQLite: FTS4
// order=DESC, migration 0040), never its whole list (db/sqlite's
// TestCommonWordSearchReadsAWindow counts that). (Not parallel: small
// limits.)
func testSearchForAWordOfEveryPayload(t *testing.T, harness Harness) {
	defer broker.SetSearchLimits(5, 10)()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	var items []broker.PushItem
	for n := range 30 {
		items = append(items, broker.PushItem{Queue: "q", TransactionID: fmt.Sprintf("t-%d", n),
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"currency":"EUR"}`, n))})
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		res := s.pop("q", "", 1)
		s.clock.Advance(time.Second)
		s.ack(res.Messages[0], broker.AckFailed, "declined")
	}
	first, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Text: "eur", Limit: 4, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	var firstNs []int
	for _, d := range first.Items {
		var p struct{ N int }
		if err := json.Unmarshal(d.Payload, &p); err != nil {
			t.Fatal(err)
		}
		firstNs = append(firstNs, p.N)
	}
	if !slices.Equal(firstNs, []int{29, 28, 27, 26}) || first.Next == nil || !first.MatchCapped || !first.TotalCapped {
		t.Errorf("first page: %v, next %v, capped %v, total %d (capped %v); want 29…26, more, capped", firstNs, first.Next, first.MatchCapped, first.Total, first.TotalCapped)
	}
	found, _, capped := searchPages(s, broker.DLQQuery{Limit: 4, Text: "eur"})
	want := make([]int, 30)
	for i := range want {
		want[i] = 29 - i
	}
	if !slices.Equal(found, want) || !capped {
		t.Errorf("every page: found %v, capped %v; want 29…0, each once, capped", found, capped)
	}
}
