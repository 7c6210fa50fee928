package web

import (
	"time"

	"github.com/labstack/echo/v4"
)

// demoUntil is when the synthetic history of a demo database ends, when a
// range that starts at from shows some of it (the pages then say so:
// views.DemoNote); zero otherwise.
func (s *Server) demoUntil(c echo.Context, from time.Time) (time.Time, error) {
	h, err := s.broker.DemoHistory(c.Request().Context())
	if err != nil || !h.Reaches(from) {
		return time.Time{}, err
	}
	return h.Until, nil
}
