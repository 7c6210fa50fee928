package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// apiError is an error whose message is safe to show, with its status.
type apiError struct {
	status  int
	message string
}

func (e *apiError) Error() string { return e.message }

// badRequest is a 400 with a message for the caller.
func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

// errorResponse is the body of every error: {"error": "..."}.
type errorResponse struct {
	Error string `json:"error"`
}

// internalMessage is all a caller learns of an internal error; the log has
// the cause.
const internalMessage = "internal error"

// unavailableMessage answers a request the database could not take
// (broker.ErrUnavailable): busy or locked by another process.
const unavailableMessage = "the database is busy; nothing was changed, try again in a moment"

// commitUnknownMessage answers a write whose commit outcome is unknown
// (broker.ErrCommitUnknown): the connection to the database broke
// during its COMMIT.
const commitUnknownMessage = "the connection to the database broke during the commit: the outcome is unknown (the write may or may not have been made); a push sent again with the same transactionIds is safe (what was made is skipped as a duplicate)"

// diskFullMessage answers a request the database could not write for
// want of space (broker.ErrNoSpace), with 507 Insufficient Storage.
const diskFullMessage = "disk full: the database cannot be written (no space left on its device); nothing was changed, try again once space is freed"

// tooSlowMessage answers a read the database stopped for running too
// long (broker.ErrTooSlow), so that it would not hold up the writes.
const tooSlowMessage = "this read took too long and was stopped, so as not to hold up the writes; nothing was changed: narrow it (a queue, a time range, fewer field filters) and try again"

// retryAfter is the Retry-After of a 503, in seconds: a lock held by
// another process is usually short (a backup step, a shell transaction).
const retryAfter = "1"

// tooSlowRetryAfter is the Retry-After of a read that took too long: the
// same read at once would take as long again, and the cores with it;
// the answer says to narrow it first.
const tooSlowRetryAfter = "30"

// tooSlowTitle and tooSlowPage say a read that took too long to a
// person: what happened, that nothing changed, and what to narrow.
const (
	tooSlowTitle = "This took too long"
	tooSlowPage  = "This page took too long to read, so it was stopped (past its time budget) rather than slow the dashboard down for everyone; nothing was changed. Narrow it and try again: pick a consumer group or an error group, a shorter time range (Since), or type whole words: \"Payload or error has\" finds words at any depth, and \"Error contains\" is fast when its text holds whole words (\": timeout,\"), not part of one."
)

// statusOf maps an error to the status and message the caller sees. ok is
// false for internal errors, whose text must not be shown.
func statusOf(err error) (status int, message string, ok bool) {
	var ae *apiError
	var be *broker.Error
	var he *echo.HTTPError
	var mb *http.MaxBytesError
	switch {
	case errors.Is(err, broker.ErrNoSpace):
		return http.StatusInsufficientStorage, diskFullMessage, true
	case errors.Is(err, broker.ErrCommitUnknown):
		return http.StatusServiceUnavailable, commitUnknownMessage, true
	case errors.Is(err, broker.ErrUnavailable):
		return http.StatusServiceUnavailable, unavailableMessage, true
	case errors.Is(err, broker.ErrTooSlow), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, tooSlowMessage, true
	case errors.As(err, &ae):
		return ae.status, ae.message, true
	case errors.As(err, &mb):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", mb.Limit), true
	case errors.As(err, &be):
		return brokerStatus(be), be.Message, true
	case errors.As(err, &he):
		msg, isString := he.Message.(string)
		if !isString || msg == "" {
			msg = http.StatusText(he.Code)
		}
		return he.Code, strings.ToLower(msg), true
	}
	return http.StatusInternalServerError, internalMessage, false
}

// brokerStatus is the HTTP status of a broker error's kind.
func brokerStatus(be *broker.Error) int {
	switch {
	case errors.Is(be, broker.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(be, broker.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(be, broker.ErrConflict), errors.Is(be, broker.ErrDuplicate):
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// handleError is echo's error handler: every error, echo's own included
// (unknown route, wrong method), is answered as {"error": "..."}.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	ctx := c.Request().Context()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// The client went away (e.g. during a long-poll pop): nobody to answer.
		s.log.DebugContext(ctx, "request canceled", "method", c.Request().Method, "route", c.Path())
		return
	}
	if overBudget(c) && !errors.Is(err, broker.ErrTooSlow) {
		// The request's budget ran out: whatever the store said as it
		// was stopped (SQLite's "interrupted"), the read took too long.
		err = fmt.Errorf("%w: %w", broker.ErrTooSlow, err)
	}
	status, message, ok := statusOf(err)
	if !ok {
		s.log.ErrorContext(ctx, "request failed", "method", c.Request().Method, "route", c.Path(), "error", err)
	}
	if errors.Is(err, broker.ErrNoSpace) {
		s.log.WarnContext(ctx, "request refused: disk full", "method", c.Request().Method, "route", c.Path(), "error", err)
	}
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", retryAfter)
		switch {
		case message == tooSlowMessage:
			c.Response().Header().Set("Retry-After", tooSlowRetryAfter)
			s.log.WarnContext(ctx, "request stopped: it took too long", "method", c.Request().Method, "route", c.Path(), "error", err)
		case errors.Is(err, broker.ErrCommitUnknown):
			s.log.ErrorContext(ctx, "request failed: commit outcome unknown", "method", c.Request().Method, "route", c.Path(), "error", err)
		case errors.Is(err, broker.ErrUnavailable):
			s.log.WarnContext(ctx, "request refused: database unavailable", "method", c.Request().Method, "route", c.Path(), "error", err)
		}
	}
	if isPage(c.Request().URL.Path) {
		if message == tooSlowMessage {
			if werr := s.renderErrorTitled(c, status, tooSlowTitle, tooSlowPage); werr != nil {
				s.log.ErrorContext(ctx, "write error page", "error", werr)
			}
			return
		}
		if werr := s.renderError(c, status, pageMessage(status, message)); werr != nil {
			s.log.ErrorContext(ctx, "write error page", "error", werr)
		}
		return
	}
	if werr := writeJSON(c, status, errorResponse{Error: message}); werr != nil {
		s.log.ErrorContext(ctx, "write error response", "error", werr)
	}
}

// pageMessage says an error to a person.
func pageMessage(status int, message string) string {
	switch status {
	case http.StatusNotFound:
		if message == "" || message == "not found" {
			return "There is nothing at this address."
		}
	case http.StatusInternalServerError:
		return "Something went wrong on our side. It has been logged; try again in a moment."
	case http.StatusServiceUnavailable:
		if message == commitUnknownMessage {
			return "The connection to the database broke while the change was being saved, so whether it was made is unknown. Reload the page to see, then try again if need be."
		}
		return "The database is busy (another program holds a lock on it), so nothing was changed. Try again in a moment."
	case http.StatusInsufficientStorage:
		return "The disk of the database is full, so nothing was changed. Try again once space is freed."
	}
	if message == "" {
		return http.StatusText(status)
	}
	return strings.ToUpper(message[:1]) + message[1:]
}
