package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The secrets of maskFixture's payload: none may be shown masked.
const (
	maskCard  = "4111111111111111"
	maskEmail = "ada@example.com"
)

// maskFixture is a dead letter of queue orders (group billing) whose
// payload holds a card number and an email, the queue masking both (the
// card number to operators too, the email at any depth), and a token and
// a logged-in browser of each role.
type maskFixture struct {
	s      *bundle
	d      deadLetter
	tokens map[broker.Role]string
	pages  map[broker.Role]*browser
}

const maskPayload = `{"card":{"number":"` + maskCard + `","brand":"visa"},"customer":{"email":"` + maskEmail + `"},"amount":12}`

func newMaskFixture(t *testing.T) maskFixture {
	t.Helper()
	s := setup(t)
	d := s.fail("orders", "p", "billing", "tx-1", maskPayload, "card declined")
	s.configure("orders", `{"maskPaths":["$.card.number","$..email"]}`)
	f := maskFixture{s: s, d: d, tokens: map[broker.Role]string{}, pages: map[broker.Role]*browser{}}
	for _, r := range []broker.Role{broker.RoleViewer, broker.RoleOperator, broker.RoleAdmin} {
		b, u := s.loggedIn(r)
		f.pages[r], f.tokens[r] = b, s.apiToken(u, "t")
	}
	return f
}

// as calls the API as a token of role.
func (f maskFixture) as(role broker.Role, method, path, body string) response {
	f.s.t.Helper()
	return f.s.request(f.s.ctx, method, path, body, http.Header{"Authorization": {"Bearer " + f.tokens[role]}})
}

// wantMasked fails unless body shows the fixture's payload masked: no
// secret, ••• in their place, the rest as it was.
func wantMasked(t *testing.T, where string, body []byte) {
	t.Helper()
	s := string(body)
	if strings.Contains(s, maskCard) || strings.Contains(s, maskEmail) || strings.Contains(s, "ada@") {
		t.Errorf("%s shows a masked value: %.600s", where, s)
	}
	if !strings.Contains(s, broker.MaskedValue) && !strings.Contains(s, `\u2022\u2022\u2022`) {
		t.Errorf("%s shows no %s: %.600s", where, broker.MaskedValue, s)
	}
}

func (f maskFixture) audit(action string) []broker.AuditEntry {
	f.s.t.Helper()
	entries, err := f.s.broker.Audit(f.s.ctx, broker.AuditFilter{Action: action}, broker.Page{Limit: 10})
	if err != nil {
		f.s.t.Fatal(err)
	}
	return entries
}

// Every API answer that shows the payload masks it, for every role:
// the dead-letter list, one dead letter (and with ?reveal=false), a
// message read, the export; the rest of the payload is as pushed.
func TestMaskedInAPIAnswers(t *testing.T) {
	t.Parallel()
	f := newMaskFixture(t)
	for _, role := range []broker.Role{broker.RoleViewer, broker.RoleOperator, broker.RoleAdmin} {
		var l dlqList
		f.as(role, "GET", "/api/v1/dlq?queue=orders", "").want(http.StatusOK).decode(&l)
		if len(l.Messages) != 1 || string(l.Messages[0].Data) != `{"card":{"number":"•••","brand":"visa"},"customer":{"email":"•••"},"amount":12}` {
			t.Fatalf("%s: list data %s", role, l.Messages[0].Data)
		}
		one := f.as(role, "GET", "/api/v1/dlq/"+f.d.ID+"?consumerGroup=billing", "").want(http.StatusOK)
		wantMasked(t, string(role)+": GET /dlq/:id", one.body)
		if !strings.Contains(string(one.body), `"masked":true`) {
			t.Errorf("%s: one dead letter does not say masked: %s", role, one.body)
		}
		wantMasked(t, string(role)+": reveal=false", f.as(role, "GET", "/api/v1/dlq/"+f.d.ID+"?reveal=false", "").want(http.StatusOK).body)
		wantMasked(t, string(role)+": GET /messages", f.as(role, "GET", "/api/v1/messages/"+f.d.PartitionID+"/tx-1", "").want(http.StatusOK).body)
	}
	for _, role := range []broker.Role{broker.RoleOperator, broker.RoleAdmin} {
		for _, format := range []string{"ndjson", "csv"} {
			wantMasked(t, string(role)+" export "+format, f.as(role, "GET", "/api/v1/dlq/export?queue=orders&format="+format, "").want(http.StatusOK).body)
		}
	}
	// Another queue without masks is shown whole.
	f.s.fail("plain", "p", "billing", "tx-2", maskPayload, "x")
	var l dlqList
	f.as(broker.RoleViewer, "GET", "/api/v1/dlq?queue=plain", "").want(http.StatusOK).decode(&l)
	if string(l.Messages[0].Data) != maskPayload {
		t.Errorf("an unmasked queue's payload: %s", l.Messages[0].Data)
	}
}

