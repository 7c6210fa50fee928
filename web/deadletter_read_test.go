package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// errorCutOf reads the errorCut of a dead letter of the API as JSON.
func errorCutOf(t *testing.T, s *bundle, query string) (msg *string, cut map[string]int) {
	t.Helper()
	var l struct {
		Messages []struct {
			ErrorMessage *string        `json:"errorMessage"`
			ErrorCut     map[string]int `json:"errorCut"`
		} `json:"messages"`
	}
	s.call("GET", "/api/v1/dlq?"+query, "").want(http.StatusOK).decode(&l)
	if len(l.Messages) != 1 {
		t.Fatalf("%s: %d dead letters, want 1", query, len(l.Messages))
	}
	return l.Messages[0].ErrorMessage, l.Messages[0].ErrorCut
}

// An error of 23 KiB, sent with a real ack, is kept cut at 8 KiB, and the
// dead letter says how much was sent: errorCut in the API; an error kept
// whole has errorCut null. Also when the ack waits in its lease for an
// earlier message's (the size travels with the pending ack).
func TestCutErrorKeepsItsSize(t *testing.T) {
	t.Parallel()
	s := setup(t)
	long := strings.Repeat("x", 23*1024)
	s.fail("q", "", "", "long", `{"a":1}`, long)
	msg, cut := errorCutOf(t, s, "queue=q&transactionId=long")
	if msg == nil || len(*msg) != broker.MaxErrorText+len("…") {
		t.Fatalf("kept error of %d bytes", len(*msg))
	}
	if cut["keptBytes"] != broker.MaxErrorText || cut["sentBytes"] != 23*1024 {
		t.Fatalf("errorCut %v, want kept %d of %d", cut, broker.MaxErrorText, 23*1024)
	}
	s.fail("q", "", "", "short", `{"a":2}`, "boom")
	if _, cut := errorCutOf(t, s, "queue=q&transactionId=short"); cut != nil {
		t.Fatalf("a whole error has errorCut %v", cut)
	}

	// Two messages in one lease: the second's failure is acked first and
	// waits for the first's ack.
	s.push("q2", "Default", "one", `1`)
	s.push("q2", "Default", "two", `2`)
	s.configure("q2", `{"retryLimit":0,"retryDelay":0}`)
	p := s.pop("q2", "batch=2")
	if len(p.Messages) != 2 {
		t.Fatalf("popped %d", len(p.Messages))
	}
	body, _ := json.Marshal(map[string]any{"transactionId": p.Messages[1].TransactionID, "partitionId": p.Messages[1].PartitionID,
		"leaseId": p.Messages[1].LeaseID, "status": "failed", "error": strings.Repeat("é", 5000)})
	s.call("POST", "/api/v1/ack", string(body)).want(http.StatusOK)
	s.ack(p.Messages[0], "completed", "").want(http.StatusOK)
	msg, cut = errorCutOf(t, s, url.Values{"queue": {"q2"}, "transactionId": {"two"}}.Encode())
	if cut["sentBytes"] != 10000 || cut["keptBytes"] != broker.MaxErrorText || len(*msg) != broker.MaxErrorText+len("…") {
		t.Fatalf("errorCut %v of a pending ack, kept %d bytes", cut, len(*msg))
	}
}

// The dead letter's page offers its payload and its whole error as
// downloads (byte for byte, attachments, not sniffed) and copy buttons,
// and says where a long error was cut; the list row has the same note.
func TestDeadLetterPageDownloadsAndCutNote(t *testing.T) {
	t.Parallel()
	s := setup(t)
	long := "upstream timeout\n" + strings.Repeat("x", 23*1024)
	payload := `{"orderId": "ord_9",  "n": [1, 2]}`
	d := s.fail("q", "", "g", "t1", payload, long)
	b, _ := s.loggedIn(broker.RoleViewer)
	page := "/queues/q/dead-letters/" + d.ID + "?group=g"
	r := b.get(page).want(http.StatusOK)
	if note := r.testid("error-cut"); !strings.Contains(note, "cut at 8 KiB of 24 KiB") {
		t.Fatalf("the cut note says %q", note)
	}
	doc := r.doc()
	if v, _ := doc.Find(`[data-testid="copy-payload"]`).Attr("data-copy"); v != payload {
		t.Fatalf("copy-payload copies %q", v)
	}
	if v, _ := doc.Find(`[data-testid="copy-error"]`).Attr("data-copy"); v != d.ErrorMessage {
		t.Fatalf("copy-error copies %d bytes", len(v))
	}
	pu, _ := doc.Find(`[data-testid="download-payload"]`).Attr("href")
	eu, _ := doc.Find(`[data-testid="download-error"]`).Attr("href")
	pr := b.get(pu).want(http.StatusOK)
	if string(pr.body) != payload || pr.header.Get("Content-Disposition") != `attachment; filename="`+d.ID+`.json"` ||
		pr.header.Get("X-Content-Type-Options") != "nosniff" || pr.header.Get("Content-Type") != "application/json" {
		t.Fatalf("payload download %q %v", pr.body, pr.header)
	}
	er := b.get(eu).want(http.StatusOK)
	if string(er.body) != d.ErrorMessage || er.header.Get("Content-Disposition") != `attachment; filename="`+d.ID+`-error.txt"` ||
		er.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("error download of %d bytes, %v", len(er.body), er.header)
	}
	b.get("/queues/other/dead-letters/" + d.ID + "/payload?group=g").want(http.StatusNotFound)
	b.get("/queues/q/dead-letters/" + d.ID + "/error?group=nope").want(http.StatusNotFound)

	list := b.get("/queues/q/dead-letters").want(http.StatusOK)
	if note := list.testid("dl-error-cut"); note != "cut at 8 KiB of 24 KiB" {
		t.Fatalf("the row's badge says %q", note)
	}
	if list.doc().Find(`[data-testid="export"]`).Length() != 0 {
		t.Fatal("a viewer is offered an export")
	}
	ob, _ := s.loggedIn(broker.RoleOperator)
	od := ob.get("/queues/q/dead-letters?group=g&error=timeout").want(http.StatusOK).doc()
	if href, _ := od.Find(`[data-testid="export-csv"]`).Attr("href"); href != "/queues/q/dead-letters/export?format=csv&error=timeout&group=g" {
		t.Fatalf("the CSV export link is %q", href)
	}
	if txt := od.Find(`[data-testid="export"] p`).Text(); !strings.Contains(txt, "(1 dead letter)") {
		t.Fatalf("the export menu says %q", txt)
	}
}
