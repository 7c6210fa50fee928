package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// Error groups you own (SPEC section 7): the API, /metrics, the pages.

// ownedGroup is an error group as the API answers it.
type ownedGroup struct {
	ID            int64   `json:"id"`
	Queue         string  `json:"queue"`
	ConsumerGroup string  `json:"consumerGroup"`
	Fingerprint   string  `json:"fingerprint"`
	State         string  `json:"state"`
	Regressed     bool    `json:"regressed"`
	Owner         *string `json:"owner"`
	Note          *string `json:"note"`
	Link          *string `json:"link"`
	DeadLetters   int64   `json:"deadLetters"`
	FirstSeen     *string `json:"firstSeen"`
	Funnel        struct {
		Life struct {
			Filed, Replayed, Succeeded, FailedAgain int64
		} `json:"life"`
		Day struct {
			Filed int64 `json:"filed"`
		} `json:"day"`
	} `json:"funnel"`
	Pending  int64 `json:"pending"`
	Evidence struct {
		Replayed, Succeeded, FailedAgain, Pending int64
	} `json:"evidence"`
	Trend   []int64           `json:"trend"`
	History []json.RawMessage `json:"history"`
}

type ownedGroups struct {
	ErrorGroups []ownedGroup `json:"errorGroups"`
}

// timeoutFP is the fingerprint of seed's "upstream timeout after 30s",
// the error of billing and of analytics in queue orders.
const timeoutFP = "upstream timeout after <n>s"

// fpPath is the API path of an error group, its fingerprint escaped.
func fpPath(fp string) string { return "/api/v1/error-groups/" + url.PathEscape(fp) }