// ?reveal=true shows the real payload to a role at or above the queue's
// maskRevealRole only (403 below it), and audits who, which dead letter
// and which fields; an export with revealed=true is an admin's, audited.
func TestRevealIsAllowedRoleOnlyAndAudited(t *testing.T) {
	t.Parallel()
	f := newMaskFixture(t)
	path := "/api/v1/dlq/" + f.d.ID + "?consumerGroup=billing&reveal=true"
	f.as(broker.RoleViewer, "GET", path, "").wantError(http.StatusForbidden, "admin")
	f.as(broker.RoleOperator, "GET", path, "").wantError(http.StatusForbidden, "admin")
	f.as(broker.RoleOperator, "GET", "/api/v1/dlq/"+f.d.ID+"?reveal=maybe", "").wantError(http.StatusBadRequest, "reveal")
	if n := len(f.audit(broker.AuditReveal)); n != 0 {
		t.Fatalf("refused reveals audited: %d", n)
	}
	var d deadLetter
	f.as(broker.RoleAdmin, "GET", path, "").want(http.StatusOK).decode(&d)
	if string(d.Data) != maskPayload {
		t.Fatalf("revealed data %s", d.Data)
	}
	entries := f.audit(broker.AuditReveal)
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Actor, "token:") || entries[0].Queue != "orders" || entries[0].Group != "billing" ||
		!strings.Contains(entries[0].Detail, f.d.ID) || !strings.Contains(entries[0].Detail, "$.card.number, $..email") {
		t.Fatalf("reveal audit: %+v", entries)
	}
	// maskRevealRole operator lets operators reveal.
	f.s.configure("orders", `{"maskRevealRole":"operator"}`)
	f.as(broker.RoleOperator, "GET", path, "").want(http.StatusOK)
	f.as(broker.RoleViewer, "GET", path, "").wantError(http.StatusForbidden, "operator")

	f.as(broker.RoleOperator, "GET", "/api/v1/dlq/export?queue=orders&revealed=true", "").wantError(http.StatusForbidden, "admin")
	body := f.as(broker.RoleAdmin, "GET", "/api/v1/dlq/export?queue=orders&revealed=true", "").want(http.StatusOK).body
	if !strings.Contains(string(body), maskCard) {
		t.Fatalf("revealed export: %s", body)
	}
	found := false
	for _, e := range f.audit(broker.AuditExport) {
		found = found || strings.Contains(e.Detail, "masked fields revealed")
	}
	if !found {
		t.Fatalf("the revealed export is not audited as such: %+v", f.audit(broker.AuditExport))
	}
}

// A search or a field filter that could probe a masked field is refused
// (400, naming it) to whom it is masked, on the list, its page, the
// export and the bulk actions; the header's search finds nothing by a
// masked queue's words for them. A filter on another field works.
func TestSearchOnMaskedFieldsIsRefused(t *testing.T) {
	t.Parallel()
	f := newMaskFixture(t)
	for _, path := range []string{
		"/api/v1/dlq?queue=orders&q=" + maskCard,
		"/api/v1/dlq?q=" + maskCard,
		"/api/v1/dlq?queue=orders&field=" + url.QueryEscape("card.number = "+maskCard),
		"/api/v1/dlq?queue=orders&field=" + url.QueryEscape("card contains 4111"),
		"/api/v1/dlq?queue=orders&field=" + url.QueryEscape("customer.email = "+maskEmail),
	} {
		f.as(broker.RoleViewer, "GET", path, "").wantError(http.StatusBadRequest, "refused", "orders")
	}
	f.as(broker.RoleOperator, "GET", "/api/v1/dlq/export?queue=orders&q="+maskCard, "").wantError(http.StatusBadRequest, "refused")
	f.as(broker.RoleOperator, "POST", "/api/v1/dlq/delete", `{"filter":{"queue":"orders","field":["card.number = `+maskCard+`"]},"dryRun":true}`).wantError(http.StatusBadRequest, "refused")
	viewer := f.pages[broker.RoleViewer]
	if r := viewer.get("/queues/orders/dead-letters?q=" + maskCard); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "refused") {
		t.Errorf("the list page's search: %d %.300s", r.status, r.body)
	}
	// $..email may be below any field: every field filter is refused.
	f.as(broker.RoleViewer, "GET", "/api/v1/dlq?queue=orders&field="+url.QueryEscape("card.brand = visa"), "").wantError(http.StatusBadRequest, "$..email")
	// Without it, a filter on a field that holds no masked one works.
	f.s.configure("orders", `{"maskPaths":["$.card.number"]}`)
	var l dlqList
	f.as(broker.RoleViewer, "GET", "/api/v1/dlq?queue=orders&field="+url.QueryEscape("card.brand = visa"), "").want(http.StatusOK).decode(&l)
	if len(l.Messages) != 1 {
		t.Errorf("a filter on an unmasked field found %d", len(l.Messages))
	}
	f.as(broker.RoleViewer, "GET", "/api/v1/dlq?queue=orders&field="+url.QueryEscape("card = x"), "").wantError(http.StatusBadRequest, "$.card.number")
	// The admin may reveal: the admin may search.
	f.as(broker.RoleAdmin, "GET", "/api/v1/dlq?queue=orders&q="+maskCard, "").want(http.StatusOK).decode(&l)
	if len(l.Messages) != 1 {
		t.Errorf("the admin's search found %d", len(l.Messages))
	}
	var res struct {
		Matches []json.RawMessage `json:"matches"`
	}
	f.as(broker.RoleAdmin, "GET", "/api/v1/search?q="+maskCard, "").want(http.StatusOK).decode(&res)
	if len(res.Matches) != 1 {
		t.Fatalf("the admin's header search found %d", len(res.Matches))
	}
	f.as(broker.RoleViewer, "GET", "/api/v1/search?q="+maskCard, "").want(http.StatusOK).decode(&res)
	if len(res.Matches) != 0 {
		t.Errorf("the viewer's header search found %d by a masked value", len(res.Matches))
	}
	if r := viewer.get("/search?q=" + maskCard).want(http.StatusOK); strings.Contains(string(r.body), f.d.ID) {
		t.Errorf("the search page shows the dead letter found by a masked value")
	}
}

