package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// The dashboard's error groups (SPEC section 7, DASHBOARD.md "Owning a
// failure"): /error-groups lists them across queues, /error-groups/:id
// shows one (its funnel, versions, trend and history) with the
// operators' actions, each a form that posts a state to
// /error-groups/:id/state and leads back to the group's page.

// errorGroupsURL is the list of error groups with a query.
func errorGroupsURL(q url.Values) string {
	if len(q) == 0 {
		return "/error-groups"
	}
	return "/error-groups?" + q.Encode()
}

// errorGroupURL is a group's page.
func errorGroupURL(id int64) string { return "/error-groups/" + strconv.FormatInt(id, 10) }

// groupsFilterKeys are the list's URL parameters, in chip order, with
// their labels.
var groupsFilterKeys = []struct{ key, label string }{
	{"state", "state"}, {"queue", "queue"}, {"group", "group"}, {"owner", "owner"}, {"version", "version"},
}

// showErrorGroupsPage renders the error groups across queues, filtered by
// state, queue, consumer group, owner and consumer version (all in the
// URL): open first (regressed first among them), ignored last.
func (s *Server) showErrorGroupsPage(c echo.Context) error {
	get := func(k string) string { return strings.TrimSpace(c.QueryParam(k)) }
	f := views.ErrorGroupsFilter{Queue: get("queue"), Group: get("group"), State: get("state"), Owner: get("owner"), Version: get("version")}
	state, err := parseGroupState(f.State, false)
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(c, 15*time.Second)
	defer cancel()
	limit := broker.MaxErrorGroups
	gs, err := s.broker.ErrorGroupList(ctx, broker.ErrorGroupFilter{Scope: scopeOf(c.Request().Context()), Queue: f.Queue, Group: f.Group, State: state, Owner: f.Owner, Version: f.Version, Limit: limit, DayOnly: true})
	if err != nil {
		return err
	}
	v := views.ErrorGroupsList{Page: s.page(c, "Error groups", "groups", views.Crumb{Label: "Overview", URL: "/"}, views.Crumb{Label: "Error groups"}),
		Filter: f, ListURL: errorGroupsURL(nil), Limit: limit, Full: len(gs) >= limit}
	for _, st := range broker.ErrorGroupStates {
		v.States = append(v.States, string(st))
	}
	base := url.Values{}
	for _, k := range groupsFilterKeys {
		if val := get(k.key); val != "" {
			base.Set(k.key, val)
		}
	}
	for _, k := range groupsFilterKeys {
		if val := base.Get(k.key); val != "" {
			u := with(base, k.key, "")
			u.Del(k.key)
			v.Chips = append(v.Chips, views.Chip{Label: k.label + ": " + views.Cut(val, 60), RemoveURL: errorGroupsURL(u)})
		}
	}
	for _, g := range gs {
		v.Rows = append(v.Rows, ownedGroupRow(g))
	}
	return renderPage(c, http.StatusOK, views.ErrorGroupsView(v), views.ErrorGroupsContent(v))
}

// ownedGroupRow is a group as the list and the overview show it.
func ownedGroupRow(g broker.OwnedErrorGroup) views.OwnedGroupRow {
	r := views.OwnedGroupRow{GroupState: groupState(g.State, g.Regressed), ID: g.ID, URL: errorGroupURL(g.ID), Queue: g.Queue, QueueURL: queueURL(g.Queue),
		Group: g.Group, Fingerprint: g.Fingerprint, Sample: views.FirstLine(g.SampleError, 160), DeadLetters: g.DeadLetters, FiledDay: g.Day.Filed,
		Owner: g.Owner, NoteLine: views.FirstLine(g.Note, 120), Link: views.SafeLink(g.Link), LastSeen: g.LastFiledAt}
	if r.Sample == "" {
		r.Sample = views.Cut(g.Fingerprint, 160)
	}
	if g.State == broker.GroupIgnored {
		r.IgnoreEnd = views.IgnoreEnd(g.UntilAt, g.UntilFiled, g.Life.Filed)
	}
	return r
}

