package web

import (
	"context"
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

// Page sizes of the dead-letter list.
var pageSizes = []int{25, 50, 100}

const defaultPageSize = 50

// maxPartitionChoices is how many partitions the filter lists at most; a
// queue with more (one per customer, say) gets a text field for the name
// instead of a list nobody could scroll, and a page of 10,000 options.
const maxPartitionChoices = 200

// quickRanges are the list's quick time ranges.
var quickRanges = []struct {
	label string
	d     time.Duration
}{{"1h", time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}}

// listFilter is the dead-letter list's filter as it travels in URLs.
type listFilter struct {
	Group, Partition, Since, From, To, Error, TxID string
	// Fingerprint is an error group (fingerprint).
	Fingerprint string
	// Version is the consumer version of the ack that filed them
	// (version).
	Version string
	// Text is free text in payloads and errors (q); Fields are payload
	// field filters (field, repeatable), as typed.
	Text   string
	Fields []string
}

// filterKeys are the URL parameters of a listFilter, in chip order.
var filterKeys = []string{"group", "fingerprint", "version", "partition", "since", "from", "to", "error", "tx"}

func (f listFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"group": f.Group, "partition": f.Partition, "since": f.Since, "from": f.From, "to": f.To, "error": f.Error, "tx": f.TxID, "fingerprint": f.Fingerprint, "version": f.Version} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.Text != "" {
		v.Set("q", f.Text)
	}
	for _, s := range f.Fields {
		v.Add("field", s)
	}
	return v
}

// describe says the filter for people, as the confirmation shows it.
func (f listFilter) describe() string {
	var parts []string
	if f.Group != "" {
		parts = append(parts, "group "+f.Group)
	}
	if f.Fingerprint != "" {
		parts = append(parts, "error group “"+views.Cut(f.Fingerprint, 120)+"”")
	}
	if f.Version != "" {
		parts = append(parts, "consumer version "+views.Cut(f.Version, 80))
	}
	if f.Partition != "" {
		parts = append(parts, "partition "+f.Partition)
	}
	if f.Since != "" {
		parts = append(parts, "failed in the last "+f.Since)
	}
	if f.From != "" {
		parts = append(parts, "failed from "+strings.Replace(f.From, "T", " ", 1)+" UTC")
	}
	if f.To != "" {
		parts = append(parts, "failed before "+strings.Replace(f.To, "T", " ", 1)+" UTC")
	}
	if f.Error != "" {
		parts = append(parts, "error containing “"+views.Cut(f.Error, 80)+"”")
	}
	if f.TxID != "" {
		parts = append(parts, "transactionId "+views.Cut(f.TxID, 80))
	}
	if f.Text != "" {
		parts = append(parts, "payload or error with “"+views.Cut(f.Text, 80)+"”")
	}
	for _, s := range f.Fields {
		parts = append(parts, "payload field "+views.Cut(s, 80))
	}
	if len(parts) == 0 {
		return "every dead letter of the queue"
	}
	return "all with " + strings.Join(parts, ", ")
}

// parseListFilter reads a filter from URL parameters.
func parseListFilter(q url.Values) listFilter {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	f := listFilter{Group: get("group"), Partition: get("partition"), Since: get("since"), From: get("from"), To: get("to"), Error: get("error"), TxID: get("tx"), Text: get("q"), Fingerprint: get("fingerprint"),
		Version: get("version")}
	for _, s := range q["field"] {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(f.Fields, s) {
			f.Fields = append(f.Fields, s)
		}
	}
	return f
}

// query turns the filter into a broker query of queue.
func (f listFilter) query(queue string, now time.Time) (broker.DLQQuery, error) {
	q := broker.DLQQuery{Queue: queue, Group: f.Group, Partition: f.Partition, ErrorContains: f.Error, TransactionID: f.TxID, Text: f.Text, Fields: f.Fields, Fingerprint: f.Fingerprint,
		ConsumerVersion: f.Version}
	if f.Since != "" {
		found := false
		for _, r := range quickRanges {
			if r.label == f.Since {
				q.From, found = now.Add(-r.d), true
			}
		}
		if !found {
			return q, badRequest("since must be 1h, 24h or 7d")
		}
	}
	var err error
	if f.From != "" {
		if q.From, err = parseFormTime("from", f.From); err != nil {
			return q, err
		}
	}
	if f.To != "" {
		if q.To, err = parseFormTime("to", f.To); err != nil {
			return q, err
		}
	}
	return q, nil
}

