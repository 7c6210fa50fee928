package web_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/archive"
	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// The archive's lines are the NDJSON export's, byte for byte: one format
// serves both (the payload last, as pushed or compacted; a cut error;
// no trace id; the expiry time).
func TestArchiveLinesAreTheExportsLines(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("orders", `{"deadLetterRetentionSeconds":86400}`)
	s.fail("orders", "p", "billing", "t1", `{"html":"<b>&amp;</b>","n":1}`, "declined <script>")
	s.fail("orders", "q", "billing", "t2", "{\n  \"n\": 2\n}", strings.Repeat("é", broker.MaxErrorText))
	r := s.call("GET", "/api/v1/dlq/export?queue=orders&format=ndjson", "").want(http.StatusOK)
	page, err := s.broker.DeadLetters(s.ctx, broker.DLQQuery{Queue: "orders", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, d := range page.Items {
		l, err := archive.Line(d)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, l...)
	}
	if !bytes.Equal(r.body, want) {
		t.Fatalf("export\n%s\narchive\n%s", r.body, want)
	}
}

// With no archive directory, a queue that asks for the archive keeps its
// due dead letters, and its page and /metrics say the archive fails,
// since when and why.
func TestQueuePageAndMetricsSayTheArchiveFails(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	s.configure("orders", `{"deadLetterRetentionSeconds":60,"deadLetterArchive":true}`)
	s.fail("orders", "p", "billing", "t1", `{"n":1}`, "declined")
	b, _ := s.loggedIn(broker.RoleViewer)
	doc := b.get("/queues/orders").want(http.StatusOK).doc()
	if txt := doc.Text(); !strings.Contains(txt, "no archive directory is configured (--archive-dir): the dead letters due are kept") {
		t.Errorf("queue page before the run does not say there is no archive directory")
	}
	s.clock.Advance(2 * time.Minute)
	at := s.clock.Now()
	if _, err := s.broker.Maintain(s.ctx); err == nil {
		t.Fatal("maintenance did not fail")
	}
	doc = b.get("/queues/orders").want(http.StatusOK).doc()
	want := "archive failing since " + at.Format("2006-01-02T15:04:05.000Z07:00") + ": no archive directory is configured"
	if txt := doc.Text(); !strings.Contains(txt, want) {
		t.Errorf("queue page does not say %q", want)
	}
	if n := len(s.deadLetters("queue=orders").Messages); n != 1 {
		t.Errorf("%d dead letters kept, want 1", n)
	}
	fams := scrape(t, s, nil)
	q := map[string]string{"queue": "orders"}
	if got, ok := metricValue(t, fams, "lazarus_archive_failures_total", q); !ok || got != 1 {
		t.Errorf("failures %v (found %v), want 1", got, ok)
	}
	if got, ok := metricValue(t, fams, "lazarus_archive_written_total", q); !ok || got != 0 {
		t.Errorf("written %v (found %v), want 0", got, ok)
	}
}