func TestErrorGroupsAPIListsReadsAndChangesState(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)

	var list ownedGroups
	s.call("GET", "/api/v1/error-groups?queue=orders", "").want(http.StatusOK).decode(&list)
	if len(list.ErrorGroups) != 3 {
		t.Fatalf("orders' groups: %+v, want card_declined of billing and the timeout of billing and of analytics", list.ErrorGroups)
	}
	for _, g := range list.ErrorGroups {
		if g.State != "open" || g.DeadLetters != 1 || g.Funnel.Life.Filed != 1 || g.Funnel.Day.Filed != 1 || g.FirstSeen == nil {
			t.Fatalf("a new group: %+v", g)
		}
	}
	s.call("GET", "/api/v1/error-groups?queue=orders&consumerGroup=analytics", "").want(http.StatusOK).decode(&list)
	if len(list.ErrorGroups) != 1 || list.ErrorGroups[0].Fingerprint != timeoutFP {
		t.Fatalf("analytics' groups: %+v", list.ErrorGroups)
	}

	// One group: its fingerprint escaped in the path; a consumer group
	// is needed when two have it.
	s.call("GET", fpPath(timeoutFP)+"?queue=orders", "").wantError(http.StatusBadRequest, "billing", "analytics")
	s.call("GET", fpPath(timeoutFP), "").wantError(http.StatusBadRequest, "queue")
	s.call("GET", fpPath("no such error")+"?queue=orders&consumerGroup=billing", "").wantError(http.StatusNotFound)
	var one ownedGroup
	s.call("GET", fpPath(timeoutFP)+"?queue=orders&consumerGroup=billing", "").want(http.StatusOK).decode(&one)
	if one.ConsumerGroup != "billing" || one.Fingerprint != timeoutFP || len(one.Trend) != broker.TrendHours || one.History == nil {
		t.Fatalf("one group: %+v", one)
	}

	// Bad input is a 400 and changes nothing.
	state := fpPath(timeoutFP) + "/state"
	for _, bad := range []struct{ body, says string }{
		{`{"queue":"orders","consumerGroup":"billing","state":"fixed"}`, "state must be"},
		{`{"queue":"orders","consumerGroup":"billing"}`, "state must be"},
		{`{"consumerGroup":"billing","state":"acknowledged"}`, "queue is required"},
		{`{"queue":"orders","consumerGroup":"billing","state":"acknowledged","link":"javascript:alert(1)"}`, "link"},
		{`{"queue":"orders","consumerGroup":"billing","state":"acknowledged","link":"ftp://files.example/x"}`, "link"},
		{`{"queue":"orders","consumerGroup":"billing","state":"ignored","until":"tomorrow"}`, "RFC 3339"},
		{`{"queue":"orders","consumerGroup":"billing","state":"ignored","until":"2020-01-01T00:00:00Z"}`, "future"},
		{`{"queue":"orders","consumerGroup":"billing","state":"ignored","untilCount":-2}`, "untilCount"},
		{`{"queue":"orders","consumerGroup":"billing","state":"open","until":"2030-01-01T00:00:00Z"}`, "ignored"},
		{`{"queue":"orders","consumerGroup":"billing","state":"acknowledged","note":"` + strings.Repeat("n", broker.MaxGroupNote+1) + `"}`, "note"},
	} {
		s.call("POST", state, bad.body).wantError(http.StatusBadRequest, bad.says)
	}
	s.call("GET", fpPath(timeoutFP)+"?queue=orders&consumerGroup=billing", "").want(http.StatusOK).decode(&one)
	if one.State != "open" || one.Owner != nil || len(one.History) != 0 {
		t.Fatalf("after bad changes: %+v", one)
	}

	// Acknowledge, without consumerGroup: every consumer group with it.
	var changed ownedGroups
	s.call("POST", state, `{"queue":"orders","state":"acknowledged","owner":"ana","note":"PAY-1432: gateway slow","link":"https://tickets.example/PAY-1432"}`).
		want(http.StatusOK).decode(&changed)
	if len(changed.ErrorGroups) != 2 {
		t.Fatalf("acknowledged %d groups, want billing's and analytics'", len(changed.ErrorGroups))
	}
	for _, g := range changed.ErrorGroups {
		if g.State != "acknowledged" || g.Owner == nil || *g.Owner != "ana" || g.Note == nil || *g.Note != "PAY-1432: gateway slow" {
			t.Fatalf("acknowledged: %+v", g)
		}
	}
	s.call("GET", "/api/v1/error-groups?state=acknowledged&owner=ana", "").want(http.StatusOK).decode(&list)
	if len(list.ErrorGroups) != 2 {
		t.Fatalf("ana's acknowledged groups: %d", len(list.ErrorGroups))
	}
	s.call("GET", "/api/v1/error-groups?state=ack", "").wantError(http.StatusBadRequest, "state must be")
	s.call("GET", "/api/v1/error-groups?limit=0", "").wantError(http.StatusBadRequest, "limit")

	// A replayed copy not settled yet: the resolve is refused, 409, with
	// the evidence; once the copy completes, it goes through.
	billing := s.deadLetters("queue=orders&consumerGroup=billing&fingerprint=" + url.QueryEscape(timeoutFP))
	if len(billing.Messages) != 1 {
		t.Fatalf("billing's timeout: %d dead letters", len(billing.Messages))
	}
	s.call("POST", "/api/v1/dlq/"+billing.Messages[0].ID+"/replay", `{"mode":"own","consumerGroup":"billing"}`).want(http.StatusOK)
	resolve := `{"queue":"orders","consumerGroup":"billing","state":"resolved","note":"timeout raised","version":"1.8.3"}`
	r := s.call("POST", state, resolve)
	msg := r.wantError(http.StatusConflict, "1 replayed", "1 pending", "force")
	var refused struct {
		Evidence []struct {
			ConsumerGroup string `json:"consumerGroup"`
			Replayed      int64  `json:"replayed"`
			Pending       int64  `json:"pending"`
		} `json:"evidence"`
	}
	r.decode(&refused)
	if len(refused.Evidence) != 1 || refused.Evidence[0].ConsumerGroup != "billing" || refused.Evidence[0].Replayed != 1 || refused.Evidence[0].Pending != 1 {
		t.Fatalf("refused resolve's evidence: %s (%s)", r.body, msg)
	}
	// billing completes the copy, at the end of partition acme.
	var p popped
	s.call("GET", "/api/v1/pop/queue/orders/partition/acme?consumerGroup=billing", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 1 || !strings.HasPrefix(p.Messages[0].TransactionID, broker.ReplayPrefix) {
		t.Fatalf("billing popped %+v, want the copy", p.Messages)
	}
	s.ack(p.Messages[0], "completed", "").want(http.StatusOK)
	s.call("POST", state, resolve).want(http.StatusOK).decode(&changed)
	if g := changed.ErrorGroups[0]; g.State != "resolved" || g.Funnel.Life.Succeeded != 1 || g.Pending != 0 {
		t.Fatalf("resolved: %+v", g)
	}
	s.call("GET", fpPath(timeoutFP)+"?queue=orders&consumerGroup=billing", "").want(http.StatusOK).decode(&one)
	if len(one.History) != 2 {
		t.Fatalf("history after acknowledge and resolve: %d changes", len(one.History))
	}
}

