package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

type healthResponse struct {
	Status string `json:"status"`
}

// showHealth answers 200 when the database answers, 503 otherwise. It is
// open to all: load balancers call it without credentials.
func (s *Server) showHealth(c echo.Context) error {
	if s.health != nil {
		if err := s.health(c.Request().Context()); err != nil {
			s.log.WarnContext(c.Request().Context(), "health check failed", "error", err)
			return &apiError{status: http.StatusServiceUnavailable, message: "database unavailable"}
		}
	}
	return writeJSON(c, http.StatusOK, healthResponse{Status: "ok"})
}