// The dead letter's page, its download and the edit page with its diff
// show the payload masked; its Reveal is for an allowed role only (403
// otherwise), audited, and shows it; the queue's page shows the options.
func TestMaskedInPagesAndRevealButton(t *testing.T) {
	t.Parallel()
	f := newMaskFixture(t)
	page := "/queues/orders/dead-letters/" + f.d.ID + "?group=billing"
	reveal := "/queues/orders/dead-letters/" + f.d.ID + "/reveal?group=billing"
	for _, role := range []broker.Role{broker.RoleViewer, broker.RoleOperator, broker.RoleAdmin} {
		b := f.pages[role]
		r := b.get(page).want(http.StatusOK)
		wantMasked(t, string(role)+"'s dead letter page", r.body)
		hasButton := r.doc().Find(`[data-testid="reveal"]`).Length() == 1
		if hasButton != (role == broker.RoleAdmin) {
			t.Errorf("%s: Reveal button shown %v", role, hasButton)
		}
		if role != broker.RoleAdmin {
			b.post(reveal, nil).want(http.StatusForbidden)
			if note := r.testid("payload-masked"); !strings.Contains(note, "$.card.number, $..email") || !strings.Contains(note, "Only admins may reveal them") {
				t.Errorf("%s: masked note %q", role, r.testid("payload-masked"))
			}
		}
		wantMasked(t, string(role)+"'s download", b.get("/queues/orders/dead-letters/"+f.d.ID+"/payload?group=billing").want(http.StatusOK).body)
	}
	op := f.pages[broker.RoleOperator]
	wantMasked(t, "edit page", op.get("/queues/orders/dead-letters/"+f.d.ID+"/edit?group=billing").want(http.StatusOK).body)
	preview := op.post("/queues/orders/dead-letters/"+f.d.ID+"/edit/preview?group=billing",
		url.Values{"payload": {strings.Replace(maskedPayload, `"amount":12`, `"amount":13`, 1)}}).want(http.StatusOK)
	wantMasked(t, "edit diff", preview.body)

	admin := f.pages[broker.RoleAdmin]
	r := admin.post(reveal, nil).want(http.StatusOK)
	if got := r.doc().Find(`[data-testid="payload-raw"]`).Text(); got != maskPayload {
		t.Fatalf("revealed payload %q", got)
	}
	if !strings.Contains(r.testid("payload-revealed"), "$.card.number") || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("revealed note %q, Cache-Control %q", r.testid("payload-revealed"), r.header.Get("Cache-Control"))
	}
	if e := f.audit(broker.AuditReveal); len(e) != 1 || !strings.HasPrefix(e[0].Actor, "user:admin") || !strings.Contains(e[0].Detail, f.d.ID) {
		t.Errorf("reveal audit: %+v", e)
	}
	q := admin.get("/queues/orders").want(http.StatusOK)
	if !strings.Contains(string(q.body), "$.card.number, $..email") {
		t.Errorf("the queue's page does not show maskPaths")
	}
}

// maskedPayload is maskPayload as shown.
const maskedPayload = `{"card":{"number":"•••","brand":"visa"},"customer":{"email":"•••"},"amount":12}`

