package web

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// defaultPopTimeout is how long a waiting pop waits when the request does
// not say.
const defaultPopTimeout = 30000 // ms

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

// parseStart reads where a consumer group new to a queue starts: from the
// beginning (subscriptionMode=all, the default), after everything already
// pushed (subscriptionMode=new, or subscriptionFrom=now), or at a time
// (subscriptionFrom=<RFC 3339>). subscriptionFrom wins when both are given.
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
	case "", "all":
		return broker.Start{}, nil
	case "new", "new-only":
		return broker.Start{Now: true}, nil
	}
	return broker.Start{}, badRequest("query parameter subscriptionMode must be new or all, got %q", truncate(mode, 32))
}

type popResponse struct {
	Messages       []deliveryView `json:"messages"`
	LeaseID        *string        `json:"leaseId"`
	LeaseExpiresAt timestamp      `json:"leaseExpiresAt"`
}

// deliveryView is one popped message.
type deliveryView struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Queue         string          `json:"queue"`
	LeaseID       *string         `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     timestamp       `json:"createdAt"`
	RetryCount    int             `json:"retryCount"`
	TraceID       *string         `json:"traceId"`
}

func newPopResponse(res broker.PopResult) popResponse {
	out := popResponse{Messages: make([]deliveryView, len(res.Messages)), LeaseID: optional(res.LeaseID), LeaseExpiresAt: timestamp(res.LeaseUntil)}
	for i, d := range res.Messages {
		out.Messages[i] = deliveryView{
			ID:            d.ID(),
			TransactionID: d.TransactionID,
			PartitionID:   d.PartitionUUID,
			Partition:     d.Partition,
			Queue:         d.Queue,
			LeaseID:       optional(d.LeaseID),
			ConsumerGroup: d.Group,
			Data:          d.Payload,
			CreatedAt:     timestamp(d.CreatedAt),
			RetryCount:    d.RetryCount,
			TraceID:       optional(d.TraceID),
		}
	}
	return out
}

// popMessages leases the next messages of a queue (or of one partition) to
// the caller; with wait=true it holds until a message arrives, the timeout
// passes or the client goes away.
func (s *Server) popMessages(c echo.Context) error {
	req, err := parsePopRequest(c)
	if err != nil {
		return err
	}
	res, err := s.broker.Pop(c.Request().Context(), req)
	if err != nil {
		return err
	}
	if len(res.Messages) == 0 {
		return c.NoContent(http.StatusNoContent)
	}
	return writeJSON(c, http.StatusOK, newPopResponse(res))
}
