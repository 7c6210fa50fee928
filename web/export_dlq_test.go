package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// exportFixture files dead letters in queue q: group g fails payloads
// with a timeout, one pretty-printed and some that a spreadsheet would
// take for formulas; group h fails one with another error.
func exportFixture(t *testing.T, s *bundle) {
	t.Helper()
	s.fail("q", "", "g", "t1", `{"orderId": "ord_1",  "amount":  10}`, "upstream timeout after 3s")
	s.clock.Advance(time.Second)
	s.fail("q", "", "g", "t2", "{\n  \"orderId\": \"ord_2\"\n}", "=HYPERLINK(\"http://evil.example\") timeout")
	s.clock.Advance(time.Second)
	s.fail("q", "", "g", "-t3", `-5`, "+timeout @ once")
	s.clock.Advance(time.Second)
	// Group h fails t1 too, with another error.
	res, err := s.broker.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "h", Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop h: %v", err)
	}
	m := res.Messages[0]
	if _, err := s.broker.AckBatch(s.ctx, "h", []broker.Ack{{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckFailed, Error: "bad request"}}); err != nil {
		t.Fatal(err)
	}
}

// exportLine is a line of an NDJSON export, as a client reads it.
type exportedLine struct {
	deadLetter
	ErrorCut *struct{ KeptBytes, SentBytes int } `json:"errorCut"`
}

// The NDJSON and CSV exports of a filter hold exactly the dead letters
// the list shows for it, newest first, with every field; they parse back
// (NDJSON's data is the payload byte for byte, compacted only when it had
// line breaks), CSV cells that a spreadsheet would run are defused, the
// file is named after the filter, and each export is in the audit twice:
// as it starts and with its count as it ends.
func TestExportOfAFilter(t *testing.T) {
	t.Parallel()
	s := setup(t)
	exportFixture(t, s)
	b, u := s.loggedIn(broker.RoleOperator)
	want := s.deadLetters("queue=q&consumerGroup=g&error=timeout").Messages
	if len(want) != 3 {
		t.Fatalf("the list has %d, want 3", len(want))
	}

	r := b.get("/queues/q/dead-letters/export?format=ndjson&group=g&error=timeout").want(http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="lazarus-q-g-error-timeout-2026-11-01T1200Z.ndjson"` {
		t.Fatalf("Content-Disposition %q", cd)
	}
	if r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("headers %v", r.header)
	}
	lines := bytes.Split(bytes.TrimSuffix(r.body, []byte("\n")), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), r.body)
	}
	for i, line := range lines {
		var got exportedLine
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("line %d %s: %v", i, line, err)
		}
		w := want[i]
		if got.ID != w.ID || got.TransactionID != w.TransactionID || got.PartitionID != w.PartitionID || got.Queue != "q" ||
			got.Partition != "Default" || got.ConsumerGroup != "g" || got.ErrorMessage != w.ErrorMessage || got.RetryCount != w.RetryCount ||
			got.CreatedAt != w.CreatedAt || got.FailedAt != w.FailedAt || got.ErrorCut != nil {
			t.Fatalf("line %d %+v, the list has %+v", i, got, w)
		}
		if !jsonEqual(got.Data, w.Data) {
			t.Fatalf("line %d data %s, want %s", i, got.Data, w.Data)
		}
	}
	if !bytes.Contains(r.body, []byte(`"data":{"orderId": "ord_1",  "amount":  10}}`+"\n")) || !bytes.Contains(r.body, []byte(`"data":{"orderId":"ord_2"}}`+"\n")) {
		t.Fatalf("the payload of t1 is not byte for byte:\n%s", r.body)
	}

	r = b.get("/queues/q/dead-letters/export?format=csv&group=g&error=timeout").want(http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cd := r.header.Get("Content-Disposition"); !strings.HasSuffix(cd, `-2026-11-01T1200Z.csv"`) {
		t.Fatalf("Content-Disposition %q", cd)
	}
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatalf("CSV %s: %v", r.body, err)
	}
	if len(rows) != 4 || strings.Join(rows[0], ",") != "id,transactionId,queue,partition,partitionId,consumerGroup,errorMessage,errorSentBytes,retryCount,data,traceId,createdAt,failedAt,isReplay" {
		t.Fatalf("CSV rows %q", rows)
	}
	for i, row := range rows[1:] {
		w := want[i]
		undo := func(v string) string {
			if len(v) > 1 && v[0] == '\'' && strings.ContainsRune("=+-@\t\r", rune(v[1])) {
				return v[1:]
			}
			return v
		}
		if row[0] != w.ID || undo(row[1]) != w.TransactionID || undo(row[6]) != w.ErrorMessage || !jsonEqual([]byte(undo(row[9])), w.Data) || row[12] != w.FailedAt {
			t.Fatalf("CSV row %d %q, the list has %+v", i, row, w)
		}
		for _, cell := range row {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Fatalf("CSV row %d: cell %q would be a formula", i, cell)
			}
		}
	}
	if rows[3][9] != `{"orderId": "ord_1",  "amount":  10}` || rows[2][9] != "{\n  \"orderId\": \"ord_2\"\n}" {
		t.Fatalf("CSV payloads are not as pushed: %q %q", rows[3][9], rows[2][9])
	}
	if rows[1][1] != "'-t3" || rows[1][6] != "'+timeout @ once" || rows[1][9] != "'-5" || !strings.HasPrefix(rows[2][6], "'=HYPERLINK") {
		t.Fatalf("formula cells not defused: %q", rows[1:])
	}

	entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditExport}, broker.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s %s %s %d %s", e.Actor, e.Queue, e.Group, e.Count, e.Detail))
	}
	slices.Reverse(got)
	filter := `queue="q" group="g" error="timeout"`
	wantAudit := []string{
		"user:" + u.Name + " q g 0 NDJSON export of " + filter + ": started",
		"user:" + u.Name + " q g 3 NDJSON export of " + filter + ": 3 dead letters",
		"user:" + u.Name + " q g 0 CSV export of " + filter + ": started",
		"user:" + u.Name + " q g 3 CSV export of " + filter + ": 3 dead letters",
	}
	if !slices.Equal(got, wantAudit) {
		t.Fatalf("audit\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantAudit, "\n"))
	}
	// The audit page lists exports, for viewers too: who exported what.
	vb, _ := s.loggedIn(broker.RoleViewer)
	if body := string(vb.get("/audit?action=export").want(http.StatusOK).body); !strings.Contains(body, "CSV export of") {
		t.Fatalf("the audit page does not show the export")
	}
}

