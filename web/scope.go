package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Queue scopes (DASHBOARD.md, "Who sees what"): a principal limited to
// some queues (Principal.Queues) finds the others as if absent. A route
// that names a queue in its path (:queue) is checked once, in require
// and requirePage (checkQueueParam); a handler that learns a queue from a
// body or from the thing it reads (a dead letter by id, a job, a hold)
// checks it with checkQueue; lists pass the scope to the broker
// (DLQQuery.Scope and the like) or keep the queues it allows (inScope).

// scopeOf is the queues the request's principal may see: every queue
// without a principal (public metrics, the health check).
func scopeOf(ctx context.Context) broker.QueueScope {
	p, _ := principalFrom(ctx)
	return p.Queues
}

// queueNotFound is the answer for a queue that is not there, or out of
// the principal's scope: the same, so that a name cannot be probed.
func queueNotFound(name string) error {
	if len(name) > 64 {
		name = name[:64]
	}
	return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("queue %q not found", name)}
}

// checkQueue answers queueNotFound when the request's principal may not
// see the queue named name.
func checkQueue(c echo.Context, name string) error {
	if !scopeOf(c.Request().Context()).Allows(name) {
		return queueNotFound(name)
	}
	return nil
}

// checkPath is the one check of what a route's path names, run by
// require and requirePage once the role is allowed: a queue (:queue), a
// dead letter (its message's :id), a job, a hold, an error group or a
// message (:partitionId/:transactionId) of a queue out of the
// principal's scope is as if absent (404). What is not there at all is
// left to the handler, which says so in its own words.
func (s *Server) checkPath(c echo.Context) error {
	sc := scopeOf(c.Request().Context())
	if sc.All() {
		return nil
	}
	if q := c.Param("queue"); q != "" {
		if err := checkQueue(c, q); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	path, id := c.Path(), c.Param("id")
	switch {
	case strings.HasPrefix(path, "/queues/:queue/dead-letters/:id"), strings.HasPrefix(path, apiPrefix+"/dlq/:id"):
		return s.checkMessage(c, id)
	case strings.HasPrefix(path, "/jobs/:id"), strings.HasPrefix(path, apiPrefix+"/jobs/:id"), strings.HasPrefix(path, "/live/jobs/:id"):
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil // the handler's 404
		}
		j, err := s.broker.JobDetail(ctx, n)
		if err == nil && !broker.JobInScope(sc, j.Job) {
			return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("job #%d not found", n)}
		}
	case strings.HasPrefix(path, "/holds/:id"), strings.HasPrefix(path, apiPrefix+"/holds/:id"):
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil
		}
		hs, err := s.broker.Holds(ctx, broker.HoldFilter{})
		if err != nil {
			return err
		}
		for _, h := range hs {
			if h.ID == n && !sc.Allows(h.Queue) {
				return &apiError{status: http.StatusNotFound, message: "no such hold"}
			}
		}
	case strings.HasPrefix(path, "/error-groups/:id"):
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil
		}
		if _, _, err := s.errorGroup(ctx, n); err != nil {
			var ae *apiError
			if errors.As(err, &ae) {
				return err
			}
		}
	case strings.HasPrefix(path, apiPrefix+"/messages/:partitionId/:transactionId"):
		m, err := s.broker.MessageState(ctx, c.Param("partitionId"), c.Param("transactionId"))
		if err == nil && !sc.Allows(m.Queue.Name) {
			return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("partition %q not found", cut64(c.Param("partitionId")))}
		}
	}
	return nil
}

// inScope keeps the items of list whose queue (queueOf) the request's
// principal may see.
func inScope[T any](ctx context.Context, list []T, queueOf func(T) string) []T {
	sc := scopeOf(ctx)
	if sc.All() {
		return list
	}
	out := list[:0:0]
	for _, v := range list {
		if sc.Allows(queueOf(v)) {
			out = append(out, v)
		}
	}
	return out
}

// errorGroup is the broker's ErrorGroup for the request's principal: a
// group of a queue out of its scope is not found.
func (s *Server) errorGroup(ctx context.Context, id int64) (broker.OwnedErrorGroup, []broker.ErrorGroupChange, error) {
	g, h, err := s.broker.ErrorGroup(ctx, id)
	if err == nil && !scopeOf(ctx).Allows(g.Queue) {
		return broker.OwnedErrorGroup{}, nil, &apiError{status: http.StatusNotFound, message: fmt.Sprintf("error group %d not found", id)}
	}
	return g, h, err
}

// checkMessage answers 404 when the message messageID (a dead letter's
// public id) is of a queue out of the request's scope, as the API answers
// for a message that is not there; a message that is not there is left
// to the handler, which says so in its own words.
func (s *Server) checkMessage(c echo.Context, messageID string) error {
	sc := scopeOf(c.Request().Context())
	if sc.All() {
		return nil
	}
	queue, err := s.broker.MessageQueue(c.Request().Context(), messageID)
	if errors.Is(err, broker.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !sc.Allows(queue) {
		return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("dead letter %s not found", cut64(messageID))}
	}
	return nil
}

func cut64(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// checkItemQueues answers 404 for a push whose items name a queue out of
// the request's scope: nothing of the push is stored.
func checkItemQueues(c echo.Context, items []pushItem) error {
	for _, it := range items {
		if err := checkQueue(c, it.Queue); err != nil {
			return err
		}
	}
	return nil
}
