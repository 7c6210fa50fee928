package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// hostileEdit is payload text that would be markup if it were not escaped.
const hostileEdit = `</textarea></pre><script>alert(1)</script><img src=x onerror=alert(2)>`

// editFixture is a dead letter of group billing in queue q, whose
// message is also dead in analytics when two is set.
type editFixture struct {
	s  *bundle
	d  deadLetter
	op *browser
}

func newEditFixture(t *testing.T, payload string, two bool, edit ...func(*web.Config)) editFixture {
	t.Helper()
	s := setup(t, edit...)
	d := s.fail("q", "p", "billing", "tx-1", payload, "billing failed")
	if two {
		var p popped
		s.call("GET", "/api/v1/pop/queue/q/partition/p?consumerGroup=analytics", "").want(http.StatusOK).decode(&p)
		if len(p.Messages) != 1 {
			t.Fatalf("analytics popped %d", len(p.Messages))
		}
		s.ack(p.Messages[0], "failed", "analytics failed").want(http.StatusOK)
	}
	op, _ := s.loggedIn(broker.RoleOperator)
	return editFixture{s: s, d: d, op: op}
}

func (f editFixture) editURL() string {
	return "/queues/q/dead-letters/" + f.d.ID + "/edit"
}

// dead counts the message's dead letters in a group.
func (f editFixture) dead(group string) int {
	return len(f.s.deadLetters(url.Values{"queue": {"q"}, "consumerGroup": {group}}.Encode()).Messages)
}

// audit returns the edit-and-replay entries.
func (f editFixture) audit() []broker.AuditEntry {
	f.s.t.Helper()
	entries, err := f.s.broker.Audit(f.s.ctx, broker.AuditFilter{Action: broker.AuditEditReplay}, broker.Page{Limit: 10})
	if err != nil {
		f.s.t.Fatal(err)
	}
	return entries
}

// An operator's edit page: the original indented (escaped), a textarea
// holding it, Preview and Replay edited copy with its confirmation in
// words. The dead letter's page links to it for operators only.
func TestEditPageShowsTheOriginal(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"orderId":"ord_1","note":`+jsonString(hostileEdit)+`,"amount":12}`, false)
	r := f.op.get(f.editURL() + "?group=billing").want(http.StatusOK)
	if bytes.Contains(r.body, []byte("<script>alert(1)")) || bytes.Contains(r.body, []byte("<img src=x")) {
		t.Fatal("the payload's text is markup in the page")
	}
	doc := r.doc()
	want := "{\n  \"orderId\": \"ord_1\",\n  \"note\": " + jsonString(hostileEdit) + ",\n  \"amount\": 12\n}"
	if got := doc.Find(`[data-testid="edit-original"]`).Text(); got != want {
		t.Fatalf("original\n%s\nwant\n%s", got, want)
	}
	if got := doc.Find(`[data-testid="edit-payload"]`).Text(); got != want {
		t.Fatalf("textarea\n%s\nwant\n%s", got, want)
	}
	replay := doc.Find(`[data-testid="edit-replay-every"]`)
	if c, _ := replay.Attr("data-confirm"); c != "Replay an edited copy of "+shortID(f.d.ID)+" to every group?" {
		t.Fatalf("confirmation %q", c)
	}
	if doc.Find(`[data-testid="edit-replay-own"]`).Length() != 0 {
		t.Fatal("a choice of groups for a message dead in one group only")
	}
	if doc.Find(`input[name="_csrf"]`).AttrOr("value", "") == "" {
		t.Fatal("the form carries no CSRF token")
	}

	page := f.op.get("/queues/q/dead-letters/" + f.d.ID + "?group=billing").want(http.StatusOK).doc()
	if href := page.Find(`[data-testid="detail-edit"]`).AttrOr("href", ""); href != f.editURL()+"?group=billing" {
		t.Fatalf("edit link %q", href)
	}
	viewer, _ := f.s.loggedIn(broker.RoleViewer)
	if viewer.get("/queues/q/dead-letters/"+f.d.ID).want(http.StatusOK).doc().Find(`[data-testid="detail-edit"]`).Length() != 0 {
		t.Fatal("a viewer sees Edit and replay")
	}
}

// Viewers may not edit, preview or replay an edit: 403, nothing changed.
// Without the CSRF token an operator's POSTs are refused too.
func TestEditRoutesRefuseViewersAndForgedForms(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"a":1}`, false)
	viewer, _ := f.s.loggedIn(broker.RoleViewer)
	form := url.Values{"payload": {`{"a":2}`}}
	viewer.get(f.editURL()).want(http.StatusForbidden)
	viewer.post(f.editURL()+"/preview", form).want(http.StatusForbidden)
	viewer.post(f.editURL(), form).want(http.StatusForbidden)
	f.op.postRaw(f.editURL()+"/preview", form, nil).want(http.StatusForbidden)
	f.op.postRaw(f.editURL(), form, nil).want(http.StatusForbidden)
	f.op.postRaw(f.editURL(), form, http.Header{"HX-Request": {"true"}, "X-CSRF-Token": {"forged"}}).want(http.StatusForbidden)
	if f.dead("billing") != 1 || len(f.audit()) != 0 {
		t.Fatal("a refused edit changed something")
	}
}