func groupState(st broker.ErrorGroupState, regressed bool) views.GroupState {
	return views.GroupState{State: string(st), Regressed: regressed}
}

// pathGroupID reads the :id of a group's page: a 404 when it names none.
func pathGroupID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, &apiError{status: http.StatusNotFound, message: "no such error group"}
	}
	return id, nil
}

// showErrorGroupPage renders a group's page.
func (s *Server) showErrorGroupPage(c echo.Context) error {
	id, err := pathGroupID(c)
	if err != nil {
		return err
	}
	v, err := s.errorGroupPage(c, id)
	if err != nil {
		return err
	}
	if !isFragment(c) {
		if v.Page.Flash, _, err = s.takeFlash(c); err != nil {
			return err
		}
	}
	return renderPage(c, http.StatusOK, views.ErrorGroupView(v), views.ErrorGroupContent(v))
}

// errorGroupPage reads group id into its page.
func (s *Server) errorGroupPage(c echo.Context, id int64) (views.ErrorGroupDetail, error) {
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	g, history, err := s.errorGroup(ctx, id)
	if err != nil {
		return views.ErrorGroupDetail{}, err
	}
	vs := s.viewSession(c)
	dl := deadLettersURL(g.Queue, url.Values{"group": {g.Group}, "fingerprint": {g.Fingerprint}})
	v := views.ErrorGroupDetail{
		Page: s.page(c, "Error group of "+g.Queue, "groups", views.Crumb{Label: "Overview", URL: "/"}, views.Crumb{Label: "Error groups", URL: errorGroupsURL(nil)},
			views.Crumb{Label: views.Cut(views.FirstLine(g.Fingerprint, 60), 60)}),
		GroupState: groupState(g.State, g.Regressed), ID: g.ID, Queue: g.Queue, QueueURL: queueURL(g.Queue), Group: g.Group,
		Fingerprint: g.Fingerprint, Sample: g.SampleError, Owner: g.Owner, Note: g.Note, Link: views.SafeLink(g.Link), LinkRaw: g.Link,
		Version: g.Version, ChangedAt: g.ChangedAt, ChangedBy: g.ChangedBy, DeadLetters: g.DeadLetters, FirstSeen: g.FirstFiledAt, LastSeen: g.LastFiledAt,
		DeadLettersURL: dl, SelfURL: errorGroupURL(g.ID),
	}
	if g.State == broker.GroupIgnored {
		v.IgnoreEnd = views.IgnoreEnd(g.UntilAt, g.UntilFiled, g.Life.Filed)
	}
	v.Funnel = funnelRows(g)
	replayed, succeeded, failed, pending := g.Evidence()
	v.Evidence = views.Evidence{Replayed: replayed, Succeeded: succeeded, FailedAgain: failed, Pending: pending, Since: g.ChangedAt}
	for _, ver := range g.Versions {
		v.Versions = append(v.Versions, views.GroupVersion{Version: ver.Version, Filed: ver.Filed, FirstSeen: ver.FirstSeen, LastSeen: ver.LastSeen})
	}
	values := make([]float64, len(g.Trend))
	for i, n := range g.Trend {
		values[i], v.TrendTotal = float64(n), v.TrendTotal+n
	}
	v.Trend = views.MakeSparkline(values, views.Plural(v.TrendTotal, "dead letter", "dead letters")+" filed in the last 24 hours, by hour")
	for _, h := range history {
		// From resolved to open is a regression: marked so.
		to := groupState(h.To, h.From == broker.GroupResolved && h.To == broker.GroupOpen)
		v.History = append(v.History, views.GroupChange{At: h.At, Actor: h.Actor, From: groupState(h.From, false), To: to, Why: h.Why})
	}
	v.Holds = holdsOfGroup(s.queueHolds(ctx, c, g.Queue), g.Group)
	if vs.CanOperate {
		v.PostURL, v.CSRFToken, v.Me = v.SelfURL+"/state", vs.CSRFToken, vs.User
		act := url.Values{"group": {g.Group}, "fingerprint": {g.Fingerprint}}
		v.ReplayURL = deadLettersURL(g.Queue, nil) + "/confirm?action=replay&all=1&canary=1&" + act.Encode()
		v.HoldForm = s.holdForm(c, g.Queue, v.SelfURL, []string{g.Group})
		v.Hold = views.HoldTarget{Queue: g.Queue, Group: g.Group, Reason: "error group: " + views.FirstLine(g.Fingerprint, 200)}
	}
	return v, nil
}

