package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// deadLetterView is one dead letter: a message one group gave up on.
type deadLetterView struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  *string         `json:"errorMessage"` // null: the worker sent no error text
	ErrorCut      *errorCutView   `json:"errorCut"`     // null: errorMessage is the whole text
	RetryCount    int             `json:"retryCount"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     timestamp       `json:"createdAt"`
	FailedAt      timestamp       `json:"failedAt"`
	TraceID       *string         `json:"traceId"`
	IsReplay      bool            `json:"isReplay"`
	// Fingerprint names the dead letter's error group (a filter:
	// fingerprint=).
	Fingerprint string `json:"fingerprint"`
	// ConsumerVersion: the version of the consumer whose ack filed it
	// (a filter: consumerVersion=); absent when the ack said none.
	ConsumerVersion string `json:"consumerVersion,omitempty"`
	// ExpiresAt: when its queue's deadLetterRetentionSeconds expires it;
	// absent when the queue keeps its dead letters.
	ExpiresAt *timestamp `json:"expiresAt,omitempty"`
}

// errorCutView says that an error text was cut to be kept: the bytes of
// it kept (errorMessage then ends in "…") and the bytes the worker sent.
type errorCutView struct {
	KeptBytes int `json:"keptBytes"`
	SentBytes int `json:"sentBytes"`
}

// newDeadLetterView makes the view of d, its payload as the request's
// masks show it (m nil: as it is, for what is revealed).
func newDeadLetterView(d broker.DeadLetter, m *requestMasks) deadLetterView {
	var cut *errorCutView
	if kept, sent, ok := d.ErrorCut(); ok {
		cut = &errorCutView{KeptBytes: kept, SentBytes: sent}
	}
	return deadLetterView{
		ErrorCut:        cut,
		ID:              d.MessageID(),
		TransactionID:   d.TransactionID,
		PartitionID:     d.PartitionKey,
		Queue:           d.Queue,
		Partition:       d.Partition,
		ConsumerGroup:   d.Group,
		ErrorMessage:    optional(d.Error),
		RetryCount:      d.RetryCount,
		Data:            maskedData(m, d.Queue, d.Payload),
		CreatedAt:       timestamp(d.CreatedAt),
		FailedAt:        timestamp(d.FailedAt),
		TraceID:         optional(d.TraceID),
		IsReplay:        d.IsReplay(),
		Fingerprint:     d.Fingerprint,
		ConsumerVersion: d.ConsumerVersion,
		ExpiresAt:       optionalTime(d.ExpiresAt),
	}
}

// maskedData is a payload as m shows it; m nil: as it is.
func maskedData(m *requestMasks, queue string, p []byte) json.RawMessage {
	if m == nil {
		return p
	}
	return m.payload(queue, p)
}

// parseDLQQuery reads the filters and page of GET /api/v1/dlq.
func parseDLQQuery(c echo.Context) (broker.DLQQuery, error) {
	q := broker.DLQQuery{
		Scope:           scopeOf(c.Request().Context()),
		Queue:           c.QueryParam("queue"),
		Group:           c.QueryParam("consumerGroup"),
		Partition:       c.QueryParam("partition"),
		ErrorContains:   c.QueryParam("error"),
		TransactionID:   c.QueryParam("transactionId"),
		Fingerprint:     c.QueryParam("fingerprint"),
		ConsumerVersion: c.QueryParam("consumerVersion"),
		Text:            c.QueryParam("q"),
		Fields:          c.QueryParams()["field"],
		WithTotal:       true,
	}
	var err error
	if q.From, err = parseTime("query parameter from", c.QueryParam("from")); err != nil {
		return q, err
	}
	if q.To, err = parseTime("query parameter to", c.QueryParam("to")); err != nil {
		return q, err
	}
	if q.Limit, err = queryInt(c, "limit", 100); err != nil {
		return q, err
	}
	if q.Limit < 1 || q.Limit > broker.MaxPageSize {
		return q, badRequest("query parameter limit must be between 1 and %d", broker.MaxPageSize)
	}
	if q.Offset, err = queryInt(c, "offset", 0); err != nil {
		return q, err
	}
	// after: the keyset position a page's "next" gave, to go on from.
	if q.After, err = parseCursor(c.QueryParam("after")); err != nil {
		return q, err
	}
	if q.After != nil && q.Offset != 0 {
		return q, badRequest("query parameters after and offset do not go together: after is where the previous page ended")
	}
	return q, nil
}

type dlqListResponse struct {
	Messages   []deadLetterView `json:"messages"`
	Total      int64            `json:"total"`
	Pagination pagination       `json:"pagination"`
	// MatchCapped: q or a field filter's words match more than
	// broker.MatchCap dead letters; the newest of them were searched.
	MatchCapped bool `json:"matchCapped,omitempty"`
	// Scanned: a field filter the index cannot narrow (a range, a bool,
	// null, !=) was checked on this many of the newest dead letters only.
	Scanned int `json:"scanned,omitempty"`
	// TotalCapped: there may be more matches than total (a search counts
	// SearchCount at most, or only in its window: totalIn).
	TotalCapped bool `json:"totalCapped,omitempty"`
	// TotalIn: total counts the matches among the newest totalIn dead
	// letters of the other filters only (the search's first window).
	TotalIn int `json:"totalIn,omitempty"`
	// Window: the part of the list this page searched in order.
	Window *searchWindowView `json:"window,omitempty"`
	// Next is where the next page starts: pass it as after= (with the
	// same filters) to go on; absent on the last page.
	Next string `json:"next,omitempty"`
}

// searchWindowView is the window a search's page read: the dead letters
// of the other filters below from (absent: from the newest) down to and
// including to (absent: to the oldest), rows of them; more: some lie
// below, which the next page reads.
type searchWindowView struct {
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	Rows int    `json:"rows"`
	More bool   `json:"more"`
}

func newSearchWindowView(w *broker.SearchWindow) *searchWindowView {
	if w == nil {
		return nil
	}
	v := &searchWindowView{Rows: w.Rows, More: w.More}
	if w.From != nil {
		v.From = cursorParam(w.From)
	}
	if w.To != nil {
		v.To = cursorParam(w.To)
	}
	return v
}

type pagination struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

// listDeadLetters lists the dead letters matching the query, newest
// failure first, within the list page's budget (listBudget): past it,
// a 503 saying what to narrow, as the page says it.
func (s *Server) listDeadLetters(c echo.Context) error {
	q, err := parseDLQQuery(c)
	if err != nil {
		return err
	}
	masks := s.masksOf(c)
	if err := masks.query(q); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(c, listBudget)
	defer cancel()
	page, err := s.broker.DeadLetters(ctx, q)
	if err != nil {
		return err
	}
	out := dlqListResponse{Messages: make([]deadLetterView, len(page.Items)), Total: page.Total, Pagination: pagination{Limit: q.Limit, Offset: q.Offset},
		MatchCapped: page.MatchCapped, Scanned: page.Scanned, TotalCapped: page.TotalCapped, TotalIn: page.TotalIn, Window: newSearchWindowView(page.Window)}
	if page.Next != nil {
		out.Next = cursorParam(page.Next)
	}
	for i, d := range page.Items {
		out.Messages[i] = newDeadLetterView(d, masks)
	}
	if err := masks.check(); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, out)
}

type deadLetterResponse struct {
	deadLetterView
	// Others are the message's dead letters in other consumer groups.
	Others []deadLetterView `json:"others"`
	// History: its failed attempts, the replays it descends from and
	// the copies made of it (page_history.go).
	History *historyView `json:"history"`
	// Replays counts the message's replays along its dlq: chain against
	// its queue's cap: at it, a replay needs force.
	Replays replayCapView `json:"replays"`
	// IndexedInPart: the search index holds only the first part of the
	// payload's words (PostgreSQL bounds one payload's); a search does
	// not find the rest. Left out when the whole payload is indexed.
	IndexedInPart bool `json:"indexedInPart,omitempty"`
	// Masked: data shows its queue's masked fields as •••
	// (?reveal=true shows them to a role that may).
	Masked bool `json:"masked,omitempty"`
}

// replayCapView is a dead letter's replay count and its queue's cap.
type replayCapView struct {
	Count      int  `json:"count"`
	MaxReplays int  `json:"maxReplays"` // 0: no cap
	AtCap      bool `json:"atCap"`      // a replay needs "force": true
}

// showDeadLetter returns a message's dead letter (the optional
// consumerGroup query picks the group's), its dead letters in the other
// groups and its history. A dead letter that is gone is a 404 that says
// what became of it: {"error": ..., "gone": {...}} (the latest, with no
// consumerGroup); one never known, the plain {"error": ...}.
func (s *Server) showDeadLetter(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	group := c.QueryParam("consumerGroup")
	reveal, err := revealParam(c, "reveal")
	if err != nil {
		return err
	}
	h, err := s.broker.DeadLetterHistory(c.Request().Context(), id, group)
	if errors.Is(err, broker.ErrNotFound) {
		return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("dead letter %s not found", views.Cut(id, 64))}
	}
	if err != nil {
		return err
	}
	d, ok := liveDeadLetter(h, group)
	if !ok {
		fates := goneFates(h, group)
		if len(fates) == 0 {
			if group != "" {
				return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("no dead letter of message %s in consumer group %s", id, views.Cut(group, 64))}
			}
			return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("message %s is not a dead letter", id)}
		}
		f := latestFate(fates)
		return writeJSON(c, http.StatusNotFound, goneAnswer{Error: goneMessage(id, f), Gone: newGoneView(f)})
	}
	// ?reveal=true shows the real payload to a role that may reveal it
	// (403 otherwise), audited with the fields; the other groups' dead
	// letters are of the same message.
	masks := s.masksOf(c)
	shown := masks
	if reveal {
		paths, err := masks.reveal(d.Queue)
		if err != nil {
			return err
		}
		if paths != nil {
			if err := s.broker.RecordReveal(c.Request().Context(), actor(c), d.Queue, d.Group, id, paths); err != nil {
				return err
			}
			shown = nil
		}
	}
	rc := h.ReplayCount
	out := deadLetterResponse{deadLetterView: newDeadLetterView(d.DeadLetter, shown), Others: make([]deadLetterView, len(d.Others)), History: newHistoryView(h),
		Replays: replayCapView{Count: rc.Replays, MaxReplays: rc.Max, AtCap: rc.AtCap()}, IndexedInPart: h.IndexedInPart}
	for i, o := range d.Others {
		out.Others[i] = newDeadLetterView(o, shown)
	}
	if err := masks.check(); err != nil {
		return err
	}
	out.Masked = shown != nil && masks.masking(d.Queue)
	return writeJSON(c, http.StatusOK, out)
}

type deleteDeadLetterResponse struct {
	Deleted int `json:"deleted"`
}

// deleteDeadLetter removes a message's dead letters: every group's, or
// only the one of the consumerGroup query.
func (s *Server) deleteDeadLetter(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	n, err := s.broker.Delete(c.Request().Context(), id, c.QueryParam("consumerGroup"), actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, deleteDeadLetterResponse{Deleted: n})
}
