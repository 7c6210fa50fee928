package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The dead-letter list searches payloads and errors (q) and payload
// fields (field, repeatable): in the URL, shown as chips that each remove
// their own filter, kept by the form, refused with a 400 naming the bad
// filter.
func TestDeadLetterListSearchesPayloads(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.fail("payments", "", "billing", "pay-1", `{"orderId":"ord_123","amount":250,"card":{"brand":"amex"}}`, "card_declined")
	s.clock.Advance(time.Minute)
	s.fail("payments", "", "billing", "pay-2", `{"orderId":"ord_456","amount":50,"card":{"brand":"visa"}}`, "upstream timeout")
	b, _ := s.loggedIn(broker.RoleViewer)
	list := func(kv ...string) []string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		doc := b.get("/queues/payments/dead-letters?" + v.Encode()).want(http.StatusOK).doc()
		var rows []string
		doc.Find(`[data-testid="dl-row"]`).Each(func(_ int, r *goquery.Selection) { rows = append(rows, r.Text()) })
		return rows
	}
	for _, tc := range []struct {
		kv   []string
		want string // the transactionId of the one row
	}{
		{[]string{"field", "orderId = ord_123"}, "pay-1"},
		{[]string{"field", "card.brand = visa"}, "pay-2"},
		{[]string{"field", "amount > 100"}, "pay-1"},
		{[]string{"q", "ord_456"}, "pay-2"},
		{[]string{"q", "TIMEOUT"}, "pay-2"},
		{[]string{"q", "card_declined", "field", "amount > 100"}, "pay-1"},
	} {
		rows := list(tc.kv...)
		if len(rows) != 1 || !strings.Contains(rows[0], tc.want) {
			t.Errorf("%v: rows %q, want %s's", tc.kv, rows, tc.want)
		}
	}
	// Two field filters and a text: three chips, each removing its own.
	v := url.Values{"field": {"amount > 10", "card.brand = amex"}, "q": {"card_declined"}}
	r := b.get("/queues/payments/dead-letters?" + v.Encode()).want(http.StatusOK)
	doc := r.doc()
	chips := doc.Find(`[data-testid="chip"]`)
	if chips.Length() != 3 {
		t.Fatalf("%d chips, want 3: %s", chips.Length(), chips.Text())
	}
	for i, want := range []url.Values{
		{"field": {"amount > 10", "card.brand = amex"}},
		{"q": {"card_declined"}, "field": {"card.brand = amex"}},
		{"q": {"card_declined"}, "field": {"amount > 10"}},
	} {
		href, _ := chips.Eq(i).Find("a").Attr("href")
		u, err := url.Parse(href)
		if err != nil {
			t.Fatal(err)
		}
		got := u.Query()
		if got.Get("q") != want.Get("q") || strings.Join(got["field"], "|") != strings.Join(want["field"], "|") {
			t.Errorf("chip %d (%s) links to %s, want %v", i, chips.Eq(i).Text(), href, want)
		}
	}
	// The form keeps the field filters (hidden) and the text.
	var kept []string
	doc.Find(`form[data-testid="filters"] input[type="hidden"][name="field"]`).Each(func(_ int, i *goquery.Selection) {
		val, _ := i.Attr("value")
		kept = append(kept, val)
	})
	if strings.Join(kept, "|") != "amount > 10|card.brand = amex" {
		t.Errorf("the form keeps fields %q", kept)
	}
	if val, _ := doc.Find(`[data-testid="filter-q"]`).Attr("value"); val != "card_declined" {
		t.Errorf("the text box holds %q", val)
	}
	// A bad filter: a 400 that names it.
	body := string(b.get("/queues/payments/dead-letters?" + url.Values{"field": {"amount >> 1"}}.Encode()).want(http.StatusBadRequest).body)
	if !strings.Contains(body, "ield filter") || !strings.Contains(body, "amount &gt;&gt; 1") {
		t.Errorf("400 page: %s", body)
	}
}
