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
	// All, with a filter that names no queue, acts on the dead letters of
	// every queue: never by default. Alone it is the empty filter's.
	All bool `json:"all"`
	// Bound, with a filter, acts only on dead letters at or below it (a
	// dry run's, or an earlier answer's); without one the action takes
	// its own as it starts. Either way the answer says the bound used: a
	// failedAt in the future is kept to now (or to the newest failure the
	// filter selects, if the clock went back), an id to the highest row
	// id. A replay also removes its messages' dead letters in every other
	// group, the filter's or not, below the bound or above it (SPEC 4).
	Bound *boundIn `json:"bound"`
	// DryRun, with a filter, changes nothing: the answer counts what the
	// filter selects, in dead letters ("matching") and in messages
	// ("messages": a message dead-lettered by several groups has a dead
	// letter in each, and a replay's done counts it once), and gives the
	// bound that freezes it.
	DryRun bool `json:"dryRun"`
}

// bulkFilter selects dead letters like GET /api/v1/dlq does. A filter
// that names no queue needs all (here or beside the filter).
type bulkFilter struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	Partition     string `json:"partition"`
	From          string `json:"from"`
	To            string `json:"to"`
	Error         string `json:"error"`
	TransactionID string `json:"transactionId"`
	Fingerprint   string `json:"fingerprint"` // an error group
	All           bool   `json:"all"`
	// Q is free text in payloads and errors, Field payload field
	// filters, as GET /api/v1/dlq's q and field.
	Q     string   `json:"q"`
	Field []string `json:"field"`
}

// bulkBound is a broker.Bound as the API writes it.
type bulkBound struct {
	FailedAt timestamp `json:"failedAt"`
	ID       int64     `json:"id"`
}

// boundIn is the bound of a request: failedAt (RFC 3339) is required;
// id, the dead letters' row id, may be left out (the highest there is).
type boundIn struct {
	FailedAt string `json:"failedAt"`
	ID       int64  `json:"id"`
}

func (b boundIn) bound() (broker.Bound, error) {
	if b.FailedAt == "" {
		return broker.Bound{}, badRequest("bound.failedAt is required")
	}
	at, err := parseTime("bound.failedAt", b.FailedAt)
	if err != nil {
		return broker.Bound{}, err
	}
	if b.ID < 0 {
		return broker.Bound{}, badRequest("bound.id must not be negative")
	}
	return broker.Bound{FailedAt: at, ID: b.ID}, nil
}

