package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

type healthResponse struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"` // "" when the build does not say
}

// showHealth answers 200 when the database answers and can be written,
// 507 while writes fail for want of space (a full disk), 503 otherwise.
// It is open to all: load balancers call it without credentials.
func (s *Server) showHealth(c echo.Context) error {
	if s.health != nil {
		if err := s.health(c.Request().Context()); err != nil {
			s.log.WarnContext(c.Request().Context(), "health check failed", "error", err)
			if errors.Is(err, broker.ErrNoSpace) {
				return &apiError{status: http.StatusInsufficientStorage, message: diskFullMessage}
			}
			return &apiError{status: http.StatusServiceUnavailable, message: "database unavailable"}
		}
	}
	return writeJSON(c, http.StatusOK, healthResponse{Status: "ok", Version: s.build.Version, Commit: s.build.Commit})
}
