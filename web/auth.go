package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Role is what a principal may do: the broker's roles, each allowed what
// the ones below it are (DASHBOARD.md, "Who may do what").
type Role = broker.Role

// Roles, weakest first.
const (
	RoleViewer   = broker.RoleViewer   // read everything
	RoleOperator = broker.RoleOperator // also push, pop, ack, replay and delete
	RoleAdmin    = broker.RoleAdmin    // also users, tokens, queue options and queue deletion
)

// Principal is who makes a request.
type Principal struct {
	// Actor names the principal in the audit trail: "user:<name>" for a
	// dashboard session, "token:<token>@<user>" for a user's API token,
	// "token:admin" for LAZARUS_ADMIN_TOKEN, "anonymous" on an open API.
	Actor string
	Role  Role
	// Queues is the queues the principal may see: out of it is as if
	// absent (404). The zero scope is every queue.
	Queues broker.QueueScope
}

// Principals that are not users.
var (
	anonymous  = Principal{Actor: "anonymous", Role: RoleAdmin}
	adminToken = Principal{Actor: "token:admin", Role: RoleAdmin}
)

// errUnauthenticated is a request without valid credentials.
var errUnauthenticated = errors.New("unauthenticated")

// errCrossOrigin is an anonymous write on the open API from a browser's
// page of another origin.
var errCrossOrigin = &apiError{status: http.StatusForbidden, message: "cross-origin request refused: without a bearer token, the open API takes no writes from another site's pages"}

// authenticator decides who an API request is from.
type authenticator struct {
	broker *broker.Broker
	// adminHash is the SHA-256 of the admin token; nil when there is none.
	adminHash []byte
	// open lets requests without credentials in, as anonymous admins.
	open bool
	// crossOrigin refuses the anonymous writes that a browser sends from
	// a page of another origin (open API only).
	crossOrigin *http.CrossOriginProtection
}

func newAuthenticator(b *broker.Broker, token string, open bool) authenticator {
	a := authenticator{broker: b, open: open, crossOrigin: http.NewCrossOriginProtection()}
	if token != "" {
		h := sha256.Sum256([]byte(token))
		a.adminHash = h[:]
	}
	return a
}

// principal returns the principal of an API request: a user's API token,
// the admin token, or (on an open API, without an Authorization header)
// anonymous. Anything else is errUnauthenticated; a token that is sent is
// always checked, on an open API too.
func (a authenticator) principal(r *http.Request) (Principal, error) {
	header := r.Header.Get(echo.HeaderAuthorization)
	if header == "" {
		if !a.open {
			return Principal{}, errUnauthenticated
		}
		// Without credentials, any page a browser shows could send a
		// write here (a text/plain POST needs no preflight): the open
		// API takes writes only from programs and same-origin pages. The
		// browser says which through Sec-Fetch-Site or Origin; a program
		// sends neither.
		if err := a.crossOrigin.Check(r); err != nil {
			return Principal{}, errCrossOrigin
		}
		return anonymous, nil
	}
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Principal{}, errUnauthenticated
	}
	if strings.HasPrefix(token, broker.TokenPrefix) {
		t, err := a.broker.Authenticate(r.Context(), token)
		if errors.Is(err, broker.ErrNotFound) {
			return Principal{}, errUnauthenticated
		}
		if err != nil {
			return Principal{}, err
		}
		return Principal{Actor: "token:" + t.Name + "@" + t.User, Role: t.Role, Queues: t.Scope()}, nil
	}
	if a.adminHash == nil {
		return Principal{}, errUnauthenticated
	}
	// Comparing hashes keeps the comparison constant-time whatever the
	// token's length.
	h := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(h[:], a.adminHash) != 1 {
		return Principal{}, errUnauthenticated
	}
	return adminToken, nil
}

type principalKey struct{}

// withPrincipal puts the request's principal in its context.
func withPrincipal(c echo.Context, p Principal) {
	r := c.Request()
	c.SetRequest(r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
}

// principalFrom returns the request's principal, set by authenticate (API)
// or requirePage (dashboard).
func principalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// actor names the request's principal for the audit trail.
func actor(c echo.Context) string {
	if p, ok := principalFrom(c.Request().Context()); ok {
		return p.Actor
	}
	return anonymous.Actor
}

// authenticate refuses API requests without valid credentials (401) and
// puts the principal of the others in the request's context. Cookies are
// never looked at: a browser's session cannot call the API.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := s.auth.principal(c.Request())
		if errors.Is(err, errUnauthenticated) {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="lazarus"`)
			return &apiError{status: http.StatusUnauthorized, message: "missing or invalid bearer token"}
		}
		if err != nil {
			return err
		}
		withPrincipal(c, p)
		return next(c)
	}
}

// require refuses (403) API principals whose role is below role.
func (s *Server) require(role Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, ok := principalFrom(c.Request().Context())
			if !ok || !p.Role.Allows(role) {
				return &apiError{status: http.StatusForbidden, message: "not allowed: this needs the " + string(role) + " role"}
			}
			if err := s.checkPath(c); err != nil {
				return err
			}
			return next(c)
		}
	}
}