// A replay sends the real payload; an edit-and-replay keeps the real
// values where the edit left •••, and what was typed over one.
func TestReplaySendsTheRealPayload(t *testing.T) {
	t.Parallel()
	f := newMaskFixture(t)
	f.as(broker.RoleOperator, "POST", "/api/v1/dlq/"+f.d.ID+"/replay", "").want(http.StatusOK)
	p := f.s.pop("orders", "consumerGroup=billing")
	if got := string(p.Messages[0].Data); got != maskPayload {
		t.Fatalf("replayed copy %s", got)
	}
	f.s.ack(p.Messages[0], "failed", "again").want(http.StatusOK)
	var l dlqList
	f.as(broker.RoleAdmin, "GET", "/api/v1/dlq?queue=orders&consumerGroup=billing", "").want(http.StatusOK).decode(&l)
	if len(l.Messages) != 1 {
		t.Fatalf("dead letters after the copy failed: %d", len(l.Messages))
	}
	edited := strings.Replace(strings.Replace(maskedPayload, `"amount":12`, `"amount":13`, 1), `"email":"•••"`, `"email":"new@example.com"`, 1)
	f.pages[broker.RoleOperator].post("/queues/orders/dead-letters/"+l.Messages[0].ID+"/edit?group=billing",
		url.Values{"payload": {edited}, "mode": {"every"}}).want(http.StatusSeeOther)
	p = f.s.pop("orders", "consumerGroup=billing")
	want := `{"card":{"number":"` + maskCard + `","brand":"visa"},"customer":{"email":"new@example.com"},"amount":13}`
	if got := string(p.Messages[0].Data); got != want {
		t.Fatalf("edited copy %s, want %s", got, want)
	}
}

// A bad mask path or role is a 400 naming it, and changes nothing.
func TestConfigureRefusesBadMasks(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("orders", `{"maskPaths":["$.card.number"],"retryLimit":2}`)
	for _, tc := range []struct{ body, want string }{
		{`{"queue":"orders","options":{"maskPaths":["$.card.number","card number"],"retryLimit":5}}`, "card number"},
		{`{"queue":"orders","options":{"maskPaths":"$.card"}}`, "maskPaths"},
		{`{"queue":"orders","options":{"maskPaths":["$.a["]}}`, "$.a["},
		{`{"queue":"orders","options":{"maskRevealRole":"viewer"}}`, "maskRevealRole"},
	} {
		s.call("POST", "/api/v1/configure", tc.body).wantError(http.StatusBadRequest, tc.want)
	}
	var c struct {
		Options struct {
			MaskPaths      []string `json:"maskPaths"`
			MaskRevealRole string   `json:"maskRevealRole"`
			RetryLimit     int      `json:"retryLimit"`
		} `json:"options"`
	}
	s.call("POST", "/api/v1/configure", `{"queue":"orders","options":{}}`).want(http.StatusOK).decode(&c)
	if len(c.Options.MaskPaths) != 1 || c.Options.MaskPaths[0] != "$.card.number" || c.Options.MaskRevealRole != "admin" || c.Options.RetryLimit != 2 {
		t.Fatalf("options after refusals: %+v", c.Options)
	}
	s.call("POST", "/api/v1/configure", `{"queue":"orders","options":{"maskPaths":null}}`).want(http.StatusOK).decode(&c)
	if len(c.Options.MaskPaths) != 0 {
		t.Fatalf("maskPaths null: %+v", c.Options)
	}
}

// The API's replay with an edited payload, by id and by Queen's retry
// route, keeps the real values left as •••.
func TestAPIReplayOfAnEditKeepsMaskedValues(t *testing.T) {
	t.Parallel()
	f := newMaskFixture(t)
	edited := strings.Replace(maskedPayload, `"amount":12`, `"amount":14`, 1)
	want := strings.Replace(maskPayload, `"amount":12`, `"amount":14`, 1)
	f.as(broker.RoleOperator, "POST", "/api/v1/dlq/"+f.d.ID+"/replay", `{"payload":`+edited+`}`).want(http.StatusOK)
	p := f.s.pop("orders", "consumerGroup=billing")
	if got := string(p.Messages[0].Data); got != want {
		t.Fatalf("copy %s, want %s", got, want)
	}
	f.s.ack(p.Messages[0], "failed", "again").want(http.StatusOK)
	f.as(broker.RoleOperator, "POST", "/api/v1/messages/"+p.Messages[0].PartitionID+"/"+p.Messages[0].TransactionID+"/retry", `{"payload":`+edited+`}`).want(http.StatusOK)
	p = f.s.pop("orders", "consumerGroup=billing")
	if got := string(p.Messages[0].Data); got != want {
		t.Fatalf("copy by retry %s, want %s", got, want)
	}
}
