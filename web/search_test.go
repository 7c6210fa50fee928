package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Every page's header has the search box: a GET form to /search, a
// search landmark with a label; it holds the text searched on the
// results page.
func TestEveryPageHasTheSearchBox(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	for _, path := range []string{"/", "/queues/orders", "/queues/orders/dead-letters", "/queues/orders/dead-letters/" + d.ID + "?group=billing", "/charts", "/audit", "/search"} {
		doc := b.get(path).want(http.StatusOK).doc()
		form := doc.Find(`header form[role="search"]`)
		if form.Length() != 1 || form.AttrOr("method", "") != "get" || form.AttrOr("action", "") != "/search" {
			t.Fatalf("%s: search form %d", path, form.Length())
		}
		in := form.Find(`input[name="q"]`)
		if id := in.AttrOr("id", ""); id == "" || form.Find(`label[for="`+id+`"]`).Text() == "" {
			t.Fatalf("%s: the search box has no label", path)
		}
	}
	doc := b.get("/search?q=" + url.QueryEscape("nothing like it")).want(http.StatusOK).doc()
	if v := doc.Find(`header input[name="q"]`).AttrOr("value", ""); v != "nothing like it" {
		t.Fatalf("the box holds %q on the results page", v)
	}
}

func TestSearchPage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := seed(t, s) // ord-1 billing, ord-2 billing, ord-3 analytics, mail-1
	b, _ := s.loggedIn(broker.RoleViewer)

	// One dead letter: opened.
	b.get("/search?q=ord-1").wantRedirect("/queues/orders/dead-letters/" + d.ID + "?group=billing")
	b.get("/search?q=" + url.QueryEscape(d.ID)).wantRedirect("/queues/orders/dead-letters/" + d.ID + "?group=billing")
	short := d.ID[:8] + "…" + d.ID[len(d.ID)-4:]
	b.get("/search?q=" + url.QueryEscape(short)).wantRedirect("/queues/orders/dead-letters/" + d.ID + "?group=billing")

	// Several: listed, with queue, group, partition, transactionId and error.
	whole, _ := page(t, b, "/search?q=ord-")
	doc := whole.doc()
	rows := doc.Find(`[data-testid="search-row"]`)
	if rows.Length() != 3 {
		t.Fatalf("prefix ord-: %d rows: %s", rows.Length(), whole.testid("search-results"))
	}
	text := rows.Text()
	for _, want := range []string{"orders", "billing", "analytics", "acme", "initech", "ord-2", "upstream timeout after 30s", "card_declined: insufficient funds"} {
		if !strings.Contains(text, want) {
			t.Errorf("the list lacks %q: %s", want, text)
		}
	}
	if strings.Contains(text, "at charge()") {
		t.Errorf("the list shows more than the error's first line: %s", text)
	}
	if href := rows.First().Find(`a[data-testid="search-link"]`).AttrOr("href", ""); !strings.HasPrefix(href, "/queues/orders/dead-letters/") {
		t.Errorf("a row links to %q", href)
	}

	// None: said, with what can be searched.
	r := b.get("/search?q=" + url.QueryEscape("ord-404")).want(http.StatusOK)
	if got := r.testid("search-none"); !strings.Contains(got, "No message or dead letter matches ord-404") {
		t.Fatalf("no match: %q", got)
	}
	if r.testid("search-hints") == "" {
		t.Fatal("no hints")
	}

	// No text: the hints.
	if r := b.get("/search").want(http.StatusOK); r.testid("search-hints") == "" {
		t.Fatal("/search without text: no hints")
	}
}

// A message that is no dead letter: a page that says where it is.
func TestSearchShowsAMessageThatIsNoDeadLetter(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	p := s.push("orders", "acme", "ord-9", `{"total":9}`)
	b, _ := s.loggedIn(broker.RoleViewer)
	r := b.get("/search?q=ord-9").want(http.StatusOK)
	if got := r.testid("message-id"); got != p.MessageID {
		t.Fatalf("message id %q, want %s", got, p.MessageID)
	}
	if got := r.testid("not-dead"); !strings.Contains(got, "not in the dead letters") || !strings.Contains(got, "transactionId") {
		t.Fatalf("not-dead: %q", got)
	}
	places := r.doc().Find(`[data-testid="place"]`)
	// billing and analytics read orders: it waits for both.
	if places.Length() != 2 || !strings.Contains(places.Text(), "billing") || strings.Count(places.Text(), "waiting") != 2 {
		t.Fatalf("places: %q", places.Text())
	}
	if facts := r.testid("facts"); !strings.Contains(facts, "acme") || !strings.Contains(facts, "orders") {
		t.Fatalf("facts: %q", facts)
	}
}

