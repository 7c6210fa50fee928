// Package web serves Lazarus over HTTP with echo: the JSON API of SPEC.md
// section 5 behind bearer tokens, and the dashboard behind logins, with
// server-side sessions, roles and CSRF protection. It imports broker and
// views, never db.
package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/password"
	"github.com/lazarus-dlq/lazarus/version"
)

// DefaultMaxBodyBytes caps a request body when Config.MaxBodyBytes is unset.
const DefaultMaxBodyBytes = 8 << 20

// DefaultMaxPayloadBytes caps one pushed payload when
// Config.MaxPayloadBytes is unset: 4 MiB, so that the largest payload
// Queen's clients push in their own tests fits with room to spare: the
// "large payload" test of the JS and Python suites (10,000 objects),
// 2,170,068 bytes as the JS client encodes it and 2,280,073 as the
// Python client's httpx 0.27 does (with spaces after , and :).
const DefaultMaxPayloadBytes = 4 << 20

// EnvelopeBytes is the room a request body keeps beside one payload of
// the largest size: the push's or transaction's own JSON around it.
const EnvelopeBytes = 64 << 10

// Config configures the HTTP server.
type Config struct {
	Broker *broker.Broker
	Logger *slog.Logger
	// HealthFunc reports whether the database answers (GET /health) and
	// can be written: an error that is broker.ErrNoSpace is a full disk
	// (507, and the lazarus_disk_full gauge of /metrics).
	HealthFunc func(ctx context.Context) error
	// LeadingFunc reports whether this process leads the background work
	// (db.DB.Leading: of several processes on one PostgreSQL database,
	// the one that runs bulk jobs and maintenance), for the metric
	// lazarus_leading; nil: always.
	LeadingFunc func() bool
	// TextIndexFunc reports the state of the full-text indexes the store
	// keeps apart (sqlite.Store.TextIndex: the search file), for the
	// lazarus_search_* metrics; nil: none (PostgreSQL).
	TextIndexFunc func(ctx context.Context) (broker.TextIndexState, error)
	// AdminToken, when set, is accepted as an admin bearer token on the API
	// (LAZARUS_ADMIN_TOKEN), beside the users' API tokens.
	AdminToken string
	// OpenAPI lets API requests that carry no Authorization header in, as
	// an anonymous admin. UNSAFE: anyone who reaches the port may do
	// anything. For local development only; off, the API answers 401
	// without a valid bearer token.
	OpenAPI bool
	// SecureCookies marks the cookies Secure on every response, not only on
	// those to requests that came over TLS or with X-Forwarded-Proto: https.
	SecureCookies bool
	// BcryptCost is the cost of the password hashes the dashboard makes
	// (default password.DefaultCost); tests lower it.
	BcryptCost int
	// SleepFunc waits before a failed login is answered (default: a timer
	// that gives up when ctx ends); tests record instead of waiting.
	SleepFunc func(ctx context.Context, d time.Duration)
	// MaxBodyBytes caps a request body (default 8 MiB, or MaxPayloadBytes
	// and EnvelopeBytes when that is more, so that a payload at the limit
	// fits).
	MaxBodyBytes int64
	// MaxPayloadBytes caps each payload of a push, as sent (default 4
	// MiB): a larger one is refused with 413 and the item's index
	// (LAZARUS_MAX_PAYLOAD_BYTES). MaxBodyBytes still caps the whole body.
	MaxPayloadBytes int64
	// Clock tells the pages the time (default broker.SystemClock).
	Clock broker.Clock
	// MetricsPublic serves /metrics without a token; otherwise it needs a
	// bearer token of a viewer or better (LAZARUS_METRICS_PUBLIC).
	MetricsPublic bool
	// MaxLoginChecks bounds the dashboard passwords checked at once
	// (bcrypt: a core for a quarter of a second each); a login past it is
	// answered 429 at once. Default DefaultMaxLoginChecks.
	MaxLoginChecks int
	// MaxLiveStreams bounds the live pages' event streams of the process
	// (default DefaultMaxLiveStreams), MaxLiveStreamsPerUser those of one
	// user (default DefaultMaxLiveStreamsPerUser: a browser opens at most
	// six connections to a server, and pages need some too); a stream
	// past either is answered 429 and its page is no longer live.
	MaxLiveStreams        int
	MaxLiveStreamsPerUser int
	// LiveHeartbeat is how often an idle event stream says it is alive
	// (default DefaultLiveHeartbeat), so that proxies keep it open and a
	// stream whose reader went is noticed.
	LiveHeartbeat time.Duration
	// LiveRelook is how often a live page's topic looks again without
	// news (default DefaultLiveRelook), as news can be lost.
	LiveRelook time.Duration
	// SSO, when set, offers single sign-on through an OpenID Connect
	// provider on the login page, beside the local passwords (sso.go).
	SSO *SSOConfig
}

// DefaultMaxLoginChecks is Config.MaxLoginChecks when unset: the cores Go
// may use, and at least 2.
func DefaultMaxLoginChecks() int { return max(2, runtime.GOMAXPROCS(0)) }

