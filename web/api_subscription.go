package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// subscriptionRequest is Queen's body: the time the group starts at
// (RFC 3339).
type subscriptionRequest struct {
	SubscriptionTimestamp *string `json:"subscriptionTimestamp"`
}

// subscriptionResponse is Queen's answer
// (update_consumer_group_subscription_v1), rowsUpdated being the queues
// whose start moved, with their names and the cursors placed again.
type subscriptionResponse struct {
	Success           bool     `json:"success"`
	ConsumerGroup     string   `json:"consumerGroup"`
	NewTimestamp      string   `json:"newTimestamp"` // as sent
	RowsUpdated       int      `json:"rowsUpdated"`
	Queues            []string `json:"queues"`
	PartitionsUpdated int64    `json:"partitionsUpdated"`
}

// moveSubscription moves where a consumer group starts, in every queue
// it reads (Queen's updateConsumerGroupTimestamp): in the partitions it
// has been handed nothing of yet, it starts with the first message pushed
// at or after subscriptionTimestamp (broker.MoveSubscription).
func (s *Server) moveSubscription(c echo.Context) error {
	group, err := pathParam(c, "group")
	if err != nil {
		return err
	}
	if !scopeOf(c.Request().Context()).All() {
		// It moves the group on every queue it reads, some perhaps out
		// of the token's scope: a seek is per queue.
		return badRequest("a token limited to some queues moves a consumer group queue by queue: POST /api/v1/consumer-groups/:group/queues/:queue/seek")
	}
	var req subscriptionRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.SubscriptionTimestamp == nil {
		return badRequest("Missing subscriptionTimestamp in request body")
	}
	at, err := parseTime("subscriptionTimestamp", *req.SubscriptionTimestamp)
	if err != nil {
		return err
	}
	if at.IsZero() {
		return badRequest("subscriptionTimestamp must be an RFC 3339 timestamp (e.g. 2026-01-02T15:04:05Z), got %q", truncate(*req.SubscriptionTimestamp, 64))
	}
	res, err := s.broker.MoveSubscription(c.Request().Context(), broker.SubscriptionRequest{Group: group, At: at, Actor: actor(c)})
	if err != nil {
		return err
	}
	out := subscriptionResponse{Success: true, ConsumerGroup: group, NewTimestamp: *req.SubscriptionTimestamp,
		RowsUpdated: len(res.Queues), Queues: res.Queues, PartitionsUpdated: res.Partitions}
	if out.Queues == nil {
		out.Queues = []string{}
	}
	return writeJSON(c, http.StatusOK, out)
}
