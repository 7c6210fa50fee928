package web_test

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/oidctest"
	"github.com/lazarus-dlq/lazarus/web"
)

// The single sign-on tests run the real flow over HTTP: a real OpenID
// provider (internal/oidctest: zitadel/oidc's op on a port of its own),
// the server on another, and a browser with a cookie jar that follows
// each redirect by hand, posts the provider's login form, and may tamper
// with what passes through it.

const (
	ssoClientID     = "lazarus"
	ssoClientSecret = "client-secret-of-the-test"
)

// ssoUsers are the provider's people: support staff (a viewer of the
// orders queues), an admin of the provider's admin group, someone of a
// group that maps to nothing, and someone whose provider name is the
// local admin's.
var ssoUsers = []oidctest.User{
	{Subject: "sub-sam", Username: "sam", Password: "sam-pw", Email: "sam@example.com", Claims: map[string]any{"groups": []string{"support"}}},
	{Subject: "sub-ada", Username: "ada", Password: "ada-pw", Email: "ada@example.com", Claims: map[string]any{"groups": []string{"lazarus-admins", "support"}}},
	{Subject: "sub-nina", Username: "nina", Password: "nina-pw", Claims: map[string]any{"groups": []string{"marketing"}}},
	{Subject: "sub-mallory", Username: "admin", Password: "mallory-pw", Claims: map[string]any{"groups": []string{"lazarus-admins"}}},
}

// ssoMapping is the mapping the tests configure: --oidc-role
// lazarus-admins=admin --oidc-role support=viewer --oidc-queues
// 'support=orders*'.
func ssoMapping() broker.SSOMapping {
	return broker.SSOMapping{Claim: "groups", Groups: []broker.SSOGroup{
		{Value: "lazarus-admins", Role: broker.RoleAdmin},
		{Value: "support", Role: broker.RoleViewer, Queues: broker.MustParseQueueScope("orders*")},
	}}
}

// ssoBundle is a server with single sign-on through a provider.
type ssoBundle struct {
	*bundle
	provider *oidctest.Provider
}

// setupSSO starts a provider, and a server whose single sign-on goes
// through it; cfg may change the provider's before it starts.
func setupSSO(t *testing.T, cfg ...func(*oidctest.Config)) *ssoBundle {
	t.Helper()
	return setupSSOWith(t, nil, cfg...)
}

