package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// A dead letter's history on its page, and the page of a dead letter that
// is gone: a 404 that says what happened to it.

// jobLink is a job's page; "" for no job (a single replay or delete).
func jobLink(id int64) string {
	if id == 0 {
		return ""
	}
	return "/jobs/" + strconv.FormatInt(id, 10)
}

// historyOf makes the History section of h, of queue's pages. live: the
// page of a live dead letter (whose error, the last attempt's, it shows).
func historyOf(queue string, h broker.DeadLetterHistory, live bool) views.History {
	v := views.History{Group: h.Group, AttemptsLeftOut: h.AttemptsLeftOut, LineageCut: h.LineageCut, Live: live}
	for _, a := range h.Attempts {
		r := views.AttemptRow{N: a.Attempt, At: a.At, First: views.FirstLine(a.Error, 200), Version: a.ConsumerVersion}
		if r.First != a.Error {
			r.Full = a.Error
		}
		if a.ErrorBytes > len(a.Error) {
			r.Cut = views.ErrorCut(len(a.Error), a.ErrorBytes)
		}
		if a.WaitKnown {
			r.Wait = views.Wait(a.Wait)
		}
		v.Attempts = append(v.Attempts, r)
	}
	for _, hop := range h.ReplayOf {
		r := views.HopRow{CopyID: hop.CopyID, OriginalID: hop.OriginalID, Actor: hop.Actor, At: hop.At, JobID: hop.JobID, JobURL: jobLink(hop.JobID), Group: hop.Group, Edited: hop.Edited}
		if hop.OriginalID != "" {
			// The original's page: its dead letter, or what became of it.
			r.OriginalURL = deadLetterURL(hop.Queue, hop.OriginalID, hop.Group)
		}
		v.ReplayOf = append(v.ReplayOf, r)
	}
	for _, c := range h.Replays {
		r := views.CopyRow{CopyID: c.CopyID, CopyURL: searchURL(c.CopyID), Actor: c.Actor, At: c.At, JobID: c.JobID, JobURL: jobLink(c.JobID), Mode: modeWords(c), Edited: c.Edited}
		for _, o := range c.Outcomes {
			r.Outcomes = append(r.Outcomes, outcomeRow(queue, c, o))
		}
		v.Replays = append(v.Replays, r)
	}
	v.TraceLimit = broker.MaxTracesPerMessage
	for _, t := range h.Traces {
		r := views.TraceRow{At: t.At, Group: t.Group, EventType: t.EventType, Names: strings.Join(t.Names, ", "), Data: t.Data, Dropped: t.Dropped}
		if t.Cut() {
			r.Cut = views.ErrorCut(len(t.Data), t.DataBytes)
		}
		v.Traces = append(v.Traces, r)
	}
	return v
}

// modeWords says a copy's replay mode: "every group" or "billing only".
func modeWords(c broker.ReplayCopy) string {
	if c.Mode() == broker.ReplayOwnGroup {
		return c.Group + " only"
	}
	return "every group"
}

// outcomeRow says how a copy ended in a group, linked to its dead letter
// when it failed again and is one.
func outcomeRow(queue string, c broker.ReplayCopy, o broker.CopyOutcome) views.OutcomeRow {
	r := views.OutcomeRow{Group: o.Group, Outcome: o.OutcomeName(), At: o.SettledAt}
	switch o.Outcome {
	case broker.CopySucceeded:
		r.Text = "completed in " + o.Group
	case broker.CopyFailed:
		r.Text = "failed again in " + o.Group
		if o.DeadLetter {
			r.URL = deadLetterURL(queue, c.CopyID, o.Group)
		}
	case broker.CopyExpired:
		r.Text = "removed by retention before " + o.Group + " settled it"
	default:
		r.Text = "pending in " + o.Group
	}
	return r
}

