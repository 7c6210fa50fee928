package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/demo"
)

// demoNote is the text of the page's note on synthetic history, "" when
// it has none.
func demoNote(r response) string {
	return strings.Join(strings.Fields(r.doc().Find(`[data-testid="demo-history"]`).Text()), " ")
}

// A demo database's charts and overview say that the history before the
// demo's first start is generated, while the range shown reaches into it.
func TestDemoHistoryIsMarkedOnTheChartsAndTheOverview(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.clock.Advance(7 * time.Minute)
	mark, err := demo.WriteHistory(s.ctx, demo.Config{Broker: s.broker})
	if err != nil || mark.Until.IsZero() {
		t.Fatalf("WriteHistory = %+v, %v", mark, err)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	const want = "demo data History before 1 Nov 12:07 UTC is generated"
	for _, path := range []string{"/charts?range=7d", "/charts?range=1h", "/charts", "/"} {
		r := b.get(path).want(http.StatusOK)
		if got := demoNote(r); !strings.HasPrefix(got, want) {
			t.Errorf("GET %s: note %q, want it to start %q", path, got, want)
		}
	}
	// The audit trail says so, under an action of its own.
	audit := b.get("/audit?action=" + broker.AuditDemoHistory).want(http.StatusOK)
	if rows := audit.doc().Find(`[data-testid="audit-row"]`); rows.Length() != 1 || !strings.Contains(rows.Text(), "synthetic demo history") {
		t.Errorf("audit of demo_history: %d rows %q, want the demo's entry", rows.Length(), rows.Text())
	}
	if audit.doc().Find(`[data-testid="audit-action"] option[value="`+broker.AuditDemoHistory+`"]`).Length() != 1 {
		t.Error("the audit filter offers no demo_history action")
	}
	// The 7 days' charts are drawn from it.
	r := b.get("/charts?range=7d").want(http.StatusOK)
	for _, chart := range []string{"depth", "flow", "oldest", "failures", "replays"} {
		if r.doc().Find(`[data-testid="chart-`+chart+`"] [data-testid="chart-empty"]`).Length() != 0 {
			t.Errorf("the %s chart of 7 days is empty", chart)
		}
	}

	// Past the last hour, the 1 h chart shows live numbers only; past a
	// day, the overview too; past 8 days, the 7 days too.
	s.clock.Advance(61 * time.Minute)
	if got := demoNote(b.get("/charts?range=1h").want(http.StatusOK)); got != "" {
		t.Errorf("1 h chart an hour after the history: note %q, want none", got)
	}
	s.clock.Advance(24 * time.Hour)
	b, _ = s.loggedIn(broker.RoleViewer) // the session has ended meanwhile
	if got := demoNote(b.get("/").want(http.StatusOK)); got != "" {
		t.Errorf("overview a day after the history: note %q, want none", got)
	}
	s.clock.Advance(7 * 24 * time.Hour)
	b, _ = s.loggedIn(broker.RoleViewer)
	if got := demoNote(b.get("/charts?range=7d").want(http.StatusOK)); got != "" {
		t.Errorf("7 d chart 8 days after the history: note %q, want none", got)
	}
	if got := demoNote(b.get("/charts?range=30d").want(http.StatusOK)); !strings.HasPrefix(got, want) {
		t.Errorf("30 d chart: note %q, want it", got)
	}
}

// A database without synthetic history says nothing of demo data.
func TestNoDemoNoteOnADatabaseOfItsOwn(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.fail("orders", "", "billing", "ord-1", `{}`, "boom")
	b, _ := s.loggedIn(broker.RoleViewer)
	for _, path := range []string{"/charts?range=7d", "/charts?range=30d", "/"} {
		if got := demoNote(b.get(path).want(http.StatusOK)); got != "" {
			t.Errorf("GET %s: note %q on a database of its own", path, got)
		}
	}
}
