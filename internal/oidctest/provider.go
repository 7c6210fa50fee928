// Package oidctest runs a real OpenID provider for tests: zitadel/oidc's
// op package (the provider side of OpenID Connect: discovery, the
// authorize, token, userinfo, keys and end-session endpoints, signed ID
// tokens, PKCE) on a port of 127.0.0.1, with users in memory and a login
// form of its own. Tests drive it as a browser would, over HTTP: no part
// of the flow is mocked.
package oidctest

import (
	"crypto/sha256"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// loginPath is where the provider's login form is: the authorize
// endpoint sends the browser there with the request's id.
const loginPath = "/login"

// Config is the provider's one client and its users.
type Config struct {
	ClientID, ClientSecret string
	// RedirectURIs and PostLogoutRedirectURIs are those the client may
	// use; more can be added once the client's server listens
	// (Provider.AllowRedirect).
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	Users                  []User
	// UserinfoOnly keeps the users' claims out of the ID token (it holds
	// the subject only): a client must ask the userinfo endpoint.
	UserinfoOnly bool
}

// User is a person the provider knows. Claims are put as they are into
// the ID token and the userinfo answer ("groups": []string{…}).
type User struct {
	Subject  string
	Username string // the login form's name, and preferred_username
	Password string
	Email    string
	Claims   map[string]any
}

// EndedSession is a call of the end-session endpoint the provider
// honoured: Subject is known when the client sent an id_token_hint.
type EndedSession struct {
	Subject  string
	ClientID string
}

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is the provider's URL (http://127.0.0.1:port), whose
	// /.well-known/openid-configuration tells the rest.
	Issuer  string
	storage *storage
	server  *httptest.Server
	// requests is the authorize endpoint's requests, in order.
	requests []AuthorizeRequest
}

// AuthorizeRequest is what a client asked the authorize endpoint for.
type AuthorizeRequest struct {
	Query url.Values
}

// Start starts a provider on a free port of 127.0.0.1; it stops when the
// test ends.
func Start(t testing.TB, cfg Config) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("oidctest: listen: %v", err)
	}
	issuer := "http://" + ln.Addr().String()
	st, err := newStorage(&client{id: cfg.ClientID, secret: cfg.ClientSecret,
		redirectURIs: slices.Clone(cfg.RedirectURIs), postLogoutURIs: slices.Clone(cfg.PostLogoutRedirectURIs)})
	if err != nil {
		ln.Close()
		t.Fatalf("oidctest: %v", err)
	}
	st.userinfoOnly = cfg.UserinfoOnly
	for _, u := range cfg.Users {
		u.Claims = cloneClaims(u.Claims)
		st.users[u.Subject] = &u
	}
	p := &Provider{Issuer: issuer, storage: st}
	opConfig := &op.Config{
		CryptoKey:                sha256.Sum256([]byte(t.Name())),
		DefaultLogoutRedirectURI: "/logged-out",
		CodeMethodS256:           true,
		AuthMethodPost:           true,
	}
	provider, err := op.NewProvider(opConfig, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		ln.Close()
		t.Fatalf("oidctest: provider: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+loginPath, p.showLogin)
	mux.HandleFunc("POST "+loginPath, p.checkLogin)
	mux.HandleFunc("GET /logged-out", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "signed out")
	})
	mux.Handle("/", p.recordAuthorize(provider))
	p.server = &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	p.server.Start()
	t.Cleanup(p.server.Close)
	return p
}

// recordAuthorize keeps the query of every request of the authorize
// endpoint, for the tests that check what a client asked for (PKCE's
// method).
func (p *Provider) recordAuthorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/authorize" {
			p.storage.mu.Lock()
			p.requests = append(p.requests, AuthorizeRequest{Query: r.URL.Query()})
			p.storage.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// Authorizations is what clients asked the authorize endpoint for, in
// order.
func (p *Provider) Authorizations() []AuthorizeRequest {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	return slices.Clone(p.requests)
}

// AllowRedirect registers a redirect URI and a post-logout redirect URI
// (either may be empty) of the client.
func (p *Provider) AllowRedirect(redirectURI, postLogoutURI string) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	if redirectURI != "" {
		p.storage.client.redirectURIs = append(p.storage.client.redirectURIs, redirectURI)
	}
	if postLogoutURI != "" {
		p.storage.client.postLogoutURIs = append(p.storage.client.postLogoutURIs, postLogoutURI)
	}
}

// PutUser adds a user, or replaces the one of the same subject (a change
// of groups between two logins).
func (p *Provider) PutUser(u User) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	u.Claims = cloneClaims(u.Claims)
	p.storage.users[u.Subject] = &u
}

// EndedSessions is the ends of sessions the provider was asked for.
func (p *Provider) EndedSessions() []EndedSession {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	return slices.Clone(p.storage.ended)
}

// Close stops the provider before the test ends: a provider that is down.
func (p *Provider) Close() { p.server.Close() }

var loginForm = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html><head><title>Test provider: log in</title></head><body>
<h1>Test provider</h1>
{{if .Error}}<p role="alert" data-testid="provider-error">{{.Error}}</p>{{end}}
<form method="post" action="/login" data-testid="provider-login">
<input type="hidden" name="id" value="{{.ID}}">
<label>User name <input name="username" data-testid="provider-username"></label>
<label>Password <input name="password" type="password" data-testid="provider-password"></label>
<button type="submit" data-testid="provider-submit">Sign in</button>
</form></body></html>`))

func (p *Provider) showLogin(w http.ResponseWriter, r *http.Request) {
	p.renderLogin(w, http.StatusOK, r.URL.Query().Get("authRequestID"), "")
}

func (p *Provider) renderLogin(w http.ResponseWriter, status int, id, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginForm.Execute(w, struct{ ID, Error string }{id, msg})
}

// checkLogin checks the form's user and password and sends the browser
// back to the authorize endpoint's callback, which redirects to the
// client with a code.
func (p *Provider) checkLogin(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("id")
	if err := p.storage.checkPassword(r.PostFormValue("username"), r.PostFormValue("password"), id); err != nil {
		p.renderLogin(w, http.StatusUnauthorized, id, err.Error())
		return
	}
	http.Redirect(w, r, fmt.Sprintf("%s/authorize/callback?id=%s", p.Issuer, url.QueryEscape(id)), http.StatusFound)
}
