package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

type ackRequest struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status"`
	Error         string `json:"error"`
	ConsumerGroup string `json:"consumerGroup"`
	// ConsumerVersion is the consumer's version, kept with a failure
	// (SPEC section 7); Queen's clients never send it.
	ConsumerVersion string `json:"consumerVersion"`
}

func (r ackRequest) ack() broker.Ack {
	return broker.Ack{TransactionID: r.TransactionID, PartitionID: r.PartitionID, LeaseID: r.LeaseID, Status: r.Status, Error: r.Error, Group: r.ConsumerGroup,
		ConsumerVersion: r.ConsumerVersion}
}

type ackResponse struct {
	TransactionID  string    `json:"transactionId"`
	Status         string    `json:"status"`
	ConsumerGroup  string    `json:"consumerGroup"`
	Success        bool      `json:"success"`
	Error          string    `json:"error,omitempty"`
	DLQ            bool      `json:"dlq"`
	Dropped        bool      `json:"dropped"`
	Requeued       bool      `json:"requeued"`
	AcknowledgedAt timestamp `json:"acknowledgedAt"`
}

// requeuedText is the error of an ack that changed nothing because an
// earlier message of its batch failed (broker.AckResult.Requeued): the
// ack was not refused, but the message was not settled either, and a
// client that counts successes must not count it.
const requeuedText = "not settled: an earlier message of its batch failed, so this one comes back after it"

// ackOutcome is what an answer says of r: success only for an ack that
// settled its message (or is waiting for the messages before it).
func ackOutcome(r broker.AckResult) (success bool, errText string) {
	if r.Requeued {
		return false, requeuedText
	}
	return r.Success, r.Error
}

// ackMessage settles one leased message. A refused ack answers with the
// status of its reason (400, 404, 409) and changes nothing.
func (s *Server) ackMessage(c echo.Context) error {
	var req ackRequest
	if err := decodeFast(c, &req, func(b []byte) bool { return fastAck(b, &req) }); err != nil {
		return err
	}
	a := req.ack()
	res, err := s.broker.Ack(c.Request().Context(), a)
	if err != nil {
		return err
	}
	group := a.Group
	if group == "" {
		group = broker.QueueModeGroup
	}
	success, errText := ackOutcome(res)
	out := ackResponse{
		TransactionID:  res.TransactionID,
		Status:         a.Status,
		ConsumerGroup:  group,
		Success:        success,
		Error:          errText,
		DLQ:            res.DLQ,
		Dropped:        res.Dropped,
		Requeued:       res.Requeued,
		AcknowledgedAt: timestamp(time.Now()),
	}
	return writeAppended(c, http.StatusOK, func(b []byte) ([]byte, error) { return appendAck(b, out), nil })
}

type ackBatchRequest struct {
	ConsumerGroup string `json:"consumerGroup"`
	// ConsumerVersion is the version of every acknowledgement that says
	// none of its own.
	ConsumerVersion string       `json:"consumerVersion"`
	Acknowledgments []ackRequest `json:"acknowledgments"`
}

// ackResultView is the outcome of one acknowledgement of a batch.
type ackResultView struct {
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	DLQ           bool    `json:"dlq"`
	Dropped       bool    `json:"dropped"`
	Requeued      bool    `json:"requeued"`
}

func newAckResultView(r broker.AckResult) ackResultView {
	success, errText := ackOutcome(r)
	return ackResultView{TransactionID: r.TransactionID, Success: success, Error: optional(errText), DLQ: r.DLQ, Dropped: r.Dropped, Requeued: r.Requeued}
}

// ackMessages applies a batch of acknowledgements in one transaction and
// answers 200 with one result per item: a refused item does not stop the
// others.
func (s *Server) ackMessages(c echo.Context) error {
	var req ackBatchRequest
	if err := decodeFast(c, &req, func(b []byte) bool { return fastAckBatch(b, &req) }); err != nil {
		return err
	}
	acks := make([]broker.Ack, len(req.Acknowledgments))
	for i, a := range req.Acknowledgments {
		acks[i] = a.ack()
		if acks[i].ConsumerVersion == "" {
			acks[i].ConsumerVersion = req.ConsumerVersion
		}
	}
	res, err := s.broker.AckBatch(c.Request().Context(), req.ConsumerGroup, acks)
	if err != nil {
		return err
	}
	return writeAppended(c, http.StatusOK, func(b []byte) ([]byte, error) { return appendAckResults(b, res), nil })
}
