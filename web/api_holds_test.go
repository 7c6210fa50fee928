package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// The holds routes: the answers' exact shapes, what a hold does to pops,
// the second POST that finds the first, the release, the gauge, the
// errors.
func TestHoldRoutes(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	held := func(group string) (float64, bool) {
		t.Helper()
		return metricValue(t, scrape(t, s, nil), "lazarus_held", map[string]string{"queue": "q", "group": group})
	}
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	m := s.pop("q", "consumerGroup=billing").Messages[0] // billing reads q; a leased
	ma := s.pop("q", "consumerGroup=analytics").Messages[0]
	if v, ok := held("billing"); ok && v != 0 {
		t.Fatalf("lazarus_held before: %v", v)
	}

	r := s.call("POST", "/api/v1/holds", `{"queue":"q","consumerGroup":"billing","reason":"card processor down"}`).want(http.StatusCreated)
	want := `{"id":1,"queue":"q","consumerGroup":"billing","kind":"manual","reason":"card processor down","by":"anonymous","since":"2026-11-01T12:00:00.000Z","waiting":2,"existing":false,"probe":null}` + "\n"
	if string(r.body) != want {
		t.Fatalf("POST /holds:\n%s\nwant\n%s", r.body, want)
	}
	if r := s.call("GET", "/api/v1/pop/queue/q?consumerGroup=billing&batch=10", ""); r.status != http.StatusNoContent {
		t.Fatalf("a held pop: %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/api/v1/pop/queue/q?consumerGroup=billing&wait=true&timeout=1", ""); r.status != http.StatusNoContent {
		t.Fatalf("a held long-poll at its timeout: %d %s", r.status, r.body)
	}
	s.ack(ma, "completed", "").want(http.StatusOK)
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=analytics&batch=10", "").want(http.StatusOK) // not held
	s.ack(m, "completed", "").want(http.StatusOK)                                                 // a lease in flight
	if v, ok := held("billing"); !ok || v != 1 {
		t.Fatalf("lazarus_held{billing} while held: %v", v)
	}
	if v, ok := held("analytics"); ok && v != 0 {
		t.Fatalf("lazarus_held{analytics}: %v", v)
	}

	again := s.call("POST", "/api/v1/holds", `{"queue":"q","consumerGroup":"billing","reason":"again"}`).want(http.StatusOK)
	if !strings.Contains(string(again.body), `"id":1,`) || !strings.Contains(string(again.body), `"reason":"card processor down"`) ||
		!strings.Contains(string(again.body), `"existing":true`) {
		t.Fatalf("the second POST: %s", again.body)
	}
	list := s.call("GET", "/api/v1/holds?queue=q", "").want(http.StatusOK)
	wantList := `{"holds":[{"id":1,"queue":"q","consumerGroup":"billing","kind":"manual","reason":"card processor down","by":"anonymous","since":"2026-11-01T12:00:00.000Z","waiting":1,"probe":null}]}` + "\n"
	if string(list.body) != wantList {
		t.Fatalf("GET /holds:\n%s\nwant\n%s", list.body, wantList)
	}
	if r := s.call("GET", "/api/v1/holds?queue=other", "").want(http.StatusOK); string(r.body) != `{"holds":[]}`+"\n" {
		t.Fatalf("GET /holds of another queue: %s", r.body)
	}

	s.clock.Advance(90 * time.Second)
	rel := s.call("DELETE", "/api/v1/holds/1", "").want(http.StatusOK)
	wantRel := `{"released":true,"hold":{"id":1,"queue":"q","consumerGroup":"billing","kind":"manual","reason":"card processor down","by":"anonymous","since":"2026-11-01T12:00:00.000Z","waiting":1,"probe":null,"releasedBy":"anonymous","releasedAt":"2026-11-01T12:01:30.000Z"}}` + "\n"
	if string(rel.body) != wantRel {
		t.Fatalf("DELETE /holds/1:\n%s\nwant\n%s", rel.body, wantRel)
	}
	if got := s.pop("q", "consumerGroup=billing"); got.Messages[0].TransactionID != "b" {
		t.Fatalf("billing once released: %+v", got.Messages)
	}
	if v, ok := held("billing"); !ok || v != 0 {
		t.Fatalf("lazarus_held{billing} once released: %v %v", v, ok)
	}
	s.call("DELETE", "/api/v1/holds/1", "").wantError(http.StatusNotFound, "hold 1 not found: released already, or never made")

	// A hold of the whole queue: consumerGroup null.
	whole := s.call("POST", "/api/v1/holds", `{"queue":"q","reason":"migrating"}`).want(http.StatusCreated)
	if !strings.Contains(string(whole.body), `,"queue":"q","consumerGroup":null,"kind":"manual","reason":"migrating"`) {
		t.Fatalf("a hold of the queue: %s", whole.body)
	}

	s.call("POST", "/api/v1/holds", `{"queue":"nope","reason":"x"}`).wantError(http.StatusNotFound, "queue")
	s.call("POST", "/api/v1/holds", `{"queue":"q"}`).wantError(http.StatusBadRequest, "reason")
	s.call("POST", "/api/v1/holds", `{"queue":"q","reason":"`+strings.Repeat("x", 501)+`"}`).wantError(http.StatusBadRequest, "reason")
	s.call("POST", "/api/v1/holds", `{"reason":"x"}`).wantError(http.StatusBadRequest, "queue")
	s.call("POST", "/api/v1/holds", `{"queue":"q","reason":"x","extra":1}`).wantError(http.StatusBadRequest)
	s.call("POST", "/api/v1/holds", `{"queue":"q","consumerGroup":"a b","reason":"x"}`).wantError(http.StatusBadRequest, "consumer group")
	s.call("DELETE", "/api/v1/holds/abc", "").wantError(http.StatusBadRequest, "hold id")
}

// Viewers list holds; only operators hold and release.
func TestHoldRoles(t *testing.T) {
	t.Parallel()
	s := setup(t, closedAPI, func(c *web.Config) { c.AdminToken = "admin-secret" })
	s.token = "admin-secret"
	viewer := s.apiToken(s.addUser("vera", broker.RoleViewer), "support")
	operator := s.apiToken(s.addUser("otto", broker.RoleOperator), "ci")
	as := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	s.push("q", "", "a", `1`)
	body := `{"queue":"q","reason":"down"}`
	s.request(s.ctx, "POST", "/api/v1/holds", body, as(viewer)).wantError(http.StatusForbidden, "operator")
	r := s.request(s.ctx, "POST", "/api/v1/holds", body, as(operator)).want(http.StatusCreated)
	if !strings.Contains(string(r.body), `"by":"token:ci@otto"`) {
		t.Fatalf("the hold: %s", r.body)
	}
	s.request(s.ctx, "GET", "/api/v1/holds", "", as(viewer)).want(http.StatusOK)
	s.request(s.ctx, "DELETE", "/api/v1/holds/1", "", as(viewer)).wantError(http.StatusForbidden, "operator")
	s.request(s.ctx, "DELETE", "/api/v1/holds/1", "", as(operator)).want(http.StatusOK)
	entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{}, broker.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Action == broker.AuditHold || e.Action == broker.AuditHoldRelease {
			got = append(got, e.Actor+" "+e.Action)
		}
	}
	if strings.Join(got, ", ") != "token:ci@otto hold_release, token:ci@otto hold" {
		t.Fatalf("audit: %v", got)
	}
}