// parseFormTime reads a datetime-local value (taken as UTC) or RFC 3339.
func parseFormTime(name, s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, badRequest("%s must be a date and time like 2026-01-02T15:04", name)
}

// cursorParam writes and reads the keyset position of a page: "<ms>-<id>".
func cursorParam(cur *broker.Cursor) string {
	return strconv.FormatInt(cur.At.UnixMilli(), 10) + "-" + strconv.FormatInt(cur.ID, 10)
}

func parseCursor(s string) (*broker.Cursor, error) {
	if s == "" {
		return nil, nil
	}
	a, b, ok := strings.Cut(s, "-")
	ms, err1 := strconv.ParseInt(a, 10, 64)
	id, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return nil, badRequest("after must be a page position like 1700000000000-42")
	}
	return &broker.Cursor{At: time.UnixMilli(ms).UTC(), ID: id}, nil
}

// showDeadLetters renders page 3: a queue's dead letters, newest first, by
// keyset pages.
func (s *Server) showDeadLetters(c echo.Context) error {
	queue, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	params := c.QueryParams()
	f := parseListFilter(params)
	size := defaultPageSize
	if v := params.Get("size"); v != "" {
		if size, err = strconv.Atoi(v); err != nil || !validSize(size) {
			return badRequest("size must be 25, 50 or 100")
		}
	}
	after, err := parseCursor(params.Get("after"))
	if err != nil {
		return err
	}
	now := s.now()
	q, err := f.query(queue, now)
	if err != nil {
		return err
	}
	if err := s.masksOf(c).query(q); err != nil {
		return err
	}
	q.Limit, q.After, q.WithTotal = size, after, true
	ctx, cancel := s.withTimeout(c, listBudget)
	defer cancel()
	tr, err := s.broker.Triage(ctx, q, errorGroupsShown)
	if err != nil {
		return err
	}
	brief, page := tr.Queue, tr.Page
	v := views.DeadLetterList{
		Page:          s.page(c, "Dead letters of "+queue, "overview", views.Crumb{Label: "Overview", URL: "/"}, views.Crumb{Label: queue, URL: queueURL(queue)}, views.Crumb{Label: "Dead letters"}),
		Queue:         queue,
		QueueURL:      queueURL(queue),
		Groups:        brief.Groups,
		Filter:        views.DeadLetterFilter{Group: f.Group, Partition: f.Partition, Since: f.Since, From: f.From, To: f.To, Error: f.Error, TxID: f.TxID, Version: f.Version, Size: size, Text: f.Text, Fields: f.Fields},
		SearchNote:    searchNote(page),
		ScanWindow:    broker.FieldScan,
		Matching:      page.Total,
		MatchingKnown: !page.TotalCapped,
		MatchingIn:    int64(page.TotalIn),
		Scanned:       int64(page.Scanned),
		FromHere:      after != nil,
		FilterQuery:   f.values().Encode(),
	}
	if len(brief.Partitions) <= maxPartitionChoices {
		v.Partitions = make([]string, 0, len(brief.Partitions))
		for _, p := range brief.Partitions {
			v.Partitions = append(v.Partitions, p.Name)
		}
	}
	base := f.values()
	if size != defaultPageSize {
		base.Set("size", strconv.Itoa(size))
	}
	v.ListURL = deadLettersURL(queue, nil) // the form's action and the prefix of the confirm links
	v.Chips = chips(queue, f, base)
	for _, r := range quickRanges {
		u := with(base, "since", r.label)
		u.Del("from")
		u.Del("to")
		v.QuickRanges = append(v.QuickRanges, views.QuickRange{Label: r.label, URL: deadLettersURL(queue, u), Current: f.Since == r.label})
	}
	for _, n := range pageSizes {
		u := with(base, "size", strconv.Itoa(n))
		if n == defaultPageSize {
			u.Del("size")
		}
		v.PageSizes = append(v.PageSizes, views.PageSize{Size: n, URL: deadLettersURL(queue, u), Current: n == size})
	}
	if page.Next != nil {
		v.NextURL = deadLettersURL(queue, with(base, "after", cursorParam(page.Next)))
	}
	if after != nil {
		v.FirstURL = deadLettersURL(queue, base)
	}
	v.ErrorGroups, v.ErrorGroupsScope, v.ErrorGroupsNarrower = errorGroupRows(queue, f, base, tr.ErrorGroups)
	for _, d := range page.Items {
		r := rowOf(queue, d)
		if f.Group != "" {
			// The list names a group: a row's Replay is for it alone.
			r.ReplayURL += "?" + url.Values{"mode": {"own"}, "group": {f.Group}}.Encode()
		}
		v.Rows = append(v.Rows, r)
	}
	v.RestoreFor = s.restoreFor()
	v.Expiring = expiringNote(queue, f.Group, tr.Expiring)
	v.RefreshURL = deadLettersURL(queue, withAfter(base, after))
	v.Holds = holdsOfGroup(s.queueHolds(ctx, c, queue), f.Group)
	v.HoldForm = s.holdForm(c, queue, deadLettersURL(queue, base), withGroup(brief.Groups, f.Group))
	for i := range v.ErrorGroups {
		v.ErrorGroups[i].Hold = errorGroupHold(queue, f.Group, brief.Groups, v.ErrorGroups[i])
	}
	ownedLinks(f.Group, v.ErrorGroups, tr.Owned)
	if !isFragment(c) {
		// The message of an action that led here (edit and replay).
		if v.Page.Flash, _, err = s.takeFlash(c); err != nil {
			return err
		}
	}
	return renderPage(c, http.StatusOK, views.DeadLettersView(v), views.DeadLettersContent(v))
}

