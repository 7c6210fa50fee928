package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
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

// replayOne replays one dead-lettered message: every group's dead letter
// of it, or with mode=own and group= (form or query) that group's only.
func (s *Server) replayOne(c echo.Context) error {
	queue, id, err := queueAndID(c)
	if err != nil {
		return err
	}
	o, err := s.formReplayOptions(c)
	if err != nil {
		return err
	}
	res, err := s.broker.ReplayWith(c.Request().Context(), id, o)
	if err != nil {
		return err
	}
	text := fmt.Sprintf("Replayed %s %s: pushed to the end of partition %s as %s.", views.ShortID(id), replayedTo(o, res.Groups), res.Partition, res.TransactionID)
	if res.Status == broker.StatusDuplicate {
		text = fmt.Sprintf("%s was already replayed: its copy %s is in partition %s; the dead letter is gone.", views.ShortID(id), res.TransactionID, res.Partition)
	}
	return s.actionDone(c, queue, views.FlashMessage(views.Flash{Kind: "ok", Text: text}))
}

// deleteOne deletes a dead letter: the group's, or every group's. The
// flash offers to undo it (the restore window keeps what was deleted).
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
	text := oneDeadLetter("Deleted", id, group, n) + ": Undo brings it back within " + s.restoreFor()
	undo := deadLettersURL(queue, nil) + "/" + url.PathEscape(id) + "/restore"
	if group != "" {
		undo += "?" + url.Values{"group": {group}}.Encode()
	}
	return s.actionDone(c, queue, views.DeletedOneMessage(views.DeletedOne{Text: text + ".", UndoURL: undo}))
}

// oneDeadLetter says what an action did to a message's dead letters: of
// group, or of n groups.
func oneDeadLetter(verb, id, group string, n int) string {
	text := fmt.Sprintf("%s dead letter %s", verb, views.ShortID(id))
	if group != "" {
		text += " of group " + group
	}
	if n > 1 {
		text += fmt.Sprintf(" (%d groups)", n)
	}
	return text
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
		if err := s.masksOf(c).query(q); err != nil {
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

// confirmBulk renders the question asked before a bulk action: how many
// it touches, per consumer group, and the first five. For a filter it
// counts, in one snapshot, what the filter matches (dead letters, and
// their messages for a replay) and the bound that freezes that set; the
// form carries the bound, so that the job acts on exactly what was
// counted.
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
	v := views.BulkConfirm{Action: action, Queue: queue, PostURL: deadLettersURL(queue, nil) + "/" + action, MaxRate: broker.MaxJobRate, RestoreFor: s.restoreFor()}
	// An error group's page offers its replay with a canary (canary=1).
	v.CanaryAsked = action == "replay" && c.QueryParam("canary") == "1"
	req := broker.JobRequest{Kind: action, Scope: scopeOf(c.Request().Context())}
	if t.all {
		req.Query = &t.query
	} else {
		req.IDs = t.ids
		if action == "delete" {
			req.Group = t.group
		}
	}
	var p broker.Preview
	if t.all || len(t.ids) > 0 {
		if p, err = s.broker.Preview(c.Request().Context(), req); err != nil {
			return err
		}
	}
	v.Count, v.DeadLetters = p.Count, p.DeadLetters
	if t.all {
		v.Bound = boundParam(*p.Bound)
		v.All, v.Filter = true, t.filter.values().Encode()
		v.Where = t.where
		v.OwnGroup = t.filter.Group
	} else {
		v.IDs, v.Group, v.OwnGroup = t.ids, t.group, t.group
		v.Where = "the ones selected on the page"
		if t.group != "" {
			v.Where += ", in group " + t.group
		} else if action == "delete" {
			v.Where += ", in every group"
		}
	}
	for _, g := range p.Groups {
		v.Groups = append(v.Groups, views.BulkGroup{Group: g.Group, DeadLetters: g.DeadLetters, Capped: g.Capped})
	}
	// A view that names a group replays to it alone by default.
	v.OwnFirst = v.OwnGroup != ""
	if action == "replay" {
		readers, err := s.broker.Readers(c.Request().Context(), queue)
		if err != nil {
			return err
		}
		for _, r := range readers {
			if !slices.ContainsFunc(p.Groups, func(g broker.PreviewGroup) bool { return g.Group == r }) {
				v.Untouched = append(v.Untouched, r)
			}
		}
	}
	if v.OwnGroup == "" && len(p.Groups) == 1 {
		// All of them are one group's: that is the group each copy goes to.
		v.OwnGroup = p.Groups[0].Group
	}
	for _, d := range p.Sample {
		v.Sample = append(v.Sample, views.BulkSample{ID: d.MessageID, URL: deadLetterURL(d.Queue, d.MessageID, d.Group), TransactionID: d.TransactionID,
			Group: d.Group, Error: d.Error, FailedAt: d.FailedAt, Now: s.now()})
	}
	// A replay to each dead letter's own group pushes a copy a dead
	// letter: the typed confirmation counts those too.
	v.TypeQueue = v.Count > typedConfirmAbove || (action == "replay" && v.DeadLetters > typedConfirmAbove)
	if v.Count == 0 {
		v.Error = "Nothing is selected, or nothing matches this filter any more."
	}
	return render(c, http.StatusOK, views.BulkConfirmDialog(v))
}

// inUnit is what the action by filter counts of counted, as its
// confirmation says: a replay messages, a delete dead letters.
func inUnit(action string, counted broker.Counted) int64 {
	if action == "replay" {
		return counted.Messages
	}
	return counted.Count
}

// A bulk action on at most waitedSelection rows picked by hand, with no
// rate, is answered once its job is done (or after waitSelectionFor).
const (
	waitedSelection  = 50
	waitSelectionFor = 5 * time.Second
)

// replayBulk starts a job that replays the selected or matching dead
// letters.
func (s *Server) replayBulk(c echo.Context) error { return s.runBulk(c, "replay") }

// deleteBulk starts a job that deletes the selected or matching dead
// letters.
func (s *Server) deleteBulk(c echo.Context) error { return s.runBulk(c, "delete") }

// runBulk starts the job of a confirmed bulk action and answers with a
// flash that links to it.
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
	req, err := jobOfForm(action, form, s.pageActor(c))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	req.Scope = scopeOf(ctx)
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
		if req.Mode == broker.ReplayOwnGroup {
			n = counted.Count // a copy a dead letter
		}
		req.Query = &t.query
	} else {
		req.IDs, req.Queue = t.ids, queue
		if action == "delete" || req.Mode == broker.ReplayOwnGroup {
			req.Group = t.group
		}
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
	j, err := s.broker.StartJob(ctx, req)
	if err != nil {
		return err
	}
	if !t.all && req.Rate == 0 && len(t.ids) <= waitedSelection {
		// A few rows picked (the keyboard's r on its row): the answer
		// waits for the job, so that the list it makes refresh shows
		// them gone; not longer than waitSelectionFor (a busy store),
		// after which the job goes on, followed on its page.
		wctx, cancel := context.WithTimeout(ctx, waitSelectionFor)
		_, _ = s.broker.WaitJob(wctx, j.ID) // not finished in time: the job goes on
		cancel()
	}
	if !isFragment(c) {
		return c.Redirect(http.StatusSeeOther, jobURL(j.ID))
	}
	msg := views.JobStarted{ID: j.ID, URL: jobURL(j.ID), Action: action, Count: j.Planned, Unit: j.PlannedUnit(), Rate: j.Rate}
	if req.Mode == broker.ReplayOwnGroup {
		msg.Group = t.filter.Group
		if !t.all {
			msg.Group = t.group
		}
	}
	if j.Kind == broker.JobDelete {
		msg.UndoURL = jobURL(j.ID) + "/undo"
	}
	c.Response().Header().Set("HX-Trigger", "dlq-changed")
	return render(c, http.StatusOK, views.JobStartedMessage(msg))
}