// setupSSOWith is setupSSO with edit run on the server's single sign-on
// configuration.
func setupSSOWith(t *testing.T, edit func(*web.SSOConfig), cfg ...func(*oidctest.Config)) *ssoBundle {
	t.Helper()
	pc := oidctest.Config{ClientID: ssoClientID, ClientSecret: ssoClientSecret, Users: ssoUsers}
	for _, f := range cfg {
		f(&pc)
	}
	p := oidctest.Start(t, pc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	p.AllowRedirect(base+"/login/sso/callback", base+"/login")
	c := &clock{now: time.Now().UTC()}
	s := setupOn(t, ln, storeAt(t, "l.db"), c, func(c *web.Config) {
		c.OpenAPI = false
		c.SSO = &web.SSOConfig{
			Issuer: p.Issuer, ClientID: ssoClientID, ClientSecret: ssoClientSecret,
			Scopes:      []string{"profile", "email", "groups"},
			RedirectURL: base + "/login/sso/callback", PostLogoutURL: base + "/login",
			Mapping: ssoMapping(), Label: "Log in with the test provider",
		}
		if edit != nil {
			edit(c.SSO)
		}
	})
	s.addUser("admin", broker.RoleAdmin)
	return &ssoBundle{bundle: s, provider: p}
}

// visit loads an absolute URL (the provider's) or a path of the server.
func (b *browser) visit(raw string) response {
	t := b.s.t
	t.Helper()
	if strings.HasPrefix(raw, "/") {
		raw = b.s.url + raw
	}
	return b.send("GET", raw, nil)
}

func (b *browser) send(method, raw string, form url.Values) response {
	t := b.s.t
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(b.s.ctx, method, raw, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, raw, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{t: t, req: method + " " + raw, status: res.StatusCode, header: res.Header, body: out}
}

// redirect is the absolute target of a redirect, which it must be.
func (r response) redirect() string {
	r.t.Helper()
	if r.status != http.StatusFound && r.status != http.StatusSeeOther {
		r.t.Fatalf("%s: status %d, want a redirect; body %.500s", r.req, r.status, r.body)
	}
	loc, err := url.Parse(r.header.Get("Location"))
	if err != nil {
		r.t.Fatal(err)
	}
	base, _ := url.Parse(strings.SplitN(r.req, " ", 2)[1])
	return base.ResolveReference(loc).String()
}

// ssoFlow is one login at the provider, as far as the redirect back to
// the server: the authorize URL the server sent the browser to, and the
// callback URL the provider sent it back with.
type ssoFlow struct {
	authorize *url.URL
	callback  string
}

// startSSO starts a single sign-on from the login page's link; tamper,
// when set, changes the authorize request on its way to the provider.
// The browser then posts the provider's login form as name, and is sent
// back with a code: the callback is returned, not yet followed.
func (s *ssoBundle) startSSO(b *browser, start, name, password string, tamper func(url.Values)) ssoFlow {
	s.t.Helper()
	to, err := url.Parse(b.visit(start).redirect())
	if err != nil {
		s.t.Fatal(err)
	}
	if !strings.HasPrefix(to.String(), s.provider.Issuer+"/authorize?") {
		s.t.Fatalf("the start leads to %s, not the provider's authorize endpoint", to)
	}
	flow := ssoFlow{authorize: to}
	if tamper != nil {
		q := to.Query()
		tamper(q)
		to.RawQuery = q.Encode()
	}
	loginPage := b.visit(b.visit(to.String()).redirect()).want(http.StatusOK)
	form := loginPage.doc().Find(`form[data-testid="provider-login"]`)
	id, _ := form.Find(`input[name="id"]`).Attr("value")
	if id == "" {
		s.t.Fatalf("the provider's login page has no form: %s", loginPage.body)
	}
	posted := b.send("POST", s.provider.Issuer+"/login", url.Values{"id": {id}, "username": {name}, "password": {password}})
	flow.callback = b.visit(posted.redirect()).redirect()
	if !strings.HasPrefix(flow.callback, s.url+"/login/sso/callback?") {
		s.t.Fatalf("the provider sent the browser to %s, not the callback", flow.callback)
	}
	return flow
}

// ssoLogin logs b in through the provider as name and returns where the
// server sent it afterwards.
func (s *ssoBundle) ssoLogin(b *browser, name, password string) string {
	s.t.Helper()
	f := s.startSSO(b, "/login/sso", name, password, nil)
	r := b.visit(f.callback)
	r.want(http.StatusSeeOther)
	return r.header.Get("Location")
}

func (s *ssoBundle) wantNoSession(b *browser) {
	s.t.Helper()
	r := b.get("/")
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
		s.t.Fatalf("GET / with the browser's cookies: %d %q, want the login page", r.status, r.header.Get("Location"))
	}
}

func TestSSOLoginThroughTheProvider(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	b := s.browser()

	page := b.get("/login").want(http.StatusOK)
	if link, _ := page.doc().Find(`[data-testid="login-sso"]`).Attr("href"); link != "/login/sso" || page.testid("login-sso") != "Log in with the test provider" {
		t.Fatalf("the login page's single sign-on link: %q %q", link, page.testid("login-sso"))
	}
	if page.doc().Find(`[data-testid="login-form"]`).Length() != 1 {
		t.Fatal("the login page lost its local form")
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+s.provider.Issuer) {
		t.Fatalf("CSP %q does not let the logout form go on to the provider", csp)
	}

	f := s.startSSO(b, "/login/sso?next=%2Faudit", "sam", "sam-pw", nil)
	q := f.authorize.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" ||
		q.Get("client_id") != ssoClientID || !strings.Contains(q.Get("scope"), "openid") {
		t.Fatalf("the authorize request: %v", q)
	}
	b.visit(f.callback).wantRedirect("/audit")
	home := b.get("/").want(http.StatusOK)
	if who := home.testid("whoami"); !strings.Contains(who, "sam") || !strings.Contains(who, "viewer") {
		t.Fatalf("whoami %q", who)
	}
	u, err := s.broker.UserByName(s.ctx, "sam")
	if err != nil || u.Subject != s.provider.Issuer+" sub-sam" || u.Role != broker.RoleViewer || u.Queues.String() != "orders*" || u.PasswordHash != "" {
		t.Fatalf("the user made: %+v %v", u, err)
	}
	entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditLogin, Actor: "user:sam"}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 1 || !strings.Contains(entries[0].Detail, "single sign-on") {
		t.Fatalf("audit: %+v %v", entries, err)
	}

	t.Run("TheUsersPageMarksTheSingleSignOnUser", func(t *testing.T) {
		admin := s.browser()
		admin.login("admin", passwordOf("admin")).wantRedirect("/")
		users := admin.get("/admin/users").want(http.StatusOK).doc()
		if users.Find(`[data-testid="user-sam"] [data-testid="user-sso"]`).Length() != 1 ||
			users.Find(`[data-testid="user-admin"] [data-testid="user-sso"]`).Length() != 0 {
			t.Fatal("the users page does not tell the single sign-on user from the local one")
		}
	})
	t.Run("APasswordDoesNotLogTheSingleSignOnUserIn", func(t *testing.T) {
		// Not even the provider's password (nor any other: one try, as
		// failures are slowed down).
		s.browser().login("sam", "sam-pw").want(http.StatusUnauthorized)
	})
	t.Run("TheClaimsSetRoleAndQueuesAtEveryLogin", func(t *testing.T) {
		sam := ssoUsers[0]
		sam.Claims = map[string]any{"groups": []string{"support", "lazarus-admins"}}
		s.provider.PutUser(sam)
		b2 := s.browser()
		s.ssoLogin(b2, "sam", "sam-pw")
		u, err := s.broker.UserByName(s.ctx, "sam")
		if err != nil || u.Role != broker.RoleAdmin || !u.Queues.All() {
			t.Fatalf("after a login with the admins' group: %+v %v", u, err)
		}
		sam.Claims = map[string]any{"groups": "support"} // a single value, not a list
		s.provider.PutUser(sam)
		s.ssoLogin(s.browser(), "sam", "sam-pw")
		if u, _ := s.broker.UserByName(s.ctx, "sam"); u.Role != broker.RoleViewer || u.Queues.String() != "orders*" {
			t.Fatalf("after the admins' group was left: %+v", u)
		}
	})
}

