package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// defaultPopTimeout is how long a waiting pop waits when the request does
// not say.
const defaultPopTimeout = 30000 // ms

// maxLeaseSeconds is the longest lease a pop may ask for: a queue's
// longest leaseTime, 7 days.
const maxLeaseSeconds = 7 * 24 * 3600

// maxPopTimeout is the longest long-poll, in milliseconds: the broker's
// limit of 10 minutes.
const maxPopTimeout = 600000

// parsePopRequest reads a pop's path and query parameters.
func parsePopRequest(c echo.Context) (broker.PopRequest, error) {
	var req broker.PopRequest
	var err error
	if req.Queue, err = pathParam(c, "queue"); err != nil {
		return req, err
	}
	if req.Partition, err = pathParam(c, "partition"); err != nil {
		return req, err
	}
	req.Group = c.QueryParam("consumerGroup")
	if req.Batch, err = queryInt(c, "batch", 1); err != nil {
		return req, err
	}
	if req.Batch < 1 {
		return req, badRequest("query parameter batch must be at least 1")
	}
	if req.Wait, err = queryBool(c, "wait"); err != nil {
		return req, err
	}
	timeout, err := queryInt(c, "timeout", defaultPopTimeout)
	if err != nil {
		return req, err
	}
	// Checked here, before it is multiplied into a time.Duration: a huge
	// number would overflow into a short wait.
	if timeout < 0 || timeout > maxPopTimeout {
		return req, badRequest("query parameter timeout must be between 0 and %d (milliseconds)", maxPopTimeout)
	}
	req.Timeout = time.Duration(timeout) * time.Millisecond
	if req.AutoAck, err = queryBool(c, "autoAck"); err != nil {
		return req, err
	}
	// Queen's multi-partition pop: up to partitions=N partitions, each
	// under its own lease (every message carries its leaseId and
	// partitionId, which Queen's clients ack and renew by).
	if req.Partitions, err = queryInt(c, "partitions", 1); err != nil {
		return req, err
	}
	if req.Partitions < 1 || req.Partitions > broker.MaxPopPartitions {
		return req, badRequest("query parameter partitions must be between 1 and %d", broker.MaxPopPartitions)
	}
	if req.LeaseSeconds, err = queryInt(c, "leaseSeconds", 0); err != nil {
		return req, err
	}
	if req.LeaseSeconds < 0 || req.LeaseSeconds > maxLeaseSeconds {
		return req, badRequest("query parameter leaseSeconds must be between 1 and %d (0 or none: the queue's leaseTime)", maxLeaseSeconds)
	}
	if req.Start, err = parseStart(c.QueryParam("subscriptionMode"), c.QueryParam("subscriptionFrom")); err != nil {
		return req, err
	}
	if req.Group == "" {
		// Where a group starts is a consumer group's choice; queue mode
		// always reads the queue from its beginning.
		req.Start = broker.Start{}
	}
	return req, nil
}

// parseStart reads where a consumer group new to a queue starts: after
// everything already pushed (subscriptionMode=new or new-only, or
// subscriptionFrom=now), at a time (subscriptionFrom=<RFC 3339>), or from
// the beginning: any other mode (all, from_beginning, …), as Queen's
// pop_unified_batch takes every mode but new as all. subscriptionFrom
// wins when both are given.
func parseStart(mode, from string) (broker.Start, error) {
	switch from {
	case "":
	case "now":
		return broker.Start{Now: true}, nil
	default:
		t, err := parseTime("query parameter subscriptionFrom", from)
		if err != nil {
			return broker.Start{}, badRequest("query parameter subscriptionFrom must be \"now\" or an RFC 3339 timestamp, got %q", truncate(from, 64))
		}
		return broker.Start{From: t}, nil
	}
	switch mode {
	case "new", "new-only":
		return broker.Start{Now: true}, nil
	}
	return broker.Start{}, nil
}

// popMessages leases the next messages of a queue (or of one partition) to
// the caller; with wait=true it holds until a message arrives, the timeout
// passes or the client goes away.
func (s *Server) popMessages(c echo.Context) error {
	req, err := parsePopRequest(c)
	if err != nil {
		return err
	}
	return s.pop(c, req)
}

// pop pops as req says and answers: 204 when nothing was leased.
func (s *Server) pop(c echo.Context, req broker.PopRequest) error {
	res, err := s.broker.Pop(c.Request().Context(), req)
	if err != nil {
		return err
	}
	if len(res.Messages) == 0 {
		return c.NoContent(http.StatusNoContent)
	}
	return writeAppended(c, http.StatusOK, func(b []byte) ([]byte, error) { return appendPop(b, res) })
}

// popLabeled is Queen's GET /api/v1/pop?namespace=&task=: a pop of the
// queues with that namespace and/or task (exactly; one at least), in name
// order, with the parameters of a pop of one queue.
func (s *Server) popLabeled(c echo.Context) error {
	req, err := parsePopRequest(c)
	if err != nil {
		return err
	}
	req.Namespace, req.Task = c.QueryParam("namespace"), c.QueryParam("task")
	if req.Namespace == "" && req.Task == "" {
		return badRequest("a pop that names no queue needs query parameter namespace or task (or use /api/v1/pop/queue/:queue)")
	}
	if !scopeOf(c.Request().Context()).All() {
		// The pop by labels picks among every queue of the namespace and
		// task; a token limited to some queues pops by queue name.
		return badRequest("a token limited to some queues pops by queue name: use /api/v1/pop/queue/:queue")
	}
	return s.pop(c, req)
}
