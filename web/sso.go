package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// SSOConfig configures single sign-on through an OpenID Connect provider
// (Keycloak, Dex, Entra ID…): the authorization code flow with PKCE
// (S256), its ID token verified by go-oidc, beside the local passwords.
type SSOConfig struct {
	// Issuer is the provider's URL; its /.well-known/openid-configuration
	// tells the rest. It is read at the first single sign-on, not at
	// start, so that a provider that is down does not keep Lazarus (and
	// its local logins) from starting.
	Issuer       string
	ClientID     string
	ClientSecret string
	// Scopes are asked for beside openid (default profile and email).
	Scopes []string
	// RedirectURL is where the provider sends the browser back:
	// <public url>/login/sso/callback, registered at the provider.
	RedirectURL string
	// PostLogoutURL is where the provider's logout sends the browser
	// back: <public url>/login, registered at the provider too.
	PostLogoutURL string
	// NameClaim is the claim whose value names the user made at the first
	// login (default preferred_username).
	NameClaim string
	// Mapping gives roles and queues from a claim's values; a person whose
	// values map to no role is refused.
	Mapping broker.SSOMapping
	// Label is the login page's button (default "Log in with single
	// sign-on").
	Label string
	// HTTPClient talks to the provider (default: a client with a 10 s
	// timeout).
	HTTPClient *http.Client
}

// Single sign-on's paths and cookies.
const (
	ssoStartPath    = "/login/sso"
	ssoCallbackPath = "/login/sso/callback"
	// ssoFlowCookie holds one login's state, nonce, PKCE verifier and
	// the page to go to, from the start to the callback, which clears it:
	// signed and encrypted (gorilla/sessions), read once.
	ssoFlowCookie = "lazarus_sso_flow"
	// ssoHintCookie holds the ID token of the login, sent back to the
	// provider's logout as id_token_hint (when it fits in a cookie).
	ssoHintCookie = "lazarus_sso_hint"
	// ssoFlowMaxAge bounds a login at the provider: a callback after it
	// is refused.
	ssoFlowMaxAge = 10 * time.Minute
	// ssoTimeout bounds each call to the provider.
	ssoTimeout = 10 * time.Second
)

// ssoUnreachable is what a login is told when the provider cannot be
// asked: the local login still works.
const ssoUnreachable = "The single sign-on provider cannot be reached just now. Log in with a local user name and password, or try again later."

// ssoClient is the relying party: the provider's endpoints and keys,
// discovered at the first use (and again after a failure).
type ssoClient struct {
	cfg  SSOConfig
	http *http.Client
	log  *slog.Logger

	mu sync.Mutex
	rp *ssoProvider // nil until discovered
}

// ssoProvider is what discovery told of the provider.
type ssoProvider struct {
	provider   *oidc.Provider
	oauth      oauth2.Config
	verifier   *oidc.IDTokenVerifier
	endSession string // "" when the provider offers none
}

func newSSOClient(cfg *SSOConfig, log *slog.Logger) *ssoClient {
	if cfg == nil || cfg.Issuer == "" {
		return nil
	}
	c := &ssoClient{cfg: *cfg, http: cfg.HTTPClient, log: log}
	if c.http == nil {
		c.http = &http.Client{Timeout: ssoTimeout}
	}
	if c.cfg.NameClaim == "" {
		c.cfg.NameClaim = "preferred_username"
	}
	if len(c.cfg.Scopes) == 0 {
		c.cfg.Scopes = []string{"profile", "email"}
	}
	if c.cfg.Label == "" {
		c.cfg.Label = "Log in with single sign-on"
	}
	return c
}

// ctx carries the client's HTTP client to go-oidc and oauth2.
func (c *ssoClient) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, c.http)
}