// Viewers read error groups; only operators change them.
func TestErrorGroupStateNeedsAnOperator(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.OpenAPI = false })
	viewer := s.apiToken(s.addUser("eg-viewer", broker.RoleViewer), "t")
	operator := s.apiToken(s.addUser("eg-operator", broker.RoleOperator), "t")
	s.token = s.apiToken(s.addUser("eg-admin", broker.RoleAdmin), "t")
	seed(t, s)
	body := `{"queue":"orders","consumerGroup":"billing","state":"acknowledged"}`
	call := func(token, method, path, body string) response {
		return s.request(s.ctx, method, path, body, http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}})
	}
	call(viewer, "GET", "/api/v1/error-groups", "").want(http.StatusOK)
	call(viewer, "POST", fpPath(timeoutFP)+"/state", body).wantError(http.StatusForbidden)
	var changed ownedGroups
	call(operator, "POST", fpPath(timeoutFP)+"/state", body).want(http.StatusOK).decode(&changed)
	if g := changed.ErrorGroups[0]; g.Owner == nil || !strings.Contains(*g.Owner, "eg-operator") {
		t.Fatalf("an acknowledge without owner: %+v, want the caller", g)
	}
}

// /metrics says how many groups of each queue are open, and regressed.
func TestErrorGroupMetricsCountOpenAndRegressed(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	seed(t, s)
	value := func(name, queue string) float64 {
		t.Helper()
		v, ok := metricValue(t, scrape(t, s, nil), name, map[string]string{"queue": queue})
		if !ok {
			t.Fatalf("no %s{queue=%q}", name, queue)
		}
		return v
	}
	if v := value("lazarus_error_groups_open", "orders"); v != 3 {
		t.Fatalf("open in orders: %v, want 3", v)
	}
	s.call("POST", fpPath("card_declined: insufficient funds")+"/state", `{"queue":"orders","state":"resolved"}`).want(http.StatusOK)
	if v := value("lazarus_error_groups_open", "orders"); v != 2 {
		t.Fatalf("open in orders after a resolve: %v, want 2", v)
	}
	s.fail("orders", "acme", "billing", "ord-9", `{}`, "card_declined: insufficient funds")
	if v, r := value("lazarus_error_groups_open", "orders"), value("lazarus_error_groups_regressed", "orders"); v != 3 || r != 1 {
		t.Fatalf("after it came back: open %v regressed %v, want 3 and 1", v, r)
	}
	if v := value("lazarus_error_groups_regressed", "emails"); v != 0 {
		t.Fatalf("regressed in emails: %v", v)
	}
}

// hostileNote and hostileLink are what a careless or hostile person may
// write on a group: markup in the note, a link that tries to leave its
// attribute.
const (
	hostileNote = "<script>alert('note')</script> PAY-1432\nsecond line <b>bold</b>"
	hostileLink = `https://tickets.example/PAY-1432?q="><script>alert(1)</script>`
)

