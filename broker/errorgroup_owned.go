package broker

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// AuditErrorGroup is the action of an error group's change of state, a
// person's or the broker's (a regression, an ignore's end).
const AuditErrorGroup = "error_group"

// The events of error groups.
const (
	// EventErrorGroupNew: the first dead letter of an error group was filed.
	EventErrorGroupNew = "error_group.new"
	// EventErrorGroupRegressed: a resolved error group opened again.
	EventErrorGroupRegressed = "error_group.regressed"
)

// settleInErrorGroup counts a replayed copy's outcome in the funnel of
// the error group id (0: none), and opens the group again, regressed,
// when the copy failed again after the group was resolved.
func settleInErrorGroup(ctx context.Context, tx errorGroupAuditTx, id int64, ok bool, now time.Time, raise func(Event) error) error {
	if id == 0 {
		return nil
	}
	d := Funnel{Succeeded: 1}
	if !ok {
		d = Funnel{FailedAgain: 1}
	}
	m, err := tx.AddErrorGroupFunnel(ctx, ErrorGroupKey{ID: id}, d, now)
	if err != nil || m.ID == 0 || ok || m.State != GroupResolved {
		return err
	}
	return reopenIfEnded(ctx, tx, m, now, "a replayed copy of one of its dead letters failed again after it was resolved", raise)
}

// reopenIfEnded opens the group m is of again, by itself, when its state
// has ended: a resolve (why says how it regressed), or an ignore whose
// time has come or whose count of dead letters is reached.
func reopenIfEnded(ctx context.Context, tx errorGroupAuditTx, m ErrorGroupMark, now time.Time, why string, raise func(Event) error) error {
	switch {
	case m.State == GroupResolved:
	case m.State == GroupIgnored && m.UntilFiled > 0 && m.Filed >= m.UntilFiled:
		why = "its ignore ended: the dead letters it waited for were filed"
	case m.State == GroupIgnored && !m.UntilAt.IsZero() && !now.Before(m.UntilAt):
		why = "its ignore ended at " + m.UntilAt.UTC().Format(time.RFC3339)
	default:
		return nil
	}
	gs, err := tx.ErrorGroupStates(ctx, ErrorGroupQuery{ID: m.ID})
	if err != nil || len(gs) == 0 {
		return err
	}
	g := gs[0]
	from := g.State
	g.State, g.Regressed = GroupOpen, g.Regressed || from == GroupResolved
	g.UntilAt, g.UntilFiled = time.Time{}, 0
	if err := tx.SetErrorGroupState(ctx, g, ErrorGroupChange{At: now, Actor: ErrorGroupSystemActor, From: from, To: GroupOpen, Why: why}); err != nil {
		return err
	}
	if err := audit(ctx, tx, now, ErrorGroupSystemActor, AuditErrorGroup, g.Queue, g.Group, 1,
		fmt.Sprintf("%s → open: %s (%s)", from, why, truncate(g.Fingerprint, 120))); err != nil {
		return err
	}
	if from != GroupResolved {
		return nil
	}
	return raise(Event{Kind: EventErrorGroupRegressed, Queue: g.Queue, Group: g.Group, ErrorGroupID: g.ID, Fingerprint: g.Fingerprint,
		Detail: why, At: now})
}

