package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// healthResponse is Queen's shape of /health (status "healthy" or
// "unhealthy", database "connected" or "disconnected", server; what
// queenctl ping reads) with Lazarus's version and commit, and the error
// when unhealthy.
type healthResponse struct {
	Status   string `json:"status"`
	Database string `json:"database"`
	Server   string `json:"server"`
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"` // "" when the build does not say
	Error    string `json:"error,omitempty"`
}

// showHealth answers 200 when the database answers and can be written,
// 507 while writes fail for want of space (a full disk), 503 otherwise.
// It is open to all: load balancers call it without credentials.
func (s *Server) showHealth(c echo.Context) error {
	h := healthResponse{Status: "healthy", Database: "connected", Server: "Lazarus", Version: s.build.Version, Commit: s.build.Commit}
	status := http.StatusOK
	if s.health != nil {
		if err := s.health(c.Request().Context()); err != nil {
			s.log.WarnContext(c.Request().Context(), "health check failed", "error", err)
			h.Status, h.Database, h.Error = "unhealthy", "disconnected", "database unavailable"
			status = http.StatusServiceUnavailable
			if errors.Is(err, broker.ErrNoSpace) {
				// It answers, but cannot write.
				h.Database, h.Error = "connected", diskFullMessage
				status = http.StatusInsufficientStorage
			}
		}
	}
	return writeJSON(c, status, h)
}
