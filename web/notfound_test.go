package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// An htmx request to a path that no route serves gets Lazarus's own error
// answer, the one app.js recognises (HX-Retarget to #flash, a flash
// message), not a bare JSON 404 that it took for a proxy's (and said
// "Lazarus could not be reached").
func TestUnknownRouteAnswersHtmxWithAFlash(t *testing.T) {
	t.Parallel()
	s := setup(t)
	htmx := http.Header{"HX-Request": {"true"}, "Accept": {"*/*"}}
	for _, r := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/queues/q/nowhere", http.StatusNotFound},
		{"POST", "/queues/q/dead-letters/x/undo", http.StatusNotFound},
		{"DELETE", "/nothing/here", http.StatusNotFound},
		{"PUT", "/queues/q/dead-letters/replay", http.StatusMethodNotAllowed},
	} {
		res := s.request(s.ctx, r.method, r.path, ``, htmx).want(r.status)
		if got := res.header.Get("HX-Retarget"); got != "#flash" {
			t.Errorf("%s %s: HX-Retarget %q, want #flash", r.method, r.path, got)
		}
		body := string(res.body)
		if !strings.Contains(res.header.Get("Content-Type"), "text/html") || !strings.Contains(body, "flash-error") || strings.Contains(body, "<html") {
			t.Errorf("%s %s: %s %s, want a flash fragment", r.method, r.path, res.header.Get("Content-Type"), body)
		}
	}
	// An API client (no HX-Request) still gets JSON.
	s.request(s.ctx, "GET", "/queues/q/nowhere", ``, nil).wantError(http.StatusNotFound)
}
