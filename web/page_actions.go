package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// typedConfirmAbove is the size of a bulk action above which the operator
// must type the queue name: in the action's unit, messages for a replay
// (the copies it pushes), dead letters for a delete.
const typedConfirmAbove = 1000

// pageActor names the dashboard user for the audit trail.
func (s *Server) pageActor(c echo.Context) string {
	if u := s.viewSession(c).User; u != "" {
		return "user:" + u
	}
	return actor(c)
}

// actionDone answers an action: for htmx the message, with an event that
// makes the list and the counters refresh in place; for a plain form a
// redirect back to the list.
func (s *Server) actionDone(c echo.Context, queue string, msg templ.Component) error {
	if !isFragment(c) {
		return c.Redirect(http.StatusSeeOther, deadLettersURL(queue, nil))
	}
	c.Response().Header().Set("HX-Trigger", "dlq-changed")
	return render(c, http.StatusOK, msg)
}

// replayOne replays one dead-lettered message (every group's dead letter of it).
func (s *Server) replayOne(c echo.Context) error {
	queue, id, err := queueAndID(c)
	if err != nil {
		return err
	}
	res, err := s.broker.Replay(c.Request().Context(), id, s.pageActor(c))
	if err != nil {
		return err
	}
	text := fmt.Sprintf("Replayed %s: pushed to the end of partition %s as %s.", views.ShortID(id), res.Partition, res.TransactionID)
	if res.Status == broker.StatusDuplicate {
		text = fmt.Sprintf("%s was already replayed: its copy %s is in partition %s; the dead letter is gone.", views.ShortID(id), res.TransactionID, res.Partition)
	}
	return s.actionDone(c, queue, views.FlashMessage(views.Flash{Kind: "ok", Text: text}))
}

// deleteOne deletes a dead letter: the group's, or every group's.
func (s *Server) deleteOne(c echo.Context) error {
	queue, id, err := queueAndID(c)
	if err != nil {
		return err
	}
	group := c.QueryParam("group")
	n, err := s.broker.Delete(c.Request().Context(), id, group, s.pageActor(c))
	if err != nil {
		return err
	}
	text := fmt.Sprintf("Deleted dead letter %s", views.ShortID(id))
	if group != "" {
		text += " of group " + group
	}
	if n > 1 {
		text += fmt.Sprintf(" (%d groups)", n)
	}
	return s.actionDone(c, queue, views.FlashMessage(views.Flash{Kind: "ok", Text: text + "."}))
}

func queueAndID(c echo.Context) (string, string, error) {
	queue, err := pathParam(c, "queue")
	if err != nil {
		return "", "", err
	}
	id, err := pathParam(c, "id")
	return queue, id, err
}

// bulkTarget is what a bulk action touches: a list of ids or a filter.
type bulkTarget struct {
	queue  string
	ids    []string
	group  string // with ids: delete only this group's dead letters
	filter listFilter
	where  string // the filter for people
	all    bool
	query  broker.DLQQuery
}

// readBulkTarget reads a bulk action's target from the request's values.
// A relative time range is pinned to absolute times, so that the action
// touches what the confirmation counted. The target is always of the
// page's queue: the dashboard never acts on every queue.
func (s *Server) readBulkTarget(c echo.Context, vals url.Values, queue string) (bulkTarget, error) {
	t := bulkTarget{queue: queue, ids: uniq(vals["ids"]), group: vals.Get("group")}
	if queue == "" {
		return t, badRequest("the page names no queue: a bulk action acts on the dead letters of one queue")
	}
	if vals.Get("all") == "1" || vals.Has("filter") {
		t.all = true
		fv := vals
		if vals.Has("filter") {
			var err error
			if fv, err = url.ParseQuery(vals.Get("filter")); err != nil {
				return t, badRequest("filter is not a URL query")
			}
		}
		t.filter = parseListFilter(fv)
		t.where = t.filter.describe()
		q, err := t.filter.query(queue, s.now())
		if err != nil {
			return t, err
		}
		if t.filter.Since != "" {
			t.filter.Since, t.filter.From = "", q.From.Format(time.RFC3339Nano)
		}
		t.query = q
	}
	return t, nil
}

// boundParam writes and reads the bound a confirmation counted up to, as
// its form carries it: "<failedAt ms>-<row id>".
func boundParam(b broker.Bound) string {
	return strconv.FormatInt(b.FailedAt.UnixMilli(), 10) + "-" + strconv.FormatInt(b.ID, 10)
}