// ownedLinks marks each of the panel's error groups with its state in
// each consumer group (owned, by fingerprint), linked to its page.
func ownedLinks(group string, rows []views.ErrorGroupRow, owned map[string][]broker.OwnedErrorGroup) {
	for i := range rows {
		gs := owned[rows[i].Fingerprint]
		for _, g := range gs {
			l := views.OwnedLink{GroupState: groupState(g.State, g.Regressed), URL: errorGroupURL(g.ID)}
			if group == "" && len(gs) > 1 {
				l.Group = g.Group
			}
			rows[i].Owned = append(rows[i].Owned, l)
		}
	}
}

// errorGroupsShown is how many error groups the dead-letter list shows.
const errorGroupsShown = 10

// errorGroupRows are the list's error groups panel: whose groups they are,
// and whether the filter has more than a consumer group and a group.
func errorGroupRows(queue string, f listFilter, base url.Values, gs []broker.ErrorGroup) (rows []views.ErrorGroupRow, scope string, narrower bool) {
	scope = "queue " + queue
	if f.Group != "" {
		scope = "consumer group " + f.Group + " of queue " + queue
	}
	narrower = f.Partition != "" || f.Since != "" || f.From != "" || f.To != "" || f.Error != "" || f.TxID != "" || f.Text != "" || len(f.Fields) > 0
	for _, g := range gs {
		filter := with(base, "fingerprint", g.Fingerprint)
		filter.Del("after")
		// The group's bulk actions: of the consumer group and error group
		// only (what the panel counted), through the usual confirmation.
		act := url.Values{"fingerprint": {g.Fingerprint}}
		if f.Group != "" {
			act.Set("group", f.Group)
		}
		values := make([]float64, len(g.Trend))
		var total int64
		for i, n := range g.Trend {
			values[i], total = float64(n), total+n
		}
		rows = append(rows, views.ErrorGroupRow{
			Fingerprint: g.Fingerprint, Count: g.DeadLetters, First: g.FirstFailedAt, Last: g.LastFailedAt,
			Trend:      views.MakeSparkline(values, fmt.Sprintf("%s filed in the last 24 hours, by hour", views.Plural(total, "dead letter", "dead letters"))),
			TrendTotal: total, Sample: g.SampleError, Current: f.Fingerprint == g.Fingerprint,
			FilterURL: deadLettersURL(queue, filter),
			ReplayURL: deadLettersURL(queue, nil) + "/confirm?action=replay&all=1&" + act.Encode(),
			DeleteURL: deadLettersURL(queue, nil) + "/confirm?action=delete&all=1&" + act.Encode(),
		})
	}
	return rows, scope, narrower
}

// errorGroupHold is what an error group's Hold holds: the consumer group
// of the list's filter, else the queue's only one; with several the
// dialog asks which. Its reason is suggested from the error.
func errorGroupHold(queue, group string, groups []string, g views.ErrorGroupRow) views.HoldTarget {
	t := views.HoldTarget{Queue: queue, Group: group, Reason: "error group: " + views.FirstLine(g.Fingerprint, 200)}
	switch {
	case group != "":
	case len(groups) == 1:
		t.Group = groups[0]
	default:
		t.AnyGroup = true
	}
	return t
}