// Hostile text: escaped, a clear 400 or no match, never a 500.
func TestSearchPageWithHostileText(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	for _, q := range []string{`<script>alert(1)</script>`, `' OR 1=1 --`, `"><img src=x onerror=alert(1)>`, "%", "\x00"} {
		r := b.get("/search?q=" + url.QueryEscape(q)).want(http.StatusOK)
		if strings.Contains(string(r.body), "<script>alert") || strings.Contains(string(r.body), "<img src=x") {
			t.Fatalf("%q: not escaped", q)
		}
		if r.testid("search-none") == "" {
			t.Fatalf("%q: no 'no match'", q)
		}
	}
	for name, raw := range map[string]string{
		"10 KB":    url.QueryEscape(strings.Repeat("ord-", 2560)),
		"not UTF8": "ord%FF%FE",
	} {
		r := b.get("/search?q=" + raw).want(http.StatusBadRequest)
		if got := r.testid("flash"); got == "" {
			t.Fatalf("%s: no error said", name)
		}
		if r.doc().Find(`header form[role="search"]`).Length() != 1 {
			t.Fatalf("%s: the error page has no search box", name)
		}
	}
}

func TestSearchAPI(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := seed(t, s)
	p := s.push("orders", "acme", "ord-9", `{"total":9}`)
	var out struct {
		Query      string   `json:"query"`
		SearchedAs []string `json:"searchedAs"`
		More       bool     `json:"more"`
		Matches    []struct {
			Match         string  `json:"match"`
			DeadLetter    bool    `json:"deadLetter"`
			ID            string  `json:"id"`
			Queue         string  `json:"queue"`
			Partition     string  `json:"partition"`
			ConsumerGroup *string `json:"consumerGroup"`
			TransactionID string  `json:"transactionId"`
			ErrorLine     *string `json:"errorLine"`
			FailedAt      *string `json:"failedAt"`
			Groups        []struct {
				ConsumerGroup string `json:"consumerGroup"`
				State         string `json:"state"`
			} `json:"groups"`
		} `json:"matches"`
	}
	s.call("GET", "/api/v1/search?q="+url.QueryEscape(d.ID), "").want(http.StatusOK).decode(&out)
	if len(out.Matches) != 1 || out.Matches[0].ID != d.ID || !out.Matches[0].DeadLetter || *out.Matches[0].ConsumerGroup != "billing" ||
		*out.Matches[0].ErrorLine != "card_declined: insufficient funds" || out.Matches[0].Match != "message id" {
		t.Fatalf("by id: %+v", out)
	}
	out.Matches = nil
	s.call("GET", "/api/v1/search?q=ord-9", "").want(http.StatusOK).decode(&out)
	if len(out.Matches) != 1 || out.Matches[0].ID != p.MessageID || out.Matches[0].DeadLetter || out.Matches[0].ConsumerGroup != nil ||
		out.Matches[0].FailedAt != nil || len(out.Matches[0].Groups) != 2 || out.Matches[0].Groups[0].State != "pending" {
		t.Fatalf("a message: %+v", out)
	}
	out.Matches = nil
	s.call("GET", "/api/v1/search?q=ord-&limit=2", "").want(http.StatusOK).decode(&out)
	if len(out.Matches) != 2 || !out.More {
		t.Fatalf("limit 2: %+v", out)
	}
	out.Matches = nil
	s.call("GET", "/api/v1/search?q=nothing", "").want(http.StatusOK).decode(&out)
	if out.Matches == nil || len(out.Matches) != 0 || out.Query != "nothing" {
		t.Fatalf("none: %+v", out)
	}
	s.call("GET", "/api/v1/search?q=", "").wantError(http.StatusBadRequest, "empty")
	s.call("GET", "/api/v1/search?q=ord%FF", "").wantError(http.StatusBadRequest, "UTF-8")
	s.call("GET", "/api/v1/search?q="+strings.Repeat("x", 10<<10), "").wantError(http.StatusBadRequest, "at most")
	s.call("GET", "/api/v1/search?q=x&limit=0", "").wantError(http.StatusBadRequest, "limit")
}

// The page of a replayed copy's dead letter links to its original, whose
// search says it was replayed, and as which copy.
func TestReplayedCopyLinksToItsOriginal(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("orders", "", "billing", "ord-1", `{"total":1}`, "declined")
	var rep struct {
		MessageID string `json:"messageId"`
	}
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").want(http.StatusOK).decode(&rep)
	var p popped
	s.call("GET", "/api/v1/pop/queue/orders/partition/Default?consumerGroup=billing", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 1 || p.Messages[0].ID != rep.MessageID {
		t.Fatalf("popped %+v, want the copy %s", p.Messages, rep.MessageID)
	}
	s.ack(p.Messages[0], "failed", "declined again").want(http.StatusOK)

	b, _ := s.loggedIn(broker.RoleViewer)
	r := b.get("/queues/orders/dead-letters/" + rep.MessageID + "?group=billing").want(http.StatusOK)
	link := r.doc().Find(`p.sub a[href="` + "/search?q=" + url.QueryEscape(d.ID) + `"]`)
	if link.Length() != 1 || link.Text() != d.ID {
		t.Fatalf("the copy's page does not link to its original: %s", r.testid("is-replay"))
	}
	r = b.get("/search?q=" + url.QueryEscape(d.ID)).want(http.StatusOK)
	if got := r.testid("replayed-as"); !strings.Contains(got, rep.MessageID) {
		t.Fatalf("the original's page: %q", got)
	}
}
