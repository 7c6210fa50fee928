package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// bulkRequest names dead letters either by message id or by a filter.
type bulkRequest struct {
	IDs []string `json:"ids"`
	// ConsumerGroup, with ids on delete, deletes only that group's dead
	// letters of the messages.
	ConsumerGroup string      `json:"consumerGroup"`
	Filter        *bulkFilter `json:"filter"`
}

// bulkFilter selects dead letters like GET /api/v1/dlq does. An empty
// filter ({}) selects every dead letter.
type bulkFilter struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	Partition     string `json:"partition"`
	From          string `json:"from"`
	To            string `json:"to"`
	Error         string `json:"error"`
	TransactionID string `json:"transactionId"`
}

// query converts the filter for the broker.
func (f bulkFilter) query() (broker.DLQQuery, error) {
	q := broker.DLQQuery{Queue: f.Queue, Group: f.ConsumerGroup, Partition: f.Partition, ErrorContains: f.Error, TransactionID: f.TransactionID}
	var err error
	if q.From, err = parseTime("filter.from", f.From); err != nil {
		return q, err
	}
	q.To, err = parseTime("filter.to", f.To)
	return q, err
}

// decodeBulkRequest reads a bulk request; exactly one of ids and filter
// must be given.
func decodeBulkRequest(c echo.Context) (bulkRequest, error) {
	var req bulkRequest
	if err := decodeJSON(c, &req); err != nil {
		return req, err
	}
	if (req.IDs == nil) == (req.Filter == nil) {
		return req, badRequest("give either ids or filter")
	}
	if req.Filter != nil && req.ConsumerGroup != "" {
		return req, badRequest("consumerGroup goes inside filter")
	}
	return req, nil
}

type bulkResponse struct {
	Done    int `json:"done"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
}

// bulkFailure is the answer to a bulk action that stopped part-way on an
// internal error: what was done before it stays done.
type bulkFailure struct {
	Error string `json:"error"`
	bulkResponse
}

// writeBulk answers a bulk action. A broker refusal is answered as any
// error; an internal failure part-way is logged and answered with the
// counts, so that the caller knows what was done.
func (s *Server) writeBulk(c echo.Context, res broker.BulkResult, err error) error {
	counts := bulkResponse{Done: res.Done, Skipped: res.Skipped, Failed: res.Failed}
	if err == nil {
		return writeJSON(c, http.StatusOK, counts)
	}
	if _, _, ok := statusOf(err); ok || (res == broker.BulkResult{}) || c.Request().Context().Err() != nil {
		return err
	}
	s.log.ErrorContext(c.Request().Context(), "bulk action failed part-way", "route", c.Path(), "done", res.Done, "failed", res.Failed, "error", err)
	return writeJSON(c, http.StatusInternalServerError, bulkFailure{Error: internalMessage, bulkResponse: counts})
}

// replayDeadLetters replays the messages named by id, or every one the
// filter matches; each exactly once or not at all.
func (s *Server) replayDeadLetters(c echo.Context) error {
	req, err := decodeBulkRequest(c)
	if err != nil {
		return err
	}
	if req.ConsumerGroup != "" {
		return badRequest("consumerGroup is for delete only: a replay replays a message for every group")
	}
	var res broker.BulkResult
	if req.Filter != nil {
		q, err := req.Filter.query()
		if err != nil {
			return err
		}
		res, err = s.broker.ReplayMatching(c.Request().Context(), q, actor(c))
		return s.writeBulk(c, res, err)
	}
	res, err = s.broker.ReplayIDs(c.Request().Context(), req.IDs, actor(c))
	return s.writeBulk(c, res, err)
}

// deleteDeadLetters deletes the dead letters of the messages named by id
// (only consumerGroup's when given), or every one the filter matches.
func (s *Server) deleteDeadLetters(c echo.Context) error {
	req, err := decodeBulkRequest(c)
	if err != nil {
		return err
	}
	var res broker.BulkResult
	if req.Filter != nil {
		q, err := req.Filter.query()
		if err != nil {
			return err
		}
		res, err = s.broker.DeleteMatching(c.Request().Context(), q, actor(c))
		return s.writeBulk(c, res, err)
	}
	res, err = s.broker.DeleteIDs(c.Request().Context(), req.IDs, req.ConsumerGroup, actor(c))
	return s.writeBulk(c, res, err)
}
