package web

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// csrfContextKey is where the CSRF middleware leaves the request's token.
const csrfContextKey = "csrf"

// csrfRefusedMessage is what a refused form says. The usual cause is a page
// left open past the token's cookie, or a form posted from another site.
const csrfRefusedMessage = "This form has expired or did not come from this site, so nothing was changed. Reload the page and try again."

// csrf protects every state-changing request of the dashboard (all but
// GET, HEAD, OPTIONS and TRACE), the login form included, with echo's CSRF
// middleware: a browser that says the request is same-origin
// (Sec-Fetch-Site) is trusted; for any other the token of the csrf cookie
// must come back in the X-CSRF-Token header (htmx, from the layout's
// hx-headers) or the _csrf field of the form's body, never the URL (echo's
// form lookup also reads the query string, so _csrf is taken out of it
// first: a token in a URL ends up in logs, the history and Referer
// headers). A login sets a new token (rotateCSRF). The API (bearer
// tokens, no cookies), the health check and the static files are not
// concerned.
func (s *Server) csrf() echo.MiddlewareFunc {
	cfg := middleware.CSRFConfig{
		Skipper:        func(c echo.Context) bool { return !isDashboard(c.Request().URL.Path) },
		TokenLookup:    "header:" + echo.HeaderXCSRFToken + ",form:_csrf",
		ContextKey:     csrfContextKey,
		CookieName:     csrfCookie,
		CookiePath:     "/",
		CookieMaxAge:   sessionMaxAge,
		CookieHTTPOnly: true,
		CookieSameSite: http.SameSiteLaxMode,
		// Same-site (another port or subdomain) and cross-site requests
		// fall back to the token instead of being let through or refused
		// outright, so that every refusal reads the same.
		AllowSecFetchSiteFunc: func(echo.Context) (bool, error) { return false, nil },
		ErrorHandler:          func(_ error, c echo.Context) error { return s.csrfRefused(c) },
	}
	plain := middleware.CSRFWithConfig(cfg)
	cfg.CookieSecure = true
	secure := middleware.CSRFWithConfig(cfg)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		p, sec := plain(next), secure(next)
		return func(c echo.Context) error {
			dropQueryToken(c.Request())
			if s.isSecure(c) {
				return sec(c)
			}
			return p(c)
		}
	}
}

// dropQueryToken takes the _csrf parameter out of the URL of a request
// that changes something, before the CSRF middleware looks for it.
func dropQueryToken(r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return
	}
	if !strings.Contains(r.URL.RawQuery, "_csrf") {
		return
	}
	q := r.URL.Query()
	q.Del("_csrf")
	r.URL.RawQuery = q.Encode()
	r.Form, r.PostForm = nil, nil // parsed again, without it
}

// csrfTokenBytes is the entropy of a CSRF token: 24 random bytes, 32
// characters.
const csrfTokenBytes = 24

// rotateCSRF gives the browser a new CSRF token, in place of the one the
// CSRF middleware has just set on the response: at a login, so that a
// token planted or read before it (a cookie set by a neighbouring site,
// a login page left open) is worthless afterwards. The cookie has the
// flags of the middleware's.
func (s *Server) rotateCSRF(c echo.Context) error {
	var raw [csrfTokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	h := c.Response().Header()
	kept := h.Values("Set-Cookie")[:0:0]
	for _, v := range h.Values("Set-Cookie") {
		if !strings.HasPrefix(v, csrfCookie+"=") {
			kept = append(kept, v)
		}
	}
	h.Del("Set-Cookie")
	for _, v := range kept {
		h.Add("Set-Cookie", v)
	}
	c.SetCookie(&http.Cookie{
		Name: csrfCookie, Value: token, Path: "/",
		Expires: time.Now().Add(time.Duration(sessionMaxAge) * time.Second), MaxAge: sessionMaxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.isSecure(c),
	})
	c.Set(csrfContextKey, token)
	return nil
}

// csrfRefused answers a request whose CSRF token is missing or wrong: 403,
// and nothing done.
func (s *Server) csrfRefused(c echo.Context) error {
	r := c.Request()
	s.log.InfoContext(r.Context(), "csrf check failed", "method", r.Method, "path", r.URL.Path)
	// The error page's own forms (logout) carry the token the cookie has.
	if ck, err := c.Cookie(csrfCookie); err == nil {
		c.Set(csrfContextKey, ck.Value)
	}
	return s.renderError(c, http.StatusForbidden, csrfRefusedMessage)
}

// csrfToken is the request's CSRF token, for the forms and htmx headers
// of the page.
func csrfToken(c echo.Context) string {
	t, _ := c.Get(csrfContextKey).(string)
	return t
}
