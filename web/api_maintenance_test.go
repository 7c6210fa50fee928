package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

type maintenanceScopeJSON struct {
	On    bool    `json:"on"`
	By    *string `json:"by"`
	Since *string `json:"since"`
}

type maintenanceState struct {
	MaintenanceMode    bool  `json:"maintenanceMode"`
	PopMaintenanceMode bool  `json:"popMaintenanceMode"`
	BufferedMessages   int64 `json:"bufferedMessages"`
	BufferHealthy      bool  `json:"bufferHealthy"`
	BufferStats        struct {
		PendingCount int64 `json:"pendingCount"`
		FailedCount  int64 `json:"failedCount"`
		DBHealthy    bool  `json:"dbHealthy"`
		FailedFiles  struct {
			Count         int64   `json:"count"`
			TotalBytes    int64   `json:"totalBytes"`
			TotalMB       float64 `json:"totalMB"`
			FailoverCount int64   `json:"failoverCount"`
			QoS0Count     int64   `json:"qos0Count"`
		} `json:"failedFiles"`
	} `json:"bufferStats"`
	Push    maintenanceScopeJSON `json:"push"`
	Pop     maintenanceScopeJSON `json:"pop"`
	Message string               `json:"message"`
}

type popMaintenanceState struct {
	PopMaintenanceMode bool                 `json:"popMaintenanceMode"`
	Message            string               `json:"message"`
	Pop                maintenanceScopeJSON `json:"pop"`
}

func (s *bundle) maintenance() maintenanceState {
	s.t.Helper()
	var m maintenanceState
	s.call("GET", "/api/v1/system/maintenance", "").want(http.StatusOK).decode(&m)
	return m
}

func (s *bundle) maintenanceAudit() []broker.AuditEntry {
	s.t.Helper()
	entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditMaintenance}, broker.Page{Limit: 20})
	if err != nil {
		s.t.Fatal(err)
	}
	return entries
}