// Exports hold payloads, personal data: viewers may not make them, on the
// dashboard or the API; an operator's token may, with the API's filter
// parameters. A bad format or filter is a 400 with nothing in the audit;
// a link another site opened is refused.
func TestExportIsForOperators(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.OpenAPI = false })
	s.token = ""
	admin := s.addUser("admin-x", broker.RoleAdmin)
	s.token = s.apiToken(admin, "fixture")
	exportFixture(t, s)
	viewer := s.apiToken(s.addUser("viewer-x", broker.RoleViewer), "v")
	operator := s.apiToken(s.addUser("operator-x", broker.RoleOperator), "o")
	get := func(token, path string) response {
		return s.request(s.ctx, "GET", path, "", http.Header{"Authorization": {"Bearer " + token}})
	}
	get(viewer, "/api/v1/dlq/export?queue=q").wantError(http.StatusForbidden)
	vb, _ := s.loggedIn(broker.RoleViewer)
	vb.get("/queues/q/dead-letters/export?format=csv").want(http.StatusForbidden)

	r := get(operator, "/api/v1/dlq/export?queue=q&consumerGroup=h&format=ndjson").want(http.StatusOK)
	if n := bytes.Count(r.body, []byte("\n")); n != 1 || !bytes.Contains(r.body, []byte(`"transactionId":"t1"`)) || !bytes.Contains(r.body, []byte(`"errorMessage":"bad request"`)) {
		t.Fatalf("the export of group h: %s", r.body)
	}
	if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="lazarus-q-h-2026-11-01T1200Z.ndjson"` {
		t.Fatalf("Content-Disposition %q", cd)
	}
	r = get(operator, "/api/v1/dlq/export?format=csv&queue=nope").want(http.StatusOK)
	if strings.Count(string(r.body), "\n") != 1 {
		t.Fatalf("an export of nothing: %q, want the header row", r.body)
	}

	before, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditExport}, broker.Page{Limit: 100})
	get(operator, "/api/v1/dlq/export?queue=q&format=xml").wantError(http.StatusBadRequest, "format")
	get(operator, "/api/v1/dlq/export?queue=q&from=yesterday").wantError(http.StatusBadRequest, "from")
	ob, _ := s.loggedIn(broker.RoleOperator)
	ob.get("/queues/q/dead-letters/export?format=csv&since=2y").want(http.StatusBadRequest)
	ob.do("GET", "/queues/q/dead-letters/export?format=csv", nil, http.Header{"Sec-Fetch-Site": {"cross-site"}}).want(http.StatusForbidden)
	after, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditExport}, broker.Page{Limit: 100})
	if len(after) != len(before) {
		t.Fatalf("refused exports wrote %d audit entries", len(after)-len(before))
	}
	ob.do("GET", "/queues/q/dead-letters/export?format=csv", nil, http.Header{"Sec-Fetch-Site": {"same-origin"}}).want(http.StatusOK)
}

// A client that goes away midway stops the export: no page is read after
// it, the download is broken off (not ended as if whole), and the audit
// says how many were written before.
func TestExportStopsWhenTheClientGoes(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "q", 1500) // three pages
	pages := make(chan struct{}, 10)
	ended := make(chan int64, 1)
	s.server.OnExport(func(ctx context.Context, end bool, rows int64) {
		if end {
			ended <- rows
			return
		}
		pages <- struct{}{}
		<-ctx.Done() // the client has gone before the next page
	})
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/dlq/export?queue=q", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(res.Body).ReadBytes('\n')
	if err != nil || !json.Valid(line) {
		t.Fatalf("first line %q: %v", line, err)
	}
	<-pages
	cancel()
	res.Body.Close()
	select {
	case rows := <-ended:
		if rows != 500 {
			t.Fatalf("the export wrote %d rows, want the first page's 500", rows)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the export did not stop when the client went")
	}
	if len(pages) != 0 {
		t.Fatalf("%d more pages written after the client went", len(pages))
	}
	entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditExport}, broker.Page{Limit: 1})
	if err != nil || len(entries) != 1 || entries[0].Count != 500 ||
		entries[0].Detail != `NDJSON export of queue="q": cut off after 500 dead letters (the client went away)` {
		t.Fatalf("audit %+v, %v", entries, err)
	}
}

// An export of several pages holds every dead letter once, newest first:
// 1,234 of them in pages of 500, counted in the audit.
func TestExportAcrossPages(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "q", 1234)
	r := s.call("GET", "/api/v1/dlq/export?queue=q&format=ndjson", "").want(http.StatusOK)
	seen := map[string]bool{}
	var last string
	for i, line := range bytes.Split(bytes.TrimSuffix(r.body, []byte("\n")), []byte("\n")) {
		var d deadLetter
		if err := json.Unmarshal(line, &d); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if seen[d.ID] || (last != "" && d.FailedAt > last) {
			t.Fatalf("line %d: %s twice or out of order", i, d.ID)
		}
		seen[d.ID], last = true, d.FailedAt
	}
	if len(seen) != 1234 {
		t.Fatalf("%d dead letters exported, want 1234", len(seen))
	}
	entries, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditExport}, broker.Page{Limit: 1})
	if len(entries) != 1 || entries[0].Count != 1234 {
		t.Fatalf("audit %+v", entries)
	}
}

// jsonEqual reports whether a and b are the same JSON value, whitespace
// aside.
func jsonEqual(a, b []byte) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && x.String() == y.String()
}

// HEAD on an export answers the download's headers and nothing else: no
// dead letter is read and nothing goes into the audit (a link checker or
// curl -I must not leave "exported 1,234 dead letters" behind).
func TestExportHeadReadsAndAuditsNothing(t *testing.T) {
	t.Parallel()
	s := setup(t)
	exportFixture(t, s)
	before, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditExport}, broker.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	r := s.call("HEAD", "/api/v1/dlq/export?queue=q&consumerGroup=g", "").want(http.StatusOK)
	if cd := r.header.Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="lazarus-q-g-`) || len(r.body) != 0 {
		t.Fatalf("HEAD: Content-Disposition %q, body %q", cd, r.body)
	}
	after, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditExport}, broker.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("a HEAD left %d export rows in the audit", len(after)-len(before))
	}
	// A GET still exports, and is audited.
	s.call("GET", "/api/v1/dlq/export?queue=q&consumerGroup=g", "").want(http.StatusOK)
	if again, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditExport}, broker.Page{Limit: 100}); len(again) != len(before)+2 {
		t.Fatalf("a GET left %d export rows in the audit, want 2", len(again)-len(before))
	}
}