// showGone renders the page of a dead letter that is no longer one, with
// status 404: what became of it in each group (replayed as which copy and
// how that went, or deleted and whether it can still be restored), or
// that the message never was one.
func (s *Server) showGone(c echo.Context, queue, id, group string, h broker.DeadLetterHistory) error {
	v := views.DeadLetterGone{
		Page: s.page(c, "Dead letter "+views.ShortID(id), "overview",
			views.Crumb{Label: "Overview", URL: "/"}, views.Crumb{Label: queue, URL: queueURL(queue)},
			views.Crumb{Label: "Dead letters", URL: deadLettersURL(queue, nil)}, views.Crumb{Label: views.ShortID(id)}),
		ID: id, Queue: queue, QueueURL: queueURL(queue), ListURL: deadLettersURL(queue, nil),
		Group: group, Partition: h.Message.Partition, TxID: h.Message.TransactionID,
		History: historyOf(queue, h, false), MessageRemoved: h.Message.Removed,
	}
	canOperate := v.Session.CanOperate
	for _, f := range goneFates(h, group) {
		v.Fates = append(v.Fates, fateRow(queue, id, f, canOperate, v.Now))
	}
	v.Never = len(v.Fates) == 0
	v.SelfURL = deadLetterURL(queue, id, group)
	// The copies the fates name are said there: the history lists the
	// others (replays for other groups).
	var others []views.CopyRow
	for _, r := range v.History.Replays {
		if !slices.ContainsFunc(v.Fates, func(f views.FateRow) bool { return f.CopyID == r.CopyID }) {
			others = append(others, r)
		}
	}
	v.History.Replays = others
	for _, d := range h.DeadLetters {
		v.Live = append(v.Live, views.LinkRow{Label: d.Group, URL: deadLetterURL(queue, id, d.Group)})
	}
	// Its 404 is a page of Lazarus's, which the page of a dead letter
	// that was just replayed or deleted swaps in (static/app.js).
	c.Response().Header().Set(lazarusPageHeader, "gone")
	return renderPage(c, http.StatusNotFound, views.DeadLetterGoneView(v), views.DeadLetterGoneContent(v))
}

// goneFates are the fates the page of group's dead letter tells: that
// group's, or with no group every group's.
func goneFates(h broker.DeadLetterHistory, group string) []broker.Fate {
	if group == "" {
		return h.Fates
	}
	if h.GroupID == 0 {
		return nil
	}
	if f, ok := h.Fate(h.GroupID); ok {
		return []broker.Fate{f}
	}
	return nil
}

// fateRow says what became of the dead letter in one group; an operator
// gets the Restore button while it can be restored.
func fateRow(queue, id string, f broker.Fate, canOperate bool, now time.Time) views.FateRow {
	r := views.FateRow{How: f.How, Group: f.Group, Actor: f.Actor, At: f.At, JobID: f.JobID, JobURL: jobLink(f.JobID)}
	switch {
	case f.Copy != nil:
		r.CopyID, r.CopyURL, r.Mode = f.Copy.CopyID, searchURL(f.Copy.CopyID), modeWords(*f.Copy)
		if o, ok := f.Copy.Outcome(f.GroupID); ok {
			or := outcomeRow(queue, *f.Copy, o)
			r.Outcome, r.OutcomeText, r.OutcomeAt, r.OutcomeURL = or.Outcome, or.Text, or.At, or.URL
		}
	case f.How == broker.FateExpired && f.Deletion != nil:
		r.Rule, r.FailedAt = broker.ExpiryWords(f.Deletion.Retention), f.Deletion.DeadLetter.FailedAt
	case f.Deletion != nil:
		r.RestoreUntil = f.Deletion.RestoreUntil
		if canOperate && r.RestoreUntil.After(now) {
			r.RestoreURL = deadLettersURL(queue, nil) + "/" + url.PathEscape(id) + "/restore?" + url.Values{"group": {f.Group}}.Encode()
		}
	}
	return r
}

