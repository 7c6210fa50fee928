package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// errorTexts are the error texts of testErrorContainsIndexAndScanAgree:
// words that hold a typed text as part of a longer word, across _, - and
// ., in other cases, beside non-ASCII letters, and none.
var errorTexts = []string{
	"ReadTimeoutError: timeout, after 30s",
	"timeout",
	"Timeout-retry exhausted",
	"time out after 30s",
	"connection refused (ECONNREFUSED)",
	"xrefused by peer",
	"card declined: insufficient_funds",
	"Card Declined: insufficient funds",
	"café timeout, après 30s",
	"upstream connect error or disconnect/reset before headers",
	"",
	"a-b c_d e.f",
	"payment failed: card_declined (code 51)",
	"error: timeout,after",
	"TIMEOUT, after 30S",
	"connection refusedByPeer",
	"Connection Refused",
}

// fileErrors files one dead letter of queue q for each text, one a
// second, with payload {"n": its index}.
func fileErrors(s *bundle, texts []string) {
	s.t.Helper()
	s.configure("q", map[string]any{"retryLimit": 0})
	var items []broker.PushItem
	for n := range texts {
		items = append(items, broker.PushItem{Queue: "q", TransactionID: fmt.Sprintf("t-%d", n), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		s.t.Fatal(err)
	}
	for _, text := range texts {
		res := s.pop("q", "", 1)
		s.clock.Advance(time.Second)
		s.ack(res.Messages[0], broker.AckFailed, text)
	}
}

// asciiLower is SQLite's lower(): ASCII letters only.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// errorPages follows the pages of an error text filter to the end: the
// n of every dead letter found, newest first, and whether a page read a
// window (no index).
func errorPages(s *bundle, text string) (found []int, windowed bool) {
	s.t.Helper()
	q := broker.DLQQuery{Queue: "q", ErrorContains: text, Limit: 4, WithTotal: true}
	for range 100 {
		page, err := s.b.DeadLetters(s.ctx, q)
		if err != nil {
			s.t.Fatalf("error contains %q: %v", text, err)
		}
		for _, d := range page.Items {
			var p struct{ N int }
			if err := json.Unmarshal(d.Payload, &p); err != nil {
				s.t.Fatal(err)
			}
			found = append(found, p.N)
		}
		windowed = windowed || page.Window != nil
		if page.Next == nil {
			return found, windowed
		}
		q.After = page.Next
	}
	s.t.Fatal("more than 100 pages")
	return
}

// "Error contains" finds the same dead letters whether the error texts'
// index narrows it (the whole words the text bounds, and the prefix it
// ends in, when rare) or the
// text is checked on every row of a window: what a plain substring test
// (any case) finds. (Not parallel: it sets the search's limits.)
func testErrorContainsIndexAndScanAgree(t *testing.T, harness Harness) {
	s := setup(t, harness)
	fileErrors(s, errorTexts)
	queries := []struct {
		text    string
		indexed bool // it has words the index answers (whole, or a prefix)
	}{
		{" timeout,", true}, {": timeout, after", true}, {"timeout", false}, {"TIMEOUT", false}, {"timeout, after", true},
		{"connection refused (", true}, {"(ECONNREFUSED)", true}, {" refused ", true}, {"refused", false},
		{"connection refused", true}, {"Connection Refused", true}, {" refus", true}, {"connection re", false},
		{"declined: insufficient", true}, {"card declined: insufficient_funds", true}, {"Declined: insufficient ", true},
		{"payment failed: card_decl", true}, {"café timeout, ", true}, {"error or disconnect/reset before", true},
		{"c_d e", false}, {" c_d ", true}, {" e.f", true}, {"(code 51)", true}, {"absent words here", true}, {"zzz", false},
		{"rror: timeout,", true}, {" 30s", true}, {" after 30s", true}, {"-", false}, {"_", false}, {" - ", false}, {"30S", false},
	}
	for _, q := range queries {
		if got := broker.ErrorWords(q.text) != ""; got != q.indexed {
			t.Errorf("ErrorWords(%q) = %q: want words %v", q.text, broker.ErrorWords(q.text), q.indexed)
		}
		var want []int
		for n := len(errorTexts) - 1; n >= 0; n-- {
			if strings.Contains(asciiLower(errorTexts[n]), asciiLower(q.text)) {
				want = append(want, n)
			}
		}
		// Each word is rare (at most 1,000 matches): the index narrows.
		restore := broker.SetSearchLimits(1000, 1000)
		byIndex, windowed := errorPages(s, q.text)
		restore()
		if windowed == q.indexed {
			t.Errorf("error contains %q: read a window %v, want %v (the index narrows when there are words)", q.text, windowed, !q.indexed)
		}
		// Every word is common: a window of every dead letter, checked.
		restore = broker.SetSearchLimits(-1, 1000)
		byScan, windowed := errorPages(s, q.text)
		restore()
		if !windowed {
			t.Errorf("error contains %q with every word common: no window", q.text)
		}
		if !slices.Equal(byIndex, byScan) || !slices.Equal(byIndex, want) {
			t.Errorf("error contains %q: by the index %v, by a scan %v, want %v", q.text, byIndex, byScan, want)
		}
	}
}

// A rare or absent error text is checked in windows of the newest dead
// letters (FieldScan), a page each, which say so and go on below: never
// a read of the whole queue. The one old match is found three windows
// down; words the text bounds find it from the index in one page.
// (Not parallel: it makes the limits small.)
func testErrorContainsReadsInWindows(t *testing.T, harness Harness) {
	defer broker.SetSearchLimits(5, 10)()
	s := setup(t, harness)
	texts := make([]string, 30)
	for n := range texts {
		texts[n] = "upstream timeout (504)"
	}
	texts[3] = "the needle: found, in a haystack"
	fileErrors(s, texts)

	q := broker.DLQQuery{Queue: "q", ErrorContains: "needle", Limit: 5, WithTotal: true}
	var windows []broker.SearchWindow
	var found []broker.DeadLetter
	for range 10 {
		page, err := s.b.DeadLetters(s.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if page.Window == nil {
			t.Fatalf("error contains needle: page %d read no window", len(windows)+1)
		}
		windows, found = append(windows, *page.Window), append(found, page.Items...)
		if len(windows) == 1 && (page.Total != 0 || !page.TotalCapped || page.TotalIn != 10 || page.Scanned != 10 || page.Next == nil) {
			t.Errorf("first page: total %d capped %v in %d, scanned %d, next %v; want none in the newest 10, capped, and a next window", page.Total, page.TotalCapped, page.TotalIn, page.Scanned, page.Next)
		}
		if page.Next == nil {
			break
		}
		q.After = page.Next
	}
	if len(windows) != 3 || len(found) != 1 || found[0].Error != texts[3] {
		t.Errorf("error contains needle: %d windows, found %d; want 3 windows and the needle", len(windows), len(found))
	}
	// The list page (Triage) reads the same window.
	tr, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: "absent", Limit: 5, WithTotal: true}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Page.Window == nil || tr.Page.Scanned != 10 || tr.Page.Next == nil || len(tr.Page.Items) != 0 || tr.Page.TotalIn != 10 {
		t.Errorf("triage of an absent text: %+v; want an empty window of 10 and a next", tr.Page)
	}
	// Words the text bounds: from the index, in one page, exactly.
	page, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: "the needle: found,", Limit: 5, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	if page.Window != nil || len(page.Items) != 1 || page.Total != 1 || page.TotalCapped || page.Next != nil {
		t.Errorf("error contains \"the needle: found,\": %+v; want the needle from the index, one page", page)
	}
	// Common words (30 timeouts > 5) are checked in the window.
	page, err = s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: " timeout (", Limit: 50, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	if page.Window == nil || len(page.Items) != 10 || page.Next == nil {
		t.Errorf("error contains \" timeout (\": %d items, window %+v; want the newest window's 10, and a next", len(page.Items), page.Window)
	}
}
