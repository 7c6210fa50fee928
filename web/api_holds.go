package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Holds (SPEC section 6, broker/hold.go): POST /api/v1/holds holds a
// queue or one consumer group of it, GET lists the holds, DELETE
// /api/v1/holds/:id releases one. One shape for a hold everywhere
// (holdJSON, holdsJSON): also in /resources/queues and /status/queues.

// holdRequest is POST /api/v1/holds's body.
type holdRequest struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	Reason        string `json:"reason"`
}

// holdJSON is a hold: consumerGroup null for a hold of the whole queue;
// waiting, the messages pushed and not yet settled by the group (by every
// group of the queue, summed); existing only in POST's answer (true: the
// hold was there already, nothing new was made); releasedBy and
// releasedAt only in DELETE's; probe null but for the circuit breaker's.
type holdJSON struct {
	ID            int64      `json:"id"`
	Queue         string     `json:"queue"`
	ConsumerGroup *string    `json:"consumerGroup"`
	Kind          string     `json:"kind"`
	Reason        string     `json:"reason"`
	By            string     `json:"by"`
	Since         timestamp  `json:"since"`
	Waiting       int64      `json:"waiting"`
	Existing      *bool      `json:"existing,omitempty"`
	Probe         *holdProbe `json:"probe"`
	ReleasedBy    *string    `json:"releasedBy,omitempty"`
	ReleasedAt    *timestamp `json:"releasedAt,omitempty"`
}

// holdProbe is the circuit breaker's probe: every how many seconds
// (the queue's holdProbeSeconds), when the next is due, how many were
// handed out, whether the last one is still leased.
type holdProbe struct {
	EverySeconds int       `json:"everySeconds"`
	Next         timestamp `json:"next"`
	Probes       int64     `json:"probes"`
	InFlight     bool      `json:"inFlight"`
}

func toHoldJSON(h broker.Hold) holdJSON {
	j := holdJSON{ID: h.ID, Queue: h.Queue, ConsumerGroup: optional(h.Group), Kind: string(h.Kind), Reason: h.Reason,
		By: h.Actor, Since: timestamp(h.Since), Waiting: h.Waiting}
	if h.Kind == broker.HoldBreaker {
		j.Probe = &holdProbe{EverySeconds: h.ProbeSeconds, Next: timestamp(h.ProbeAt), Probes: h.Probes, InFlight: h.ProbeInFlight}
	}
	if h.ReleasedBy != "" {
		at := timestamp(h.ReleasedAt)
		j.ReleasedBy, j.ReleasedAt = &h.ReleasedBy, &at
	}
	return j
}

// holdsJSON is holds in holdJSON's shape, [] when none: GET
// /api/v1/holds and wherever a queue appears in the API.
func holdsJSON(hs []broker.Hold) []holdJSON {
	out := make([]holdJSON, len(hs))
	for i, h := range hs {
		out[i] = toHoldJSON(h)
	}
	return out
}

// createHold answers POST /api/v1/holds: 201 and the hold, or 200 and
// the hold there already ("existing": true), so a request sent again is
// safe.
func (s *Server) createHold(c echo.Context) error {
	var req holdRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Queue == "" {
		return badRequest("queue is required")
	}
	if err := checkQueue(c, req.Queue); err != nil {
		return err
	}
	h, created, err := s.broker.Hold(c.Request().Context(), broker.HoldRequest{Queue: req.Queue, Group: req.ConsumerGroup, Reason: req.Reason, Actor: actor(c)})
	if err != nil {
		return err
	}
	j := toHoldJSON(h)
	existing := !created
	j.Existing = &existing
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	return writeJSON(c, status, j)
}

// listHolds answers GET /api/v1/holds?queue=&consumerGroup=.
func (s *Server) listHolds(c echo.Context) error {
	hs, err := s.broker.Holds(c.Request().Context(), broker.HoldFilter{Queue: c.QueryParam("queue"), Group: c.QueryParam("consumerGroup")})
	hs = inScope(c.Request().Context(), hs, func(h broker.Hold) string { return h.Queue })
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		Holds []holdJSON `json:"holds"`
	}{holdsJSON(hs)})
}

// releaseHold answers DELETE /api/v1/holds/:id: the hold as it was, with
// who released it and when; 404 when it is not there (released already,
// or never made).
func (s *Server) releaseHold(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return badRequest("hold id must be a positive integer")
	}
	h, err := s.broker.Release(c.Request().Context(), id, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		Released bool     `json:"released"`
		Hold     holdJSON `json:"hold"`
	}{true, toHoldJSON(h)})
}
