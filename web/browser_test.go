package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
)

// browser is a dashboard visitor: a client with a cookie jar that does not
// follow redirects, so that tests see them.
type browser struct {
	s      *bundle
	client *http.Client
}

// browser returns a new visitor, logged in as nobody.
func (s *bundle) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return &browser{s: s, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var userSeq atomic.Int64

// passwordOf is the password the fixtures give a user.
func passwordOf(name string) string { return "password-of-" + name }

// addUser creates a user with a role and the password passwordOf(name).
func (s *bundle) addUser(name string, role broker.Role) broker.User {
	s.t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(passwordOf(name)), bcrypt.MinCost)
	if err != nil {
		s.t.Fatal(err)
	}
	u, err := s.broker.CreateUser(s.ctx, name, role, string(h), "test")
	if err != nil {
		s.t.Fatalf("add user %s: %v", name, err)
	}
	return u
}

// apiToken makes an API token for a user and returns its secret.
func (s *bundle) apiToken(u broker.User, name string) string {
	s.t.Helper()
	secret, _, err := s.broker.CreateToken(s.ctx, u.ID, name, "test")
	if err != nil {
		s.t.Fatal(err)
	}
	return secret
}

// loggedIn returns a browser logged in as a new user with the role.
func (s *bundle) loggedIn(role broker.Role) (*browser, broker.User) {
	s.t.Helper()
	u := s.addUser(fmt.Sprintf("%s-%d", role, userSeq.Add(1)), role)
	b := s.browser()
	b.login(u.Name, passwordOf(u.Name)).wantRedirect("/")
	return b, u
}

// do sends a request from the browser.
func (b *browser) do(method, path string, body io.Reader, header http.Header) response {
	t := b.s.t
	t.Helper()
	req, err := http.NewRequestWithContext(b.s.ctx, method, b.s.url+path, body)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{t: t, req: method + " " + path, status: res.StatusCode, header: res.Header, body: out}
}

// get loads a page.
func (b *browser) get(path string) response {
	b.s.t.Helper()
	return b.do("GET", path, nil, nil)
}

// cookie returns the value of one of the browser's cookies for the server.
func (b *browser) cookie(name string) string {
	u, _ := url.Parse(b.s.url)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// csrf returns the browser's CSRF token, loading the login page for one
// when it has none yet: what a form of the dashboard would carry.
func (b *browser) csrf() string {
	b.s.t.Helper()
	if tok := b.cookie("lazarus_csrf"); tok != "" {
		return tok
	}
	b.get("/login").want(http.StatusOK)
	tok := b.cookie("lazarus_csrf")
	if tok == "" {
		b.s.t.Fatal("no CSRF cookie after GET /login")
	}
	return tok
}

// post submits a form with the browser's CSRF token, as the dashboard's
// forms do.
func (b *browser) post(path string, form url.Values) response {
	b.s.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", b.csrf())
	return b.postRaw(path, form, nil)
}

// postRaw submits a form as it is: no CSRF token unless form has one.
func (b *browser) postRaw(path string, form url.Values, header http.Header) response {
	b.s.t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	for k, vs := range header {
		h[k] = vs
	}
	return b.do("POST", path, strings.NewReader(form.Encode()), h)
}

// login submits the login form.
func (b *browser) login(name, password string) response {
	b.s.t.Helper()
	return b.post("/login", url.Values{"name": {name}, "password": {password}})
}

// wantRedirect fails the test unless the response is a 303 to location.
func (r response) wantRedirect(location string) response {
	r.t.Helper()
	r.want(http.StatusSeeOther)
	if got := r.header.Get("Location"); got != location {
		r.t.Fatalf("%s: redirect to %q, want %q", r.req, got, location)
	}
	return r
}

// doc parses the body as HTML.
func (r response) doc() *goquery.Document {
	r.t.Helper()
	d, err := goquery.NewDocumentFromReader(strings.NewReader(string(r.body)))
	if err != nil {
		r.t.Fatalf("%s: parse HTML: %v", r.req, err)
	}
	return d
}

// testid returns the text of the element with a data-testid, trimmed.
func (r response) testid(id string) string {
	r.t.Helper()
	return strings.TrimSpace(r.doc().Find(`[data-testid="` + id + `"]`).Text())
}

// setCookie puts a cookie in the browser's jar, as a thief would.
func (b *browser) setCookie(name, value string) {
	u, _ := url.Parse(b.s.url)
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
}
