package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// messageListItem is a message in Queen's message list
// (list_messages_v1), without its payload.
type messageListItem struct {
	ID            string    `json:"id"`
	TransactionID string    `json:"transactionId"`
	PartitionID   string    `json:"partitionId"`
	QueuePath     string    `json:"queuePath"`
	Queue         string    `json:"queue"`
	Partition     string    `json:"partition"`
	Namespace     *string   `json:"namespace"`
	Task          *string   `json:"task"`
	Status        string    `json:"status"`
	QueueStatus   string    `json:"queueStatus"` // the queue-mode group's: dead_letter, completed, processing, pending
	BusStatus     busStatus `json:"busStatus"`
	TraceID       *string   `json:"traceId"`
	ProducerSub   *string   `json:"producerSub"`   // null: Lazarus keeps no producer identity
	QueuePriority int       `json:"queuePriority"` // 0: priority is kept, not enforced
	CreatedAt     timestamp `json:"createdAt"`
}

// busStatus counts the named consumer groups (not queue mode) that read
// the message's queue, and those that settled it.
type busStatus struct {
	ConsumedBy  int `json:"consumedBy"`
	TotalGroups int `json:"totalGroups"`
}

func newMessageListItem(m broker.MessageState) messageListItem {
	v := messageListItem{ID: m.ID(), TransactionID: m.TransactionID, PartitionID: m.Partition.UUID, QueuePath: m.Queue.Name + "/" + m.Partition.Name,
		Queue: m.Queue.Name, Partition: m.Partition.Name, Namespace: optional(m.Queue.Namespace), Task: optional(m.Queue.Task), Status: m.Status(),
		QueueStatus: broker.MessagePending, TraceID: optional(m.TraceID), CreatedAt: timestamp(m.CreatedAt)}
	for _, g := range m.Groups {
		if g.Name == broker.QueueModeGroup {
			switch {
			case g.DeadLetter:
				v.QueueStatus = broker.MessageDeadLetter
			case g.Consumed:
				v.QueueStatus = broker.MessageCompleted
			case !g.LeaseUntil.IsZero():
				v.QueueStatus = broker.MessageProcessing
			}
			continue
		}
		v.BusStatus.TotalGroups++
		if g.Consumed {
			v.BusStatus.ConsumedBy++
		}
	}
	return v
}

// limitCut says that a list's limit was more than it serves, and what
// it served instead.
type limitCut struct {
	Asked   int `json:"asked"`
	Applied int `json:"applied"`
}

// listMessages lists messages newest first (Queen's GET /messages; its
// filters queue, partition, status, from, to, limit (200; more is taken as 1000)
// and offset (at most 10000)), each with where it stands.
func (s *Server) listMessages(c echo.Context) error {
	for _, p := range []string{"ns", "namespace", "task"} {
		if c.QueryParam(p) != "" {
			return badRequest("%s is not a filter of the message list: name the queue", p)
		}
	}
	q := broker.MessageListQuery{Scope: scopeOf(c.Request().Context()), Queue: c.QueryParam("queue"), Partition: c.QueryParam("partition"), Status: c.QueryParam("status")}
	var err error
	if q.Limit, err = queryInt(c, "limit", broker.MessageListDefault); err != nil {
		return err
	}
	if q.Offset, err = queryInt(c, "offset", 0); err != nil {
		return err
	}
	if q.From, err = parseTime("from", c.QueryParam("from")); err != nil {
		return err
	}
	if q.To, err = parseTime("to", c.QueryParam("to")); err != nil {
		return err
	}
	// Queen takes any limit, and queenctl asks for 10000: a limit over the
	// most is taken as the most (its tests want every message of a
	// smaller queue), and the answer says so (limitCut), never silently.
	var cut *limitCut
	switch {
	case q.Limit <= 0:
		return badRequest("limit must be 1 to %d", broker.MessageListMax)
	case q.Limit > broker.MessageListMax:
		cut = &limitCut{Asked: q.Limit, Applied: broker.MessageListMax}
		q.Limit = broker.MessageListMax
	}
	ms, err := s.broker.ListMessages(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := struct {
		Messages   []messageListItem `json:"messages"`
		Pagination pagination        `json:"pagination"`
		LimitCut   *limitCut         `json:"limitCut"`
	}{Messages: make([]messageListItem, len(ms)), Pagination: pagination{Limit: q.Limit, Offset: q.Offset}, LimitCut: cut}
	for i, m := range ms {
		out.Messages[i] = newMessageListItem(m)
	}
	return writeJSON(c, http.StatusOK, out)
}
