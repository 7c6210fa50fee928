// Package web serves Lazarus over HTTP with echo: the JSON API of SPEC.md
// section 5 (and, later, the dashboard). It imports broker and views, never db.
package web

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Config configures the HTTP server.
type Config struct {
	Broker *broker.Broker
	Logger *slog.Logger
	// HealthFunc reports whether the database answers (GET /health).
	HealthFunc func(ctx context.Context) error
	// AdminToken, when set, is accepted as an admin bearer token on the API.
	AdminToken string
	// MaxBodyBytes caps a request body (default 8 MiB).
	MaxBodyBytes int64
}

// Server is the echo application.
type Server struct {
	cfg  Config
	echo *echo.Echo
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	s := &Server{cfg: cfg, echo: e}
	return s
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }
