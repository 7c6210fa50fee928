package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A visitor whose session expired is told so on the login page, and is
// brought back after the login to the page they were on: the page they
// asked for, the page an htmx request or a form came from (this site's
// only: never another's, nor the login page).
func TestAnExpiredSessionIsSaidAndTheLoginLeadsBack(t *testing.T) {
	t.Parallel()
	s := setup(t)
	expired := func(t *testing.T) (*browser, broker.User) {
		s := s.sub(t)
		b, u := s.loggedIn(broker.RoleOperator)
		if _, err := s.db.ExecUncatalogued(s.ctx, `DELETE FROM sessions`); err != nil { // as maintenance does to an idle one
			t.Fatal(err)
		}
		return b, u
	}
	host := strings.TrimPrefix(s.url, "http://")

	t.Run("APage", func(t *testing.T) {
		b, u := expired(t)
		b.get("/audit?action=login").wantRedirect("/login?expired=1&next=%2Faudit%3Faction%3Dlogin")
		page := b.get("/login?expired=1&next=%2Faudit%3Faction%3Dlogin").want(http.StatusOK)
		if got := page.testid("login-expired"); got != "Your session expired; sign in again." {
			t.Fatalf("login page says %q", got)
		}
		if next, _ := page.doc().Find(`input[name="next"]`).Attr("value"); next != "/audit?action=login" {
			t.Fatalf("next field %q", next)
		}
		b.post("/login", url.Values{"name": {u.Name}, "password": {passwordOf(u.Name)}, "next": {"/audit?action=login"}}).wantRedirect("/audit?action=login")
	})
	t.Run("AnHtmxRequest", func(t *testing.T) {
		b, _ := expired(t)
		stale := b.cookie("lazarus_session")
		for current, want := range map[string]string{
			"http://" + host + "/queues/q/dead-letters?group=g": "/login?expired=1&next=%2Fqueues%2Fq%2Fdead-letters%3Fgroup%3Dg",
			"http://evil.example/queues/q":                      "/login?expired=1",
			"http://" + host + "/login?next=%2Faudit":           "/login?expired=1",
		} {
			b.setCookie("lazarus_session", stale)
			r := b.do("GET", "/queues/q/dead-letters", nil, http.Header{"HX-Request": {"true"}, "HX-Current-URL": {current}}).want(http.StatusUnauthorized)
			if got := r.header.Get("HX-Redirect"); got != want {
				t.Errorf("from %s: HX-Redirect %q, want %q", current, got, want)
			}
		}
	})
	t.Run("AForm", func(t *testing.T) {
		b, _ := expired(t)
		form := url.Values{"_csrf": {b.csrf()}}
		r := b.postRaw("/queues/q/dead-letters/1/replay", form, http.Header{"Referer": {"http://" + host + "/queues/q/dead-letters"}})
		r.wantRedirect("/login?expired=1&next=%2Fqueues%2Fq%2Fdead-letters")
	})
	// The page's own background requests (the live list, its polls) may
	// reach the server before the visitor's next page: they must not
	// leave that page unable to say the session expired. The login page
	// says it once, then has the browser forget the cookie.
	t.Run("ABackgroundRequestFirst", func(t *testing.T) {
		b, _ := expired(t)
		b.do("GET", "/queues/q/dead-letters", nil, http.Header{"HX-Request": {"true"}}).want(http.StatusUnauthorized)
		b.get("/audit").wantRedirect("/login?expired=1&next=%2Faudit")
		if got := b.get("/login").testid("login-expired"); got != "Your session expired; sign in again." {
			t.Fatalf("the login page after a background request says %q", got)
		}
		if got := b.cookie("lazarus_session"); got != "" {
			t.Fatalf("the login page left the ended session's cookie %q", got)
		}
		b.get("/audit").wantRedirect("/login?next=%2Faudit")
	})
	t.Run("NoSessionIsNoExpiry", func(t *testing.T) {
		s := s.sub(t)
		b := s.browser()
		b.get("/audit").wantRedirect("/login?next=%2Faudit")
		if got := b.get("/login?next=%2Faudit").testid("login-expired"); got != "" {
			t.Fatalf("a visitor who never logged in is told %q", got)
		}
	})
}