// goneView is what GET /api/v1/dlq/:id answers for a dead letter that is
// gone, with 404: {"error": ..., "gone": {...}}.
type goneView struct {
	How             string     `json:"how"` // replayed, deleted, expired
	ConsumerGroup   string     `json:"consumerGroup"`
	At              timestamp  `json:"at"`
	By              string     `json:"by"`
	JobID           int64      `json:"jobId,omitempty"`
	Copy            *copyView  `json:"copy,omitempty"`
	RestorableUntil *timestamp `json:"restorableUntil,omitempty"`
	// Expired: the rule that expired it, its value, and when it had
	// failed.
	Rule             string     `json:"rule,omitempty"`
	RetentionSeconds int64      `json:"retentionSeconds,omitempty"`
	FailedAt         *timestamp `json:"failedAt,omitempty"`
}

// copyView is a replayed copy and its outcome in a group.
type copyView struct {
	MessageID     string    `json:"messageId"`
	TransactionID string    `json:"transactionId"`
	Mode          string    `json:"mode"` // every, own
	ConsumerGroup string    `json:"consumerGroup,omitempty"`
	Outcome       string    `json:"outcome,omitempty"` // succeeded, failed, pending
	SettledAt     timestamp `json:"settledAt"`
	DeadLetter    bool      `json:"deadLetter,omitempty"` // the copy is a dead letter of the group now
}

func newGoneView(f broker.Fate) goneView {
	g := goneView{How: f.How, ConsumerGroup: f.Group, At: timestamp(f.At), By: f.Actor, JobID: f.JobID}
	if f.Copy != nil {
		cv := &copyView{MessageID: f.Copy.CopyID, TransactionID: f.Copy.TransactionID, Mode: modeName(f.Copy.GroupID), ConsumerGroup: f.Copy.Group}
		if o, ok := f.Copy.Outcome(f.GroupID); ok {
			cv.Outcome, cv.SettledAt, cv.DeadLetter = o.OutcomeName(), timestamp(o.SettledAt), o.DeadLetter
		}
		g.Copy = cv
	}
	if f.How == broker.FateExpired && f.Deletion != nil {
		g.Rule, g.RetentionSeconds, g.FailedAt = "deadLetterRetentionSeconds", int64(f.Deletion.Retention/time.Second), optionalTime(f.Deletion.DeadLetter.FailedAt)
	}
	if f.Deletion != nil && !f.Deletion.RestoreUntil.IsZero() {
		t := timestamp(f.Deletion.RestoreUntil)
		g.RestorableUntil = &t
	}
	return g
}

// goneAnswer is the API's 404 for a dead letter that is gone.
type goneAnswer struct {
	Error string   `json:"error"`
	Gone  goneView `json:"gone"`
}

func goneMessage(id string, f broker.Fate) string {
	if f.How == broker.FateReplayed && f.Copy != nil {
		return fmt.Sprintf("dead letter %s was replayed as %s", id, f.Copy.CopyID)
	}
	if f.How == broker.FateExpired && f.Deletion != nil {
		return fmt.Sprintf("dead letter %s expired at %s (%s)", id, f.At.UTC().Format(time.RFC3339), broker.ExpiryWords(f.Deletion.Retention))
	}
	return fmt.Sprintf("dead letter %s was deleted", id)
}

// liveDeadLetter picks the dead letter the page shows from h: the
// group's, or with no group the first; with the message's others.
func liveDeadLetter(h broker.DeadLetterHistory, group string) (broker.DeadLetterDetail, bool) {
	i := -1
	for j, d := range h.DeadLetters {
		if (group == "" && i < 0) || (group != "" && d.Group == group) {
			i = j
		}
	}
	if i < 0 {
		return broker.DeadLetterDetail{}, false
	}
	dls := h.DeadLetters
	d := broker.DeadLetterDetail{DeadLetter: dls[i], Others: append(append([]broker.DeadLetter{}, dls[:i]...), dls[i+1:]...)}
	if len(h.ReplayOf) > 0 && h.ReplayOf[0].CopySeq == d.Seq {
		d.CopyFor = h.ReplayOf[0].Group // a copy for one group ("" every group)
	}
	return d, true
}

