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
}

func (r ackRequest) ack() broker.Ack {
	return broker.Ack{TransactionID: r.TransactionID, PartitionID: r.PartitionID, LeaseID: r.LeaseID, Status: r.Status, Error: r.Error, Group: r.ConsumerGroup}
}

type ackResponse struct {
	TransactionID  string    `json:"transactionId"`
	Status         string    `json:"status"`
	ConsumerGroup  string    `json:"consumerGroup"`
	Success        bool      `json:"success"`
	DLQ            bool      `json:"dlq"`
	Dropped        bool      `json:"dropped"`
	AcknowledgedAt timestamp `json:"acknowledgedAt"`
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
	out := ackResponse{
		TransactionID:  res.TransactionID,
		Status:         a.Status,
		ConsumerGroup:  group,
		Success:        res.Success,
		DLQ:            res.DLQ,
		Dropped:        res.Dropped,
		AcknowledgedAt: timestamp(time.Now()),
	}
	return writeAppended(c, http.StatusOK, func(b []byte) ([]byte, error) { return appendAck(b, out), nil })
}

type ackBatchRequest struct {
	ConsumerGroup   string       `json:"consumerGroup"`
	Acknowledgments []ackRequest `json:"acknowledgments"`
}

// ackResultView is the outcome of one acknowledgement of a batch.
type ackResultView struct {
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	DLQ           bool    `json:"dlq"`
	Dropped       bool    `json:"dropped"`
}

func newAckResultView(r broker.AckResult) ackResultView {
	return ackResultView{TransactionID: r.TransactionID, Success: r.Success, Error: optional(r.Error), DLQ: r.DLQ, Dropped: r.Dropped}
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
	}
	res, err := s.broker.AckBatch(c.Request().Context(), req.ConsumerGroup, acks)
	if err != nil {
		return err
	}
	return writeAppended(c, http.StatusOK, func(b []byte) ([]byte, error) { return appendAckResults(b, res), nil })
}
