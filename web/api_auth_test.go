package web_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// closedAPI is the server as it runs by default: no open API.
func closedAPI(c *web.Config) { c.OpenAPI = false }

func TestAPIIsClosedByDefault(t *testing.T) {
	t.Parallel()
	s := setup(t, closedAPI)
	s.request(s.ctx, "GET", "/api/v1/resources/queues", "", nil).wantError(http.StatusUnauthorized, "bearer token")
	s.request(s.ctx, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`, nil).wantError(http.StatusUnauthorized)
	// Without an admin token configured, no token is the admin token.
	s.request(s.ctx, "GET", "/api/v1/resources/queues", "", http.Header{"Authorization": {"Bearer "}}).wantError(http.StatusUnauthorized)
	s.request(s.ctx, "GET", "/api/v1/resources/queues", "", http.Header{"Authorization": {"Bearer anything"}}).wantError(http.StatusUnauthorized)
	s.request(s.ctx, "GET", "/health", "", nil).want(http.StatusOK)
}

func TestOpenAPIStillChecksTokensThatAreSent(t *testing.T) {
	t.Parallel()
	s := setup(t) // OpenAPI
	s.request(s.ctx, "GET", "/api/v1/resources/queues", "", nil).want(http.StatusOK)
	s.request(s.ctx, "GET", "/api/v1/resources/queues", "", http.Header{"Authorization": {"Bearer lzr_forged"}}).wantError(http.StatusUnauthorized)
	v := s.addUser("viewer", broker.RoleViewer)
	tok := s.apiToken(v, "ci")
	s.request(s.ctx, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`,
		http.Header{"Authorization": {"Bearer " + tok}}).wantError(http.StatusForbidden)
}

// A page of another site may send the open API a text/plain POST (no
// preflight); the browser says where it comes from, and the write is
// refused. Programs send neither header, and reads stay open.
func TestOpenAPIRefusesCrossSiteWrites(t *testing.T) {
	t.Parallel()
	s := setup(t) // OpenAPI
	push := `{"items":[{"queue":"q","payload":1}]}`
	for _, h := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}, "Content-Type": {"text/plain"}},
		{"Sec-Fetch-Site": {"same-site"}}, // another port or subdomain
		{"Origin": {"https://evil.example"}, "Content-Type": {"text/plain"}},
	} {
		s.request(s.ctx, "POST", "/api/v1/push", push, h).wantError(http.StatusForbidden, "cross-origin")
		s.request(s.ctx, "DELETE", "/api/v1/resources/queues/q", "", h).wantError(http.StatusForbidden, "cross-origin")
	}
	if _, err := s.broker.Queue(s.ctx, "q"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("queue q after refused writes: %v, want not found", err)
	}
	// A read from anywhere, a same-origin page, and a program.
	s.request(s.ctx, "GET", "/api/v1/resources/queues", "", http.Header{"Sec-Fetch-Site": {"cross-site"}}).want(http.StatusOK)
	s.request(s.ctx, "POST", "/api/v1/push", push, http.Header{"Sec-Fetch-Site": {"same-origin"}}).want(http.StatusCreated)
	s.request(s.ctx, "POST", "/api/v1/push", push, nil).want(http.StatusCreated)
	// A token sent from another site's page is checked as ever: a page
	// cannot attach a bearer token it does not know.
	v := s.addUser("op", broker.RoleOperator)
	tok := s.apiToken(v, "ci")
	s.request(s.ctx, "POST", "/api/v1/push", push, http.Header{"Authorization": {"Bearer " + tok}, "Sec-Fetch-Site": {"cross-site"}}).want(http.StatusCreated)
}