// ErrorGroupList returns up to f.Limit error groups across queues that
// f selects, open ones first (regressed first among them), then
// acknowledged, resolved and ignored, each newest filed first; with
// their Life, Day and Week funnels and their versions. An unknown queue or consumer group
// selects none.
func (b *Broker) ErrorGroupList(ctx context.Context, f ErrorGroupFilter) ([]OwnedErrorGroup, error) {
	if f.Limit < 1 || f.Limit > MaxErrorGroups {
		return nil, errorf(ErrInvalid, "limit must be between 1 and %d", MaxErrorGroups)
	}
	if f.State != "" && !validState(f.State) {
		return nil, errorf(ErrInvalid, "state must be one of open, acknowledged, resolved, ignored")
	}
	var out []OwnedErrorGroup
	err := b.store.View(ctx, func(tx Tx) error {
		q := ErrorGroupQuery{State: f.State, Owner: f.Owner, Version: f.Version, Limit: f.Limit}
		if f.Queue != "" && !f.Scope.Allows(f.Queue) {
			return nil
		}
		if f.Queue == "" {
			ids, all, err := scopeQueueIDs(ctx, tx, f.Scope)
			if err != nil || (!all && len(ids) == 0) {
				return err
			}
			q.QueueIDs = ids
		}
		if f.Queue != "" {
			qq, err := tx.QueueByName(ctx, f.Queue)
			if isNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
			q.QueueID = qq.ID
		}
		if f.Group != "" {
			gid, err := tx.GroupID(ctx, f.Group, false)
			if isNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
			q.GroupID = gid
		}
		gs, err := tx.ErrorGroupStates(ctx, q)
		if err != nil {
			return fmt.Errorf("error groups: %w", err)
		}
		if err := errorGroupWindows(ctx, tx, gs, b.now(), f.DayOnly); err != nil {
			return fmt.Errorf("error groups' funnels: %w", err)
		}
		if err := tx.FillErrorGroupVersions(ctx, gs); err != nil {
			return fmt.Errorf("error groups' versions: %w", err)
		}
		out = gs
		return nil
	})
	return out, err
}

// ErrorGroup returns the error group id names, with its funnels,
// versions, trend, and its history (newest first, at most
// MaxErrorGroupHistory). Unknown: ErrNotFound.
func (b *Broker) ErrorGroup(ctx context.Context, id int64) (OwnedErrorGroup, []ErrorGroupChange, error) {
	var g OwnedErrorGroup
	var h []ErrorGroupChange
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		g, h, err = b.errorGroupDetail(ctx, tx, ErrorGroupQuery{ID: id})
		return err
	})
	return g, h, err
}

// ErrorGroupByKey is ErrorGroup for a queue, consumer group and
// fingerprint. With group "", the queue's one consumer group that has
// the fingerprint; when several have it, ErrInvalid names them.
func (b *Broker) ErrorGroupByKey(ctx context.Context, queue, group, fingerprint string) (OwnedErrorGroup, []ErrorGroupChange, error) {
	var g OwnedErrorGroup
	var h []ErrorGroupChange
	err := b.store.View(ctx, func(tx Tx) error {
		id, err := errorGroupID(ctx, tx, queue, group, fingerprint)
		if err != nil {
			return err
		}
		g, h, err = b.errorGroupDetail(ctx, tx, ErrorGroupQuery{ID: id})
		return err
	})
	return g, h, err
}

// errorGroupQueueSubscriptionTx is a transaction for ErrorGroupStateTx,
// QueueTx and SubscriptionTx.
type errorGroupQueueSubscriptionTx interface {
	ErrorGroupStateTx
	QueueTx
	SubscriptionTx
}

// errorGroupID returns the id of the error group of a queue's
// fingerprint: in group, or (group "") in the one consumer group that
// has it; several is ErrInvalid, none ErrNotFound.
func errorGroupID(ctx context.Context, tx errorGroupQueueSubscriptionTx, queue, group, fingerprint string) (int64, error) {
	gs, err := errorGroupsOfKey(ctx, tx, queue, group, fingerprint)
	if err != nil {
		return 0, err
	}
	if len(gs) > 1 {
		names := make([]string, len(gs))
		for i, g := range gs {
			names[i] = g.Group
		}
		return 0, errorf(ErrInvalid, "consumer groups %s have this error group: name one (consumerGroup)", strings.Join(names, ", "))
	}
	return gs[0].ID, nil
}

// errorGroupsOfKey returns the error groups of a queue's fingerprint, in
// group or (group "") in each consumer group that has it; none is
// ErrNotFound.
func errorGroupsOfKey(ctx context.Context, tx errorGroupQueueSubscriptionTx, queue, group, fingerprint string) ([]OwnedErrorGroup, error) {
	if fingerprint == "" {
		return nil, errorf(ErrInvalid, "an error group's fingerprint is required")
	}
	q, err := queueNamed(ctx, tx, queue)
	if err != nil {
		return nil, err
	}
	var gid int64
	if group != "" {
		if gid, err = tx.GroupID(ctx, group, false); isNotFound(err) {
			return nil, errorf(ErrNotFound, "consumer group %q has no error groups", group)
		} else if err != nil {
			return nil, err
		}
	}
	gs, err := tx.ErrorGroupStates(ctx, ErrorGroupQuery{QueueID: q.ID, GroupID: gid, Fingerprint: fingerprint, Limit: MaxErrorGroups})
	if err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		return nil, errorf(ErrNotFound, "queue %q has no such error group", queue)
	}
	return gs, nil
}