// The pages: the list across queues, a group's page, the badge on the
// dead-letter list, the banner on a dead letter, the overview; text
// people wrote is shown as text, and only an http(s) link is an href.
func TestErrorGroupPagesShowStateAndEscape(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := seed(t, s)
	s.call("POST", fpPath(timeoutFP)+"/state", `{"queue":"orders","consumerGroup":"billing","state":"acknowledged","owner":"ana","note":`+
		jsonString(hostileNote)+`,"link":`+jsonString(hostileLink)+`}`).want(http.StatusOK)
	s.call("POST", fpPath("<n> mailbox unavailable")+"/state", `{"queue":"emails","state":"ignored","untilCount":5}`).want(http.StatusOK)
	s.call("POST", fpPath(timeoutFP)+"/state", `{"queue":"orders","state":"acknowledged","link":"javascript:alert(1)"}`).wantError(http.StatusBadRequest, "link")

	viewer, _ := s.loggedIn(broker.RoleViewer)
	whole, _ := page(t, viewer, "/error-groups")
	doc := whole.doc()
	rows := doc.Find(`[data-testid="owned-group"]`)
	if rows.Length() != 4 {
		t.Fatalf("%d groups listed, want 4", rows.Length())
	}
	var order []string
	rows.Each(func(_ int, r *goquery.Selection) { order = append(order, r.AttrOr("data-state", "")) })
	if strings.Join(order, ",") != "open,open,acknowledged,ignored" {
		t.Fatalf("order %v: open first, ignored last", order)
	}
	last := rows.Last()
	if got := last.Find(`[data-testid="group-ignore-end"]`).Text(); !strings.Contains(got, "until 5 more dead letters") {
		t.Fatalf("an ignored group says %q", got)
	}
	ack := rows.Eq(2)
	if got := ack.Find(`[data-testid="group-note"]`).Text(); got != "<script>alert('note')</script> PAY-1432 …" {
		t.Fatalf("note's first line %q", got)
	}
	if doc.Find(`#page script`).Length() != 0 || strings.Contains(string(whole.body), "<script>alert") {
		t.Fatal("the note became markup")
	}
	if href, _ := ack.Find(`[data-testid="group-link"]`).Attr("href"); href != hostileLink {
		t.Fatalf("link href %q, want the link as written, escaped in its attribute", href)
	}
	if n := viewer.get("/error-groups?state=acknowledged").want(http.StatusOK).doc().Find(`[data-testid="owned-group"]`).Length(); n != 1 {
		t.Fatalf("acknowledged: %d", n)
	}
	if n := viewer.get("/error-groups?owner=ana&queue=orders&group=billing").want(http.StatusOK).doc().Find(`[data-testid="owned-group"]`).Length(); n != 1 {
		t.Fatalf("ana's: %d", n)
	}
	viewer.get("/error-groups?state=fixed").want(http.StatusBadRequest)

	// The group's page: what is known, the funnel, no actions for a viewer.
	href, _ := ack.Find(`[data-testid="group-open"]`).Attr("href")
	gp, _ := page(t, viewer, href)
	g := gp.doc()
	if got := g.Find(`[data-testid="group-note"]`).Text(); got != hostileNote {
		t.Fatalf("the page's note %q", got)
	}
	if g.Find(`#page script`).Length() != 0 {
		t.Fatal("a script on the group's page")
	}
	if got := strings.TrimSpace(g.Find(`[data-testid="funnel-filed-life"]`).Text()); got != "1" {
		t.Fatalf("funnel filed %q", got)
	}
	if g.Find(`[data-testid="group-actions"]`).Length() != 0 {
		t.Fatal("a viewer is offered actions")
	}
	if dl, _ := g.Find(`[data-testid="group-dead-letters-link"]`).Attr("href"); !strings.Contains(dl, "fingerprint=") || !strings.Contains(dl, "group=billing") {
		t.Fatalf("its dead letters: %q", dl)
	}

	// The dead-letter list's group links to the group's page, with its state.
	list := viewer.get("/queues/orders/dead-letters?group=billing").want(http.StatusOK).doc()
	link := list.Find(`[data-testid="error-group-page"]`).FilterFunction(func(_ int, l *goquery.Selection) bool {
		return l.AttrOr("href", "") == href
	})
	if link.Length() != 1 || link.Find(`[data-testid="group-state"]`).Text() != "acknowledged" {
		t.Fatalf("the list's link to %s: %d", href, link.Length())
	}

	// Support reads the note on the dead letter; an open group nobody
	// wrote on has no banner.
	banner := viewer.get("/queues/orders/dead-letters?group=billing&fingerprint=" + url.QueryEscape(timeoutFP)).want(http.StatusOK).doc()
	id := banner.Find(`[data-testid="dl-row"]`).AttrOr("data-id", "")
	dp := viewer.get("/queues/orders/dead-letters/" + id + "?group=billing").want(http.StatusOK)
	k := dp.doc().Find(`[data-testid="known-issue"]`)
	if k.Length() != 1 || k.Find(`[data-testid="known-note"]`).Text() != "<script>alert('note')</script> PAY-1432 …" ||
		k.Find(`[data-testid="known-owner"]`).Text() != "ana" || k.Find(`[data-testid="group-state"]`).Text() != "acknowledged" {
		t.Fatalf("known issue: %q", k.Text())
	}
	if strings.Contains(string(dp.body), "<script>alert") {
		t.Fatal("the banner made the note markup")
	}
	if viewer.get("/queues/orders/dead-letters/"+d.ID+"?group=billing").want(http.StatusOK).doc().Find(`[data-testid="known-issue"]`).Length() != 0 {
		t.Fatal("a banner on a dead letter of an open group nobody wrote on")
	}

	// The overview: the open groups first, linked to the list of them.
	ov := viewer.get("/").want(http.StatusOK).doc()
	if got := ov.Find(`[data-testid="open-groups-link"]`); !strings.Contains(got.Text(), "2 open error groups") || got.AttrOr("href", "") != "/error-groups?state=open" {
		t.Fatalf("overview's open groups: %q %q", got.Text(), got.AttrOr("href", ""))
	}
	if n := ov.Find(`[data-testid="open-group"]`).Length(); n != 2 {
		t.Fatalf("overview lists %d open groups", n)
	}
}

// An operator acts from the group's page: acknowledge (owner: the user),
// a refused resolve says why and offers Force, the forced resolve, an
// ignore until a count, reopen. A viewer's post is refused.
func TestErrorGroupPageActions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	var one ownedGroup
	s.call("GET", fpPath(timeoutFP)+"?queue=orders&consumerGroup=billing", "").want(http.StatusOK).decode(&one)
	path := "/error-groups/" + jsonInt(one.ID)

	viewer, _ := s.loggedIn(broker.RoleViewer)
	viewer.post(path+"/state", url.Values{"state": {"acknowledged"}}).want(http.StatusForbidden)

	op, u := s.loggedIn(broker.RoleOperator)
	g := op.get(path).want(http.StatusOK).doc()
	if g.Find(`[data-testid="ack-owner"]`).AttrOr("value", "") != u.Name {
		t.Fatalf("acknowledge's owner defaults to %q, want %q", g.Find(`[data-testid="ack-owner"]`).AttrOr("value", ""), u.Name)
	}
	replay, _ := g.Find(`[data-testid="group-replay"]`).Attr("hx-get")
	confirm := op.get(replay).want(http.StatusOK).doc()
	if _, on := confirm.Find(`[data-testid="confirm-canary-on"]`).Attr("checked"); !on {
		t.Fatal("the group's replay does not offer a canary")
	}
	if got := confirm.Find(`[data-testid="confirm-summary"]`).Text(); !strings.Contains(got, "1 message") || !strings.Contains(got, timeoutFP) {
		t.Fatalf("the group's replay confirms %q", got)
	}

	op.post(path+"/state", url.Values{"state": {"acknowledged"}, "owner": {""}, "note": {"looking"}, "link": {""}}).wantRedirect(path)
	g = op.get(path).want(http.StatusOK).doc()
	if got := g.Find(`[data-testid="flash"]`).Text(); !strings.Contains(got, "Acknowledged: owner "+u.Name) {
		t.Fatalf("flash %q", got)
	}
	if got := strings.TrimSpace(g.Find(`[data-testid="group-owner"]`).Text()); got != u.Name {
		t.Fatalf("owner %q", got)
	}
	op.post(path+"/state", url.Values{"state": {"acknowledged"}, "link": {"javascript:alert(1)"}}).want(http.StatusBadRequest)

	// A replay not settled: the resolve is refused, the page says why.
	s.call("POST", "/api/v1/dlq/"+s.deadLetters("queue=orders&consumerGroup=billing&fingerprint=" + url.QueryEscape(timeoutFP)).Messages[0].ID+"/replay",
		`{"mode":"own","consumerGroup":"billing"}`).want(http.StatusOK)
	g = op.get(path).want(http.StatusOK).doc()
	if got := g.Find(`[data-testid="resolve-evidence"]`).Text(); !strings.Contains(got, "1 replayed, 0 succeeded, 0 failed again, 1 pending since") {
		t.Fatalf("evidence %q", got)
	}
	refused := op.post(path+"/state", url.Values{"state": {"resolved"}, "note": {"raised the timeout"}, "version": {"1.8.3"}}).want(http.StatusConflict).doc()
	if got := refused.Find(`[data-testid="resolve-refused"]`).Text(); !strings.Contains(got, "1 pending") || refused.Find(`[data-testid="resolve-force"]`).Length() != 1 {
		t.Fatalf("refused: %q", got)
	}
	form := url.Values{}
	refused.Find(`[data-testid="resolve-refused"] form input`).Each(func(_ int, in *goquery.Selection) {
		form.Set(in.AttrOr("name", ""), in.AttrOr("value", ""))
	})
	op.postRaw(path+"/state", form, nil).wantRedirect(path)
	s.call("GET", fpPath(timeoutFP)+"?queue=orders&consumerGroup=billing", "").want(http.StatusOK).decode(&one)
	if one.State != "resolved" || one.Note == nil || *one.Note != "raised the timeout" {
		t.Fatalf("forced resolve: %+v", one)
	}

	op.post(path+"/state", url.Values{"state": {"ignored"}, "for": {"count"}, "untilCount": {"3"}, "note": {"noise"}}).wantRedirect(path)
	if got := op.get(path).want(http.StatusOK).doc().Find(`dd[data-testid="group-ignore-end"]`).Text(); !strings.Contains(got, "until 3 more dead letters") {
		t.Fatalf("ignored %q", got)
	}
	// Editing the note of an ignored group keeps its end.
	op.post(path+"/state", url.Values{"state": {"ignored"}, "for": {"keep"}, "note": {"noise, see PAY-9"}, "link": {""}}).wantRedirect(path)
	if got := op.get(path).want(http.StatusOK).doc().Find(`dd[data-testid="group-ignore-end"]`).Text(); !strings.Contains(got, "until 3 more dead letters") {
		t.Fatalf("after a note edit: ignored %q", got)
	}
	op.post(path+"/state", url.Values{"state": {"ignored"}, "for": {"time"}, "until": {""}}).want(http.StatusBadRequest)
	op.post(path+"/state", url.Values{"state": {"ignored"}, "for": {"time"}, "until": {s.clock.Now().Add(time.Hour).Format("2006-01-02T15:04")}}).wantRedirect(path)
	op.post(path+"/state", url.Values{"state": {"open"}}).wantRedirect(path)
	s.call("GET", fpPath(timeoutFP)+"?queue=orders&consumerGroup=billing", "").want(http.StatusOK).decode(&one)
	if one.State != "open" || len(one.History) != 6 {
		t.Fatalf("reopened: %+v, %d changes", one.State, len(one.History))
	}
	op.get("/error-groups/999999").want(http.StatusNotFound)
	op.get("/error-groups/x").want(http.StatusNotFound)
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
