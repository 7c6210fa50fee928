package web

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

type pushRequest struct {
	Items []pushItem `json:"items"`
}

type pushItem struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	// Payload is kept as the bytes that came in: key order and big numbers
	// survive.
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId"`
}

// pushItems converts request items for the broker.
func pushItems(in []pushItem) []broker.PushItem {
	out := make([]broker.PushItem, len(in))
	for i, it := range in {
		out[i] = broker.PushItem{Queue: it.Queue, Partition: it.Partition, Payload: it.Payload, TransactionID: it.TransactionID, TraceID: it.TraceID}
	}
	return out
}

// pushResultView is one pushed item, in Queen's snake_case.
type pushResultView struct {
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	TransactionID string `json:"transaction_id"`
	PartitionID   string `json:"partition_id"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
}

func newPushResultViews(rs []broker.PushResult) []pushResultView {
	out := make([]pushResultView, len(rs))
	for i, r := range rs {
		out[i] = pushResultView{Status: r.Status, MessageID: r.MessageID, TransactionID: r.TransactionID, PartitionID: r.PartitionID, Queue: r.Queue, Partition: r.Partition}
	}
	return out
}

// pushMessages stores the items, in order, in one transaction.
func (s *Server) pushMessages(c echo.Context) error {
	var req pushRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	res, err := s.broker.Push(c.Request().Context(), pushItems(req.Items))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, newPushResultViews(res))
}
