package web

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// messageView is a message as GET
// /api/v1/messages/:partitionId/:transactionId answers it: Queen's
// getMessage shape (what queenctl's "messages get" and "dlq describe"
// print), with Lazarus's kept and deadLetters beside it.
type messageView struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	QueuePath     string          `json:"queuePath"` // queue/partition
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Namespace     *string         `json:"namespace"`
	Task          *string         `json:"task"`
	Status        string          `json:"status"` // dead_letter, completed, processing, pending
	Payload       json.RawMessage `json:"payload"`
	IsEncrypted   bool            `json:"isEncrypted"` // never: Lazarus keeps payloads as pushed
	TraceID       *string         `json:"traceId"`
	ProducerSub   *string         `json:"producerSub"` // null: Lazarus keeps no producer identity
	CreatedAt     timestamp       `json:"createdAt"`
	// ErrorMessage and RetryCount are of its first dead letter (null
	// when it has none); deadLetters lists them all.
	ErrorMessage *string `json:"errorMessage"`
	RetryCount   *int    `json:"retryCount"`
	// LeaseExpiresAt: the queue-mode group's live lease on it, if any.
	LeaseExpiresAt *timestamp         `json:"leaseExpiresAt"`
	QueueConfig    messageQueueConfig `json:"queueConfig"`
	Mode           messageModeView    `json:"mode"`
	ConsumerGroups []messageGroupView `json:"consumerGroups"`
	// Kept: false when retention removed the message and it is shown
	// from its dead letters, which keep its payload.
	Kept        bool             `json:"kept"`
	DeadLetters []deadLetterView `json:"deadLetters"`
}

// messageQueueConfig is the part of the queue's options Queen shows with
// a message.
type messageQueueConfig struct {
	LeaseTime          int  `json:"leaseTime"`
	RetryLimit         int  `json:"retryLimit"`
	RetryDelay         int  `json:"retryDelay"`
	DeadLetterQueue    bool `json:"deadLetterQueue"`
	DLQAfterMaxRetries bool `json:"dlqAfterMaxRetries"`
}

// messageModeView says how the queue is read: by the queue-mode group,
// by named groups (bus), both (hybrid) or none yet.
type messageModeView struct {
	HasQueueMode     bool   `json:"hasQueueMode"`
	BusGroupsCount   int    `json:"busGroupsCount"`
	ConsumedByGroups int    `json:"consumedByGroups"`
	Type             string `json:"type"` // queue, bus, hybrid, none
}

// messageGroupView is where one group stands with the message.
type messageGroupView struct {
	Name           string     `json:"name"`
	Consumed       bool       `json:"consumed"`
	LeaseExpiresAt *timestamp `json:"leaseExpiresAt"`
	DeadLetter     bool       `json:"deadLetter"`
}

// newMessageView makes the view of m, its payload as masks show it
// (mask.go: a read of a message is not a consumer's pop).
func newMessageView(m broker.MessageState, masks *requestMasks) messageView {
	o := m.Queue.Options
	v := messageView{ID: m.ID(), TransactionID: m.TransactionID, PartitionID: m.Partition.UUID, QueuePath: m.Queue.Name + "/" + m.Partition.Name,
		Queue: m.Queue.Name, Partition: m.Partition.Name, Namespace: optional(m.Queue.Namespace), Task: optional(m.Queue.Task), Status: m.Status(),
		Payload: maskedData(masks, m.Queue.Name, m.Payload), TraceID: optional(m.TraceID), CreatedAt: timestamp(m.CreatedAt), Kept: m.Kept,
		QueueConfig: messageQueueConfig{LeaseTime: o.LeaseTime, RetryLimit: o.RetryLimit, RetryDelay: o.RetryDelay, DeadLetterQueue: o.DeadLetterQueue,
			DLQAfterMaxRetries: o.DLQAfterMaxRetries},
		ConsumerGroups: make([]messageGroupView, 0, len(m.Groups)), DeadLetters: make([]deadLetterView, len(m.DeadLetters))}
	for i, d := range m.DeadLetters {
		v.DeadLetters[i] = newDeadLetterView(d, masks)
	}
	if len(m.DeadLetters) > 0 {
		v.ErrorMessage, v.RetryCount = optional(m.DeadLetters[0].Error), &m.DeadLetters[0].RetryCount
	}
	for _, g := range m.Groups {
		gv := messageGroupView{Name: g.Name, Consumed: g.Consumed, DeadLetter: g.DeadLetter, LeaseExpiresAt: optionalTime(g.LeaseUntil)}
		if g.Name == broker.QueueModeGroup {
			v.Mode.HasQueueMode, v.LeaseExpiresAt = true, gv.LeaseExpiresAt
		} else {
			v.Mode.BusGroupsCount++
			if g.Consumed {
				v.Mode.ConsumedByGroups++
			}
		}
		v.ConsumerGroups = append(v.ConsumerGroups, gv)
	}
	switch {
	case v.Mode.HasQueueMode && v.Mode.BusGroupsCount > 0:
		v.Mode.Type = "hybrid"
	case v.Mode.HasQueueMode:
		v.Mode.Type = "queue"
	case v.Mode.BusGroupsCount > 0:
		v.Mode.Type = "bus"
	default:
		v.Mode.Type = "none"
	}
	return v
}

// showMessage answers a message named by its partition and transactionId
// (Queen's admin.getMessage): where each group stands with it, and its
// dead letters. 404 when the partition keeps no such message (nor a dead
// letter of it).
func (s *Server) showMessage(c echo.Context) error {
	partitionID, txid, err := messagePath(c)
	if err != nil {
		return err
	}
	m, err := s.broker.MessageState(c.Request().Context(), partitionID, txid)
	if err != nil {
		return err
	}
	masks := s.masksOf(c)
	v := newMessageView(m, masks)
	if err := masks.check(); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, v)
}

// deleteMessageResponse is Queen's answer to deleteMessage, with what was
// deleted.
type deleteMessageResponse struct {
	Success         bool      `json:"success"`
	PartitionID     string    `json:"partitionId"`
	TransactionID   string    `json:"transactionId"`
	Message         string    `json:"message"`
	DLQID           string    `json:"dlqId"`
	Deleted         int       `json:"deleted"` // dead letters
	RestorableUntil timestamp `json:"restorableUntil"`
}

// deleteMessage is Queen's admin.deleteMessage (queenctl's "messages
// delete" and "dlq drain"): it deletes the message's dead letters (every
// group's, or the consumerGroup query's), restorable and audited as DELETE
// /api/v1/dlq/:id does. A message is shared by the groups that read its
// partition and is never deleted alone: one with no dead letter is a 409
// that changes nothing.
func (s *Server) deleteMessage(c echo.Context) error {
	partitionID, txid, err := messagePath(c)
	if err != nil {
		return err
	}
	res, err := s.broker.DeleteTransaction(c.Request().Context(), partitionID, txid, c.QueryParam("consumerGroup"), actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, deleteMessageResponse{Success: true, PartitionID: partitionID, TransactionID: txid,
		Message: "Dead letters deleted (restorable until restorableUntil); the message itself is kept", DLQID: res.MessageID, Deleted: res.Deleted,
		RestorableUntil: timestamp(res.RestorableUntil)})
}

// messagePath reads the partition and transactionId of a message's path.
func messagePath(c echo.Context) (partitionID, txid string, err error) {
	if partitionID, err = pathParam(c, "partitionId"); err != nil {
		return "", "", err
	}
	txid, err = pathParam(c, "transactionId")
	return partitionID, txid, err
}
