package web_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

func TestHealth(t *testing.T) {
	t.Parallel()
	t.Run("DatabaseAnswers", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		var body map[string]string
		s.call("GET", "/health", "").want(http.StatusOK).decode(&body)
		if body["status"] != "healthy" || body["database"] != "connected" {
			t.Fatalf("body %v", body)
		}
	})
	t.Run("DatabaseDown", func(t *testing.T) {
		t.Parallel()
		s := setup(t, func(c *web.Config) {
			c.HealthFunc = func(context.Context) error { return errors.New("disk on fire") }
		})
		msg := s.call("GET", "/health", "").wantError(http.StatusServiceUnavailable)
		if strings.Contains(msg, "fire") {
			t.Fatalf("cause shown to caller: %q", msg)
		}
		if !strings.Contains(s.logs.String(), "disk on fire") {
			t.Fatalf("cause not logged: %s", s.logs.String())
		}
	})
	t.Run("ClosedDatabase", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		s.db.Close()
		s.call("GET", "/health", "").wantError(http.StatusServiceUnavailable)
	})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.AdminToken, c.OpenAPI = "s3cret-token", false })
	cases := []struct {
		name   string
		header string
		status int
	}{
		{"Missing", "", http.StatusUnauthorized},
		{"WrongToken", "Bearer nope", http.StatusUnauthorized},
		{"TokenPrefix", "Bearer s3cret", http.StatusUnauthorized},
		{"WrongScheme", "Basic s3cret-token", http.StatusUnauthorized},
		{"NoScheme", "s3cret-token", http.StatusUnauthorized},
		{"Right", "Bearer s3cret-token", http.StatusOK},
		{"SchemeAnyCase", "bearer s3cret-token", http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			h := http.Header{}
			if tc.header != "" {
				h.Set("Authorization", tc.header)
			}
			r := s.request(s.ctx, "GET", "/api/v1/resources/queues", "", h)
			if tc.status == http.StatusUnauthorized {
				r.wantError(http.StatusUnauthorized, "token")
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
				return
			}
			r.want(tc.status)
		})
	}
	t.Run("RefusedPushStoresNothing", func(t *testing.T) {
		s := s.sub(t)
		s.request(s.ctx, "POST", "/api/v1/push", `{"items":[{"queue":"unauth","payload":1}]}`, nil).wantError(http.StatusUnauthorized)
		s.call("GET", "/api/v1/resources/queues/unauth", "").wantError(http.StatusNotFound)
	})
	t.Run("UnknownRouteNeedsTokenToo", func(t *testing.T) {
		s := s.sub(t)
		s.request(s.ctx, "GET", "/api/v1/nothing-here", "", nil).wantError(http.StatusUnauthorized)
	})
	t.Run("HealthIsOpen", func(t *testing.T) {
		s := s.sub(t)
		s.request(s.ctx, "GET", "/health", "", nil).want(http.StatusOK)
	})
	t.Run("AuditNamesToken", func(t *testing.T) {
		s := s.sub(t)
		s.configure("audited", `{"retryLimit":2}`)
		entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{Queue: "audited", Action: broker.AuditConfigure}, broker.Page{})
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Actor != "token:admin" {
			t.Fatalf("audit %+v", entries)
		}
	})
}

func TestAuditNamesAnonymousWithoutAuth(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("q", "", "", "t1", `1`, "boom")
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").want(http.StatusOK)
	entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditReplay}, broker.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Actor != "anonymous" {
		t.Fatalf("audit %+v", entries)
	}
}

func TestEchoErrorsAreJSONUnderTheAPI(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("GET", "/api/v1/nowhere", "").wantError(http.StatusNotFound)
	s.call("GET", "/api/v1/push", "").wantError(http.StatusMethodNotAllowed)
	s.call("PUT", "/api/v1/dlq", "").wantError(http.StatusMethodNotAllowed)
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MaxBodyBytes = 1024 })
	big := `{"items":[{"queue":"big","payload":"` + strings.Repeat("x", 2000) + `"}]}`
	s.call("POST", "/api/v1/push", big).wantError(http.StatusRequestEntityTooLarge, "1024")
	s.call("GET", "/api/v1/resources/queues/big", "").wantError(http.StatusNotFound)

	// Without a Content-Length the limit holds while reading.
	h := http.Header{}
	r := s.requestChunked("/api/v1/push", big, h)
	r.wantError(http.StatusRequestEntityTooLarge)
	s.call("GET", "/api/v1/resources/queues/big", "").wantError(http.StatusNotFound)

	// Under the limit is fine.
	s.push("big", "", "", `"small"`)
}

func TestBodyLimitDefaultsToEightMiB(t *testing.T) {
	t.Parallel()
	s := setup(t)
	payload := `"` + strings.Repeat("x", 8<<20) + `"`
	s.call("POST", "/api/v1/push", `{"items":[{"queue":"q","payload":`+payload+`}]}`).wantError(http.StatusRequestEntityTooLarge)
	// A body of several payloads, each under their own limit, may pass 1 MiB.
	s.call("POST", "/api/v1/push", items("q", 5, `"`+strings.Repeat("x", 1<<20-2)+`"`)).want(http.StatusCreated)
}

func TestInternalErrorIsLoggedNotShown(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "t1", `{"secret":"payload-text"}`)
	s.db.Close()
	msg := s.call("GET", "/api/v1/resources/queues", "").wantError(http.StatusInternalServerError)
	if msg != "internal error" {
		t.Fatalf("error %q", msg)
	}
	logs := s.logs.String()
	if !strings.Contains(logs, "request failed") || !strings.Contains(logs, "closed") {
		t.Fatalf("cause not logged: %s", logs)
	}
	s.call("POST", "/api/v1/push", `{"items":[{"queue":"q","payload":{"secret":"payload-text"}}]}`).wantError(http.StatusInternalServerError)
	if strings.Contains(s.logs.String(), "payload-text") {
		t.Fatalf("payload logged: %s", s.logs.String())
	}
}

func TestMalformedJSON(t *testing.T) {
	t.Parallel()
	s := setup(t)
	routes := []string{"/api/v1/configure", "/api/v1/push", "/api/v1/ack", "/api/v1/ack/batch", "/api/v1/lease/x/extend",
		"/api/v1/transaction", "/api/v1/dlq/replay", "/api/v1/dlq/delete"}
	bodies := []struct {
		name, body, want string
	}{
		{"Syntax", `{"items":[}`, "malformed JSON"},
		{"Truncated", `{"items":[`, "malformed JSON"},
		{"Trailing", `{} {}`, "single JSON value"},
		{"NotAnObject", `[1,2]`, "must be an object"},
		{"UnknownField", `{"bogus":1}`, `unknown field "bogus"`},
		{"Empty", ``, "empty"},
	}
	for _, route := range routes {
		for _, b := range bodies {
			if route == "/api/v1/lease/x/extend" && b.name == "Empty" {
				continue // an empty body extends by 60 s (SPEC.md section 5)
			}
			t.Run(strings.TrimPrefix(route, "/api/v1/")+"/"+b.name, func(t *testing.T) {
				s := s.sub(t)
				s.call("POST", route, b.body).wantError(http.StatusBadRequest, b.want)
			})
		}
	}
}