func parseBound(s string) (broker.Bound, error) {
	a, b, ok := strings.Cut(s, "-")
	ms, err1 := strconv.ParseInt(a, 10, 64)
	id, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || ms <= 0 || id < 0 {
		return broker.Bound{}, badRequest("the confirmation's bound is missing or not valid: open the confirmation again")
	}
	return broker.Bound{FailedAt: time.UnixMilli(ms).UTC(), ID: id}, nil
}

// confirmBulk renders the question asked before a bulk action. For a
// filter it counts, in one snapshot, what the filter matches (dead
// letters, and their messages for a replay) and the bound that freezes
// that set; the form carries the bound, so that the action touches exactly
// what was counted.
func (s *Server) confirmBulk(c echo.Context) error {
	queue, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	action := c.QueryParam("action")
	if action != "replay" && action != "delete" {
		return badRequest("action must be replay or delete")
	}
	t, err := s.readBulkTarget(c, c.QueryParams(), queue)
	if err != nil {
		return err
	}
	v := views.BulkConfirm{Action: action, Queue: queue, PostURL: deadLettersURL(queue, nil) + "/" + action}
	switch {
	case t.all:
		counted, err := s.broker.CountMatching(c.Request().Context(), t.query)
		if err != nil {
			return err
		}
		v.Count, v.Bound = inUnit(action, counted), boundParam(counted.Bound)
		v.DeadLetters = counted.Count
		v.All, v.Filter = true, t.filter.values().Encode()
		v.Where = t.where
	default:
		v.Count = int64(len(t.ids))
		v.IDs, v.Group = t.ids, t.group
		v.Where = "the ones selected on the page"
		if t.group != "" {
			v.Where += ", in group " + t.group
		} else if action == "delete" {
			v.Where += ", in every group"
		}
	}
	v.TypeQueue = v.Count > typedConfirmAbove
	if v.Count == 0 {
		v.Error = "Nothing is selected, or nothing matches this filter any more."
	}
	return render(c, http.StatusOK, views.BulkConfirmDialog(v))
}

// inUnit is what the action by filter counts of counted: a replay
// messages, a delete dead letters.
func inUnit(action string, counted broker.Counted) int64 {
	if action == "replay" {
		return counted.Messages
	}
	return counted.Count
}

// replayBulk replays the selected or matching dead letters.
func (s *Server) replayBulk(c echo.Context) error { return s.runBulk(c, "replay") }

// deleteBulk deletes the selected or matching dead letters.
func (s *Server) deleteBulk(c echo.Context) error { return s.runBulk(c, "delete") }

func (s *Server) runBulk(c echo.Context, action string) error {
	queue, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	form, err := c.FormParams()
	if err != nil {
		return badRequest("the form could not be read")
	}
	t, err := s.readBulkTarget(c, form, queue)
	if err != nil {
		return err
	}
	ctx, who := c.Request().Context(), s.pageActor(c)
	n := int64(len(t.ids))
	if t.all {
		// Only what the confirmation counted: the dead letters at or
		// below its bound.
		bound, err := parseBound(form.Get("bound"))
		if err != nil {
			return err
		}
		t.query.Bound = &bound
		counted, err := s.broker.CountMatching(ctx, t.query)
		if err != nil {
			return err
		}
		n = inUnit(action, counted)
	}
	if n == 0 {
		return badRequest("nothing to %s: select dead letters or use a filter that matches some", action)
	}
	if n > typedConfirmAbove && form.Get("confirm") != queue {
		unit := "dead letters"
		if action == "replay" {
			unit = "messages"
		}
		return badRequest("this %s touches %s %s: type the queue name %q to confirm", action, views.Count(n), unit, queue)
	}
	var res broker.BulkResult
	switch {
	case t.all && action == "replay":
		res, err = s.broker.ReplayMatching(ctx, t.query, who)
	case t.all:
		res, err = s.broker.DeleteMatching(ctx, t.query, who)
	case action == "replay":
		res, err = s.broker.ReplayIDs(ctx, t.ids, who)
	default:
		res, err = s.broker.DeleteIDs(ctx, t.ids, t.group, who)
	}
	out := views.BulkResult{Action: action, Done: res.Done, Skipped: res.Skipped, Failed: res.Failed, ByFilter: t.all, ArrivedKnown: err == nil, ArrivedSince: res.ArrivedSince}
	if err != nil {
		// What was done stays done; say so, and how much was not.
		s.log.ErrorContext(ctx, "bulk action failed part-way", "action", action, "queue", queue, "done", res.Done, "error", err)
		out.Error = "It stopped on an error; what is counted as done is done, the rest is untouched. Try again."
	}
	return s.actionDone(c, queue, views.BulkResultMessage(out))
}

func uniq(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