// historyView is a live dead letter's history in GET /api/v1/dlq/:id: the
// failed attempts before the last (of its consumer group), the replays
// it descends from (nearest first) and the copies made of it.
type historyView struct {
	Attempts []attemptView `json:"attempts"`
	// AttemptsLeftOut is how many earlier attempts are not listed.
	AttemptsLeftOut int              `json:"attemptsLeftOut,omitempty"`
	ReplayOf        []replayHopView  `json:"replayOf"`
	Replays         []replayCopyView `json:"replays"`
	// Traces are what workers recorded on the message (POST
	// /api/v1/traces), oldest first.
	Traces []traceView `json:"traces"`
}

// traceView is one trace of a message. data is the JSON sent; when it was
// cut, null, with the kept start of its text in dataText and the sizes in
// dataCut. droppedAfter counts the later traces not kept (this one being
// the last the message keeps).
type traceView struct {
	ID            int64           `json:"id"`
	ConsumerGroup string          `json:"consumerGroup"`
	EventType     string          `json:"eventType"`
	TraceNames    []string        `json:"traceNames"`
	Data          json.RawMessage `json:"data"`
	DataText      *string         `json:"dataText,omitempty"`
	DataCut       *errorCutView   `json:"dataCut"`
	DroppedAfter  int64           `json:"droppedAfter"`
	At            timestamp       `json:"at"`
}

func newTraceViews(ts []broker.Trace) []traceView {
	out := make([]traceView, 0, len(ts))
	for _, t := range ts {
		v := traceView{ID: t.ID, ConsumerGroup: t.Group, EventType: t.EventType, TraceNames: t.Names, DroppedAfter: t.Dropped, At: timestamp(t.At)}
		if v.TraceNames == nil {
			v.TraceNames = []string{}
		}
		if t.Cut() {
			text := t.Data
			v.Data, v.DataText, v.DataCut = json.RawMessage("null"), &text, &errorCutView{KeptBytes: len(t.Data), SentBytes: t.DataBytes}
		} else {
			v.Data = json.RawMessage(t.Data)
		}
		out = append(out, v)
	}
	return out
}

type attemptView struct {
	Attempt  int           `json:"attempt"`
	At       timestamp     `json:"at"`
	Error    *string       `json:"error"`    // null: no error text
	ErrorCut *errorCutView `json:"errorCut"` // null: error is the whole text
	// WaitMs is how long the message was held back before the retry that
	// followed, in milliseconds; null: not recorded (before migration
	// 0025).
	WaitMs *int64 `json:"waitMs"`
	// ConsumerVersion is the version its ack said; absent when none.
	ConsumerVersion string `json:"consumerVersion,omitempty"`
}

// replayHopView: messageId was replayed from originalId.
type replayHopView struct {
	MessageID     string    `json:"messageId"`
	OriginalID    *string   `json:"originalId"` // null: its queue was deleted
	By            string    `json:"by"`
	At            timestamp `json:"at"`
	JobID         int64     `json:"jobId,omitempty"`
	Mode          string    `json:"mode"`                    // every, own
	ConsumerGroup string    `json:"consumerGroup,omitempty"` // own: the group it went to
	Edited        bool      `json:"edited"`
}

type replayCopyView struct {
	MessageID     string        `json:"messageId"`
	TransactionID string        `json:"transactionId"`
	By            string        `json:"by"`
	At            timestamp     `json:"at"`
	JobID         int64         `json:"jobId,omitempty"`
	Mode          string        `json:"mode"`
	ConsumerGroup string        `json:"consumerGroup,omitempty"`
	Edited        bool          `json:"edited"`
	Outcomes      []outcomeView `json:"outcomes"`
}

