package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

type extendLeaseRequest struct {
	Seconds int `json:"seconds"`
}

type extendLeaseResponse struct {
	LeaseID        string    `json:"leaseId"`
	LeaseExpiresAt timestamp `json:"leaseExpiresAt"`
}

// extendLease moves a live lease's end to seconds from now.
func (s *Server) extendLease(c echo.Context) error {
	leaseID, err := pathParam(c, "leaseId")
	if err != nil {
		return err
	}
	var req extendLeaseRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	until, err := s.broker.ExtendLease(c.Request().Context(), leaseID, req.Seconds)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, extendLeaseResponse{LeaseID: leaseID, LeaseExpiresAt: timestamp(until)})
}
