package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The CSRF token counts only in the X-CSRF-Token header or a field of the
// form's body: a token in the URL (which ends up in logs, the history
// and Referer headers) is refused, even the right one.
func TestCSRFTokenIsNeverTakenFromTheURL(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b, _ := s.loggedIn(broker.RoleViewer)
	tok := b.csrf()

	b.postRaw("/logout?_csrf="+url.QueryEscape(tok), url.Values{}, nil).want(http.StatusForbidden)
	b.do(http.MethodPost, "/logout?_csrf="+url.QueryEscape(tok), nil, nil).want(http.StatusForbidden)
	b.get("/login").wantRedirect("/") // still logged in

	// A wrong token in the body is not saved by the right one in the URL.
	b.postRaw("/logout?_csrf="+url.QueryEscape(tok), url.Values{"_csrf": {"wrong"}}, nil).want(http.StatusForbidden)
	b.get("/login").wantRedirect("/")

	// The header and the body field both work.
	b.postRaw("/logout", url.Values{}, http.Header{"X-CSRF-Token": {tok}}).wantRedirect("/login")
	b2, _ := s.loggedIn(broker.RoleViewer)
	b2.postRaw("/logout", url.Values{"_csrf": {b2.csrf()}}, nil).wantRedirect("/login")
}

// A login gives the browser a new CSRF token: one planted before the
// login (a cookie set by a neighbouring site, a token read off the login
// page) is worthless once the user is in.
func TestLoginRotatesTheCSRFToken(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.addUser("ann", broker.RoleViewer)
	b := s.browser()
	planted := b.csrf()
	res := b.login("ann", passwordOf("ann")).wantRedirect("/")
	var set []string
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if c.Name == "lazarus_csrf" {
			set = append(set, c.Value)
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
				t.Errorf("the new CSRF cookie: HttpOnly %v SameSite %v Path %q", c.HttpOnly, c.SameSite, c.Path)
			}
		}
	}
	if len(set) != 1 || set[0] == planted || set[0] == "" {
		t.Fatalf("the login set the CSRF cookie to %q; the token before it was %q", set, planted)
	}
	fresh := b.cookie("lazarus_csrf")
	if fresh != set[0] {
		t.Fatalf("browser holds %q, the login set %q", fresh, set[0])
	}
	// The page after the login carries the new token.
	page := b.get("/audit").want(http.StatusOK)
	if v, _ := page.doc().Find(`input[name="_csrf"]`).First().Attr("value"); v != fresh {
		t.Fatalf("the page's forms carry %q, want the new token %q", v, fresh)
	}
	// The planted token, sent with its own cookie as an attacker would,
	// no longer goes through: the session's cookie holds another.
	h := http.Header{"X-CSRF-Token": {planted}}
	b.postRaw("/logout", url.Values{}, h).want(http.StatusForbidden)
	b.get("/login").wantRedirect("/")
	b.postRaw("/logout", url.Values{}, http.Header{"X-CSRF-Token": {fresh}}).wantRedirect("/login")
	if strings.Contains(s.logs.String(), planted) || strings.Contains(s.logs.String(), fresh) {
		t.Fatal("a CSRF token was logged")
	}
}