func TestSSOWithoutARoleIsRefused(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	b := s.browser()
	f := s.startSSO(b, "/login/sso", "nina", "nina-pw", nil)
	r := b.visit(f.callback).want(http.StatusForbidden)
	if msg := r.testid("login-error"); msg != broker.SSONoRole {
		t.Fatalf("the page says %q", msg)
	}
	if r.doc().Find(`[data-testid="login-form"]`).Length() != 1 || r.doc().Find(`[data-testid="login-sso"]`).Length() != 1 {
		t.Fatal("the refusal page does not offer the logins again")
	}
	s.wantNoSession(b)
	if _, err := s.broker.UserByName(s.ctx, "nina"); err == nil {
		t.Fatal("a user was made for a person without a role")
	}
	entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditLoginFailed}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 1 || !strings.Contains(entries[0].Detail, `"nina"`) || !strings.Contains(entries[0].Detail, "no group maps to a role") {
		t.Fatalf("audit: %+v %v", entries, err)
	}
}

func TestSSODoesNotTakeOverALocalUser(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	b := s.browser()
	f := s.startSSO(b, "/login/sso", "admin", "mallory-pw", nil)
	r := b.visit(f.callback).want(http.StatusForbidden)
	if msg := r.testid("login-error"); msg != broker.SSONameTaken {
		t.Fatalf("the page says %q", msg)
	}
	s.wantNoSession(b)
	admin, err := s.broker.UserByName(s.ctx, "admin")
	if err != nil || admin.Subject != "" {
		t.Fatalf("the local admin: %+v %v", admin, err)
	}
	// The local admin still logs in with the password.
	s.browser().login("admin", passwordOf("admin")).wantRedirect("/")
}