// Preview: the diff of the indented texts, removed and added lines
// marked - and +, the payload's text escaped.
func TestEditPreviewShowsTheDiff(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"orderId":"ord_1","amount":12,"note":"x"}`, false)
	edited := "{\n  \"orderId\": \"ord_1\",\n  \"amount\": 13,\n  \"note\": " + jsonString(hostileEdit) + "\n}"
	r := hx(f.op, f.editURL()+"/preview?group=billing", url.Values{"payload": {edited}}).want(http.StatusOK)
	if bytes.Contains(r.body, []byte("<script>alert(1)")) || bytes.Contains(r.body, []byte("<img src=x")) {
		t.Fatal("the edit's text is markup in the diff")
	}
	doc := r.doc()
	var rows []string
	doc.Find(`[data-testid="diff-line"]`).Each(func(_ int, l *goquery.Selection) {
		rows = append(rows, l.AttrOr("data-op", "?")+strings.TrimSpace(l.Find("td.op").Text())+" "+l.Find("code").Text())
	})
	want := []string{
		"  {", "  " + `  "orderId": "ord_1",`,
		`--   "amount": 12,`, `--   "note": "x"`,
		`++   "amount": 13,`, `++   "note": ` + jsonString(hostileEdit),
		"  }",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diff rows\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if s := r.testid("diff-summary"); !strings.Contains(s, "2 lines removed, 2 lines added") {
		t.Fatalf("summary %q", s)
	}
	if f.dead("billing") != 1 {
		t.Fatal("a preview replayed")
	}
}

// Text that is not JSON: 400, saying where (line, column, byte), in the
// preview's place; nothing is replayed.
func TestEditInvalidJSONIsRefusedWithWhere(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"a":1}`, false)
	cases := []struct{ name, text, where string }{
		{"BadToken", "{\n  \"a\": 1,\n  \"b\": tru\n}", "line 3, column 11"},
		{"Unclosed", "{\n  \"a\": [1, 2\n", "ends too soon, at line 2, column 13 (byte 15)"},
		{"Trailing", `{"a":1} {"b":2}`, "line 1, column 9"},
		{"Empty", "  \n ", "empty"},
		{"NotJSONAtAll", hostileEdit, "line 1, column 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{f.editURL() + "/preview", f.editURL()} {
				r := hx(f.op, path, url.Values{"payload": {c.text}}).want(http.StatusBadRequest)
				if r.header.Get("HX-Retarget") != "#edit-preview" {
					t.Fatalf("%s: HX-Retarget %q", path, r.header.Get("HX-Retarget"))
				}
				if msg := r.testid("edit-error"); !strings.Contains(msg, c.where) {
					t.Fatalf("%s: error %q, want %q", path, msg, c.where)
				}
				if bytes.Contains(r.body, []byte("<script>alert(1)")) {
					t.Fatalf("%s: the text is markup in the error", path)
				}
			}
		})
	}
	// A plain form gets the page again, the text kept, the error shown.
	r := f.op.post(f.editURL(), url.Values{"payload": {"{\"a\": tru}"}}).want(http.StatusBadRequest)
	if got := r.testid("edit-payload"); got != `{"a": tru}` {
		t.Fatalf("textarea %q", got)
	}
	if !strings.Contains(r.testid("edit-error"), "line 1, column 10 (byte 10)") || r.testid("edit-error-where") != "{\"a\": tru}\n         ^" {
		t.Fatalf("error %q where %q", r.testid("edit-error"), r.testid("edit-error-where"))
	}
	if f.dead("billing") != 1 || len(f.audit()) != 0 {
		t.Fatal("a refused edit changed something")
	}
}

