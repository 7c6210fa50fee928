package web

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// traceRequest is what Queen's clients' message.trace() sends.
type traceRequest struct {
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	ConsumerGroup *string `json:"consumerGroup"`
	// TraceNames is null, a list of names, or one name (Queen's server
	// takes both).
	TraceNames json.RawMessage `json:"traceNames"`
	EventType  *string         `json:"eventType"`
	Data       json.RawMessage `json:"data"`
}

// traceResponse is Queen's answer ({"success":true,"traceId":...}), with
// what Lazarus kept: kept false and dropped true when the message had its
// broker.MaxTracesPerMessage traces already (this one is counted on the
// last, not kept); dataCut when the data was cut.
type traceResponse struct {
	Success bool          `json:"success"`
	TraceID *string       `json:"traceId"`
	Kept    bool          `json:"kept"`
	Dropped bool          `json:"dropped"`
	DataCut *errorCutView `json:"dataCut"`
}

// recordTrace keeps a worker's trace of a message it handles, shown in
// the history of the message's dead letters.
func (s *Server) recordTrace(c echo.Context) error {
	var req traceRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.TransactionID == "" || req.PartitionID == "" {
		return badRequest("transactionId and partitionId are required")
	}
	if len(req.Data) == 0 || string(req.Data) == "null" {
		return badRequest("data is required")
	}
	p := broker.TraceParams{PartitionUUID: req.PartitionID, TransactionID: req.TransactionID, Data: req.Data}
	if req.ConsumerGroup != nil {
		p.Group = *req.ConsumerGroup
	}
	if req.EventType != nil {
		p.EventType = *req.EventType
	}
	if len(req.TraceNames) > 0 && string(req.TraceNames) != "null" {
		var one string
		if json.Unmarshal(req.TraceNames, &one) == nil {
			p.Names = []string{one}
		} else if err := json.Unmarshal(req.TraceNames, &p.Names); err != nil {
			return badRequest("traceNames must be null, a string or a list of strings")
		}
	}
	res, err := s.broker.RecordTrace(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := traceResponse{Success: true, Kept: res.Kept, Dropped: res.Dropped}
	if res.Kept {
		id := strconv.FormatInt(res.ID, 10)
		out.TraceID = &id
	}
	if res.DataBytes > 0 {
		out.DataCut = &errorCutView{KeptBytes: res.DataKept, SentBytes: res.DataBytes}
	}
	return writeJSON(c, http.StatusCreated, out)
}