func TestAPIUserTokens(t *testing.T) {
	t.Parallel()
	s := setup(t, closedAPI, func(c *web.Config) { c.AdminToken = "admin-secret" })
	s.token = "admin-secret"
	s.addUser("root", broker.RoleAdmin)
	viewer := s.addUser("vera", broker.RoleViewer)
	operator := s.addUser("otto", broker.RoleOperator)
	viewerToken, operatorToken := s.apiToken(viewer, "support"), s.apiToken(operator, "ci")
	as := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

	d := s.fail("orders", "", "billing", "t1", `{"n":1}`, "boom")
	replay := "/api/v1/dlq/" + d.ID + "/replay?consumerGroup=billing"

	t.Run("ViewerReadsButCannotReplay", func(t *testing.T) {
		s := s.sub(t)
		s.request(s.ctx, "GET", "/api/v1/dlq?queue=orders", "", as(viewerToken)).want(http.StatusOK)
		s.request(s.ctx, "POST", replay, "", as(viewerToken)).wantError(http.StatusForbidden, "operator")
		if l := s.deadLetters("queue=orders"); len(l.Messages) != 1 {
			t.Fatalf("the refused replay changed something: %d dead letters", len(l.Messages))
		}
	})
	t.Run("OperatorReplays", func(t *testing.T) {
		s := s.sub(t)
		s.request(s.ctx, "POST", replay, "", as(operatorToken)).want(http.StatusOK)
		entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditReplay}, broker.Page{})
		if err != nil || len(entries) != 1 || entries[0].Actor != "token:ci@otto" {
			t.Fatalf("audit %+v %v", entries, err)
		}
		// Admin routes stay closed to operators.
		s.request(s.ctx, "POST", "/api/v1/configure", `{"queue":"orders","options":{"retryLimit":1}}`, as(operatorToken)).wantError(http.StatusForbidden)
	})
	t.Run("TheTokenFollowsItsUsersRole", func(t *testing.T) {
		s := s.sub(t)
		if err := s.broker.SetUserRole(s.ctx, viewer.ID, broker.RoleAdmin, "test"); err != nil {
			t.Fatal(err)
		}
		s.request(s.ctx, "POST", "/api/v1/configure", `{"queue":"orders","options":{"retryLimit":1}}`, as(viewerToken)).want(http.StatusOK)
		if err := s.broker.SetUserRole(s.ctx, viewer.ID, broker.RoleViewer, "test"); err != nil {
			t.Fatal(err)
		}
		s.request(s.ctx, "POST", "/api/v1/configure", `{"queue":"orders","options":{"retryLimit":1}}`, as(viewerToken)).wantError(http.StatusForbidden)
	})
	t.Run("RevokedAndDeletedTokensAreRefused", func(t *testing.T) {
		s := s.sub(t)
		temp := s.addUser("temp", broker.RoleOperator)
		tok := s.apiToken(temp, "short-lived")
		s.request(s.ctx, "GET", "/api/v1/dlq", "", as(tok)).want(http.StatusOK)
		if err := s.broker.DeleteUser(s.ctx, temp.ID, "test"); err != nil {
			t.Fatal(err)
		}
		s.request(s.ctx, "GET", "/api/v1/dlq", "", as(tok)).wantError(http.StatusUnauthorized)
	})
	t.Run("ADashboardSessionDoesNotOpenTheAPI", func(t *testing.T) {
		s := s.sub(t)
		b, _ := s.loggedIn(broker.RoleAdmin)
		r := b.get("/api/v1/resources/queues")
		r.wantError(http.StatusUnauthorized)
	})
	t.Run("TheAdminTokenKeepsWorking", func(t *testing.T) {
		s := s.sub(t)
		s.call("GET", "/api/v1/resources/queues", "").want(http.StatusOK)
		s.request(s.ctx, "GET", "/api/v1/resources/queues", "", as("admin-secret-not")).wantError(http.StatusUnauthorized)
	})
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b := s.browser()
	for _, path := range []string{"/login", "/", "/nowhere", "/static/app.css", "/health", "/api/v1/resources/queues", "/api/v1/nowhere",
		"/queues/q/dead-letters", "/api/v1/dlq?limit=0"} {
		r := b.get(path)
		csp := r.header.Get("Content-Security-Policy")
		for _, part := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, part) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, part)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		// Scripts come from the server and nowhere else: no inline, no
		// data: or other hosts, whatever other directives say.
		for _, d := range strings.Split(csp, ";") {
			if f := strings.Fields(d); len(f) > 0 && f[0] == "script-src" && strings.Join(f[1:], " ") != "'self'" {
				t.Errorf("%s: %q", path, d)
			}
		}
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY"} {
			if got := r.header.Get(h); got != want {
				t.Errorf("%s: %s %q, want %q", path, h, got, want)
			}
		}
	}
}
