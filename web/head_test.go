package web_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The static files are served, their folders are not listed: a request
// for a folder is a 404 like any other path that names no file.
func TestStaticListsNoDirectories(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, path := range []string{"/static/", "/static/vendor/", "/static/vendor", "/static//", "/static/./vendor/", "/static/vendor/../"} {
		r := s.request(s.ctx, http.MethodGet, path, "", nil)
		if r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404; body %.200s", path, r.status, r.body)
		}
		if contains(string(r.body), "htmx") || contains(string(r.body), "app.css") {
			t.Errorf("GET %s lists the files: %.200s", path, r.body)
		}
	}
	for _, path := range []string{"/static/app.css", "/static/vendor/htmx-2.0.11.min.js"} {
		s.request(s.ctx, http.MethodGet, path, "", nil).want(http.StatusOK)
	}
}

// HEAD on any GET route answers as GET does, status and headers, without
// the body: pages, the health check, the API's reads and static files.
func TestHeadAnswersLikeGet(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "t-1", `{"n":1}`)
	b, _ := s.loggedIn(broker.RoleViewer)
	paths := []struct {
		path    string
		browser bool // with the browser's session
	}{
		{"/health", false},
		{"/api/v1/resources/queues", false},
		{"/api/v1/resources/queues/q", false},
		{"/static/app.css", false},
		{"/login", false},
		{"/audit", true},
		{"/", true},
		{"/queues/q", true},
	}
	for _, p := range paths {
		t.Run(p.path, func(t *testing.T) {
			var get, head response
			if p.browser {
				get, head = b.do(http.MethodGet, p.path, nil, nil), b.do(http.MethodHead, p.path, nil, nil)
			} else {
				get, head = s.request(s.ctx, http.MethodGet, p.path, "", nil), s.request(s.ctx, http.MethodHead, p.path, "", nil)
			}
			get.want(http.StatusOK)
			head.want(http.StatusOK)
			if len(head.body) != 0 {
				t.Errorf("HEAD %s sent a body of %d bytes", p.path, len(head.body))
			}
			if g, h := get.header.Get("Content-Type"), head.header.Get("Content-Type"); g != h {
				t.Errorf("HEAD %s: Content-Type %q, GET says %q", p.path, h, g)
			}
			if cl := head.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(get.body)) && !p.browser {
				t.Errorf("HEAD %s: Content-Length %s, GET sent %d bytes", p.path, cl, len(get.body))
			}
		})
	}
	// Without a session, HEAD on a page is sent to the login as GET is.
	r := s.browser().do(http.MethodHead, "/audit", nil, nil).want(http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/login?next=%2Faudit" {
		t.Errorf("HEAD /audit without a session: Location %q", loc)
	}
	// A pop leases what it returns: HEAD must not take messages nobody
	// will see.
	s.request(s.ctx, http.MethodHead, "/api/v1/pop/queue/q?consumerGroup=g", "", nil).want(http.StatusMethodNotAllowed)
	if p := s.pop("q", "consumerGroup=g"); len(p.Messages) != 1 {
		t.Fatalf("after a HEAD, a pop got %d messages", len(p.Messages))
	}
	// POST-only routes still refuse HEAD.
	s.request(s.ctx, http.MethodHead, "/api/v1/push", "", nil).want(http.StatusMethodNotAllowed)
}