// Queen's maintenance routes, both scopes: the answers' shapes, what each
// scope does to pushes and pops, the audit.
func TestMaintenanceRoutes(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	gauge := func(scope string) float64 {
		t.Helper()
		v, ok := metricValue(t, scrape(t, s, nil), "lazarus_maintenance", map[string]string{"scope": scope})
		if !ok {
			t.Fatalf("no lazarus_maintenance{scope=%q}", scope)
		}
		return v
	}

	m := s.maintenance()
	if m.MaintenanceMode || m.PopMaintenanceMode || m.BufferedMessages != 0 || !m.BufferHealthy || !m.BufferStats.DBHealthy ||
		m.Push.On || m.Push.By != nil || m.Push.Since != nil || m.Pop.On {
		t.Fatalf("at the start: %+v", m)
	}
	if gauge("push") != 0 || gauge("pop") != 0 {
		t.Fatal("the gauges are not 0 at the start")
	}
	s.push("q", "", "before", `1`)

	var on maintenanceState
	s.call("POST", "/api/v1/system/maintenance", `{"enabled":true}`).want(http.StatusOK).decode(&on)
	if !on.MaintenanceMode || on.PopMaintenanceMode || !on.Push.On || on.Push.By == nil || *on.Push.By != "anonymous" ||
		on.Push.Since == nil || *on.Push.Since != "2026-11-01T12:00:00.000Z" || !strings.Contains(on.Message, "ENABLED") {
		t.Fatalf("turned on: %+v", on)
	}
	if gauge("push") != 1 || gauge("pop") != 0 {
		t.Fatal("the gauges while push is on")
	}
	s.push("q", "", "during", `2`) // stored: 201
	if r := s.call("GET", "/api/v1/pop/queue/q", ""); r.status != http.StatusNoContent {
		t.Fatalf("a pop during push maintenance: %d %s", r.status, r.body)
	}
	if m := s.maintenance(); m.BufferedMessages != 1 || m.BufferStats.PendingCount != 1 || m.BufferStats.FailedCount != 0 {
		t.Fatalf("buffered: %+v, want 1 (during)", m)
	}

	var pop popMaintenanceState
	s.call("POST", "/api/v1/system/maintenance/pop", `{"enabled":true}`).want(http.StatusOK).decode(&pop)
	if !pop.PopMaintenanceMode || !pop.Pop.On || !strings.Contains(pop.Message, "ENABLED") {
		t.Fatalf("pop on: %+v", pop)
	}
	s.call("GET", "/api/v1/system/maintenance/pop", "").want(http.StatusOK).decode(&pop)
	if !pop.PopMaintenanceMode || !strings.Contains(pop.Message, "ON") {
		t.Fatalf("pop read: %+v", pop)
	}
	var off maintenanceState
	s.call("POST", "/api/v1/system/maintenance", `{"enabled":false}`).want(http.StatusOK).decode(&off)
	if off.MaintenanceMode || !off.PopMaintenanceMode || off.BufferedMessages != 0 || !strings.Contains(off.Message, "Pop maintenance mode is still on") {
		t.Fatalf("push off, pop on: %+v", off)
	}
	if r := s.call("GET", "/api/v1/pop/queue/q", ""); r.status != http.StatusNoContent {
		t.Fatalf("a pop during pop maintenance: %d %s", r.status, r.body)
	}
	if gauge("push") != 0 || gauge("pop") != 1 {
		t.Fatal("the gauges while pop is on")
	}
	s.call("POST", "/api/v1/system/maintenance/pop", `{"enabled":false}`).want(http.StatusOK).decode(&pop)
	if pop.PopMaintenanceMode || pop.Pop.On {
		t.Fatalf("pop off: %+v", pop)
	}
	if p := s.pop("q", "batch=10"); len(p.Messages) != 2 {
		t.Fatalf("once off: %d messages, want 2", len(p.Messages))
	}
	// Turning a scope off that is off changes nothing and is not audited
	// (Queen's clients do so before and after their tests).
	s.call("POST", "/api/v1/system/maintenance", `{"enabled":false}`).want(http.StatusOK)
	var details []string
	for _, e := range s.maintenanceAudit() {
		if e.Actor != "anonymous" {
			t.Errorf("audit entry by %q", e.Actor)
		}
		details = append(details, e.Detail)
	}
	if len(details) != 4 || !strings.HasPrefix(details[0], "pop maintenance mode off") || details[1] != "push maintenance mode off: 1 messages pushed while it was on" {
		t.Fatalf("audit, newest first: %q", details)
	}
}

// A body that is not {"enabled": true|false} is a 400 and changes
// nothing.
func TestMaintenanceRefusesBadBodies(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, path := range []string{"/api/v1/system/maintenance", "/api/v1/system/maintenance/pop"} {
		for _, tc := range []struct{ body, want string }{
			{`{}`, "enabled (boolean) is required"},
			{`{"enabled":null}`, "enabled (boolean) is required"},
			{`{"enabled":"true"}`, "enabled"},
			{`{"enabled":1}`, "enabled"},
			{`{"enabled":true,"scope":"all"}`, "scope"},
			{`{"enabled":true} {}`, ""},
			{`[]`, ""},
			{``, ""},
		} {
			s.call("POST", path, tc.body).wantError(http.StatusBadRequest, tc.want)
		}
	}
	if m := s.maintenance(); m.MaintenanceMode || m.PopMaintenanceMode {
		t.Fatalf("bad bodies changed the mode: %+v", m)
	}
	if a := s.maintenanceAudit(); len(a) != 0 {
		t.Fatalf("bad bodies were audited: %+v", a)
	}
}

