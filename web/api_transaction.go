package web

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

type transactionRequest struct {
	Operations []operationRequest `json:"operations"`
	// RequiredLeases are lease ids that must be live (Queen's clients
	// always send them; null or empty ids are allowed).
	RequiredLeases []string `json:"requiredLeases"`
}

// operationRequest is an ack ({"type":"ack", ...the fields of /ack...}) or
// a push ({"type":"push","items":[...]}).
type operationRequest struct {
	Type string `json:"type"`
	ackRequest
	Items []pushItem `json:"items"`
}

type transactionResponse struct {
	Success bool                  `json:"success"`
	Results []operationResultView `json:"results"`
}

// operationResultView is the outcome of one operation: an ack's fields, or
// a push's messages.
type operationResultView struct {
	Type string `json:"type"`
	*ackResultView
	Messages []pushResultView `json:"messages,omitempty"`
}

// runTransaction applies acks and pushes in one transaction: all or
// nothing. A refused ack fails the whole call with its status and error,
// and so do a required lease that is not live and an ack that would
// settle nothing behind a failure in its lease (409).
func (s *Server) runTransaction(c echo.Context) error {
	var req transactionRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ops := make([]broker.Operation, len(req.Operations))
	for i, op := range req.Operations {
		if err := checkItemQueues(c, op.Items); err != nil {
			return err
		}
		if err := s.checkPayloads(fmt.Sprintf("operations[%d].items", i), op.Items); err != nil {
			return err
		}
		ops[i] = broker.Operation{Type: op.Type, Ack: op.ack(), Items: pushItems(op.Items)}
	}
	res, err := s.broker.Transaction(c.Request().Context(), ops, req.RequiredLeases...)
	if err != nil {
		return err
	}
	out := transactionResponse{Success: true, Results: make([]operationResultView, len(res))}
	for i, r := range res {
		out.Results[i] = operationResultView{Type: r.Type}
		if r.Ack != nil {
			v := newAckResultView(*r.Ack)
			out.Results[i].ackResultView = &v
		}
		if r.Push != nil {
			out.Results[i].Messages = newPushResultViews(r.Push)
		}
	}
	return writeJSON(c, http.StatusOK, out)
}
