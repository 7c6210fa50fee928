package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

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
	// ProducerSub is read and dropped, as Queen does (push.cpp): a producer
	// does not say who it is.
	ProducerSub ignored `json:"producerSub"`
}

// ignored is a member of a body that is read and dropped, whatever its
// value.
type ignored struct{}

// UnmarshalJSON drops the value.
func (*ignored) UnmarshalJSON([]byte) error { return nil }

// pushItems converts request items for the broker. Their payloads are
// well-formed JSON: both decoders (json_fast.go's and encoding/json's
// into a RawMessage) refuse a body where one is not.
func pushItems(in []pushItem) []broker.PushItem {
	out := make([]broker.PushItem, len(in))
	for i, it := range in {
		out[i] = broker.PushItem{Queue: it.Queue, Partition: it.Partition, Payload: it.Payload, TransactionID: it.TransactionID, TraceID: it.TraceID, PayloadChecked: true}
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
	if err := decodeFast(c, &req, func(b []byte) bool { return fastPush(b, &req) }); err != nil {
		return err
	}
	if req.Items != nil && len(req.Items) == 0 {
		// Queen answers an empty list at once with an empty one; a body
		// without items (or with null) stays a 400.
		return c.JSONBlob(http.StatusCreated, []byte("[]"))
	}
	if err := checkItemQueues(c, req.Items); err != nil {
		return err
	}
	if err := s.checkPayloads("items", req.Items); err != nil {
		return err
	}
	res, err := s.broker.Push(c.Request().Context(), pushItems(req.Items))
	if err != nil {
		return err
	}
	return writeAppended(c, http.StatusCreated, func(b []byte) ([]byte, error) { return appendPushResults(b, res), nil })
}

// checkPayloads refuses an item whose payload is over the server's limit
// (413) or is not UTF-8 (400: JSON text must be, and a consumer's JSON
// parser may refuse a whole batch over one such message); where names the
// list in the message ("items", "operations[2].items").
func (s *Server) checkPayloads(where string, items []pushItem) error {
	for i, it := range items {
		if n := int64(len(it.Payload)); n > s.maxPayload {
			return &apiError{status: http.StatusRequestEntityTooLarge,
				message: fmt.Sprintf("%s[%d]: payload is %d bytes, over the limit of %d bytes per payload", where, i, n, s.maxPayload)}
		}
		if !utf8.Valid(it.Payload) {
			return badRequest("%s[%d]: payload is not valid UTF-8: JSON text must be (send binary data base64-encoded)", where, i)
		}
	}
	return nil
}