// Viewers read maintenance mode; operators turn it on and off, audited
// with their token.
func TestMaintenanceNeedsAnOperator(t *testing.T) {
	t.Parallel()
	s := setup(t, closedAPI, func(c *web.Config) { c.AdminToken = "admin-secret" })
	s.token = "admin-secret"
	viewerToken := s.apiToken(s.addUser("vera", broker.RoleViewer), "support")
	operatorToken := s.apiToken(s.addUser("otto", broker.RoleOperator), "ci")
	as := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	for _, path := range []string{"/api/v1/system/maintenance", "/api/v1/system/maintenance/pop"} {
		s.request(s.ctx, "GET", path, "", nil).wantError(http.StatusUnauthorized)
		s.request(s.ctx, "GET", path, "", as(viewerToken)).want(http.StatusOK)
		s.request(s.ctx, "POST", path, `{"enabled":true}`, as(viewerToken)).wantError(http.StatusForbidden, "operator")
	}
	if m := s.maintenance(); m.MaintenanceMode || m.PopMaintenanceMode {
		t.Fatalf("a viewer changed the mode: %+v", m)
	}
	s.request(s.ctx, "POST", "/api/v1/system/maintenance/pop", `{"enabled":true}`, as(operatorToken)).want(http.StatusOK)
	if m := s.maintenance(); !m.PopMaintenanceMode || m.Pop.By == nil || *m.Pop.By != "token:ci@otto" {
		t.Fatalf("after the operator: %+v", m)
	}
	if a := s.maintenanceAudit(); len(a) != 1 || a[0].Actor != "token:ci@otto" || !strings.Contains(a[0].Detail, "pop maintenance mode on") {
		t.Fatalf("audit: %+v", a)
	}
}

// While either scope is on, every whole page carries the banner saying
// so (who, since when; escaped); an htmx fragment does not, nor does a
// page once it is off.
func TestMaintenanceBannerOnEveryPage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	pages := []string{"/", "/queues/orders", "/queues/orders/dead-letters", "/audit", "/charts", "/jobs", "/search?q=upstream"}
	for _, p := range pages {
		if r := b.get(p).want(http.StatusOK); strings.Contains(string(r.body), "maintenance-banner") {
			t.Fatalf("%s has the banner while maintenance mode is off", p)
		}
	}
	if _, err := s.broker.SetMaintenance(s.ctx, broker.MaintenancePop, true, "<b>ops</b>"); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(5 * time.Minute)
	for _, p := range pages {
		whole, fragment := page(t, b, p)
		body := string(whole.body)
		if !strings.Contains(body, `data-testid="maintenance-banner"`) || !strings.Contains(body, "no pop delivers anything until it is turned off") ||
			!strings.Contains(body, `data-testid="maintenance-pop"`) || strings.Contains(body, `data-testid="maintenance-push"`) ||
			!strings.Contains(body, "by &lt;b&gt;ops&lt;/b&gt;") || !strings.Contains(body, "5 min ago") {
			t.Fatalf("%s while pop maintenance is on:\n%s", p, body)
		}
		if strings.Contains(string(fragment.body), "maintenance-banner") {
			t.Fatalf("%s: the fragment carries the banner", p)
		}
	}
	if _, err := s.broker.SetMaintenance(s.ctx, broker.MaintenancePop, false, "ops"); err != nil {
		t.Fatal(err)
	}
	if r := b.get("/").want(http.StatusOK); strings.Contains(string(r.body), "maintenance-banner") {
		t.Fatal("the banner stays once maintenance mode is off")
	}
	// The login page tells a visitor nothing.
	if _, err := s.broker.SetMaintenance(s.ctx, broker.MaintenancePush, true, "ops"); err != nil {
		t.Fatal(err)
	}
	if r := s.browser().get("/login").want(http.StatusOK); strings.Contains(string(r.body), "maintenance-banner") {
		t.Fatal("the login page shows the banner")
	}
	if r := b.get("/").want(http.StatusOK); !strings.Contains(string(r.body), `data-testid="maintenance-push"`) {
		t.Fatal("no banner of the push scope")
	}
}