func withAfter(base url.Values, after *broker.Cursor) url.Values {
	if after == nil {
		return base
	}
	return with(base, "after", cursorParam(after))
}

func validSize(n int) bool {
	for _, s := range pageSizes {
		if s == n {
			return true
		}
	}
	return false
}

// with returns a copy of v with k set to val.
func with(v url.Values, k, val string) url.Values {
	out := url.Values{}
	for key, vals := range v {
		out[key] = append([]string(nil), vals...)
	}
	out.Set(k, val)
	return out
}

// chips lists the active filters, each with the link that removes it.
func chips(queue string, f listFilter, base url.Values) []views.Chip {
	labels := map[string]string{"fingerprint": "error group", "group": "group", "partition": "partition", "since": "last", "from": "from", "to": "to", "error": "error contains", "tx": "transactionId", "version": "consumer version"}
	var out []views.Chip
	for _, k := range filterKeys {
		val := base.Get(k)
		if val == "" {
			continue
		}
		u := with(base, k, "")
		u.Del(k)
		out = append(out, views.Chip{Label: labels[k] + ": " + views.Cut(val, 60), RemoveURL: deadLettersURL(queue, u)})
	}
	if f.Text != "" {
		u := with(base, "q", "")
		u.Del("q")
		out = append(out, views.Chip{Label: "text: " + views.Cut(f.Text, 60), RemoveURL: deadLettersURL(queue, u)})
	}
	for _, s := range f.Fields {
		u := with(base, "field", "")
		u.Del("field")
		for _, o := range f.Fields {
			if o != s {
				u.Add("field", o)
			}
		}
		out = append(out, views.Chip{Label: "field: " + views.Cut(s, 60), RemoveURL: deadLettersURL(queue, u)})
	}
	return out
}

// searchNote says what a search did not read: common words' older
// matches, or dead letters below the window a page read.
func searchNote(p broker.DLQPage) string {
	var notes []string
	if p.MatchCapped {
		notes = append(notes, fmt.Sprintf("These words match more than %s dead letters: they are looked up in windows of the %s newest dead letters from here, page by page.", views.Count(broker.MatchCap), views.Count(broker.FieldScan)))
	}
	if p.Scanned > 0 {
		notes = append(notes, fmt.Sprintf("This page checked the %s newest dead letters from here without filling up; the next page goes on.", views.Count(int64(p.Scanned))))
	}
	if len(notes) == 0 {
		return ""
	}
	return strings.Join(notes, " ") + " Whole words in “Payload or error has”, a field = value, or a time range narrow the search and are fast at any depth."
}

// rowOf makes a list row of a dead letter.
func rowOf(queue string, d broker.DeadLetter) views.DeadLetterRow {
	id := d.MessageID()
	return views.DeadLetterRow{
		ID: id, ShortID: views.ShortID(id), TxID: d.TransactionID, Partition: d.Partition, Group: d.Group,
		Error: views.FirstLine(d.Error, 200), ErrorCut: errorCutNote(d), Retries: d.RetryCount, FailedAt: d.FailedAt, ExpiresAt: d.ExpiresAt, IsReplay: d.IsReplay(),
		URL:       deadLetterURL(queue, id, d.Group),
		ReplayURL: deadLettersURL(queue, nil) + "/" + url.PathEscape(id) + "/replay",
		DeleteURL: deadLettersURL(queue, nil) + "/" + url.PathEscape(id) + "/delete?" + url.Values{"group": {d.Group}}.Encode(),
	}
}

func deadLetterURL(queue, id, group string) string {
	u := deadLettersURL(queue, nil) + "/" + url.PathEscape(id)
	if group != "" {
		u += "?" + url.Values{"group": {group}}.Encode()
	}
	return u
}

// pathDeadLetter reads the dead letter the path names
// (/queues/:queue/dead-letters/:id, ?group= picking the group's): a 404
// when it is none, or not of that queue.
func (s *Server) pathDeadLetter(ctx context.Context, c echo.Context) (queue, id string, d broker.DeadLetterDetail, err error) {
	if queue, err = pathParam(c, "queue"); err != nil {
		return
	}
	if id, err = pathParam(c, "id"); err != nil {
		return
	}
	if d, err = s.broker.DeadLetter(ctx, id, c.QueryParam("group")); err != nil {
		return
	}
	if d.Queue != queue {
		err = &apiError{status: http.StatusNotFound, message: fmt.Sprintf("dead letter %s is not in queue %s", id, queue)}
	}
	return
}