// An edit over the server's payload limit: 400 naming the limit.
func TestEditOverTheLimitIsRefused(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"a":1}`, false, func(c *web.Config) { c.MaxPayloadBytes = 64 })
	big := `{"a":"` + strings.Repeat("x", 60) + `"}`
	for _, path := range []string{f.editURL() + "/preview", f.editURL()} {
		r := hx(f.op, path, url.Values{"payload": {big}}).want(http.StatusBadRequest)
		if msg := r.testid("edit-error"); !strings.Contains(msg, "68 bytes, over the limit of 64 bytes") {
			t.Fatalf("%s: %q", path, msg)
		}
	}
	hx(f.op, f.editURL()+"/preview", url.Values{"payload": {`{"a":"` + strings.Repeat("x", 56) + `"}`}}).want(http.StatusOK)
	if f.dead("billing") != 1 || len(f.audit()) != 0 {
		t.Fatal("a refused edit changed something")
	}
}

// Replay edited copy: the copy popped through the API is the edit (its
// bytes, line breaks as LF, downloaded once it failed again), marked
// dlq:<id>; the audit names both versions; the list says so in a flash
// that names the copy.
func TestEditAndReplayPushesTheEdit(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"orderId":"ord_1","amount":12}`, false)
	sent := "{\r\n  \"orderId\": \"ord_1\",\r\n  \"amount\":   13e0,\r\n  \"fixed\": true\r\n}"
	edited := strings.ReplaceAll(sent, "\r\n", "\n")
	f.op.post(f.editURL(), url.Values{"payload": {sent}, "mode": {"every"}}).wantRedirect("/queues/q/dead-letters?group=billing")
	list := f.op.get("/queues/q/dead-letters?group=billing").want(http.StatusOK)
	flash := list.testid("flash")
	if !strings.HasPrefix(flash, "Replayed an edited copy of "+shortID(f.d.ID)+" to every group (billing) as ") {
		t.Fatalf("flash %q", flash)
	}
	if f.op.get("/queues/q/dead-letters?group=billing").testid("flash") != "" {
		t.Fatal("the flash is shown twice")
	}

	var p popped
	f.s.call("GET", "/api/v1/pop/queue/q/partition/p?consumerGroup=billing", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != broker.ReplayPrefix+f.d.ID {
		t.Fatalf("popped %+v", p.Messages)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(edited)); err != nil {
		t.Fatal(err)
	}
	if string(p.Messages[0].Data) != compact.String() {
		t.Fatalf("popped %s, want %s", p.Messages[0].Data, compact.String())
	}
	if !strings.Contains(flash, " as "+p.Messages[0].ID+":") {
		t.Fatalf("flash %q does not name the copy %s", flash, p.Messages[0].ID)
	}
	// The copy fails again: its payload, downloaded byte for byte, is the edit.
	f.s.ack(p.Messages[0], "failed", "again").want(http.StatusOK)
	dl := f.op.get("/queues/q/dead-letters/" + p.Messages[0].ID + "/payload?group=billing").want(http.StatusOK)
	if string(dl.body) != edited {
		t.Fatalf("the copy's payload %q, want %q", dl.body, edited)
	}

	entries := f.audit()
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Actor, "user:operator") ||
		!strings.Contains(entries[0].Detail, "original 31 bytes") || !strings.Contains(entries[0].Detail, fmt.Sprintf("edited %d bytes", len(edited))) {
		t.Fatalf("audit %+v", entries)
	}
	// Replayed: a second edit finds no dead letter.
	hx(f.op, f.editURL()+"?group=billing", url.Values{"payload": {`{}`}}).want(http.StatusNotFound)
}

