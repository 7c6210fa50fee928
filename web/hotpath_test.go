package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestSecurityHeadersAllocateNothing: every response's four security
// headers share their values, made once; a handler that adds to one
// response's header changes no other response's.
func TestSecurityHeadersAllocateNothing(t *testing.T) {
	e := echo.New()
	h := securityHeaders(func(echo.Context) error { return nil })
	rec := httptest.NewRecorder()
	c := e.NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec)
	if n := testing.AllocsPerRun(100, func() { _ = h(c) }); n != 0 {
		t.Errorf("%v allocations a response", n)
	}
	c.Response().Header().Add("X-Frame-Options", "SAMEORIGIN")
	other := httptest.NewRecorder()
	_ = h(e.NewContext(httptest.NewRequest(http.MethodGet, "/", nil), other))
	if got := other.Header().Values("X-Frame-Options"); len(got) != 1 || got[0] != "DENY" {
		t.Errorf("another response's X-Frame-Options: %q", got)
	}
	if got := rec.Header().Values("X-Frame-Options"); len(got) != 2 {
		t.Errorf("the response added to: %q", got)
	}
}
