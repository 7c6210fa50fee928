package web

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// isFragment reports whether the request wants a page's fragment rather
// than the whole page: an htmx request that is not a history restore.
func isFragment(c echo.Context) bool {
	h := c.Request().Header
	return h.Get("HX-Request") == "true" && h.Get("HX-History-Restore-Request") != "true"
}

// renderPage renders whole (a direct visit) or fragment (htmx) into a
// buffer, then writes it: an error never leaves half a page.
func renderPage(c echo.Context, status int, whole, fragment templ.Component) error {
	c.Response().Header().Add(echo.HeaderVary, "HX-Request")
	comp := whole
	if isFragment(c) {
		comp = fragment
	}
	return render(c, status, comp)
}

// render writes one component, rendered into a buffer first. The buffer
// is one of the answers' (answerBuffers): a list page is over 100 KB,
// which a fresh buffer would grow to, copying, on every request.
func render(c echo.Context, status int, comp templ.Component) error {
	bp := answerBuffers.Get().(*[]byte)
	buf := bytes.NewBuffer((*bp)[:0])
	err := comp.Render(c.Request().Context(), buf)
	if err == nil {
		h := c.Response().Header()
		h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
		h.Set("Cache-Control", "no-store")
		err = c.Blob(status, echo.MIMETextHTMLCharsetUTF8, buf.Bytes()) // copied into the connection's buffer, or sent
	}
	putAnswerBuffer(bp, buf.Bytes())
	return err
}

// page fills what every page's layout needs.
func (s *Server) page(c echo.Context, title, nav string, crumbs ...views.Crumb) views.Page {
	p := views.Page{Title: title, Nav: nav, Session: s.viewSession(c), Now: s.now(), Crumbs: crumbs,
		Version: s.build.Version, Commit: s.build.ShortCommit()}
	if p.Session.User != "" && !isFragment(c) { // a fragment has no layout
		p.Maintenance = s.maintenanceNote(c)
	}
	return p
}

// maintenanceNote is the banner of maintenance mode while it holds
// deliveries (one read of the settings a page). A failed read leaves the
// banner out, logged: the page's own reads say what is wrong.
func (s *Server) maintenanceNote(c echo.Context) *views.MaintenanceNote {
	m, err := s.broker.Maintenance(c.Request().Context())
	if err != nil {
		s.log.WarnContext(c.Request().Context(), "maintenance mode for the banner", "err", err)
		return nil
	}
	if !m.Holds() {
		return nil
	}
	var n views.MaintenanceNote
	for _, sc := range []struct {
		name string
		st   broker.MaintenanceState
	}{{string(broker.MaintenancePush), m.Push}, {string(broker.MaintenancePop), m.Pop}} {
		if sc.st.On {
			n.Scopes = append(n.Scopes, views.MaintenanceScope{Scope: sc.name, By: sc.st.By, Since: sc.st.Since})
		}
	}
	return &n
}

func (s *Server) now() time.Time { return s.clock.Now().UTC() }

// isPage reports whether a path is a dashboard page (HTML errors) rather
// than the API or the health check (JSON errors).
func isPage(path string) bool {
	return !strings.HasPrefix(path, apiPrefix+"/") && path != apiPrefix && path != "/health" && path != "/metrics" && path != "/mcp"
}

// renderError answers a page request's error with an error page (or, for
// htmx, a flash message).
func (s *Server) renderError(c echo.Context, status int, message string) error {
	return s.renderErrorTitled(c, status, http.StatusText(status), message)
}

// renderErrorTitled is renderError with a title of its own.
func (s *Server) renderErrorTitled(c echo.Context, status int, title, message string) error {
	if isFragment(c) {
		// htmx swaps only 2xx answers by default: say it in the flash.
		c.Response().Header().Set("HX-Retarget", "#flash")
		c.Response().Header().Set("HX-Reswap", "innerHTML")
		return render(c, status, views.FlashMessage(views.Flash{Kind: "error", Text: message}))
	}
	p := s.page(c, title, "")
	return render(c, status, views.ErrorView(views.ErrorPage{Page: p, Status: status, Message: message}))
}

// withTimeout bounds a request's broker calls by its budget d (in tests,
// s.budget when set, whatever d). The context is kept with the request:
// an error that comes once the budget is spent (a statement SQLite
// interrupted, or one that never started) is answered as a read that
// took too long (overBudget), never as an internal error.
func (s *Server) withTimeout(c echo.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if s.budget > 0 {
		d = s.budget
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), d)
	c.Set(budgetKey, ctx)
	return ctx, cancel
}

// listBudget is how long a list of dead letters (the page, the API) may
// read: past it the read is stopped and answered 503, "This took too
// long" (the search's windows keep every kind of filter well inside it).
const listBudget = 15 * time.Second

// budgetKey keeps a request's budgeted context (withTimeout) in its echo
// context.
const budgetKey = "lazarus.budget"

// overBudget reports whether c's request ran out of its budget
// (withTimeout) while its client was still there.
func overBudget(c echo.Context) bool {
	ctx, ok := c.Get(budgetKey).(context.Context)
	return ok && errors.Is(ctx.Err(), context.DeadlineExceeded) && c.Request().Context().Err() == nil
}
