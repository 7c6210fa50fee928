package web

import (
	"net/http"

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
// hx-headers) or the _csrf form field. The API (bearer tokens, no
// cookies), the health check and the static files are not concerned.
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
			if s.isSecure(c) {
				return sec(c)
			}
			return p(c)
		}
	}
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