// errorGroupWindows fills the Day and Week funnels of gs: the 24 and
// 168 hours up to the one now is in; with dayOnly, the Day funnels only
// (24 hourly rows a group read, not 168).
func errorGroupWindows(ctx context.Context, tx ErrorGroupStateTx, gs []OwnedErrorGroup, now time.Time, dayOnly bool) error {
	h := hourOf(now)
	if !dayOnly {
		return tx.ErrorGroupWindows(ctx, gs, h-23, h-7*24+1)
	}
	if err := tx.ErrorGroupWindows(ctx, gs, h-23, h-23); err != nil {
		return err
	}
	for i := range gs {
		gs[i].Week = Funnel{}
	}
	return nil
}

// errorGroupDetailTx is a transaction for ErrorGroupStateTx and GroupTx.
type errorGroupDetailTx interface {
	ErrorGroupStateTx
	GroupTx
}

// errorGroupDetail reads one group with its funnels, trend and history.
func (b *Broker) errorGroupDetail(ctx context.Context, tx errorGroupDetailTx, q ErrorGroupQuery) (OwnedErrorGroup, []ErrorGroupChange, error) {
	gs, err := tx.ErrorGroupStates(ctx, q)
	if err != nil {
		return OwnedErrorGroup{}, nil, err
	}
	if len(gs) == 0 {
		return OwnedErrorGroup{}, nil, errorf(ErrNotFound, "no such error group")
	}
	if err := errorGroupWindows(ctx, tx, gs, b.now(), false); err != nil {
		return OwnedErrorGroup{}, nil, fmt.Errorf("error group funnel: %w", err)
	}
	now := hourOf(b.now())
	g := gs[0]
	g.Trend = make([]int64, TrendHours)
	hours, err := tx.ErrorGroupHours(ctx, g.QueueID, g.GroupID, []string{g.Fingerprint}, now-TrendHours+1)
	if err != nil {
		return OwnedErrorGroup{}, nil, fmt.Errorf("error group trend: %w", err)
	}
	for _, h := range hours {
		if i := h.Hour - (now - TrendHours + 1); i >= 0 && i < TrendHours {
			g.Trend[i] += h.Filed
		}
	}
	if g.Versions, err = tx.ErrorGroupVersions(ctx, g.QueueID, g.GroupID, g.Fingerprint); err != nil {
		return OwnedErrorGroup{}, nil, fmt.Errorf("error group versions: %w", err)
	}
	h, err := tx.ErrorGroupHistory(ctx, g.ID, MaxErrorGroupHistory)
	if err != nil {
		return OwnedErrorGroup{}, nil, fmt.Errorf("error group history: %w", err)
	}
	return g, h, nil
}

// SetErrorGroupState changes the state of the error groups c names (c.ID,
// or c.Queue, c.Group and c.Fingerprint: with c.Group "", in every
// consumer group of the queue that has it), audited and kept in each
// one's history, and returns them as they are after. A resolve while
// copies are pending or failed again since the state began is ErrConflict
// unless c.Force. Bad input is ErrInvalid and changes nothing.
func (b *Broker) SetErrorGroupState(ctx context.Context, c StateChange) ([]OwnedErrorGroup, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var out []OwnedErrorGroup
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		out = nil
		var gs []OwnedErrorGroup
		var err error
		if c.ID != 0 {
			if gs, err = tx.ErrorGroupStates(ctx, ErrorGroupQuery{ID: c.ID}); err == nil && len(gs) == 0 {
				err = errorf(ErrNotFound, "no such error group")
			}
		} else {
			gs, err = errorGroupsOfKey(ctx, tx, c.Queue, c.Group, c.Fingerprint)
		}
		if err != nil {
			return err
		}
		now := b.now()
		for _, g := range gs {
			changed, why, err := c.apply(g, now)
			if err != nil {
				return err
			}
			if why == "" {
				out = append(out, g) // an edit that changes nothing
				continue
			}
			if err := tx.SetErrorGroupState(ctx, changed, ErrorGroupChange{At: now, Actor: c.Actor, From: g.State, To: changed.State, Why: why}); err != nil {
				return err
			}
			if err := audit(ctx, tx, now, c.Actor, AuditErrorGroup, g.Queue, g.Group, 1,
				fmt.Sprintf("%s → %s: %s (%s)", g.State, changed.State, why, truncate(g.Fingerprint, 120))); err != nil {
				return err
			}
			touched(g.Queue)
			if changed.State != g.State {
				changed.ChangedAt, changed.ChangedBy, changed.Since = now, c.Actor, changed.Life
			}
			out = append(out, changed)
		}
		return nil
	})
	return out, err
}

