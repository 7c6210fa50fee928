package web

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/views"
)

// requirePage lets a dashboard request through when its visitor is logged
// in with a role that allows role. Without a session a page visit is sent
// to the login page (303, coming back afterwards), and an htmx request is
// answered 401 with HX-Redirect; a role too low gets a 403 page.
func (s *Server) requirePage(role Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			v, ok := visitorFrom(c)
			if !ok {
				return toLogin(c)
			}
			if !v.user.Role.Allows(role) {
				return s.renderError(c, http.StatusForbidden,
					"This needs the "+string(role)+" role; you are "+string(v.user.Role)+". An admin can change your role.")
			}
			if err := s.checkPath(c); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// toLogin sends a visitor without a session to the login page, to come
// back afterwards to the page they were on (a path of this site only:
// the request's own for a page visit, the page htmx or a form was sent
// from otherwise), told that their session expired when it did.
func toLogin(c echo.Context) error {
	r := c.Request()
	q := url.Values{}
	if sessionEnded(c) {
		q.Set("expired", "1")
	}
	var back string
	switch {
	case r.Header.Get("HX-Request") == "true":
		back = sameSitePath(r, r.Header.Get("HX-Current-URL"))
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		back = r.URL.RequestURI()
	default:
		back = sameSitePath(r, r.Referer())
	}
	if back != "" {
		q.Set("next", back)
	}
	target := "/login"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	if r.Header.Get("HX-Request") == "true" {
		// htmx would swap a redirect's target into the page: have it load
		// the login page whole instead.
		c.Response().Header().Set("HX-Redirect", target)
		return c.NoContent(http.StatusUnauthorized)
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// sameSitePath is the path (and query) of raw, an absolute URL the
// browser sent (HX-Current-URL, Referer), when it is of this site and
// not the login page: "" otherwise.
func sameSitePath(r *http.Request, raw string) string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Host != r.Host || u.Path == "/login" {
		return ""
	}
	if p := safeNext(u.RequestURI()); p != "/" || u.Path == "/" {
		return p
	}
	return ""
}

// viewSession is who is looking, for the layout: empty but for the CSRF
// token when nobody is logged in.
func (s *Server) viewSession(c echo.Context) views.Session {
	vs := views.Session{CSRFToken: csrfToken(c)}
	if v, ok := visitorFrom(c); ok {
		role := v.user.Role
		vs.User, vs.Role = v.user.Name, string(role)
		vs.CanOperate, vs.IsAdmin = role.Allows(RoleOperator), role.Allows(RoleAdmin)
	}
	return vs
}