// showDeadLetterPage renders page 4: one dead letter, with its history;
// or, with status 404, the page of one that is gone (showGone). An id
// that names no message of the queue is the plain not-found page.
func (s *Server) showDeadLetterPage(c echo.Context) error { return s.deadLetterPage(c, false) }

// revealDeadLetter is the page's Reveal (a POST, for it writes the
// audit): the dead letter's page with its queue's masked fields shown, to
// a role at or above the queue's maskRevealRole (403 otherwise), audited
// with who, which dead letter and which fields. The answer is not kept
// by the browser (no-store); opening the page again (a GET) masks them.
func (s *Server) revealDeadLetter(c echo.Context) error { return s.deadLetterPage(c, true) }

func (s *Server) deadLetterPage(c echo.Context, reveal bool) error {
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	queue, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	group := c.QueryParam("group")
	h, err := s.broker.DeadLetterHistory(ctx, id, group)
	if errors.Is(err, broker.ErrNotFound) || (err == nil && h.Message.Queue != queue) {
		return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("dead letter %s not found in queue %s", views.Cut(id, 64), views.Cut(queue, 64))}
	}
	if err != nil {
		return err
	}
	d, ok := liveDeadLetter(h, group)
	if !ok {
		return s.showGone(c, queue, id, group, h)
	}
	limit := views.PayloadPreview
	if c.QueryParam("full") == "1" {
		limit = 0
	}
	masks := s.masksOf(c)
	payload := masks.payload(queue, d.Payload)
	if err := masks.check(); err != nil {
		return err
	}
	var revealed []string
	if reveal {
		if revealed, err = masks.reveal(queue); err != nil {
			return err
		}
		if revealed != nil {
			if err := s.broker.RecordReveal(ctx, actor(c), queue, d.Group, id, revealed); err != nil {
				return err
			}
			payload = d.Payload
			c.Response().Header().Set("Cache-Control", "no-store")
		}
	}
	v := views.DeadLetterDetail{
		Page: s.page(c, "Dead letter "+views.ShortID(id), "overview",
			views.Crumb{Label: "Overview", URL: "/"}, views.Crumb{Label: queue, URL: queueURL(queue)},
			views.Crumb{Label: "Dead letters", URL: deadLettersURL(queue, nil)}, views.Crumb{Label: views.ShortID(id)}),
		ID: id, Queue: queue, QueueURL: queueURL(queue), ListURL: deadLettersURL(queue, url.Values{"group": {d.Group}}),
		Partition: d.Partition, PartitionID: d.PartitionKey, Group: d.Group, TxID: d.TransactionID, TraceID: d.TraceID,
		Error: d.Error, Retries: d.RetryCount, PushedAt: d.CreatedAt, FailedAt: d.FailedAt, IsReplay: d.IsReplay(),
		ExpiresAt: d.ExpiresAt,
		Payload:   views.MakePayload(payload, limit),
		ReplayURL: deadLettersURL(queue, nil) + "/" + url.PathEscape(id) + "/replay",
		DeleteURL: deadLettersURL(queue, nil) + "/" + url.PathEscape(id) + "/delete?" + url.Values{"group": {d.Group}}.Encode(),
	}
	v.ErrorCut = errorCutNote(d.DeadLetter)
	if d.ConsumerVersion != "" {
		v.ConsumerVersion = d.ConsumerVersion
		v.VersionURL = deadLettersURL(queue, url.Values{"version": {d.ConsumerVersion}})
	}
	v.IndexedInPart = h.IndexedInPart
	v.Replays, v.MaxReplays = h.ReplayCount.Replays, h.ReplayCount.Max
	if !d.ExpiresAt.IsZero() {
		v.Retention = broker.DurationWords(d.ExpiresAt.Sub(d.FailedAt))
	}
	v.PayloadURL, v.ErrorURL = deadLetterPartURL(queue, id, d.Group, "payload"), deadLetterPartURL(queue, id, d.Group, "error")
	if revealed != nil {
		v.RevealedPaths = strings.Join(revealed, ", ")
	} else if qm, ok := masks.of(queue); ok {
		v.MaskedPaths, v.RevealRole = strings.Join(qm.Paths, ", "), string(qm.RevealRole)
		if _, err := masks.reveal(queue); err == nil {
			v.RevealURL = deadLetterPartURL(queue, id, d.Group, "reveal")
		}
	}
	if v.IsReplay {
		v.OriginalID = strings.TrimPrefix(d.TransactionID, broker.ReplayPrefix)
		v.OriginalURL = searchURL(v.OriginalID) // where the original is now, and its copies
	}
	if v.Payload.Truncated {
		v.FullURL = deadLetterURL(queue, id, d.Group) + "&full=1"
	}
	for _, o := range d.Others {
		v.OtherGroups = append(v.OtherGroups, o.Group)
	}
	if v.Readers, err = s.broker.Readers(ctx, queue); err != nil {
		return err
	}
	v.CopyFor = d.CopyFor
	if v.Completed, err = s.completedGroups(ctx, d.DeadLetter); err != nil {
		return err
	}
	v.SelfURL = deadLetterURL(queue, id, d.Group)
	if limit == 0 {
		v.SelfURL += "&full=1"
	}
	v.RestoreFor = s.restoreFor()
	v.History = historyOf(queue, h, true)
	v.Holds = holdsOfGroup(s.queueHolds(ctx, c, queue), d.Group)
	v.HoldForm = s.holdForm(c, queue, v.SelfURL, withGroup(v.Readers, d.Group))
	v.KnownIssue = s.knownIssue(ctx, queue, d.Group, d.Fingerprint)
	if !isFragment(c) {
		if v.Page.Flash, _, err = s.takeFlash(c); err != nil {
			return err
		}
	}
	return renderPage(c, http.StatusOK, views.DeadLetterView(v), views.DeadLetterContent(v))
}