// funnelRows are a group's funnel, line by line.
func funnelRows(g broker.OwnedErrorGroup) []views.FunnelRow {
	row := func(key, label, help string, pick func(broker.Funnel) int64) views.FunnelRow {
		return views.FunnelRow{Key: key, Label: label, Help: help, Life: pick(g.Life), Day: pick(g.Day), Week: pick(g.Week)}
	}
	return []views.FunnelRow{
		row("filed", "Filed", "Dead letters filed into the group", func(f broker.Funnel) int64 { return f.Filed }),
		row("replayed", "Replayed", "Of its dead letters, replayed (each once)", func(f broker.Funnel) int64 { return f.Replayed }),
		row("succeeded", "Succeeded", "Replayed copies that then completed", func(f broker.Funnel) int64 { return f.Succeeded }),
		row("failed-again", "Failed again", "Replayed copies that were dead-lettered again", func(f broker.Funnel) int64 { return f.FailedAgain }),
		{Key: "pending", Label: "Pending", Help: "Replayed copies not settled yet", Life: g.Life.Pending(), LifeOnly: true},
		row("deleted", "Deleted", "Dead letters deleted (less those restored)", func(f broker.Funnel) int64 { return f.Deleted }),
		row("expired", "Expired", "Dead letters removed by the queue's retention", func(f broker.Funnel) int64 { return f.Expired }),
	}
}

// stateForm is a group page's state form, as posted: Owner, Note, Link
// and Version nil when the form has no such field (the group keeps
// what it has).
type stateForm struct {
	State                  string
	Owner, Note, Link      *string
	Version                *string
	For, Until, UntilCount string
	Force                  bool
}

// readStateForm reads a state form.
func readStateForm(c echo.Context) (stateForm, error) {
	form, err := c.FormParams()
	if err != nil {
		return stateForm{}, badRequest("the form could not be read")
	}
	field := func(k string) *string {
		if !form.Has(k) {
			return nil
		}
		v := strings.TrimSpace(form.Get(k))
		return &v
	}
	f := stateForm{State: form.Get("state"), Owner: field("owner"), Note: field("note"), Link: field("link"), Version: field("version"),
		For: form.Get("for"), Until: strings.TrimSpace(form.Get("until")), UntilCount: strings.TrimSpace(form.Get("untilCount"))}
	if f.Force, err = formForce(form.Get("force")); err != nil {
		return f, badRequest("force must be on or left out")
	}
	return f, nil
}

