package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestSecurityHeadersAllocateNothing: every response's four security
// headers share their values, made once; a handler that adds to one
// response's header changes no other response's.
func TestSecurityHeadersAllocateNothing(t *testing.T) {
	h := securityHeaders(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(rec, req) }); n != 0 {
		t.Errorf("%v allocations a response", n)
	}
	rec.Header().Add("X-Frame-Options", "SAMEORIGIN")
	other := httptest.NewRecorder()
	h.ServeHTTP(other, req)
	if got := other.Header().Values("X-Frame-Options"); len(got) != 1 || got[0] != "DENY" {
		t.Errorf("another response's X-Frame-Options: %q", got)
	}
	if got := rec.Header().Values("X-Frame-Options"); len(got) != 2 {
		t.Errorf("the response added to: %q", got)
	}
}

// TestMiddlewareChainBuiltOnce: chainOnce wraps the middleware once, not
// for each request as echo's e.Use does, and the chain ends in the
// handler the router found: a route's, or echo's 404 and 405.
func TestMiddlewareChainBuiltOnce(t *testing.T) {
	e := echo.New()
	built, ran := 0, 0
	mw := func(next echo.HandlerFunc) echo.HandlerFunc {
		built++
		return func(c echo.Context) error { ran++; return next(c) }
	}
	e.Use(chainOnce(mw, mw))
	e.GET("/a", func(c echo.Context) error { return c.String(http.StatusOK, "a") })
	for _, tc := range []struct {
		method, path string
		status       int
	}{{"GET", "/a", 200}, {"GET", "/b", 404}, {"POST", "/a", 405}, {"GET", "/a", 200}} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.status)
		}
	}
	if built != 2 || ran != 8 {
		t.Errorf("built %d times, ran %d times; want 2 and 8", built, ran)
	}
}

// TestReadBodyAllocatesWhatComes: a Content-Length is allocated up front
// only up to maxBodyUpFront; past it the buffer grows with the bytes that
// come (a client that promises 8 MiB and sends 10 bytes holds little).
func TestReadBodyAllocatesWhatComes(t *testing.T) {
	for _, tc := range []struct {
		length  int64
		maxCap  int
		minCap  int
		comment string
	}{
		{length: 8 << 20, maxCap: maxBodyUpFront, comment: "a promise of 8 MiB"},
		{length: 2000, minCap: 2000, maxCap: 2001, comment: "a body of its length, in one allocation"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"items":[]}`))
		req.ContentLength = tc.length
		b, err := readBody(req)
		if err != nil || string(b) != `{"items":[]}` {
			t.Fatalf("%s: %q, %v", tc.comment, b, err)
		}
		if cap(b) > tc.maxCap || cap(b) < tc.minCap {
			t.Errorf("%s: a buffer of %d bytes", tc.comment, cap(b))
		}
	}
}
