// Package web serves Lazarus over HTTP with echo: the JSON API of SPEC.md
// section 5 (and, later, the dashboard). It imports broker and views, never db.
package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// DefaultMaxBodyBytes caps a request body when Config.MaxBodyBytes is unset.
const DefaultMaxBodyBytes = 8 << 20

// Config configures the HTTP server.
type Config struct {
	Broker *broker.Broker
	Logger *slog.Logger
	// HealthFunc reports whether the database answers (GET /health).
	HealthFunc func(ctx context.Context) error
	// AdminToken, when set, is accepted as an admin bearer token on the API,
	// and the API refuses requests without a valid token. When empty the
	// API is open and acts as "anonymous".
	AdminToken string
	// MaxBodyBytes caps a request body (default 8 MiB).
	MaxBodyBytes int64
	// Clock tells the pages the time (default broker.SystemClock).
	Clock broker.Clock
}

// Server is the echo application.
type Server struct {
	broker  *broker.Broker
	log     *slog.Logger
	health  func(ctx context.Context) error
	maxBody int64
	auth    authenticator
	echo    *echo.Echo
	clock   broker.Clock
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = broker.SystemClock
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	s := &Server{
		broker:  cfg.Broker,
		log:     cfg.Logger,
		health:  cfg.HealthFunc,
		maxBody: cfg.MaxBodyBytes,
		auth:    newAuthenticator(cfg.AdminToken),
		echo:    e,
		clock:   cfg.Clock,
	}
	e.HTTPErrorHandler = s.handleError
	e.Pre(escapedPath)
	e.Use(s.recoverPanic)
	s.routes()
	return s
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// escapedPath makes echo route on the escaped path always, so that every
// path parameter arrives escaped and pathParam can unescape it once: a
// transactionId may hold '/', '%' or spaces.
func escapedPath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		u.RawPath = u.EscapedPath()
		return next(c)
	}
}

// recoverPanic turns a panicking handler into a logged 500.
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// limitBody caps the request body at maxBody bytes. Reading past the cap
// fails with *http.MaxBytesError, which handleError answers with 413.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > s.maxBody {
			return &http.MaxBytesError{Limit: s.maxBody}
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, s.maxBody)
		return next(c)
	}
}

// underPrefix applies mw only to requests whose path is prefix or under it.
func underPrefix(prefix string, mw echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		wrapped := mw(next)
		return func(c echo.Context) error {
			p := c.Request().URL.Path
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				return wrapped(c)
			}
			return next(c)
		}
	}
}