// provider returns the provider's endpoints, asking for them the first
// time (and after a failure).
func (c *ssoClient) provider(ctx context.Context) (*ssoProvider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rp != nil {
		return c.rp, nil
	}
	ctx, cancel := context.WithTimeout(c.ctx(ctx), ssoTimeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, c.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover the provider %s: %w", c.cfg.Issuer, err)
	}
	var meta struct {
		EndSession string   `json:"end_session_endpoint"`
		Methods    []string `json:"code_challenge_methods_supported"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, fmt.Errorf("read the provider's metadata: %w", err)
	}
	if len(meta.Methods) > 0 && !slices.Contains(meta.Methods, "S256") {
		// PKCE is sent all the same (a provider that ignores it loses
		// nothing); the log says the provider does not check it.
		c.log.Warn("single sign-on: the provider does not list PKCE's S256 among its code challenge methods", "methods", meta.Methods)
	}
	c.rp = &ssoProvider{
		provider: p,
		oauth: oauth2.Config{
			ClientID:     c.cfg.ClientID,
			ClientSecret: c.cfg.ClientSecret,
			Endpoint:     p.Endpoint(),
			RedirectURL:  c.cfg.RedirectURL,
			Scopes:       append([]string{oidc.ScopeOpenID}, c.cfg.Scopes...),
		},
		verifier:   p.Verifier(&oidc.Config{ClientID: c.cfg.ClientID}),
		endSession: meta.EndSession,
	}
	return c.rp, nil
}

// randomToken is 32 random bytes, base64url: a state or a nonce.
func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// ssoStart sends the browser to the provider to log in, with a new
// state, nonce and PKCE verifier kept in the flow cookie. A GET: it
// changes nothing stored, and a link (not a form) leaves the page's
// form-action policy out of the way.
func (s *Server) ssoStart(c echo.Context) error {
	if s.sso == nil {
		return echo.ErrNotFound
	}
	next := safeNext(c.QueryParam("next"))
	if _, ok := visitorFrom(c); ok {
		return c.Redirect(http.StatusSeeOther, next)
	}
	ctx := c.Request().Context()
	rp, err := s.sso.provider(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "single sign-on: the provider cannot be reached", "err", shortErr(err))
		return s.renderLogin(c, http.StatusBadGateway, views.Login{Next: next, Error: ssoUnreachable})
	}
	state, err := randomToken()
	if err != nil {
		return err
	}
	nonce, err := randomToken()
	if err != nil {
		return err
	}
	verifier := oauth2.GenerateVerifier()
	st, err := s.cookies.get(ctx)
	if err != nil {
		return err
	}
	flow := sessions.NewSession(st, ssoFlowCookie)
	flow.Values["state"], flow.Values["nonce"], flow.Values["verifier"] = state, nonce, verifier
	flow.Values["next"], flow.Values["at"] = next, s.clock.Now().Unix()
	flow.Options = s.cookieOptions(c, int(ssoFlowMaxAge.Seconds()))
	if err := st.Save(c.Request(), c.Response(), flow); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, rp.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)))
}

// ssoFlow is a login in progress, read from the flow cookie.
type ssoFlow struct {
	state, nonce, verifier, next string
	at                           time.Time
}

// takeFlow reads the flow cookie and clears it: a callback is answered
// once (a replayed one finds no flow).
func (s *Server) takeFlow(c echo.Context) (ssoFlow, bool, error) {
	if _, err := c.Cookie(ssoFlowCookie); err != nil {
		return ssoFlow{}, false, nil
	}
	s.clearCookie(c, ssoFlowCookie)
	st, err := s.cookies.get(c.Request().Context())
	if err != nil {
		return ssoFlow{}, false, err
	}
	sess, err := st.New(c.Request(), ssoFlowCookie)
	if err != nil {
		return ssoFlow{}, false, nil // tampered with, or made with other keys
	}
	var f ssoFlow
	f.state, _ = sess.Values["state"].(string)
	f.nonce, _ = sess.Values["nonce"].(string)
	f.verifier, _ = sess.Values["verifier"].(string)
	f.next, _ = sess.Values["next"].(string)
	at, _ := sess.Values["at"].(int64)
	f.at = time.Unix(at, 0)
	if f.state == "" || f.nonce == "" || f.verifier == "" {
		return ssoFlow{}, false, nil
	}
	return f, true, nil
}

// Refusals of a callback, as the login page says them.
const (
	ssoNoFlow    = "This single sign-on was not started from this browser, was already used, or took longer than 10 minutes. Start again."
	ssoBadAnswer = "The single sign-on provider's answer could not be verified, so nobody was logged in. Start again; if it happens again, tell an admin."
)

// ssoCallback ends a login at the provider: the state must be the flow
// cookie's, the code is exchanged with the PKCE verifier, the ID token is
// verified (signature, issuer, audience, expiry) and must carry the
// flow's nonce; then the claims are mapped to a role and queues and the
// broker opens the session (SSOLogin).
func (s *Server) ssoCallback(c echo.Context) error {
	if s.sso == nil {
		return echo.ErrNotFound
	}
	ctx := c.Request().Context()
	ip := clientIP(c.Request())
	flow, ok, err := s.takeFlow(c)
	if err != nil {
		return err
	}
	q := c.Request().URL.Query()
	if !ok || s.clock.Now().Sub(flow.at) > ssoFlowMaxAge {
		s.log.InfoContext(ctx, "single sign-on refused: no login in progress", "from", ip)
		return s.renderLogin(c, http.StatusBadRequest, views.Login{Error: ssoNoFlow})
	}
	v := views.Login{Next: flow.next}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(flow.state)) != 1 {
		s.log.WarnContext(ctx, "single sign-on refused: the state is not this browser's", "from", ip)
		v.Error = ssoNoFlow
		return s.renderLogin(c, http.StatusBadRequest, v)
	}
	if e := q.Get("error"); e != "" {
		// The provider's words are a stranger's: logged short, shown
		// escaped (templ), never whole.
		s.log.InfoContext(ctx, "single sign-on: the provider refused", "error", truncateLog(e), "from", ip)
		v.Error = "The single sign-on provider did not log you in (" + truncateLog(e) + "). Start again, or log in with a local user name and password."
		return s.renderLogin(c, http.StatusUnauthorized, v)
	}
	rp, err := s.sso.provider(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "single sign-on: the provider cannot be reached", "err", shortErr(err))
		v.Error = ssoUnreachable
		return s.renderLogin(c, http.StatusBadGateway, v)
	}
	pctx, cancel := context.WithTimeout(s.sso.ctx(ctx), ssoTimeout)
	defer cancel()
	tok, err := rp.oauth.Exchange(pctx, q.Get("code"), oauth2.VerifierOption(flow.verifier))
	if err != nil {
		s.log.WarnContext(ctx, "single sign-on refused: the code was not exchanged", "err", shortErr(err), "from", ip)
		v.Error = ssoBadAnswer
		return s.renderLogin(c, http.StatusBadGateway, v)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		s.log.WarnContext(ctx, "single sign-on refused: no ID token in the provider's answer", "from", ip)
		v.Error = ssoBadAnswer
		return s.renderLogin(c, http.StatusBadGateway, v)
	}
	idt, err := rp.verifier.Verify(pctx, raw)
	if err != nil {
		s.log.WarnContext(ctx, "single sign-on refused: the ID token is not valid", "err", shortErr(err), "from", ip)
		v.Error = ssoBadAnswer
		return s.renderLogin(c, http.StatusUnauthorized, v)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(flow.nonce)) != 1 {
		s.log.WarnContext(ctx, "single sign-on refused: the ID token's nonce is not this login's", "from", ip)
		v.Error = ssoBadAnswer
		return s.renderLogin(c, http.StatusUnauthorized, v)
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			s.log.WarnContext(ctx, "single sign-on refused: the access token is not the ID token's", "from", ip)
			v.Error = ssoBadAnswer
			return s.renderLogin(c, http.StatusUnauthorized, v)
		}
	}
	claims, err := s.ssoClaims(pctx, rp, idt, tok)
	if err != nil {
		s.log.WarnContext(ctx, "single sign-on refused: the claims could not be read", "err", shortErr(err), "from", ip)
		v.Error = ssoBadAnswer
		return s.renderLogin(c, http.StatusBadGateway, v)
	}
	name, _ := claimValue(claims, s.sso.cfg.NameClaim).(string)
	role, queues, err := s.sso.cfg.Mapping.Map(claimStrings(claims, s.sso.cfg.Mapping.Claim))
	if err != nil {
		s.log.WarnContext(ctx, "single sign-on refused: the groups' queues", "err", err, "from", ip)
		role = "" // refused below, audited
	}
	old, err := s.sessionID(c)
	if err != nil {
		return err
	}
	secret, u, err := s.broker.SSOLogin(ctx, broker.SSOLoginRequest{
		Subject: idt.Issuer + " " + idt.Subject, Name: name, Role: role, Queues: queues, From: ip, Replaces: old,
	})
	if errors.Is(err, broker.ErrDenied) {
		s.log.InfoContext(ctx, "single sign-on refused", "user", truncateLog(name), "reason", err.Error(), "from", ip)
		v.Error = err.Error() // the broker's message, meant to be shown
		return s.renderLogin(c, http.StatusForbidden, v)
	}
	if err != nil {
		return err
	}
	if err := s.writeSession(c, secret); err != nil {
		return err
	}
	if err := s.rotateCSRF(c); err != nil {
		return fmt.Errorf("new csrf token: %w", err)
	}
	s.keepLogoutHint(c, raw)
	s.log.InfoContext(ctx, "logged in through single sign-on", "user", u.Name, "role", string(u.Role), "from", ip)
	return c.Redirect(http.StatusSeeOther, safeNext(flow.next))
}

// ssoClaims is the ID token's claims, with those of the userinfo
// endpoint that the token lacks (providers put the groups in one or the
// other); the userinfo answer counts only when it is of the same subject.
func (s *Server) ssoClaims(ctx context.Context, rp *ssoProvider, idt *oidc.IDToken, tok *oauth2.Token) (map[string]any, error) {
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return nil, fmt.Errorf("id token claims: %w", err)
	}
	_, hasName := claims[s.sso.cfg.NameClaim]
	hasGroups := claimValue(claims, s.sso.cfg.Mapping.Claim) != nil
	if (hasName && hasGroups) || rp.provider.UserInfoEndpoint() == "" || tok.AccessToken == "" {
		return claims, nil
	}
	info, err := rp.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil, fmt.Errorf("userinfo: %w", err)
	}
	if info.Subject != idt.Subject {
		return nil, errors.New("userinfo: another subject than the ID token's")
	}
	more := map[string]any{}
	if err := info.Claims(&more); err != nil {
		return nil, fmt.Errorf("userinfo claims: %w", err)
	}
	for k, v := range more {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return claims, nil
}

// claimValue is the claim name of claims: the claim of that whole name,
// or else, for a name with dots, the claim at that path of nested objects
// (Keycloak's realm_access.roles). Claim names can hold dots (Auth0's are
// URLs), which is why the whole name is looked at first.
func claimValue(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var cur any = claims
	for _, part := range strings.Split(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[part]; !ok {
			return nil
		}
	}
	return cur
}

// claimStrings is the values of a claim that holds a string or a list of
// strings; anything else holds none.
func claimStrings(claims map[string]any, name string) []string {
	switch v := claimValue(claims, name).(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// keepLogoutHint keeps the ID token for the provider's logout
// (id_token_hint), when its cookie fits in a browser's 4 KB; a larger
// one (a token with many groups) is not kept, and the logout sends the
// client id only.
func (s *Server) keepLogoutHint(c echo.Context, idToken string) {
	st, err := s.cookies.get(c.Request().Context())
	if err != nil {
		return
	}
	sess := sessions.NewSession(st, ssoHintCookie)
	sess.Values["t"] = idToken
	sess.Options = s.cookieOptions(c, sessionMaxAge)
	if err := st.Save(c.Request(), c.Response(), sess); err != nil {
		s.log.DebugContext(c.Request().Context(), "single sign-on: the ID token is too large to keep for the logout", "err", err)
	}
}

// logoutHint returns the ID token kept at the login, if any, and clears
// its cookie.
func (s *Server) logoutHint(c echo.Context) string {
	if _, err := c.Cookie(ssoHintCookie); err != nil {
		return ""
	}
	s.clearCookie(c, ssoHintCookie)
	st, err := s.cookies.get(c.Request().Context())
	if err != nil {
		return ""
	}
	sess, err := st.New(c.Request(), ssoHintCookie)
	if err != nil {
		return ""
	}
	t, _ := sess.Values["t"].(string)
	return t
}

// ssoLogoutURL is where a single sign-on user's logout goes after the
// session here has ended: the provider's end-session endpoint, to end
// the session there too, which sends the browser back to the login page;
// "" when the provider offers none (or cannot be reached).
func (s *Server) ssoLogoutURL(c echo.Context, hint string) string {
	rp, err := s.sso.provider(c.Request().Context())
	if err != nil || rp.endSession == "" {
		return ""
	}
	u, err := url.Parse(rp.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("client_id", s.sso.cfg.ClientID)
	if s.sso.cfg.PostLogoutURL != "" {
		q.Set("post_logout_redirect_uri", s.sso.cfg.PostLogoutURL)
	}
	if hint != "" {
		q.Set("id_token_hint", hint)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// shortErr is an error of a call to the provider, for the log: its text
// may hold the provider's answer (oauth2.RetrieveError does), which is
// not logged whole.
func shortErr(err error) string { return clip(err.Error(), 300) }

// truncateLog shortens a stranger's text for a log line or a message.
func truncateLog(s string) string { return clip(s, 64) }

// clip cuts s to at most n bytes, on a character's boundary, marking the
// cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
