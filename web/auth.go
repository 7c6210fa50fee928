package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// Role is what a principal may do; each role may do what the ones below it
// may (DASHBOARD.md, "Who may do what").
type Role int

// Roles, weakest first.
const (
	RoleViewer   Role = iota + 1 // read everything
	RoleOperator                 // also push, pop, ack, replay and delete
	RoleAdmin                    // also queue options and queue deletion
)

// Principal is who makes a request.
type Principal struct {
	// Actor names the principal in the audit trail.
	Actor string
	Role  Role
}

// Principals the API knows today. Users and their tokens come later, as
// more cases of authenticator.principal.
var (
	anonymous  = Principal{Actor: "anonymous", Role: RoleAdmin}
	adminToken = Principal{Actor: "token:admin", Role: RoleAdmin}
)

// authenticator decides who a request is from.
type authenticator struct {
	// adminHash is the SHA-256 of the admin token; nil when auth is off.
	adminHash []byte
}

func newAuthenticator(token string) authenticator {
	if token == "" {
		return authenticator{}
	}
	h := sha256.Sum256([]byte(token))
	return authenticator{adminHash: h[:]}
}

// principal returns the principal of a request, or false when it is not
// authenticated.
func (a authenticator) principal(r *http.Request) (Principal, bool) {
	if a.adminHash == nil {
		return anonymous, true
	}
	scheme, token, ok := strings.Cut(r.Header.Get(echo.HeaderAuthorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Principal{}, false
	}
	// Comparing hashes keeps the comparison constant-time whatever the
	// token's length.
	h := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(h[:], a.adminHash) != 1 {
		return Principal{}, false
	}
	return adminToken, true
}

type principalKey struct{}

// principalFrom returns the request's principal, set by authenticate.
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

// authenticate refuses requests without valid credentials (401) and puts
// the principal of the others in the request's context.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, ok := s.auth.principal(c.Request())
		if !ok {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="lazarus"`)
			return &apiError{status: http.StatusUnauthorized, message: "missing or invalid bearer token"}
		}
		r := c.Request()
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
		return next(c)
	}
}

// require refuses (403) principals whose role is below role.
func (s *Server) require(role Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, ok := principalFrom(c.Request().Context())
			if !ok || p.Role < role {
				return &apiError{status: http.StatusForbidden, message: "not allowed"}
			}
			return next(c)
		}
	}
}
