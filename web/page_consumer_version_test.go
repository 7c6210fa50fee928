package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// hostileVersion is a consumer version a worker could send to attack the
// pages: no control characters, within 64 bytes.
const hostileVersion = `"><script>alert(1)</script>&amp;`

// The dead letter's page shows the version of the ack that filed it,
// linked to the list of that version, and its history the version of
// each failed attempt, escaped; the list filters by it, the form keeps
// it, and a chip says it.
func TestPagesShowAndFilterTheConsumerVersion(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":1,"retryDelay":0}`)
	if _, err := s.broker.Push(s.ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "order-1", Payload: json.RawMessage(`{"n":1}`)},
		{Queue: "q", Partition: "p", TransactionID: "order-2", Payload: json.RawMessage(`{"n":2}`)}}); err != nil {
		t.Fatal(err)
	}
	fail := func(version string) broker.Delivery {
		res, err := s.broker.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "billing", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop: %+v, %v", res, err)
		}
		m := res.Messages[0]
		if _, err := s.broker.Ack(s.ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID,
			Status: broker.AckFailed, Error: "card declined", Group: "billing", ConsumerVersion: version}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	fail("<i>1.0</i>")
	m := fail(hostileVersion)
	fail("")
	fail("")

	b, _ := s.loggedIn(broker.RoleViewer)
	r := b.get("/queues/q/dead-letters/" + m.ID() + "?group=billing").want(http.StatusOK)
	if got := r.testid("fact-version"); got != hostileVersion {
		t.Errorf("the dead letter's version %q", got)
	}
	href, _ := r.doc().Find(`[data-testid="fact-version"] a`).Attr("href")
	want := "/queues/q/dead-letters?" + url.Values{"version": {hostileVersion}}.Encode()
	if href != want {
		t.Errorf("the version's link %q, want %q", href, want)
	}
	if got := r.testid("attempt-version"); got != "version <i>1.0</i>" {
		t.Errorf("the attempt's version %q", got)
	}
	if body := string(r.body); strings.Contains(body, "<script>alert(1)") || strings.Contains(body, "<i>1.0</i>") {
		t.Fatal("a consumer version is rendered as HTML")
	}
	// The API's history says each attempt's version too.
	var api struct {
		History struct {
			Attempts []map[string]any
		}
	}
	s.call("GET", "/api/v1/dlq/"+m.ID()+"?consumerGroup=billing", "").want(http.StatusOK).decode(&api)
	if a := api.History.Attempts; len(a) != 1 || a[0]["consumerVersion"] != "<i>1.0</i>" {
		t.Errorf("the API's attempts %v", a)
	}

	// The other dead letter (its ack said none) shows no version.
	other := b.get("/queues/q/dead-letters?group=billing").want(http.StatusOK).doc().Find(`[data-testid="dl-row"]`)
	if other.Length() != 2 {
		t.Fatalf("%d rows, want 2", other.Length())
	}
	otherID, _ := other.First().Attr("data-id")
	if otherID == m.ID() {
		otherID, _ = other.Last().Attr("data-id")
	}
	if got := b.get("/queues/q/dead-letters/" + otherID + "?group=billing").want(http.StatusOK).doc().Find(`[data-testid="fact-version"]`).Length(); got != 0 {
		t.Errorf("a dead letter without a version shows %d", got)
	}

	list := b.get(href).want(http.StatusOK)
	doc := list.doc()
	rows := doc.Find(`[data-testid="dl-row"]`)
	if id, _ := rows.First().Attr("data-id"); rows.Length() != 1 || id != m.ID() {
		t.Fatalf("the list of the version: %d rows", rows.Length())
	}
	if v, _ := doc.Find(`[data-testid="filter-version"]`).Attr("value"); v != hostileVersion {
		t.Errorf("the form's version %q", v)
	}
	if chip := doc.Find(`[data-testid="chip"]`).Text(); !strings.Contains(chip, "consumer version: "+hostileVersion) {
		t.Errorf("chips %q", chip)
	}
	if strings.Contains(string(list.body), "<script>alert(1)") {
		t.Fatal("the list renders the version as HTML")
	}
	if n := b.get("/queues/q/dead-letters?version=2.0").want(http.StatusOK).doc().Find(`[data-testid="dl-row"]`).Length(); n != 0 {
		t.Errorf("the list of a version with none: %d rows", n)
	}
}