// check refuses a change that no group could take.
func (c StateChange) check() error {
	if !validState(c.State) {
		return errorf(ErrInvalid, "state must be one of open, acknowledged, resolved, ignored")
	}
	if c.ID == 0 && (c.Queue == "" || c.Fingerprint == "") {
		return errorf(ErrInvalid, "queue and the error group's fingerprint are required")
	}
	for _, f := range []struct {
		name string
		v    *string
		max  int
	}{{"owner", c.Owner, MaxGroupOwner}, {"note", c.Note, MaxGroupNote}, {"link", c.Link, MaxGroupLink}, {"version", c.Version, MaxConsumerVersion}} {
		if f.v == nil {
			continue
		}
		if len(*f.v) > f.max {
			return errorf(ErrInvalid, "%s is longer than %d bytes", f.name, f.max)
		}
		if err := checkText(f.name, *f.v, f.name == "note"); err != nil {
			return err
		}
	}
	if c.Link != nil && *c.Link != "" {
		if err := CheckLink(*c.Link); err != nil {
			return err
		}
	}
	if c.State != GroupIgnored && (!c.Until.IsZero() || c.UntilCount != 0) {
		return errorf(ErrInvalid, "until and untilCount are for the ignored state only")
	}
	if c.UntilCount < 0 || c.UntilCount > MaxUntilCount {
		return errorf(ErrInvalid, "untilCount must be between 1 and %d", MaxUntilCount)
	}
	if c.Version != nil && *c.Version != "" && c.State != GroupResolved {
		return errorf(ErrInvalid, "version (the consumer version with the fix) is for the resolved state only")
	}
	if c.Actor == "" {
		return errorf(ErrInvalid, "a change of state needs its actor")
	}
	return nil
}

// checkText refuses text that is not UTF-8 or holds control characters
// (a note may hold line breaks and tabs) or the controls of bidirectional
// text (which could make a name or version read as another).
func checkText(name, s string, lines bool) error {
	if !utf8.ValidString(s) {
		return errorf(ErrInvalid, "%s is not valid UTF-8", name)
	}
	for _, r := range s {
		if (unicode.IsControl(r) && !(lines && (r == '\n' || r == '\r' || r == '\t'))) || unicode.Is(unicode.Bidi_Control, r) {
			return errorf(ErrInvalid, "%s holds a control character (%U)", name, r)
		}
	}
	return nil
}

// CheckLink refuses a link that is not an absolute http or https URL
// with a host: an error group's link becomes a link in pages.
func CheckLink(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return errorf(ErrInvalid, "link must be an http or https URL")
	}
	return nil
}

func validState(s ErrorGroupState) bool {
	for _, v := range ErrorGroupStates {
		if s == v {
			return true
		}
	}
	return false
}