// Server is the echo application.
type Server struct {
	build   version.Info // the build's version and commit (/health, the footer)
	broker  *broker.Broker
	log     *slog.Logger
	health  func(ctx context.Context) error
	maxBody int64
	auth    authenticator
	echo    *echo.Echo
	// middleware is what every request passes after the routing (use).
	middleware []echo.MiddlewareFunc
	// handler is echo behind escapedPath, securityHeaders and headAsGet.
	handler http.Handler
	clock   broker.Clock
	metrics *metrics
	// metricsPublic: /metrics needs no token.
	metricsPublic bool
	// maxPayload caps each pushed payload.
	maxPayload int64

	// Dashboard sign-in.
	cookies    cookieJar
	secure     bool // every cookie Secure
	bcryptCost int
	sleep      func(ctx context.Context, d time.Duration)
	checks     checkSlots
	dummy      dummyHash
	// checkHook, when set (tests), runs as each password check starts.
	checkHook func()
	// exportHook, when set (tests), runs after each page an export wrote
	// (end false) and once it has ended and is in the audit (end true).
	exportHook func(ctx context.Context, end bool, rows int64)
	// live fans the broker's news out to the live pages' event streams.
	live *liveHub
	// budget, when set (tests), is every request's budget (withTimeout).
	budget time.Duration
	// sso is the single sign-on's relying party; nil without one.
	sso *ssoClient
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = max(DefaultMaxBodyBytes, cfg.MaxPayloadBytes+EnvelopeBytes)
	}
	if cfg.Clock == nil {
		cfg.Clock = broker.SystemClock
	}
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = password.DefaultCost
	}
	if cfg.SleepFunc == nil {
		cfg.SleepFunc = sleep
	}
	if cfg.MaxLoginChecks <= 0 {
		cfg.MaxLoginChecks = DefaultMaxLoginChecks()
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	s := &Server{
		build:   version.Get(),
		broker:  cfg.Broker,
		log:     cfg.Logger,
		health:  cfg.HealthFunc,
		maxBody: cfg.MaxBodyBytes,
		auth:    newAuthenticator(cfg.Broker, cfg.AdminToken, cfg.OpenAPI),
		echo:    e,
		clock:   cfg.Clock,
		metrics: newMetrics(cfg.Broker, cfg.Clock, cfg.HealthFunc, cfg.LeadingFunc, cfg.TextIndexFunc),

		metricsPublic: cfg.MetricsPublic,
		maxPayload:    cfg.MaxPayloadBytes,

		cookies:    cookieJar{broker: cfg.Broker},
		secure:     cfg.SecureCookies,
		bcryptCost: cfg.BcryptCost,
		sleep:      cfg.SleepFunc,
		checks:     make(checkSlots, cfg.MaxLoginChecks),
		dummy:      dummyHash{cost: cfg.BcryptCost},
		live:       newLiveHub(cfg.Broker, cfg.MaxLiveStreams, cfg.MaxLiveStreamsPerUser, cfg.LiveHeartbeat, cfg.LiveRelook),
		sso:        newSSOClient(cfg.SSO, cfg.Logger),
	}
	e.HTTPErrorHandler = s.handleError
	s.use(s.metrics.observe, s.recoverPanic)
	s.routes()
	e.Use(chainOnce(s.middleware...))
	csp := cspValue
	if s.sso != nil {
		// The logout form of a single sign-on user is sent on to the
		// provider's logout: the provider's origin is a form's target too.
		csp = []string{contentSecurityPolicy + " " + originOf(cfg.SSO.Issuer)}
	}
	s.handler = headAsGet(escapedPath(securityHeadersWith(e, csp)))
	return s
}

// Handler is the server's http.Handler. HEAD is answered as GET (head.go).
func (s *Server) Handler() http.Handler { return s.handler }

// use adds middleware that every request passes, after the routing, in
// the order given (see chainOnce).
func (s *Server) use(mw ...echo.MiddlewareFunc) { s.middleware = append(s.middleware, mw...) }

// chainOnce is the middleware mw as one, built once: echo builds the
// chain of e.Use's middleware anew for each request (a closure or more
// for each), around the handler the router found; this chain is built
// around a handler that calls the one found, c.Handler(), which is what
// echo passes as next.
func chainOnce(mw ...echo.MiddlewareFunc) echo.MiddlewareFunc {
	h := func(c echo.Context) error { return c.Handler()(c) }
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return func(echo.HandlerFunc) echo.HandlerFunc { return h }
}

// escapedPath makes echo route on the escaped path always, so that every
// path parameter arrives escaped and pathParam can unescape it once: a
// transactionId may hold '/', '%' or spaces. It runs before echo (as
// echo's Pre middleware would, which echo also wraps anew each request).
func escapedPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.RawPath = r.URL.EscapedPath()
		next.ServeHTTP(w, r)
	})
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

// sleep waits d, or less when ctx ends first.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
