package web

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// Cookies of the dashboard. The session cookie holds only the session id
// (the session itself is in the database, so that a logout really ends
// it); the flash cookie carries the message of the next page. Both are
// signed and encrypted with the keys broker.SessionKeys keeps.
const (
	sessionCookie = "lazarus_session"
	flashCookie   = "lazarus_flash"
	csrfCookie    = "lazarus_csrf"
	sessionIDKey  = "sid"
	// flashMaxAge is long enough to follow a redirect, short enough that a
	// new token does not linger in a cookie.
	flashMaxAge = 60
)

// sessionMaxAge is the session cookie's lifetime in seconds: the longest a
// session may last (the server ends idle ones sooner).
var sessionMaxAge = int(broker.SessionMaxAge.Seconds())

// cookieJar is the gorilla/sessions store of the dashboard's cookies, made
// on first use with the keys kept in the database.
type cookieJar struct {
	broker *broker.Broker
	mu     sync.Mutex
	store  *sessions.CookieStore
}

// get returns the store, loading (or making and storing) the keys the
// first time. A failure is retried on the next request.
func (j *cookieJar) get(ctx context.Context) (*sessions.CookieStore, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.store != nil {
		return j.store, nil
	}
	hashKey, blockKey, err := j.broker.SessionKeys(ctx)
	if err != nil {
		return nil, err
	}
	st := sessions.NewCookieStore(hashKey, blockKey)
	st.MaxAge(sessionMaxAge) // the codec refuses older cookies too
	j.store = st
	return st, nil
}

// isSecure reports whether the request came over TLS (directly, or to a
// proxy that says so with X-Forwarded-Proto), or every cookie is Secure.
func (s *Server) isSecure(c echo.Context) bool {
	return s.secure || c.Scheme() == "https"
}

// cookieOptions are the flags of every dashboard cookie: not readable by
// scripts, not sent on cross-site requests other than top-level
// navigation, Secure behind TLS.
func (s *Server) cookieOptions(c echo.Context, maxAge int) *sessions.Options {
	return &sessions.Options{Path: "/", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.isSecure(c)}
}

// sessionID is the session id the request's cookie holds, or "" when it
// holds none (or one that was not made by this server).
func (s *Server) sessionID(c echo.Context) (string, error) {
	if _, err := c.Cookie(sessionCookie); err != nil {
		return "", nil
	}
	st, err := s.cookies.get(c.Request().Context())
	if err != nil {
		return "", err
	}
	sess, err := st.New(c.Request(), sessionCookie)
	if err != nil {
		return "", nil // tampered with, or made with other keys
	}
	sid, _ := sess.Values[sessionIDKey].(string)
	return sid, nil
}

// writeSession sets the session cookie to hold sid.
func (s *Server) writeSession(c echo.Context, sid string) error {
	st, err := s.cookies.get(c.Request().Context())
	if err != nil {
		return err
	}
	sess := sessions.NewSession(st, sessionCookie)
	sess.Values[sessionIDKey] = sid
	sess.Options = s.cookieOptions(c, sessionMaxAge)
	return st.Save(c.Request(), c.Response(), sess)
}

// clearCookie tells the browser to forget a cookie.
func (s *Server) clearCookie(c echo.Context, name string) {
	http.SetCookie(c.Response(), sessions.NewCookie(name, "", s.cookieOptions(c, -1)))
}

// visitor is the logged-in user of a dashboard request.
type visitor struct {
	user broker.User
}

type visitorKey struct{}

// visitorFrom returns the request's logged-in user, set by loadSession.
func visitorFrom(c echo.Context) (visitor, bool) {
	v, ok := c.Request().Context().Value(visitorKey{}).(visitor)
	return v, ok
}

type sessionEndedKey struct{}

// sessionEnded reports whether the request came with the cookie of a
// session that has ended (expired, or ended elsewhere): the login page
// then says so.
func sessionEnded(c echo.Context) bool {
	ended, _ := c.Request().Context().Value(sessionEndedKey{}).(bool)
	return ended
}

// isDashboard reports whether a path is the dashboard's, sessions and
// CSRF included: neither the API, the health check nor the static files.
func isDashboard(path string) bool {
	return isPage(path) && !strings.HasPrefix(path, "/static/")
}

// loadSession finds the logged-in user of a dashboard request, if any, and
// makes them the request's principal. It refuses nothing: requirePage does.
func (s *Server) loadSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !isDashboard(c.Request().URL.Path) {
			return next(c)
		}
		sid, err := s.sessionID(c)
		if err != nil {
			return err
		}
		if sid == "" {
			return next(c)
		}
		u, err := s.broker.SessionUser(c.Request().Context(), sid)
		switch {
		case errors.Is(err, broker.ErrNotFound):
			// Ended. The cookie is kept until the login page is shown
			// (showLogin forgets it): a page's background request that
			// comes first must not leave the page's own visit unable to
			// tell an expired session from none.
			r := c.Request()
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), sessionEndedKey{}, true)))
			return next(c)
		case err != nil:
			return err
		}
		r := c.Request()
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), visitorKey{}, visitor{user: u})))
		withPrincipal(c, Principal{Actor: "user:" + u.Name, Role: u.Role, Queues: u.Queues})
		return next(c)
	}
}

// setFlash leaves a message for the next page the browser loads, and, for
// a new API token, its secret (shown that once).
func (s *Server) setFlash(c echo.Context, f views.Flash, token string) error {
	st, err := s.cookies.get(c.Request().Context())
	if err != nil {
		return err
	}
	sess := sessions.NewSession(st, flashCookie)
	sess.Values["kind"], sess.Values["text"] = f.Kind, f.Text
	if token != "" {
		sess.Values["token"] = token
	}
	sess.Options = s.cookieOptions(c, flashMaxAge)
	return st.Save(c.Request(), c.Response(), sess)
}

// takeFlash returns the message left for this page, if any, and clears it.
func (s *Server) takeFlash(c echo.Context) (flash *views.Flash, token string, err error) {
	if _, err := c.Cookie(flashCookie); err != nil {
		return nil, "", nil
	}
	s.clearCookie(c, flashCookie)
	st, err := s.cookies.get(c.Request().Context())
	if err != nil {
		return nil, "", err
	}
	sess, err := st.New(c.Request(), flashCookie)
	if err != nil {
		return nil, "", nil
	}
	kind, _ := sess.Values["kind"].(string)
	text, _ := sess.Values["text"].(string)
	token, _ = sess.Values["token"].(string)
	if text == "" {
		return nil, token, nil
	}
	return &views.Flash{Kind: kind, Text: text}, token, nil
}