// With dead letters in two groups the page asks which, in words; billing
// only leaves analytics's dead letter; htmx is sent to the list.
func TestEditAndReplayToOneGroup(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"a":1}`, true)
	doc := f.op.get(f.editURL() + "?group=billing").want(http.StatusOK).doc()
	every, own := doc.Find(`[data-testid="edit-replay-every"]`), doc.Find(`[data-testid="edit-replay-own"]`)
	if strings.TrimSpace(every.Text()) != "Replay edited copy for every group (billing, analytics)" ||
		strings.TrimSpace(own.Text()) != "Replay edited copy for billing only" {
		t.Fatalf("choices %q, %q", every.Text(), own.Text())
	}
	if c := own.AttrOr("data-confirm", ""); c != "Replay an edited copy of "+shortID(f.d.ID)+" to billing only? The other groups (analytics) pass the copy by; its dead letters in analytics stay." {
		t.Fatalf("confirmation %q", c)
	}
	if c := every.AttrOr("data-confirm", ""); c != "Replay an edited copy of "+shortID(f.d.ID)+" to every group (billing, analytics)?" {
		t.Fatalf("confirmation %q", c)
	}
	post := own.AttrOr("hx-post", "")
	if post != f.editURL()+"?group=billing" || own.AttrOr("formaction", "") != post || own.AttrOr("value", "") != "own" {
		t.Fatalf("own posts to %q with %q", post, own.AttrOr("value", ""))
	}
	r := hx(f.op, post, url.Values{"payload": {`{"a":2}`}, "mode": {"own"}}).want(http.StatusOK)
	if r.header.Get("HX-Redirect") != "/queues/q/dead-letters?group=billing" {
		t.Fatalf("HX-Redirect %q", r.header.Get("HX-Redirect"))
	}
	if f.dead("billing") != 0 || f.dead("analytics") != 1 {
		t.Fatal("billing's dead letter should be gone, analytics's kept")
	}
	if flash := f.op.get("/queues/q/dead-letters?group=billing").testid("flash"); !strings.Contains(flash, "to billing only as ") ||
		!strings.Contains(flash, broker.OwnGroupTransaction(f.d.ID, "billing")) {
		t.Fatalf("flash %q", flash)
	}
	var p popped
	f.s.call("GET", "/api/v1/pop/queue/q/partition/p?consumerGroup=billing", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 1 || string(p.Messages[0].Data) != `{"a":2}` {
		t.Fatalf("billing popped %+v", p.Messages)
	}
	// A mode the page does not know: 400, nothing changed.
	hx(f.op, "/queues/q/dead-letters/"+f.d.ID+"/edit?group=analytics", url.Values{"payload": {`{}`}, "mode": {"some"}}).want(http.StatusBadRequest)
	if f.dead("analytics") != 1 {
		t.Fatal("a bad mode changed something")
	}
}

// The dead letter page's replay, for a message dead in two groups: the
// choice in words, and billing only leaves analytics's dead letter.
func TestReplayOneToItsGroupOnly(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"a":1}`, true)
	doc := f.op.get("/queues/q/dead-letters/" + f.d.ID + "?group=billing").want(http.StatusOK).doc()
	every, own := doc.Find(`[data-testid="detail-replay"]`), doc.Find(`[data-testid="detail-replay-own"]`)
	if strings.TrimSpace(every.Text()) != "Replay for every group (billing, analytics)" || strings.TrimSpace(own.Text()) != "Replay for billing only" {
		t.Fatalf("choices %q, %q", every.Text(), own.Text())
	}
	r := hx(f.op, own.AttrOr("hx-post", ""), nil).want(http.StatusOK)
	if !strings.Contains(r.testid("flash"), "to billing only") {
		t.Fatalf("flash %q", r.testid("flash"))
	}
	if f.dead("billing") != 0 || f.dead("analytics") != 1 {
		t.Fatal("billing's dead letter should be gone, analytics's kept")
	}
	hx(f.op, "/queues/q/dead-letters/"+f.d.ID+"/replay?mode=sideways", nil).want(http.StatusBadRequest)
	if f.dead("analytics") != 1 {
		t.Fatal("a bad mode changed something")
	}
	// billing's is replayed: a second replay to billing only finds none.
	hx(f.op, "/queues/q/dead-letters/"+f.d.ID+"/replay?mode=own&group=billing", nil).want(http.StatusNotFound)
	// One dead letter left, analytics's: billing still reads the queue
	// and would get a copy replayed to every group, so the choice stays.
	doc = f.op.get("/queues/q/dead-letters/" + f.d.ID + "?group=analytics").want(http.StatusOK).doc()
	every, own = doc.Find(`[data-testid="detail-replay"]`), doc.Find(`[data-testid="detail-replay-own"]`)
	if strings.TrimSpace(every.Text()) != "Replay for every group (analytics, billing)" || strings.TrimSpace(own.Text()) != "Replay for analytics only" {
		t.Fatalf("choices for a message dead in one of two groups: %q, %q", every.Text(), own.Text())
	}
	// A group beside every group (a form's field) is left out: every group.
	r = hx(f.op, "/queues/q/dead-letters/"+f.d.ID+"/replay", url.Values{"group": {"analytics"}}).want(http.StatusOK)
	if !strings.Contains(r.testid("flash"), "to every group (analytics)") || f.dead("analytics") != 0 {
		t.Fatalf("flash %q, analytics %d", r.testid("flash"), f.dead("analytics"))
	}
}