// jobOfForm reads a bulk form's mode and rate into the job to start.
func jobOfForm(action string, form url.Values, who string) (broker.JobRequest, error) {
	req := broker.JobRequest{Kind: action, Actor: who}
	switch form.Get("mode") {
	case "", "every":
	case "own":
		if action != "replay" {
			return req, badRequest("only a replay goes to one group")
		}
		req.Mode = broker.ReplayOwnGroup
	default:
		return req, badRequest("mode must be every or own")
	}
	if r := strings.TrimSpace(form.Get("rate")); r != "" {
		n, err := strconv.Atoi(r)
		if err != nil || n < 0 || n > broker.MaxJobRate {
			return req, badRequest("the rate must be a whole number of %s a second, from 0 (no limit) to %d", map[string]string{"replay": "messages", "delete": "dead letters"}[action], broker.MaxJobRate)
		}
		req.Rate = n
	}
	force, err := formForce(form.Get("force"))
	if err != nil {
		return req, err
	}
	if force && action != "replay" {
		return req, badRequest("force goes with a replay")
	}
	req.Force = force
	if req.Canary, err = formCanary(action, form); err != nil {
		return req, err
	}
	return req, nil
}

// formCanary reads a bulk form's canary (nil: the box is not ticked):
// how many, how long to wait for them, how many may fail again; an empty
// field is the dialog's default.
func formCanary(action string, form url.Values) (*broker.Canary, error) {
	on, err := formForce(form.Get("canary"))
	if err != nil {
		return nil, badRequest("canary must be on or left out")
	}
	if !on {
		return nil, nil
	}
	if action != "replay" {
		return nil, badRequest("a canary goes with a replay")
	}
	num := func(name string, def, lo, hi int, what string) (int, error) {
		v := strings.TrimSpace(form.Get(name))
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, badRequest("the canary's %s must be a whole number from %d to %d", what, lo, hi)
		}
		return n, nil
	}
	c := &broker.Canary{}
	if c.Count, err = num("canaryCount", views.CanaryCount, 1, broker.MaxCanaryCount, "count"); err != nil {
		return nil, err
	}
	if c.SettleSeconds, err = num("canarySettleSeconds", views.CanarySettleSeconds, 1, broker.MaxCanarySettleSeconds, "wait (seconds)"); err != nil {
		return nil, err
	}
	if c.MaxFailed, err = num("canaryMaxFailed", views.CanaryMaxFailed, 0, c.Count-1, "number that may fail again (below its count)"); err != nil {
		return nil, err
	}
	return c, nil
}

// formForce reads a form's "replay even if replayed maxReplays times
// already" checkbox.
func formForce(v string) (bool, error) {
	switch v {
	case "", "0", "false":
		return false, nil
	case "1", "on", "true":
		return true, nil
	}
	return false, badRequest("force must be on or left out")
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
