package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/password"
	"github.com/lazarus-dlq/lazarus/views"
)

// wrongLogin is all a failed login learns: never which of the two was wrong.
const wrongLogin = "Wrong user name or password."

// showLogin shows the login page; a visitor already logged in goes on.
func (s *Server) showLogin(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if _, ok := visitorFrom(c); ok {
		return c.Redirect(http.StatusSeeOther, next)
	}
	// expired=1 comes from toLogin; a stale session cookie, from a
	// browser sent here by a bookmark.
	expired := c.QueryParam("expired") == "1" || sessionEnded(c)
	if sessionEnded(c) {
		s.clearCookie(c, sessionCookie) // said here: the browser may forget it
	}
	return s.renderLogin(c, http.StatusOK, views.Login{Next: next, Expired: expired})
}

func (s *Server) renderLogin(c echo.Context, status int, v views.Login) error {
	v.Page = s.page(c, "Log in", "")
	if s.sso != nil {
		v.SSOLabel = s.sso.cfg.Label
		v.SSOURL = ssoStartPath
		if v.Next != "" && v.Next != "/" {
			v.SSOURL += "?" + url.Values{"next": {v.Next}}.Encode()
		}
	}
	return render(c, status, views.LoginView(v))
}

// login checks a user name and password and opens a session: a new one at
// every login, replacing the one the browser had, with a new CSRF token.
// Attempts are counted before they are checked, failures slowed down and
// checks bounded (login_limit.go: the counts are the store's, shared by
// every process of it); failures are audited by the broker.
// Passwords are never logged, nor names that are no user's.
func (s *Server) login(c echo.Context) error {
	ctx := c.Request().Context()
	name := strings.TrimSpace(c.FormValue("name"))
	pw := c.FormValue("password")
	v := views.Login{Name: name, Next: safeNext(c.FormValue("next"))}
	if name == "" || pw == "" {
		v.Error = "Enter your user name and your password."
		return s.renderLogin(c, http.StatusBadRequest, v)
	}
	old, err := s.sessionID(c)
	if err != nil {
		return err
	}
	ip := clientIP(c.Request())
	keys := loginKeys(ip, name)
	tooMany := func(wait time.Duration) error {
		secs := int(math.Ceil(wait.Seconds()))
		// Not the name: it may be a password typed into the wrong field.
		s.log.WarnContext(ctx, "login refused: too many failures", "from", ip)
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		v.Error = fmt.Sprintf("Too many failed logins: wait %d s and try again.", secs)
		return s.renderLogin(c, http.StatusTooManyRequests, v)
	}
	// Looked at first without a write, and counted only with a check
	// slot taken: attempts refused (waiting, or past the slots) cost the
	// store no write, so a flood of them does not hold up the writes of
	// messages.
	if wait, err := s.broker.LoginWait(ctx, s.clock.Now(), loginDelay, keys...); err != nil {
		return err
	} else if wait > 0 {
		return tooMany(wait)
	}
	if !s.checks.take() {
		s.log.WarnContext(ctx, "login refused: too many password checks at once", "from", ip, "max", cap(s.checks))
		c.Response().Header().Set("Retry-After", "1")
		v.Error = "Too many logins at once: wait a second and try again."
		return s.renderLogin(c, http.StatusTooManyRequests, v)
	}
	attempt, err := s.broker.BeginLogin(ctx, s.clock.Now(), loginDelay, keys...)
	if err != nil {
		s.checks.give()
		return err
	}
	if attempt.Wait > 0 {
		s.checks.give()
		return tooMany(attempt.Wait)
	}
	known := false // name is a user's
	secret, u, err := s.broker.Login(ctx, broker.LoginRequest{
		Name:     name,
		From:     ip,
		Replaces: old,
		CheckFunc: func(hash string) bool {
			if s.checkHook != nil {
				s.checkHook()
			}
			if hash == "" {
				password.Match(s.dummy.get(), pw)
				return false
			}
			known = true
			return password.Match(hash, pw)
		},
	})
	s.checks.give() // before the failure's wait: a waiting answer holds no slot
	if errors.Is(err, broker.ErrDenied) {
		if known {
			s.log.InfoContext(ctx, "login failed", "user", name, "from", ip)
		} else {
			// The name of no user is not logged: it is often a password
			// typed into the wrong field.
			s.log.InfoContext(ctx, "login failed: no such user", "from", ip)
		}
		s.sleep(ctx, attempt.FailWait)
		v.Error = wrongLogin
		return s.renderLogin(c, http.StatusUnauthorized, v)
	}
	if err != nil {
		s.endLogin(ctx, attempt, keys, nil) // not decided
		return err
	}
	// The name's failures are forgotten, the address's stay (but for
	// this attempt, which did not fail: it sets no wait).
	s.endLogin(ctx, attempt, keys[:1], keys[1:])
	if err := s.writeSession(c, secret); err != nil {
		return err
	}
	if err := s.rotateCSRF(c); err != nil {
		return fmt.Errorf("new csrf token: %w", err)
	}
	s.log.InfoContext(ctx, "logged in", "user", u.Name, "from", ip)
	return c.Redirect(http.StatusSeeOther, v.Next)
}

// endLogin ends an attempt that did not fail (broker.EndLogin): the
// count BeginLogin made, and the wait it set, are taken back from the
// keys of withdraw, and the keys of forget lose their failures, even when the
// client has gone (the count would otherwise stay as a failure). When
// that fails the counts stay as they were: logged, not the attempt's
// answer.
func (s *Server) endLogin(ctx context.Context, a broker.LoginAttempt, withdraw, forget []string) {
	if err := s.broker.EndLogin(context.WithoutCancel(ctx), a, withdraw, forget); err != nil {
		s.log.WarnContext(ctx, "login: the failed-login counts were not updated", "err", err)
	}
}

// logout ends the session, server-side and in the browser. A single
// sign-on user goes on to the provider's logout, where it offers one, to
// end the session there too (it sends them back to the login page).
func (s *Server) logout(c echo.Context) error {
	sid, err := s.sessionID(c)
	if err != nil {
		return err
	}
	v, known := visitorFrom(c)
	if err := s.broker.Logout(c.Request().Context(), sid, clientIP(c.Request())); err != nil {
		return err
	}
	s.clearCookie(c, sessionCookie)
	if s.sso != nil {
		hint := s.logoutHint(c)
		if known && v.user.Subject != "" {
			if to := s.ssoLogoutURL(c, hint); to != "" {
				return c.Redirect(http.StatusSeeOther, to)
			}
		}
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext is where to go after the login: a path of this site, never
// another site ("//host", "/\host", "https://host"); "/" otherwise.
func safeNext(next string) string { return localNext(next, "/") }

// localNext is next when it is a path of this site (never another host:
// "//evil", "/\evil", "/<tab>/evil" which a browser reads as "//evil",
// "https://…"), else fallback: where a form leads back to.
func localNext(next, fallback string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.HasPrefix(next, `/\`) ||
		strings.ContainsAny(next, "\\\r\n\t") {
		return fallback
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return fallback
	}
	return next
}
