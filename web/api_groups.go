package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// deleteGroupResponse is Queen's answer to deleteConsumerGroup (and
// deleteConsumerGroupForQueue: queueName), with what was removed.
type deleteGroupResponse struct {
	Success           bool     `json:"success"`
	ConsumerGroup     string   `json:"consumerGroup"`
	QueueName         string   `json:"queueName,omitempty"`
	DeletedPartitions int64    `json:"deletedPartitions"` // cursors removed, a partition each
	MetadataDeleted   bool     `json:"metadataDeleted"`
	Queues            []string `json:"queues"`      // the queues it was removed from
	LeasesEnded       int64    `json:"leasesEnded"` // of the cursors, those that held a live lease
	// DeadLetters: "kept", or "deleted": then deadLetterJob is the delete
	// job (restorable) that removes them (absent: there were none).
	DeadLetters   string `json:"deadLetters"`
	DeadLetterJob *int64 `json:"deadLetterJob,omitempty"`
}

// deleteGroup removes a consumer group (Queen's deleteConsumerGroup): its
// subscriptions, cursors and leases, on every queue it reads, or on the
// :queue of DELETE /api/v1/consumer-groups/:group/queues/:queue (Queen's
// deleteConsumerGroupForQueue). deleteMetadata (Queen's, default true):
// false keeps the group's subscription and where it starts (Queen's
// subscription metadata), and places its cursors back there; a
// subscription whose start Lazarus did not record is a 400, nothing
// changed. Its dead letters stay unless
// deleteDeadLetters=true (Lazarus's): a delete job, restorable, removes
// them. A group that reads nothing there answers 200 with nothing removed,
// as Queen does.
func (s *Server) deleteGroup(c echo.Context) error {
	group, err := pathParam(c, "group")
	if err != nil {
		return err
	}
	queue := ""
	if c.Param("queue") != "" { // the route of one queue
		if queue, err = pathParam(c, "queue"); err != nil {
			return err
		}
	} else if !scopeOf(c.Request().Context()).All() {
		// The group of every queue reaches queues out of the token's
		// scope: it deletes the group queue by queue instead.
		return badRequest("a token limited to some queues deletes a consumer group from one queue: DELETE /api/v1/consumer-groups/:group/queues/:queue")
	}
	meta := true
	if c.QueryParam("deleteMetadata") != "" {
		if meta, err = queryBool(c, "deleteMetadata"); err != nil {
			return err
		}
	}
	dead, err := queryBool(c, "deleteDeadLetters")
	if err != nil {
		return err
	}
	res, err := s.broker.DeleteGroup(c.Request().Context(), broker.DeleteGroupRequest{Group: group, Queue: queue, DeleteDeadLetters: dead, KeepSubscription: !meta, Actor: actor(c)})
	if err != nil {
		return err
	}
	out := deleteGroupResponse{Success: true, ConsumerGroup: group, QueueName: queue, DeletedPartitions: res.Partitions, MetadataDeleted: meta,
		Queues: res.Queues, LeasesEnded: res.Leases, DeadLetters: "kept"}
	if out.Queues == nil {
		out.Queues = []string{}
	}
	if dead {
		out.DeadLetters = "deleted"
	}
	if res.DeadLetterJob != 0 {
		out.DeadLetterJob = &res.DeadLetterJob
	}
	return writeJSON(c, http.StatusOK, out)
}
