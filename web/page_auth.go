package web

import (
	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/views"
)

// TEMPORARY: replaced by sessions, logins and roles.

// requirePage lets a page through when the visitor's role allows it.
func (s *Server) requirePage(role Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
}

// viewSession is who is looking, for the layout.
func (s *Server) viewSession(c echo.Context) views.Session {
	return views.Session{User: "dev", Role: "admin", CanOperate: true, IsAdmin: true}
}