// apply returns g changed as c says at now, and the why of its history,
// or ErrConflict (a resolve refused) or ErrInvalid (an ignore's end
// already past). A change to the state the group is in is an edit of
// what goes with it (owner, note, link, version, an ignore's end): it
// keeps the regressed mark, the evidence's start and, for an ignore, its
// end unless a new one is given; an edit that changes nothing has no
// why (nothing is written).
func (c StateChange) apply(g OwnedErrorGroup, now time.Time) (OwnedErrorGroup, string, error) {
	var why []string
	set := func(name string, dst *string, v *string) {
		if v != nil && *v != *dst {
			*dst = *v
			if *v == "" {
				why = append(why, name+" cleared")
			} else {
				why = append(why, name+" set")
			}
		}
	}
	edit := c.State == g.State
	to := g
	if !edit {
		to.State, to.Regressed = c.State, false
		to.UntilAt, to.UntilFiled = time.Time{}, 0
		if c.State != GroupResolved {
			to.Version = ""
		}
	}
	set("owner", &to.Owner, c.Owner)
	if c.State == GroupAcknowledged && to.Owner == "" {
		to.Owner = c.Actor
		why = append(why, "owner "+c.Actor)
	}
	set("note", &to.Note, c.Note)
	set("link", &to.Link, c.Link)
	set("version", &to.Version, c.Version)
	switch c.State {
	case GroupResolved:
		if edit {
			break
		}
		replayed, succeeded, failedAgain, pending := g.Evidence()
		evidence := fmt.Sprintf("%d replayed, %d succeeded, %d failed again, %d pending", replayed, succeeded, failedAgain, pending)
		if (pending > 0 || failedAgain > 0) && !c.Force {
			return g, "", errorf(ErrConflict, "not resolved: %s since it was %s; resolve with force to resolve anyway", evidence, sinceWhat(g))
		}
		why = append([]string{"evidence: " + evidence}, why...)
		if c.Force && (pending > 0 || failedAgain > 0) {
			why = append(why, "forced")
		}
	case GroupIgnored:
		if !c.Until.IsZero() || c.UntilCount > 0 {
			to.UntilAt, to.UntilFiled = time.Time{}, 0
		}
		if !c.Until.IsZero() {
			if !c.Until.After(now) {
				return g, "", errorf(ErrInvalid, "until must be in the future")
			}
			to.UntilAt = c.Until.UTC()
			why = append(why, "until "+to.UntilAt.Format(time.RFC3339))
		}
		if c.UntilCount > 0 {
			to.UntilFiled = g.Life.Filed + c.UntilCount
			why = append(why, fmt.Sprintf("until %d more dead letters", c.UntilCount))
		}
		if !edit && c.Until.IsZero() && c.UntilCount == 0 {
			why = append(why, "for ever")
		}
	}
	if len(why) == 0 && !edit {
		why = append(why, "state set")
	}
	return to, strings.Join(why, "; "), nil
}

// sinceWhat says since when a group's evidence counts.
func sinceWhat(g OwnedErrorGroup) string {
	if g.ChangedAt.IsZero() {
		return "first filed"
	}
	return string(g.State) + " at " + g.ChangedAt.UTC().Format(time.RFC3339)
}

// ErrorGroupCounts returns, per queue with any, how many of its error
// groups are open and regressed, by queue name.
func (b *Broker) ErrorGroupCounts(ctx context.Context) ([]ErrorGroupCount, error) {
	var out []ErrorGroupCount
	err := b.store.View(ctx, func(tx Tx) error {
		counts, err := tx.ErrorGroupCounts(ctx)
		if err != nil || len(counts) == 0 {
			return err
		}
		qs, err := tx.Queues(ctx)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if n, ok := counts[q.ID]; ok {
				out = append(out, ErrorGroupCount{Queue: q.Name, Open: n[0], Regressed: n[1]})
			}
		}
		return nil
	})
	return out, err
}

// endIgnores opens the ignored groups whose time has come, up to limit
// in one background transaction (a maintenance write); it reports how
// many.
func (b *Broker) endIgnores(ctx context.Context, limit int) (int, error) {
	n := 0
	err := b.updateWith(ctx, background, func(tx Tx, _ UpdateOptions, touched func(string)) error {
		n = 0
		now := b.now()
		ids, err := tx.IgnoresEnded(ctx, now, limit)
		if err != nil {
			return err
		}
		for _, id := range ids {
			gs, err := tx.ErrorGroupStates(ctx, ErrorGroupQuery{ID: id})
			if err != nil || len(gs) == 0 {
				return err
			}
			g := gs[0]
			m := ErrorGroupMark{ID: g.ID, State: g.State, Regressed: g.Regressed, Filed: g.Life.Filed, UntilAt: g.UntilAt, UntilFiled: g.UntilFiled}
			if err := reopenIfEnded(ctx, tx, m, now, "", b.raiser(ctx, tx)); err != nil {
				return err
			}
			touched(g.Queue)
			n++
		}
		return nil
	})
	return n, err
}
