package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

func TestLogin(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.addUser("ann", broker.RoleOperator)

	t.Run("PagesSendVisitorsWithoutASessionToTheLogin", func(t *testing.T) {
		s := s.sub(t)
		b := s.browser()
		b.get("/").wantRedirect("/login?next=%2F")
		b.get("/audit?action=login").wantRedirect("/login?next=%2Faudit%3Faction%3Dlogin")
		page := b.get("/login?next=%2Faudit").want(http.StatusOK)
		if got, _ := page.doc().Find(`input[name="next"]`).Attr("value"); got != "/audit" {
			t.Fatalf("next field %q", got)
		}
		if page.testid("whoami") != "" {
			t.Fatal("the login page shows a user")
		}
	})
	t.Run("RightPasswordLogsIn", func(t *testing.T) {
		s := s.sub(t)
		b := s.browser()
		b.login("ann", passwordOf("ann")).wantRedirect("/")
		page := b.get("/audit")
		if page.status == http.StatusSeeOther || page.status == http.StatusUnauthorized || page.status == http.StatusForbidden {
			t.Fatalf("after login: %d", page.status)
		}
		if who := page.testid("whoami"); !strings.Contains(who, "ann") || !strings.Contains(who, "operator") {
			t.Fatalf("whoami %q", who)
		}
		// A logged-in visitor of the login page goes on.
		b.get("/login?next=%2Faudit").wantRedirect("/audit")
	})
	t.Run("NextLeadsBack", func(t *testing.T) {
		s := s.sub(t)
		b := s.browser()
		b.post("/login", url.Values{"name": {"ann"}, "password": {passwordOf("ann")}, "next": {"/queues/q?x=1"}}).wantRedirect("/queues/q?x=1")
	})
	t.Run("NextNeverLeavesTheSite", func(t *testing.T) {
		s := s.sub(t)
		for _, next := range []string{"//evil.example/", "https://evil.example/", `/\evil.example`, "javascript:alert(1)", "evil", "/%0d%0aSet-Cookie:x=1"} {
			b := s.browser()
			r := b.post("/login", url.Values{"name": {"ann"}, "password": {passwordOf("ann")}, "next": {next}}).want(http.StatusSeeOther)
			if loc := r.header.Get("Location"); loc != "/" && !strings.HasPrefix(loc, "/%") {
				t.Errorf("next %q: redirect to %q", next, loc)
			}
		}
	})
	t.Run("WrongPasswordAndUnknownUserFailAlike", func(t *testing.T) {
		s := s.sub(t)
		wrong := s.browser().login("ann", "not-the-password").want(http.StatusUnauthorized)
		s.clock.Advance(time.Minute) // past the slowdown
		unknown := s.browser().login("nobody", "not-the-password").want(http.StatusUnauthorized)
		w, u := wrong.testid("login-error"), unknown.testid("login-error")
		if w != "Wrong user name or password." || w != u {
			t.Fatalf("wrong password says %q, unknown user says %q", w, u)
		}
		if v, _ := unknown.doc().Find(`input[name="name"]`).Attr("value"); v != "nobody" {
			t.Fatalf("the name typed is not kept: %q", v)
		}
		if unknown.doc().Find(`input[name="password"]`).AttrOr("value", "") != "" {
			t.Fatal("the password is sent back")
		}
		s.clock.Advance(time.Minute)
	})
	t.Run("LoginsAreAuditedWithoutPasswords", func(t *testing.T) {
		s := s.sub(t)
		ok, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditLogin}, broker.Page{})
		failed, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditLoginFailed}, broker.Page{})
		if len(ok) == 0 || ok[0].Actor != "user:ann" {
			t.Fatalf("logins %+v", ok)
		}
		var names []string
		for _, f := range failed {
			names = append(names, f.Detail)
		}
		joined := strings.Join(names, "\n")
		// The name of no user is not kept: it may be a password typed
		// into the wrong field.
		if !strings.Contains(joined, `"ann"`) || !strings.Contains(joined, "unknown user") || strings.Contains(joined, "nobody") {
			t.Fatalf("failed logins %q", joined)
		}
		for _, e := range append(ok, failed...) {
			if strings.Contains(e.Detail, "password") {
				t.Fatalf("audit detail %q", e.Detail)
			}
		}
		if strings.Contains(s.logs.String(), "not-the-password") || strings.Contains(s.logs.String(), passwordOf("ann")) {
			t.Fatal("a password was logged")
		}
	})
	t.Run("EmptyFormIsRefusedWithoutCounting", func(t *testing.T) {
		s := s.sub(t)
		r := s.browser().login("ann", "").want(http.StatusBadRequest)
		if !strings.Contains(r.testid("login-error"), "password") {
			t.Fatalf("error %q", r.testid("login-error"))
		}
	})
}