// A circuit breaker's hold on the API: kind breaker, by lazarus, the
// reason with the count and the last error, and its probe (every how
// many seconds, when the next is due, how many went out, whether the
// last is still leased).
func TestBreakerHoldJSON(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"holdAfterFailures":2,"holdProbeSeconds":30,"retryDelay":0}`)
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	for range 2 {
		m := s.pop("q", "consumerGroup=billing").Messages[0]
		s.ack(m, "failed", "gateway <timeout>").want(http.StatusOK)
	}
	if r := s.call("GET", "/api/v1/pop/queue/q?consumerGroup=billing&batch=10", ""); r.status != http.StatusNoContent {
		t.Fatalf("a pop of the group the breaker holds: %d %s", r.status, r.body)
	}
	list := s.call("GET", "/api/v1/holds?queue=q", "").want(http.StatusOK)
	want := `{"holds":[{"id":1,"queue":"q","consumerGroup":"billing","kind":"breaker","reason":"circuit breaker: 2 failures in a row, last error gateway <timeout>","by":"lazarus","since":"2026-11-01T12:00:00.000Z","waiting":2,"probe":{"everySeconds":30,"next":"2026-11-01T12:00:30.000Z","probes":0,"inFlight":false}}]}` + "\n"
	if string(list.body) != want {
		t.Fatalf("GET /holds:\n%s\nwant\n%s", list.body, want)
	}
	s.clock.Advance(30 * time.Second)
	probe := s.pop("q", "consumerGroup=billing&batch=10")
	if len(probe.Messages) != 1 {
		t.Fatalf("the probe: %+v", probe.Messages)
	}
	list = s.call("GET", "/api/v1/holds?queue=q", "").want(http.StatusOK)
	if !strings.Contains(string(list.body), `"probe":{"everySeconds":30,"next":"2026-11-01T12:01:00.000Z","probes":1,"inFlight":true}`) {
		t.Fatalf("GET /holds with the probe out: %s", list.body)
	}
	var held, queue struct {
		Holds json.RawMessage `json:"holds"`
	}
	s.call("GET", "/api/v1/holds?queue=q", "").want(http.StatusOK).decode(&held)
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&queue)
	if string(queue.Holds) != string(held.Holds) {
		t.Fatalf("/resources/queues/q's holds %s, want GET /holds's %s", queue.Holds, held.Holds)
	}
	s.ack(probe.Messages[0], "completed", "").want(http.StatusOK)
	if r := s.call("GET", "/api/v1/holds?queue=q", "").want(http.StatusOK); string(r.body) != `{"holds":[]}`+"\n" {
		t.Fatalf("GET /holds once the probe completed: %s", r.body)
	}
}

// Wherever a queue appears in the API (/resources/queues, its one queue,
// /status/queues and its one queue) it carries its holds and its groups',
// byte for byte as GET /api/v1/holds answers them; [] when none.
func TestQueueAnswersCarryTheirHolds(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	s.push("other", "", "c", `3`)
	s.pop("q", "consumerGroup=billing") // billing reads q: a leased, b waiting
	s.call("POST", "/api/v1/holds", `{"queue":"q","consumerGroup":"billing","reason":"card processor down"}`).want(http.StatusCreated)
	s.clock.Advance(time.Minute)
	s.call("POST", "/api/v1/holds", `{"queue":"q","reason":"migrating <b>"}`).want(http.StatusCreated)

	var list struct {
		Holds json.RawMessage `json:"holds"`
	}
	s.call("GET", "/api/v1/holds?queue=q", "").want(http.StatusOK).decode(&list)
	want := string(list.Holds)
	if !strings.Contains(want, `"consumerGroup":"billing"`) || !strings.Contains(want, `"consumerGroup":null`) || !strings.Contains(want, `"waiting":2`) {
		t.Fatalf("GET /holds?queue=q: %s", want)
	}
	type withHolds struct {
		Name  string          `json:"name"`
		Holds json.RawMessage `json:"holds"`
	}
	check := func(where string, q withHolds) {
		t.Helper()
		w := "[]"
		if q.Name == "q" {
			w = want
		}
		if string(q.Holds) != w {
			t.Errorf("%s, queue %s: holds %s, want %s", where, q.Name, q.Holds, w)
		}
	}
	var one withHolds
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&one)
	check("/resources/queues/q", one)
	one = withHolds{}
	s.call("GET", "/api/v1/resources/queues/other", "").want(http.StatusOK).decode(&one)
	check("/resources/queues/other", one)
	var all struct {
		Queues []withHolds `json:"queues"`
	}
	for _, path := range []string{"/api/v1/resources/queues", "/api/v1/status/queues"} {
		all.Queues = nil
		s.call("GET", path, "").want(http.StatusOK).decode(&all)
		if len(all.Queues) != 2 {
			t.Fatalf("%s: %d queues", path, len(all.Queues))
		}
		for _, q := range all.Queues {
			check(path, q)
		}
	}
	for _, name := range []string{"q", "other"} {
		var detail struct {
			Queue withHolds `json:"queue"`
		}
		s.call("GET", "/api/v1/status/queues/"+name, "").want(http.StatusOK).decode(&detail)
		check("/status/queues/"+name, detail.Queue)
	}

	// Released: the queue's answers say so at once.
	s.call("DELETE", "/api/v1/holds/1", "").want(http.StatusOK)
	s.call("DELETE", "/api/v1/holds/2", "").want(http.StatusOK)
	one = withHolds{}
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&one)
	if string(one.Holds) != "[]" {
		t.Fatalf("released, /resources/queues/q still says %s", one.Holds)
	}
}