func TestSSOLogoutEndsBothSessions(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	b := s.browser()
	s.ssoLogin(b, "sam", "sam-pw")
	b.get("/").want(http.StatusOK)

	out := b.post("/logout", nil)
	to, err := url.Parse(out.redirect())
	if err != nil {
		t.Fatal(err)
	}
	q := to.Query()
	if !strings.HasPrefix(to.String(), s.provider.Issuer+"/end_session?") || q.Get("client_id") != ssoClientID ||
		q.Get("post_logout_redirect_uri") != s.url+"/login" || q.Get("id_token_hint") == "" {
		t.Fatalf("the logout leads to %s", to)
	}
	s.wantNoSession(b)
	if b.cookie("lazarus_sso_hint") != "" {
		t.Fatal("the ID token's cookie outlived the logout")
	}
	// The provider ends its session and sends the browser back to the
	// login page.
	if back := b.visit(to.String()).redirect(); back != s.url+"/login" {
		t.Fatalf("the provider's logout sends the browser to %s", back)
	}
	ended := s.provider.EndedSessions()
	if len(ended) != 1 || ended[0].Subject != "sub-sam" || ended[0].ClientID != ssoClientID {
		t.Fatalf("the provider ended %+v", ended)
	}

	t.Run("ALocalUsersLogoutStaysHere", func(t *testing.T) {
		b := s.browser()
		b.login("admin", passwordOf("admin")).wantRedirect("/")
		b.post("/logout", nil).wantRedirect("/login")
	})
}

func TestSSOTamperedStateIsRefused(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	b := s.browser()
	f := s.startSSO(b, "/login/sso", "sam", "sam-pw", nil)
	cb, _ := url.Parse(f.callback)
	q := cb.Query()
	q.Set("state", q.Get("state")+"x")
	cb.RawQuery = q.Encode()
	r := b.visit(cb.String()).want(http.StatusBadRequest)
	if !strings.Contains(r.testid("login-error"), "was not started from this browser") {
		t.Fatalf("the page says %q", r.testid("login-error"))
	}
	s.wantNoSession(b)
	// The flow is spent: the right state after a wrong one is refused too.
	b.visit(f.callback).want(http.StatusBadRequest)
	s.wantNoSession(b)
	if _, err := s.broker.UserByName(s.ctx, "sam"); err == nil {
		t.Fatal("a user was made")
	}

	t.Run("AnotherBrowsersCallbackIsRefused", func(t *testing.T) {
		victim, thief := s.browser(), s.browser()
		f := s.startSSO(victim, "/login/sso", "sam", "sam-pw", nil)
		s.startSSO(thief, "/login/sso", "sam", "sam-pw", nil) // a flow of its own
		thief.visit(f.callback).want(http.StatusBadRequest)
		s.wantNoSession(thief)
	})
}

func TestSSOTooSlowALoginIsRefused(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	b := s.browser()
	f := s.startSSO(b, "/login/sso", "sam", "sam-pw", nil)
	s.clock.Advance(11 * time.Minute)
	r := b.visit(f.callback).want(http.StatusBadRequest)
	if !strings.Contains(r.testid("login-error"), "longer than 10 minutes") {
		t.Fatalf("the page says %q", r.testid("login-error"))
	}
	s.wantNoSession(b)
}

func TestSSOReplayedCallbackIsRefused(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	b := s.browser()
	f := s.startSSO(b, "/login/sso", "sam", "sam-pw", nil)
	flowCookie := b.cookie("lazarus_sso_flow")
	b.visit(f.callback).wantRedirect("/")

	// The same browser again: its flow was spent by the first callback.
	again := s.browser()
	again.visit(f.callback).want(http.StatusBadRequest)
	s.wantNoSession(again)
	// With the flow cookie copied too: the code was spent at the provider.
	again.setCookie("lazarus_sso_flow", flowCookie)
	r := again.visit(f.callback)
	if r.status < 400 {
		t.Fatalf("a replayed callback with its flow cookie: %d", r.status)
	}
	s.wantNoSession(again)
}