func TestLoginRotatesTheSession(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.addUser("ann", broker.RoleViewer)
	b := s.browser()
	b.login("ann", passwordOf("ann")).wantRedirect("/")
	first := b.cookie("lazarus_session")
	b.login("ann", passwordOf("ann")).wantRedirect("/")
	second := b.cookie("lazarus_session")
	if first == "" || second == "" || first == second {
		t.Fatalf("session cookie %q then %q", first, second)
	}
	// The session the first cookie named has ended.
	old := s.browser()
	old.setCookie("lazarus_session", first)
	old.get("/audit").wantRedirect("/login?expired=1&next=%2Faudit")
	b.get("/login").wantRedirect("/")
}

func TestLogout(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b, u := s.loggedIn(broker.RoleViewer)
	cookie := b.cookie("lazarus_session")

	// Without the CSRF token the logout is refused and changes nothing.
	r := b.postRaw("/logout", url.Values{}, nil).want(http.StatusForbidden)
	if !strings.Contains(r.testid("error-page"), "Reload the page") {
		t.Fatalf("refusal says %q", r.testid("error-page"))
	}
	b.get("/login").wantRedirect("/")

	res := b.post("/logout", nil).wantRedirect("/login")
	if !clearsCookie(res, "lazarus_session") {
		t.Fatalf("the session cookie is not cleared: %v", res.header.Values("Set-Cookie"))
	}
	b.get("/audit").wantRedirect("/login?next=%2Faudit")

	// The old cookie, replayed, no longer opens anything: the session is
	// gone from the server, not only from the browser.
	thief := s.browser()
	thief.setCookie("lazarus_session", cookie)
	thief.get("/audit").wantRedirect("/login?expired=1&next=%2Faudit") // a session that ended

	out, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditLogout}, broker.Page{})
	if len(out) != 1 || out[0].Actor != "user:"+u.Name {
		t.Fatalf("logout audit %+v", out)
	}
	// Logging out without a session just leads to the login page.
	s.browser().post("/logout", nil).wantRedirect("/login")
}

func TestSessionEndsWhenIdle(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b, _ := s.loggedIn(broker.RoleViewer)
	s.clock.Advance(broker.SessionIdle - time.Minute)
	b.get("/login").wantRedirect("/")
	s.clock.Advance(broker.SessionIdle - time.Minute) // sliding: the visit moved the end
	b.get("/login").wantRedirect("/")
	s.clock.Advance(broker.SessionIdle)
	b.get("/audit").wantRedirect("/login?expired=1&next=%2Faudit")
}

func TestHtmxWithoutASessionIsToldToReload(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b := s.browser()
	r := b.do("GET", "/queues/q/dead-letters", nil, http.Header{"HX-Request": {"true"}}).want(http.StatusUnauthorized)
	if r.header.Get("HX-Redirect") != "/login" {
		t.Fatalf("HX-Redirect %q", r.header.Get("HX-Redirect"))
	}
	form := url.Values{"_csrf": {b.csrf()}}
	r = b.postRaw("/queues/q/dead-letters/1/replay", form, http.Header{"HX-Request": {"true"}}).want(http.StatusUnauthorized)
	if r.header.Get("HX-Redirect") != "/login" {
		t.Fatalf("HX-Redirect %q", r.header.Get("HX-Redirect"))
	}
}

func TestCookieFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		header http.Header
		edit   func(*web.Config)
		secure bool
	}{
		{"PlainHTTP", nil, nil, false},
		{"BehindATLSProxy", http.Header{"X-Forwarded-Proto": {"https"}}, nil, true},
		{"SecureCookiesSetting", nil, func(c *web.Config) { c.SecureCookies = true }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var edits []func(*web.Config)
			if tc.edit != nil {
				edits = append(edits, tc.edit)
			}
			s := setup(t, edits...)
			s.addUser("ann", broker.RoleViewer)
			b := s.browser()
			page := b.do("GET", "/login", nil, tc.header).want(http.StatusOK)
			csrf := setCookie(t, page, "lazarus_csrf")
			token, _ := page.doc().Find(`input[name="_csrf"]`).Attr("value")
			form := url.Values{"name": {"ann"}, "password": {passwordOf("ann")}, "_csrf": {token}}
			h := http.Header{"Cookie": {"lazarus_csrf=" + csrf.Value}}
			for k, v := range tc.header {
				h[k] = v
			}
			res := b.postRaw("/login", form, h).wantRedirect("/")
			sess := setCookie(t, res, "lazarus_session")
			for _, c := range []*http.Cookie{sess, csrf} {
				if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure != tc.secure {
					t.Errorf("%s: HttpOnly %v SameSite %v Path %q Secure %v (want Secure %v)", c.Name, c.HttpOnly, c.SameSite, c.Path, c.Secure, tc.secure)
				}
			}
			if sess.MaxAge != int(broker.SessionMaxAge.Seconds()) {
				t.Errorf("session MaxAge %d", sess.MaxAge)
			}
			if strings.Contains(sess.Value, "ann") {
				t.Errorf("the session cookie shows its content: %q", sess.Value)
			}
		})
	}
}

func TestLoginSlowdown(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.addUser("ann", broker.RoleViewer)
	s.addUser("bob", broker.RoleViewer)
	b := s.browser()

	// Each failure in a row waits twice as long as the one before, up to
	// 8 s; the next attempt is heard only after that wait.
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	for i, w := range want {
		b.login("ann", "wrong-password").want(http.StatusUnauthorized)
		if got := s.sleeps.take(); len(got) != 1 || got[0] != w {
			t.Fatalf("failure %d waited %v, want %v", i+1, got, w)
		}
		// Too soon: refused, right password or not, and not checked.
		r := b.login("ann", passwordOf("ann")).want(http.StatusTooManyRequests)
		if !strings.Contains(r.testid("login-error"), "Too many failed logins") || r.header.Get("Retry-After") == "" {
			t.Fatalf("refusal %q, Retry-After %q", r.testid("login-error"), r.header.Get("Retry-After"))
		}
		// The same client address is held back for other names too.
		b.login("bob", passwordOf("bob")).want(http.StatusTooManyRequests)
		s.clock.Advance(w)
	}
	if got := s.sleeps.take(); len(got) != 0 {
		t.Fatalf("refusals waited %v", got)
	}
	// Once the wait is over the right password gets in and clears the
	// name's count, not the address's.
	b.login("ann", passwordOf("ann")).wantRedirect("/")
	s.browserFrom("127.0.4.1").login("ann", "wrong-password").want(http.StatusUnauthorized)
	if got := s.sleeps.take(); len(got) != 1 || got[0] != 250*time.Millisecond {
		t.Fatalf("after a success, a failure waited %v", got)
	}
	// The success set no wait of its own: the address is heard at once,
	// and its failures, still counted, make this one wait 8 s.
	b.login("bob", "wrong-password").want(http.StatusUnauthorized)
	if got := s.sleeps.take(); len(got) != 1 || got[0] != 8*time.Second {
		t.Fatalf("the address's next failure waited %v, want 8s", got)
	}
}

// setCookie returns the cookie a response sets.
func setCookie(t *testing.T, r response, name string) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("%s: no %s cookie set in %v", r.req, name, r.header.Values("Set-Cookie"))
	return nil
}

// clearsCookie reports whether a response tells the browser to drop a cookie.
func clearsCookie(r response, name string) bool {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name && c.MaxAge < 0 {
			return true
		}
	}
	return false
}
