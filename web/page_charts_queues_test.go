package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The charts' queue picker suggests at most 20 names, and as a person
// types, those that contain the text (any case); the depth chart says
// how many of its lines it leaves out and links to the next ones.
func TestChartsPickerSuggestsAndDepthChartSaysWhatItLeavesOut(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for i := range 12 {
		q := fmt.Sprintf("deep-%02d", i)
		for k := 0; k <= i; k++ {
			s.fail(q, "", "billing", fmt.Sprintf("%s-%d", q, k), `{}`, "boom")
		}
	}
	for i := range 13 {
		s.configure(fmt.Sprintf("quiet-%02d", i), `{}`)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	values := func(sel *goquery.Selection) []string {
		return sel.Map(func(_ int, o *goquery.Selection) string { return o.AttrOr("value", "") })
	}

	doc := b.get("/charts").want(http.StatusOK).doc()
	if got := values(doc.Find(`[data-testid="chart-queue-list"] option`)); len(got) != 20 || got[0] != "deep-00" || got[19] != "quiet-07" {
		t.Fatalf("suggested at first: %v", got)
	}
	if doc.Find(`select[name="queue"]`).Length() != 0 || doc.Find(`input[name="queue"][list="chart-queue-list"]`).Length() != 1 {
		t.Fatal("the picker is not an input with suggestions")
	}
	opts := b.get("/charts/queues?queue=DEEP-1").want(http.StatusOK).doc()
	if got := strings.Join(values(opts.Find("option")), " "); got != "deep-10 deep-11" {
		t.Fatalf("suggested for DEEP-1: %q", got)
	}
	if got := values(b.get("/charts/queues?queue=e").want(http.StatusOK).doc().Find("option")); len(got) != 20 {
		t.Fatalf("suggested for e: %d names", len(got))
	}

	depth := doc.Find(`[data-testid="chart-depth"]`)
	if got := squash(depth.Find(`[data-testid="chart-note"]`).Text()); !strings.Contains(got, "Showing the 8 deepest of 12 lines") {
		t.Fatalf("depth chart's note: %q", got)
	}
	if got := depth.Find(`.legend li`).Length(); got != 8 {
		t.Fatalf("depth chart draws %d lines", got)
	}
	next, ok := depth.Find(`[data-testid="chart-more"]`).Attr("href")
	if !ok {
		t.Fatal("no link to the other lines")
	}
	depth = b.get(next).want(http.StatusOK).doc().Find(`[data-testid="chart-depth"]`)
	if got := squash(depth.Find(`[data-testid="chart-note"]`).Text()); !strings.Contains(got, "Showing lines 9–12 of 12") || strings.Contains(got, "deepest of") {
		t.Fatalf("the next lines' note (%s): %q", next, got)
	}
	if got := squash(depth.Find(`.legend`).Text()); !strings.Contains(got, "deep-03 / billing") || strings.Contains(got, "deep-04") {
		t.Fatalf("the next lines: %q", got)
	}
	if got := depth.Find(`[data-testid="chart-note"]`).Length(); got != 1 {
		t.Fatal("no note")
	}
	if got := b.get("/charts?queue=deep-05").want(http.StatusOK).doc().Find(`[data-testid="chart-depth"] [data-testid="chart-note"]`).Length(); got != 0 {
		t.Fatal("a chart that leaves nothing out has a note")
	}
	b.get("/charts?series=0").want(http.StatusBadRequest)
}