func TestSSOTamperedNonceIsRefused(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	for _, tc := range []struct {
		name   string
		tamper func(q url.Values, earlier string)
	}{
		{"Changed", func(q url.Values, _ string) { q.Set("nonce", q.Get("nonce")+"x") }},
		{"Dropped", func(q url.Values, _ string) { q.Del("nonce") }},
		{"ReplayedFromAnEarlierLogin", func(q url.Values, earlier string) { q.Set("nonce", earlier) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &ssoBundle{bundle: s.sub(t), provider: s.provider}
			earlier := s.startSSO(s.browser(), "/login/sso", "sam", "sam-pw", nil).authorize.Query().Get("nonce")
			b := s.browser()
			f := s.startSSO(b, "/login/sso", "sam", "sam-pw", func(q url.Values) { tc.tamper(q, earlier) })
			r := b.visit(f.callback)
			if r.status != http.StatusUnauthorized || r.testid("login-error") == "" {
				t.Fatalf("status %d, error %q", r.status, r.testid("login-error"))
			}
			s.wantNoSession(b)
		})
	}
	if _, err := s.broker.UserByName(s.ctx, "sam"); err == nil {
		t.Fatal("a user was made")
	}
}

func TestSSOChangedCodeChallengeIsRefused(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	b := s.browser()
	other := sha256.Sum256([]byte("a verifier that is not the server's"))
	f := s.startSSO(b, "/login/sso", "sam", "sam-pw", func(q url.Values) {
		q.Set("code_challenge", base64.RawURLEncoding.EncodeToString(other[:]))
	})
	r := b.visit(f.callback)
	if r.status < 400 || r.testid("login-error") == "" {
		t.Fatalf("status %d, error %q", r.status, r.testid("login-error"))
	}
	s.wantNoSession(b)
}

func TestSSOReadsTheClaimsOfTheUserinfoEndpoint(t *testing.T) {
	t.Parallel()
	s := setupSSO(t, func(c *oidctest.Config) { c.UserinfoOnly = true })
	b := s.browser()
	s.ssoLogin(b, "sam", "sam-pw")
	u, err := s.broker.UserByName(s.ctx, "sam")
	if err != nil || u.Role != broker.RoleViewer || u.Queues.String() != "orders*" {
		t.Fatalf("%+v %v", u, err)
	}
}

func TestSSOProviderDownLeavesTheLocalLogin(t *testing.T) {
	t.Parallel()
	s := setupSSO(t)
	s.provider.Close()
	b := s.browser()
	r := b.get("/login/sso").want(http.StatusBadGateway)
	if !strings.Contains(r.testid("login-error"), "cannot be reached") || r.doc().Find(`[data-testid="login-form"]`).Length() != 1 {
		t.Fatalf("the page: %q", r.testid("login-error"))
	}
	b.login("admin", passwordOf("admin")).wantRedirect("/")
	b.get("/").want(http.StatusOK)
	// A local user's logout does not need the provider.
	b.post("/logout", nil).wantRedirect("/login")
}

func TestSSOWithAWrongClientSecretIsRefused(t *testing.T) {
	t.Parallel()
	s := setupSSOWith(t, func(c *web.SSOConfig) { c.ClientSecret = "not-the-secret" })
	b := s.browser()
	f := s.startSSO(b, "/login/sso", "sam", "sam-pw", nil)
	r := b.visit(f.callback).want(http.StatusBadGateway)
	if !strings.Contains(r.testid("login-error"), "could not be verified") {
		t.Fatalf("the page says %q", r.testid("login-error"))
	}
	s.wantNoSession(b)
	if strings.Contains(s.logs.String(), "not-the-secret") {
		t.Fatal("the client secret is in the log")
	}
}
