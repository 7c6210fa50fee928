package web

import (
	"bytes"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

// defaultExtendSeconds is how far an extend that names no seconds moves a
// lease, as Queen does: its clients send {} (SPEC.md section 5).
const defaultExtendSeconds = 60

type extendLeaseRequest struct {
	Seconds *int `json:"seconds"`
}

type extendLeaseResponse struct {
	LeaseID        string    `json:"leaseId"`
	LeaseExpiresAt timestamp `json:"leaseExpiresAt"`
	// NewExpiresAt is the same time under the name Queen's Go, JS, Python
	// and PHP clients read from a renew.
	NewExpiresAt timestamp `json:"newExpiresAt"`
}

// extendLease moves a live lease's end to seconds from now: 60 when the
// body is empty, {}, [] (what PHP's json_encode makes of an empty array:
// Queen's PHP client sends it) or has no (or a null) seconds.
func (s *Server) extendLease(c echo.Context) error {
	leaseID, err := pathParam(c, "leaseId")
	if err != nil {
		return err
	}
	var req extendLeaseRequest
	if err := decodeOptionalJSON(c, &req); err != nil {
		return err
	}
	seconds := defaultExtendSeconds
	if req.Seconds != nil {
		seconds = *req.Seconds
	}
	until, err := s.broker.ExtendLease(c.Request().Context(), leaseID, seconds)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, extendLeaseResponse{LeaseID: leaseID, LeaseExpiresAt: timestamp(until), NewExpiresAt: timestamp(until)})
}

// decodeOptionalJSON is decodeJSON for a body that may be left out: an
// empty body (or one of white space only) leaves dst as it is, and so
// does an empty JSON array, which is how PHP encodes an empty options
// array (Queen's PHP client posts [] for "no options").
func decodeOptionalJSON(c echo.Context, dst any) error {
	r := c.Request()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if berr := bodyError(err); berr != nil {
			return berr
		}
		return badRequest("the request body could not be read")
	}
	trimmed := bytes.Trim(body, " \t\r\n") // JSON's white space
	if len(trimmed) == 0 {
		return nil // empty, or whitespace only
	}
	if trimmed[0] == '[' && string(bytes.TrimLeft(trimmed[1:], " \t\r\n")) == "]" {
		return nil // [ ], PHP's empty array
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decodeJSON(c, dst)
}