// query converts the filter for the broker. A filter with no queue is
// refused unless all says "every queue".
func (r bulkRequest) query() (broker.DLQQuery, error) {
	f := *r.Filter
	all := r.All || f.All
	q := broker.DLQQuery{Queue: f.Queue, Group: f.ConsumerGroup, Partition: f.Partition, ErrorContains: f.Error, TransactionID: f.TransactionID, Fingerprint: f.Fingerprint, AllQueues: all,
		Text: f.Q, Fields: f.Field}
	var err error
	if q.From, err = parseTime("filter.from", f.From); err != nil {
		return q, err
	}
	if q.To, err = parseTime("filter.to", f.To); err != nil {
		return q, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.To.After(q.From) {
		return q, badRequest("filter.to must be after filter.from")
	}
	switch {
	case f.Queue == "" && !all:
		return q, badRequest(`filter.queue is empty: name a queue, or send "all": true to act on the dead letters of every queue; nothing was changed`)
	case f.Queue != "" && all:
		return q, badRequest(`"all": true means every queue: it cannot go with filter.queue`)
	}
	if r.Bound != nil {
		b, err := r.Bound.bound()
		if err != nil {
			return q, err
		}
		q.Bound = &b
	}
	return q, nil
}

// decodeBulkRequest reads a bulk request; exactly one of ids and filter
// must be given ("all" alone is the empty filter).
func decodeBulkRequest(c echo.Context) (bulkRequest, error) {
	var req bulkRequest
	if err := decodeJSON(c, &req); err != nil {
		return req, err
	}
	if req.Filter == nil && req.IDs == nil && req.All {
		req.Filter = &bulkFilter{}
	}
	if (req.IDs == nil) == (req.Filter == nil) {
		return req, badRequest("give either ids or filter")
	}
	if req.Filter != nil && req.ConsumerGroup != "" {
		return req, badRequest("consumerGroup goes inside filter")
	}
	if req.IDs != nil && (req.All || req.Bound != nil || req.DryRun) {
		return req, badRequest("all, bound and dryRun go with a filter; ids name their dead letters already")
	}
	return req, nil
}

type bulkResponse struct {
	// Done counts messages for a replay, dead letters for a delete by
	// filter (by ids: the messages whose dead letters were deleted).
	Done    int `json:"done"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	// By filter only: what a dry run counted (dead letters, and their
	// messages), the bound kept to, and how many dead letters matching the
	// filter were filed after it was taken (a row id above bound.id; not
	// touched). arrivedSince is left out when the action stopped on an
	// error before counting them; older dead letters that failed after a
	// bound.failedAt given earlier than theirs are not in it.
	Matching     *int64     `json:"matching,omitempty"`
	Messages     *int64     `json:"messages,omitempty"`
	Bound        *bulkBound `json:"bound,omitempty"`
	ArrivedSince *int64     `json:"arrivedSince,omitempty"`
}

// bulkFailure is the answer to a bulk action that stopped part-way on an
// internal error: what was done before it stays done.
type bulkFailure struct {
	Error string `json:"error"`
	bulkResponse
}

// writeBulk answers a bulk action. A broker refusal is answered as any
// error; an internal failure part-way is logged and answered with the
// counts, so that the caller knows what was done, without arrivedSince
// (not counted: the action stopped first).
func (s *Server) writeBulk(c echo.Context, res broker.BulkResult, err error) error {
	counts := bulkResponse{Done: res.Done, Skipped: res.Skipped, Failed: res.Failed}
	if res.Bound != nil {
		counts.Bound = &bulkBound{FailedAt: timestamp(res.Bound.FailedAt), ID: res.Bound.ID}
		if err == nil {
			counts.ArrivedSince = &res.ArrivedSince
		}
	}
	if err == nil {
		return writeJSON(c, http.StatusOK, counts)
	}
	nothing := res.Done == 0 && res.Skipped == 0 && res.Failed == 0
	if _, _, ok := statusOf(err); ok || nothing || c.Request().Context().Err() != nil {
		return err
	}
	s.log.ErrorContext(c.Request().Context(), "bulk action failed part-way", "route", c.Path(), "done", res.Done, "failed", res.Failed, "error", err)
	return writeJSON(c, http.StatusInternalServerError, bulkFailure{Error: internalMessage, bulkResponse: counts})
}

// countMatching answers a dry run: how many dead letters the filter
// selects and how many messages they are, and the bound that freezes them.
func (s *Server) countMatching(c echo.Context, q broker.DLQQuery) error {
	n, err := s.broker.CountMatching(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, bulkResponse{Matching: &n.Count, Messages: &n.Messages, Bound: &bulkBound{FailedAt: timestamp(n.Bound.FailedAt), ID: n.Bound.ID}})
}

// replayDeadLetters replays the messages named by id, or every one the
// filter matches at or below the bound; each exactly once or not at all.
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
		q, err := req.query()
		if err != nil {
			return err
		}
		if req.DryRun {
			return s.countMatching(c, q)
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
		q, err := req.query()
		if err != nil {
			return err
		}
		if req.DryRun {
			return s.countMatching(c, q)
		}
		res, err = s.broker.DeleteMatching(c.Request().Context(), q, actor(c))
		return s.writeBulk(c, res, err)
	}
	res, err = s.broker.DeleteIDs(c.Request().Context(), req.IDs, req.ConsumerGroup, actor(c))
	return s.writeBulk(c, res, err)
}