// knownIssue is the banner of a dead letter's error group when someone
// said something of it (an owner, a note, a link) or it is not open:
// support reads there what is known. A failed read leaves it out,
// logged: the dead letter is what the page is for.
func (s *Server) knownIssue(ctx context.Context, queue, group, fingerprint string) *views.KnownIssue {
	if fingerprint == "" {
		return nil
	}
	owned, err := s.broker.ErrorGroupStatesOf(ctx, queue, group, []string{fingerprint})
	if err != nil {
		s.log.WarnContext(ctx, "error group for the known-issue banner", "queue", queue, "err", err)
		return nil
	}
	gs := owned[fingerprint]
	if len(gs) == 0 {
		return nil
	}
	g := gs[0]
	if g.State == broker.GroupOpen && g.Owner == "" && g.Note == "" && g.Link == "" {
		return nil
	}
	k := &views.KnownIssue{GroupState: groupState(g.State, g.Regressed), URL: errorGroupURL(g.ID), NoteLine: views.FirstLine(g.Note, 200),
		Link: views.SafeLink(g.Link), Owner: g.Owner}
	if g.State == broker.GroupIgnored {
		k.IgnoreEnd = views.IgnoreEnd(g.UntilAt, g.UntilFiled, g.Life.Filed)
	}
	return k
}

// expiringNote is the list's banner of what expires within
// broker.ExpiringWithin (nil: the queue keeps its dead letters), linked
// to exactly those: the group's (when the list is of one) that failed
// before e.FailedTo.
func expiringNote(queue, group string, e *broker.Expiring) *views.ExpiringNote {
	if e == nil {
		return nil
	}
	u := url.Values{"to": {e.FailedTo.UTC().Format(expiringToLayout)}}
	if group != "" {
		u.Set("group", group)
	}
	return &views.ExpiringNote{Retention: broker.DurationWords(e.Retention), Within: views.Age(broker.ExpiringWithin), Count: e.Count, More: e.More,
		Before: e.Before, URL: deadLettersURL(queue, u), Group: group}
}

// expiringToLayout writes the list's to= for the expiring link: to the
// millisecond, as failedAt is kept, and in the form the filter's
// datetime-local field takes (UTC, parseFormTime).
const expiringToLayout = "2006-01-02T15:04:05.000"

// optionalTime is t for the JSON, nil when zero (the field left out).
func optionalTime(t time.Time) *timestamp {
	if t.IsZero() {
		return nil
	}
	v := timestamp(t)
	return &v
}