// outcomeView is a copy's outcome in a group whose dead letter it
// replaced.
type outcomeView struct {
	ConsumerGroup string    `json:"consumerGroup"`
	Outcome       string    `json:"outcome"`   // succeeded, failed, pending
	SettledAt     timestamp `json:"settledAt"` // null while pending
	DeadLetter    bool      `json:"deadLetter"`
}

func modeName(groupID int64) string {
	if groupID != 0 {
		return "own"
	}
	return "every"
}

func newHistoryView(h broker.DeadLetterHistory) *historyView {
	v := &historyView{Attempts: []attemptView{}, ReplayOf: []replayHopView{}, Replays: []replayCopyView{}, AttemptsLeftOut: h.AttemptsLeftOut, Traces: newTraceViews(h.Traces)}
	for _, a := range h.Attempts {
		av := attemptView{Attempt: a.Attempt, At: timestamp(a.At), Error: optional(a.Error), ConsumerVersion: a.ConsumerVersion}
		if a.ErrorBytes > len(a.Error) {
			av.ErrorCut = &errorCutView{KeptBytes: len(a.Error), SentBytes: a.ErrorBytes}
		}
		if a.WaitKnown {
			ms := a.Wait.Milliseconds()
			av.WaitMs = &ms
		}
		v.Attempts = append(v.Attempts, av)
	}
	for _, hop := range h.ReplayOf {
		v.ReplayOf = append(v.ReplayOf, replayHopView{MessageID: hop.CopyID, OriginalID: optional(hop.OriginalID), By: hop.Actor, At: timestamp(hop.At),
			JobID: hop.JobID, Mode: modeName(hop.GroupID), ConsumerGroup: hop.Group, Edited: hop.Edited})
	}
	for _, c := range h.Replays {
		cv := replayCopyView{MessageID: c.CopyID, TransactionID: c.TransactionID, By: c.Actor, At: timestamp(c.At),
			JobID: c.JobID, Mode: modeName(c.GroupID), ConsumerGroup: c.Group, Edited: c.Edited, Outcomes: []outcomeView{}}
		for _, o := range c.Outcomes {
			cv.Outcomes = append(cv.Outcomes, outcomeView{ConsumerGroup: o.Group, Outcome: o.OutcomeName(), SettledAt: timestamp(o.SettledAt), DeadLetter: o.DeadLetter})
		}
		v.Replays = append(v.Replays, cv)
	}
	return v
}

// latestFate is the most recent of fs (at least one).
func latestFate(fs []broker.Fate) broker.Fate {
	f := fs[0]
	for _, g := range fs[1:] {
		if g.At.After(f.At) {
			f = g
		}
	}
	return f
}

// restoreOne puts back a deleted dead letter of the queue (only the
// group's with ?group=) while its restore window lasts: an operator's
// Restore on the page of a deleted dead letter, and the Undo of a
// delete's flash. A message of another queue, or nothing restorable: 404;
// only deleted dead letters that cannot come back (the group has one of
// the message again): 409 saying why. Those skipped beside others
// restored are named in the flash.
func (s *Server) restoreOne(c echo.Context) error {
	queue, id, err := queueAndID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	group := c.QueryParam("group")
	h, err := s.broker.DeadLetterHistory(ctx, id, "")
	if errors.Is(err, broker.ErrNotFound) || (err == nil && h.Message.Queue != queue) {
		return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("dead letter %s not found in queue %s", views.Cut(id, 64), views.Cut(queue, 64))}
	}
	if err != nil {
		return err
	}
	res, err := s.broker.RestoreMessage(ctx, id, group, s.pageActor(c))
	if err != nil {
		return err
	}
	f := views.Flash{Kind: "ok", Text: oneDeadLetter("Restored", id, group, res.Restored) + ": it is a dead letter again, as it was."}
	if len(res.Skipped) > 0 {
		f.Kind = "info"
		f.Text += fmt.Sprintf(" %d not restored: %s.", len(res.Skipped), broker.SkipsText(res.Skipped))
	}
	return s.actionDone(c, queue, views.FlashMessage(f))
}
