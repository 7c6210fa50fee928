package web

import (
	"net/http"
	"reflect"
	"strings"

	"github.com/labstack/echo/v4"
)

// notFoundMessage answers a path that no route serves.
const notFoundMessage = "no route serves this path"

// unknownRoute answers a request that no route serves (echo's 404 and 405
// handlers): a JSON {"error": ...} with 404 or 405 (SPEC.md section 5),
// or, outside the API, the error page for a browser asking for a page
// (Accept: text/html) and renderError's flash for htmx. It runs after
// routing and the API's token check (an unknown API path still needs a
// token: 401 without one), and before the dashboard's sessions and CSRF
// check, which had refused a POST to a path that does not exist with its
// 403 page.
func (s *Server) unknownRoute(next echo.HandlerFunc) echo.HandlerFunc {
	notFound := reflect.ValueOf(echo.NotFoundHandler).Pointer()
	notAllowed := reflect.ValueOf(echo.MethodNotAllowedHandler).Pointer()
	return func(c echo.Context) error {
		h := c.Handler()
		if h == nil {
			return next(c)
		}
		status := 0
		switch reflect.ValueOf(h).Pointer() {
		case notFound:
			status = http.StatusNotFound
		case notAllowed:
			status = http.StatusMethodNotAllowed
		default:
			return next(c)
		}
		msg := notFoundMessage
		if status == http.StatusMethodNotAllowed {
			msg = "method not allowed"
			if allow, ok := c.Get(echo.ContextKeyHeaderAllow).(string); ok {
				c.Response().Header().Set(echo.HeaderAllow, allow)
			}
		}
		// htmx (an old page, a link to a route since gone) gets the answer of
		// every other page error, a flash with HX-Retarget: app.js takes an
		// error without it for a proxy's and says Lazarus could not be reached.
		if isPage(c.Request().URL.Path) && (isFragment(c) || wantsHTML(c.Request())) {
			return s.renderError(c, status, pageMessage(status, msg))
		}
		return writeJSON(c, status, errorResponse{Error: msg})
	}
}

// wantsHTML reports whether the request asks for an HTML page, as a
// browser's navigation does.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}