// The API: POST /api/v1/dlq/:id/replay takes an optional body with an
// edited payload (kept as sent), mode own and a consumerGroup.
func TestAPIReplayWithABody(t *testing.T) {
	t.Parallel()
	t.Run("Payload", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t, `{"a":1}`, false)
		var rep map[string]any
		f.s.call("POST", "/api/v1/dlq/"+f.d.ID+"/replay", `{"payload": {"a": 2, "big": 12345678901234567890, "k": [1, 2]}}`).want(http.StatusOK).decode(&rep)
		var p popped
		f.s.call("GET", "/api/v1/pop/queue/q/partition/p?consumerGroup=billing", "").want(http.StatusOK).decode(&p)
		if len(p.Messages) != 1 || string(p.Messages[0].Data) != `{"a":2,"big":12345678901234567890,"k":[1,2]}` || p.Messages[0].ID != rep["messageId"] {
			t.Fatalf("popped %+v, replay %v", p.Messages, rep)
		}
		f.s.ack(p.Messages[0], "failed", "again").want(http.StatusOK)
		dl := f.op.get("/queues/q/dead-letters/" + p.Messages[0].ID + "/payload").want(http.StatusOK)
		if string(dl.body) != `{"a": 2, "big": 12345678901234567890, "k": [1, 2]}` {
			t.Fatalf("the copy's payload %q", dl.body)
		}
		if e := f.audit(); len(e) != 1 || !strings.Contains(e[0].Detail, "original 7 bytes") {
			t.Fatalf("audit %+v", e)
		}
	})
	t.Run("OwnGroup", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t, `{"a":1}`, true)
		var rep struct {
			TransactionID  string   `json:"transactionId"`
			ConsumerGroups []string `json:"consumerGroups"`
		}
		f.s.call("POST", "/api/v1/dlq/"+f.d.ID+"/replay", `{"mode":"own","consumerGroup":"billing"}`).want(http.StatusOK).decode(&rep)
		if rep.TransactionID != broker.OwnGroupTransaction(f.d.ID, "billing") || len(rep.ConsumerGroups) != 1 || rep.ConsumerGroups[0] != "billing" {
			t.Fatalf("replay %+v", rep)
		}
		if f.dead("billing") != 0 || f.dead("analytics") != 1 {
			t.Fatal("billing's dead letter should be gone, analytics's kept")
		}
		if len(f.audit()) != 0 {
			t.Fatal("a replay without an edit audited as one")
		}
		// Every group, by its word, with the original payload (null).
		f.s.call("POST", "/api/v1/dlq/"+f.d.ID+"/replay", `{"mode":"every","payload":null}`).want(http.StatusOK).decode(&rep)
		if rep.TransactionID != broker.ReplayPrefix+f.d.ID || f.dead("analytics") != 0 {
			t.Fatalf("replay %+v", rep)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t, `{"a":1}`, true, func(c *web.Config) { c.MaxPayloadBytes = 64 })
		path := "/api/v1/dlq/" + f.d.ID + "/replay"
		f.s.call("POST", path, `{"consumerGroup":"billing"}`).wantError(http.StatusBadRequest, `mode "own"`)
		f.s.call("POST", path, `{"mode":"sideways"}`).wantError(http.StatusBadRequest, `mode must be "every"`)
		f.s.call("POST", path, `{"payload":{"a":`).wantError(http.StatusBadRequest, "malformed JSON")
		f.s.call("POST", path, `{"payload":1,"extra":2}`).wantError(http.StatusBadRequest, "unknown field")
		f.s.call("POST", path, `{"payload":"`+strings.Repeat("x", 70)+`"}`).wantError(http.StatusRequestEntityTooLarge, "72 bytes, over the limit of 64 bytes")
		f.s.call("POST", path, `{"mode":"own","consumerGroup":"nobody"}`).wantError(http.StatusNotFound, "nobody")
		if f.dead("billing") != 1 || f.dead("analytics") != 1 {
			t.Fatal("a refused replay changed something")
		}
		f.s.call("POST", path, " \n").want(http.StatusOK) // empty: today's replay, every group
		if f.dead("billing") != 0 || f.dead("analytics") != 0 {
			t.Fatal("an empty body should replay for every group")
		}
	})
}

// jsonString is s as a JSON string, < and > as they are (json.Marshal
// would write them as \u003c and \u003e).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// shortID is views.ShortID for a message id.
func shortID(id string) string {
	if len(id) == 36 {
		return id[:8] + "…" + id[len(id)-4:]
	}
	return id
}

// A form over Go's 10 MB cap for forms is a 400 that says so, not an
// empty text.
func TestEditFormTooLargeToRead(t *testing.T) {
	t.Parallel()
	f := newEditFixture(t, `{"a":1}`, false)
	big := url.Values{"payload": {strings.Repeat("x", 11<<20)}}
	r := f.op.postRaw(f.editURL()+"/preview", big, http.Header{"HX-Request": {"true"}, "X-CSRF-Token": {f.op.csrf()}}).want(http.StatusBadRequest)
	if !strings.Contains(r.testid("flash"), "form could not be read (a form is at most 10 MB") {
		t.Fatalf("answer %s", r.body)
	}
}