// setErrorGroupStatePage answers POST /error-groups/:id/state: the state
// a form of the group's page sends, with its owner, note, link, version
// or ignore's end; back to the page with what was done. A refused
// resolve renders the page with 409, saying why and offering Force.
func (s *Server) setErrorGroupStatePage(c echo.Context) error {
	id, err := pathGroupID(c)
	if err != nil {
		return err
	}
	if _, _, err := s.errorGroup(c.Request().Context(), id); err != nil {
		return err // out of the visitor's queue scope: as if absent
	}
	f, err := readStateForm(c)
	if err != nil {
		return err
	}
	change, err := s.stateChangeOf(c, id, f)
	if err != nil {
		return err
	}
	// What the resolve is judged by, for its message: the group as it
	// was (the answer's is as it is after: its evidence starts over).
	var before broker.OwnedErrorGroup
	if change.State == broker.GroupResolved {
		if before, _, err = s.errorGroup(c.Request().Context(), id); err != nil {
			return err
		}
	}
	gs, err := s.broker.SetErrorGroupState(c.Request().Context(), change)
	if errors.Is(err, broker.ErrConflict) {
		v, rerr := s.errorGroupPage(c, id)
		if rerr != nil {
			return rerr
		}
		_, msg, _ := statusOf(err)
		// The page offers its own button for force: the API's advice
		// on it is left out.
		v.Refused = upperFirst(strings.TrimSuffix(msg, "; resolve with force to resolve anyway")) + "."
		if f.Note != nil {
			v.RefusedNote = *f.Note
		}
		if f.Version != nil {
			v.RefusedVersion = *f.Version
		}
		return renderPage(c, http.StatusConflict, views.ErrorGroupView(v), views.ErrorGroupContent(v))
	}
	if err != nil {
		return err
	}
	text := "Saved."
	if len(gs) > 0 {
		text = stateDone(gs[0], before)
	}
	if err := s.setFlash(c, views.Flash{Kind: "ok", Text: text}, ""); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, errorGroupURL(id))
}

// stateChangeOf reads a state form into the broker's change: an ignore's
// end from the choice (for: time, count, ever, or keep: the end it has,
// when only its note changes), Acknowledge's owner defaulting to the
// signed-in user.
func (s *Server) stateChangeOf(c echo.Context, id int64, f stateForm) (broker.StateChange, error) {
	state, err := parseGroupState(f.State, true)
	if err != nil {
		return broker.StateChange{}, err
	}
	ch := broker.StateChange{ID: id, State: state, Owner: f.Owner, Note: f.Note, Link: f.Link, Version: f.Version, Force: f.Force, Actor: s.pageActor(c)}
	if state == broker.GroupAcknowledged && (ch.Owner == nil || *ch.Owner == "") {
		me := s.viewSession(c).User
		ch.Owner = &me
	}
	if state != broker.GroupResolved && ch.Version != nil && *ch.Version == "" {
		ch.Version = nil // the resolve form's empty field on another state
	}
	if state != broker.GroupIgnored {
		return ch, nil
	}
	switch f.For {
	case "time":
		if f.Until == "" {
			return ch, badRequest("say until when to ignore it: a date and time (UTC)")
		}
		if ch.Until, err = parseFormTime("until", f.Until); err != nil {
			return ch, err
		}
	case "count":
		n, err := strconv.ParseInt(f.UntilCount, 10, 64)
		if err != nil || n < 1 {
			return ch, badRequest("say how many more dead letters end the ignore: a whole number from 1")
		}
		ch.UntilCount = n
	case "keep":
		g, _, err := s.errorGroup(c.Request().Context(), id)
		if err != nil {
			return ch, err
		}
		if g.State == broker.GroupIgnored {
			ch.Until = g.UntilAt
			if g.UntilFiled > 0 {
				ch.UntilCount = max(g.UntilFiled-g.Life.Filed, 1)
			}
		}
	case "", "ever":
	default:
		return ch, badRequest("ignore until a time, a count of dead letters, or for ever")
	}
	return ch, nil
}

// stateDone says what a state change did: g as it is after, before as
// it was (read for a resolve only: its evidence).
func stateDone(g, before broker.OwnedErrorGroup) string {
	switch g.State {
	case broker.GroupAcknowledged:
		return "Acknowledged: owner " + g.Owner + "."
	case broker.GroupResolved:
		r, ok, failed, pending := before.Evidence()
		return fmt.Sprintf("Resolved (%d replayed, %d succeeded, %d failed again, %d pending): a new dead letter opens it again, regressed.", r, ok, failed, pending)
	case broker.GroupIgnored:
		return "Ignored " + views.IgnoreEnd(g.UntilAt, g.UntilFiled, g.Life.Filed) + "."
	}
	return "Open."
}
