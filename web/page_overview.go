package web

import (
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

// showOverview renders page 1: the totals of every queue, judged against
// the monitoring thresholds, and one page of the queues, sorted by
// health (default), dead letters or name, filtered by a part of the name
// and by having dead letters, all in the URL.
func (s *Server) showOverview(c echo.Context) error {
	q, err := overviewQuery(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	ov, err := s.broker.Overview(ctx, q)
	if err != nil {
		return err
	}
	now := s.now()
	v := views.Overview{Page: s.page(c, "Overview", "overview"), SelfURL: overviewURL(q, q.Offset)}
	holds, err := s.broker.Holds(ctx, broker.HoldFilter{})
	if err != nil {
		return err
	}
	holds = inScope(ctx, holds, func(h broker.Hold) string { return h.Queue })
	notes := s.holdNotes(c, holds)
	for _, r := range ov.Rows {
		row := views.QueueRow{Name: r.Name, URL: queueURL(r.Name), DLQURL: deadLettersURL(r.Name, nil), Partitions: r.PartitionCount, Depth: r.Health.Depth,
			DepthDelta: countDelta(r.Health.Depth, r.DepthThen, "dead letters", "24 h ago")}
		if now.Sub(r.CreatedAt) < broker.HealthWindow {
			// Made within the day: nothing to compare with 24 h ago.
			row.DepthDelta = views.Delta{Text: "new", Class: "same", Title: "made " + views.Ago(r.CreatedAt, now) + ": nothing to compare with 24 h ago"}
		}
		for _, g := range r.Stats {
			gd := views.GroupDepth{Group: g.Group, Depth: g.Depth, URL: deadLettersURL(r.Name, url.Values{"group": {g.Group}})}
			if !g.OldestFailedAt.IsZero() && g.Depth > 0 {
				gd.Oldest = views.Age(now.Sub(g.OldestFailedAt))
			}
			row.Groups = append(row.Groups, gd)
		}
		holdRow(&row, notes, func(g string) string { return deadLettersURL(r.Name, url.Values{"group": {g}}) })
		if r.Health.Oldest > 0 {
			row.Oldest = views.Age(r.Health.Oldest)
		}
		for _, br := range r.Breaches {
			row.Alerts = append(row.Alerts, br.Text)
		}
		row.FailureRate, row.FailureNote = rateText(r.Health.Failed, r.Health.Acks, "acks")
		row.FailureDelta = rateDelta(r.Health.Failed, r.Health.Acks, r.Before.Failed, r.Before.Acks, true)
		row.ReplayRate, row.ReplayNote = rateText(r.Health.ReplayOK, r.Health.ReplayEnds, "replayed copies settled")
		spark := make([]float64, len(r.DepthSeries))
		for k, d := range r.DepthSeries {
			spark[k] = float64(d)
		}
		row.Spark = views.MakeSparkline(spark, "Dead letters of "+r.Name+" over the last 24 h")
		row.Spark.Class = views.SeriesClass(r.Name) // its colour on the charts
		for _, g := range r.ErrorGroups {
			row.ErrorGroups = append(row.ErrorGroups, views.TopError{Error: g.Fingerprint, Count: g.DeadLetters,
				URL: deadLettersURL(r.Name, url.Values{"fingerprint": {g.Fingerprint}})})
		}
		v.Queues = append(v.Queues, row)
	}
	l := ov.Thresholds.Default
	depthTile := views.Tile{Label: "Dead letters", Value: views.Count(ov.Depth), Note: fmt.Sprintf("alert above %d in a queue", l.Depth), Status: status(ov.Deepest <= l.Depth), TestID: "depth",
		Delta: countDelta(ov.Depth, ov.DepthThen, "dead letters", "24 h ago")}
	filed := failureTile(ov.Window.Acks-ov.Window.Failed, ov.Window.Failed, l)
	filed.Delta = rateDelta(ov.Window.Failed, ov.Window.Acks, ov.Before.Failed, ov.Before.Acks, true)
	replays := replayTile(ov.Window, ov.Replayed, l)
	replays.Delta = rateDelta(ov.Window.ReplayOK, ov.Window.ReplayEnds, ov.Before.ReplayOK, ov.Before.ReplayEnds, false)
	v.Tiles = []views.Tile{
		{Label: "Queues", Value: views.Count(int64(ov.Queues)), TestID: "queues"},
		depthTile,
		{Label: "Filed in 24 h", Value: views.Count(ov.Filed), Note: "dead letters filed", TestID: "filed",
			Delta: countDelta(ov.Filed, ov.FiledBefore, "dead letters filed", "the 24 h before")},
		oldestTile(ov.Oldest, l),
		filed,
		replays,
	}
	v.Controls, v.Pager = overviewControls(q, ov)
	v.OpenGroups = s.openGroups(c)
	if v.DemoUntil, err = s.demoUntil(c, now.Add(-broker.HealthWindow)); err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.OverviewView(v), views.OverviewContent(v))
}

// overviewOpenGroups is how many open error groups the overview lists.
const overviewOpenGroups = 5

// openGroups are the overview's open error groups: how many, how many
// regressed, and the first few, regressed first. A failed read leaves
// them out, logged: the queues are the overview's first business.
func (s *Server) openGroups(c echo.Context) views.OpenGroups {
	ctx, cancel := s.withTimeout(c, 5*time.Second)
	defer cancel()
	o := views.OpenGroups{URL: errorGroupsURL(url.Values{"state": {string(broker.GroupOpen)}})}
	counts, err := s.broker.ErrorGroupCounts(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "error group counts for the overview", "err", err)
		return views.OpenGroups{}
	}
	for _, n := range inScope(ctx, counts, func(n broker.ErrorGroupCount) string { return n.Queue }) {
		o.Open, o.Regressed = o.Open+n.Open, o.Regressed+n.Regressed
	}
	if o.Open == 0 {
		return o
	}
	gs, err := s.broker.ErrorGroupList(ctx, broker.ErrorGroupFilter{Scope: scopeOf(c.Request().Context()), State: broker.GroupOpen, Limit: overviewOpenGroups, DayOnly: true})
	if err != nil {
		s.log.WarnContext(ctx, "open error groups for the overview", "err", err)
		return o
	}
	for _, g := range gs {
		o.Rows = append(o.Rows, ownedGroupRow(g))
	}
	return o
}

// holdRow marks the holds of a queue's row: the queue's own on its
// name, a group's on its badge (a held group without dead letters gets
// one, so that the hold shows).
func holdRow(row *views.QueueRow, notes []views.HoldNote, groupURL func(string) string) {
	for i := range notes {
		h := &notes[i]
		if h.Queue != row.Name {
			continue
		}
		if h.Group == "" {
			row.Hold = h
			continue
		}
		found := false
		for k := range row.Groups {
			if row.Groups[k].Group == h.Group {
				row.Groups[k].Hold, found = h, true
			}
		}
		if !found {
			row.Groups = append(row.Groups, views.GroupDepth{Group: h.Group, URL: groupURL(h.Group), Hold: h})
		}
	}
}

// overviewPage is how many queues a page of the overview shows unless
// the URL says (per, up to broker.MaxOverviewPage).
const overviewPage = 50

// overviewQuery reads the overview's sort (sort), name filter (q), hide-
// empty toggle (empty=hide), page (page, from 1) and page size (per).
func overviewQuery(c echo.Context) (broker.OverviewQuery, error) {
	q := broker.OverviewQuery{Sort: c.QueryParam("sort"), Name: c.QueryParam("q"), HideEmpty: c.QueryParam("empty") == "hide",
		Limit: overviewPage, ErrorGroups: overviewErrorGroups, Scope: scopeOf(c.Request().Context())}
	switch q.Sort {
	case "", broker.OverviewByHealth, broker.OverviewByDeadLetters, broker.OverviewByName:
	default:
		return q, badRequest("sort must be health, dead-letters or name")
	}
	if len(q.Name) > broker.MaxNameLength {
		return q, badRequest("q: at most %d bytes", broker.MaxNameLength)
	}
	if p := c.QueryParam("per"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > broker.MaxOverviewPage {
			return q, badRequest("per must be between 1 and %d", broker.MaxOverviewPage)
		}
		q.Limit = n
	}
	if p := c.QueryParam("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 1_000_000 {
			return q, badRequest("page must be a number from 1")
		}
		q.Offset = (n - 1) * q.Limit
	}
	return q, nil
}

// overviewURL is the overview with q's sort, filter and toggle, at the
// page that starts at offset; the defaults are left out.
func overviewURL(q broker.OverviewQuery, offset int) string {
	v := url.Values{}
	if q.Sort != "" && q.Sort != broker.OverviewByHealth {
		v.Set("sort", q.Sort)
	}
	if q.Name != "" {
		v.Set("q", q.Name)
	}
	if q.HideEmpty {
		v.Set("empty", "hide")
	}
	if q.Limit != overviewPage {
		v.Set("per", strconv.Itoa(q.Limit))
	}
	if offset > 0 {
		v.Set("page", strconv.Itoa(offset/q.Limit+1))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

func overviewControls(q broker.OverviewQuery, ov broker.OverviewPage) (views.OverviewControls, views.Pager) {
	c := views.OverviewControls{Action: "/", Sort: q.Sort, Name: q.Name, HideEmpty: q.HideEmpty}
	if c.Sort == "" {
		c.Sort = broker.OverviewByHealth
	}
	for _, o := range []struct{ label, sort string }{{"health", broker.OverviewByHealth}, {"dead letters", broker.OverviewByDeadLetters}, {"name", broker.OverviewByName}} {
		sq := q
		sq.Sort = o.sort
		c.Sorts = append(c.Sorts, views.QuickRange{Label: o.label, URL: overviewURL(sq, 0), Current: o.sort == c.Sort})
	}
	if q.Name != "" || q.HideEmpty {
		c.Matching = views.Count(int64(ov.Matching)) + " of " + views.Plural(int64(ov.Queues), "queue", "queues")
		clear := q
		clear.Name, clear.HideEmpty = "", false
		c.ClearURL = overviewURL(clear, 0)
	}
	var p views.Pager
	if n := len(ov.Rows); n > 0 {
		p.Shown = fmt.Sprintf("queues %s–%s of %s", views.Count(int64(ov.Offset+1)), views.Count(int64(ov.Offset+n)), views.Count(int64(ov.Matching)))
	}
	if ov.Offset > 0 {
		p.Prev = overviewURL(q, max(ov.Offset-q.Limit, 0))
	}
	if ov.Offset+len(ov.Rows) < ov.Matching {
		p.Next = overviewURL(q, ov.Offset+q.Limit)
	}
	if len(ov.Rows) == 0 && ov.Offset > 0 {
		p.PastEnd = overviewURL(q, 0) // a page past the last: its first
	}
	return c, p
}

// countDelta says how a count moved against an earlier one, said as
// when ("24 h ago"); a rise of something bad is worse. Nothing when both
// are 0.
func countDelta(now, then int64, what, when string) views.Delta {
	if now == 0 && then == 0 {
		return views.Delta{} // nothing then, nothing now: no news
	}
	d := views.Delta{Title: fmt.Sprintf("%s %s now, %s %s", views.Count(now), what, views.Count(then), when)}
	switch {
	case now > then:
		d.Text, d.Class = "▲ "+views.Count(now-then)+" vs "+when, "worse"
	case now < then:
		d.Text, d.Class = "▼ "+views.Count(then-now)+" vs "+when, "better"
	default:
		d.Text, d.Class = "= "+when, "same"
	}
	return d
}

// rateDelta says how a rate (part of whole) of the last 24 h moved
// against the 24 h before, in percentage points; badUp: a rise is worse
// (failures), else better (replay success). Nothing without both wholes.
func rateDelta(part, whole, partBefore, wholeBefore int64, badUp bool) views.Delta {
	if whole == 0 || wholeBefore == 0 {
		return views.Delta{}
	}
	now, before := 100*float64(part)/float64(whole), 100*float64(partBefore)/float64(wholeBefore)
	d := views.Delta{Title: fmt.Sprintf("%.1f %% in the last 24 h, %.1f %% in the 24 h before", now, before)}
	diff := now - before
	switch {
	case diff >= 0.05:
		d.Text, d.Class = fmt.Sprintf("▲ %.1f pts vs the 24 h before", diff), "worse"
	case diff <= -0.05:
		d.Text, d.Class = fmt.Sprintf("▼ %.1f pts vs the 24 h before", -diff), "better"
	default:
		return views.Delta{Text: "= the 24 h before", Class: "same", Title: d.Title}
	}
	if !badUp {
		d.Class = map[string]string{"worse": "better", "better": "worse"}[d.Class]
	}
	return d
}

// rateText is part of whole in percent, with a note of the counts; "–"
// and a note of none when there is no whole.
func rateText(part, whole int64, what string) (string, string) {
	if whole == 0 {
		return "–", "no " + what + " in 24 h"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(part)/float64(whole)), fmt.Sprintf("%s of %s %s in 24 h", views.Count(part), views.Count(whole), what)
}

// overviewErrorGroups is how many error groups a queue's row shows.
const overviewErrorGroups = 3

func status(ok bool) string {
	if ok {
		return "ok"
	}
	return "alert"
}

func oldestTile(age time.Duration, l broker.Limits) views.Tile {
	t := views.Tile{Label: "Oldest dead letter", Value: "–", Note: "none waiting", Status: "ok", TestID: "oldest"}
	if age > 0 {
		t.Value, t.Note = views.Age(age), fmt.Sprintf("alert above %g h", l.OldestHours)
		t.Status = status(age <= time.Duration(l.OldestHours*float64(time.Hour)))
	}
	return t
}

func failureTile(completed, failed int64, l broker.Limits) views.Tile {
	t := views.Tile{Label: "Failures among acks", Value: "–", Note: "no acks yet", TestID: "failures"}
	if n := completed + failed; n > 0 {
		rate := float64(failed) / float64(n)
		t.Value = fmt.Sprintf("%.1f %%", rate*100)
		t.Note = fmt.Sprintf("%s of %s acks in 24 h; alert above %g %%", views.Count(failed), views.Count(n), l.FailurePct)
		t.Status = status(rate*100 <= l.FailurePct)
	}
	return t
}

func replayTile(h broker.Health, replayed int64, l broker.Limits) views.Tile {
	t := views.Tile{Label: "Replays that succeeded", Value: "–", Note: views.Count(replayed) + " replayed in all; none settled in 24 h", TestID: "replays"}
	if h.ReplayEnds > 0 {
		pct := 100 * float64(h.ReplayOK) / float64(h.ReplayEnds)
		t.Value = fmt.Sprintf("%.1f %%", pct) // as the rows say it
		t.Note = fmt.Sprintf("%s of %s replayed copies in 24 h; alert below %g %%", views.Count(h.ReplayOK), views.Count(h.ReplayEnds), l.ReplayMinPct)
		t.Status = status(pct >= l.ReplayMinPct)
	}
	return t
}

// showQueuePage renders page 2: one queue.
func (s *Server) showQueuePage(c echo.Context) error {
	name, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	q, err := s.broker.Queue(ctx, name)
	if err != nil {
		return err
	}
	find := c.QueryParam("partition")
	if len(find) > broker.MaxNameLength {
		return badRequest("partition: at most %d bytes", broker.MaxNameLength)
	}
	now := s.now()
	v := views.QueueDetail{
		Page:           s.page(c, "Queue "+q.Name, "overview", views.Crumb{Label: "Overview", URL: "/"}, views.Crumb{Label: q.Name}),
		Name:           q.Name,
		URL:            queueURL(q.Name),
		CreatedAt:      q.CreatedAt,
		Depth:          q.Depth(),
		DLQURL:         deadLettersURL(q.Name, nil),
		Options:        archiveRow(s.broker, q, optionRows(q.Options)),
		Namespace:      q.Namespace,
		Task:           q.Task,
		NotEnforced:    strings.Join(q.Options.NotEnforced(), ", "),
		PartitionTotal: len(q.Partitions),
		Finder:         len(q.Partitions) > maxPartitionChoices || find != "",
		Find:           find,
	}
	// A queue of many partitions lists the first of those the finder
	// matches (all: the first), by name, not a table nobody could scroll.
	for _, p := range q.Partitions {
		if !strings.HasPrefix(p.Name, find) {
			continue
		}
		v.PartitionsMatch++
		if len(v.Partitions) < maxPartitionChoices {
			v.Partitions = append(v.Partitions, views.PartitionRow{Name: p.Name, ID: p.UUID, Messages: p.Messages, DLQURL: deadLettersURL(q.Name, url.Values{"partition": {p.Name}})})
		}
	}
	stats := map[string]broker.GroupStats{}
	for _, g := range q.Stats {
		stats[g.Group] = g
	}
	seen := map[string]bool{}
	addGroup := func(name string, lag, leased int64) {
		seen[name] = true
		st := stats[name]
		row := views.GroupRow{Name: name, Lag: lag, Leased: leased, Depth: st.Depth, DeadLettered: st.DeadLettered, Replayed: st.Replayed, Deleted: st.Deleted, Dropped: st.Dropped, Expired: st.Expired,
			DLQURL: deadLettersURL(q.Name, url.Values{"group": {name}})}
		if !st.OldestFailedAt.IsZero() {
			row.Oldest = views.Age(now.Sub(st.OldestFailedAt))
		}
		v.Groups = append(v.Groups, row)
	}
	for _, g := range q.Groups {
		addGroup(g.Name, g.Lag, g.Leased)
	}
	for _, g := range q.Stats {
		if !seen[g.Group] {
			addGroup(g.Group, 0, 0)
		}
	}
	v.Holds = s.queueHolds(ctx, c, q.Name)
	var groups []string
	for i := range v.Groups {
		groups = append(groups, v.Groups[i].Name)
		v.Groups[i].Hold = views.HeldGroup(v.Holds, v.Groups[i].Name)
	}
	v.HoldForm = s.holdForm(c, q.Name, v.URL, groups)
	if !isFragment(c) {
		if v.Page.Flash, _, err = s.takeFlash(c); err != nil {
			return err
		}
	}
	return renderPage(c, http.StatusOK, views.QueueView(v), views.QueueContent(v))
}

// breakerRule says the circuit breaker's options in words.
func breakerRule(o broker.Options) string {
	if o.HoldAfterFailures <= 0 {
		return "0 (off: no group holds itself)"
	}
	return fmt.Sprintf("%d (a group holds itself after %d failed tries in a row; a probe every %d s)", o.HoldAfterFailures, o.HoldAfterFailures, o.HoldProbeSeconds)
}

func optionRows(o broker.Options) []views.Option {
	d := broker.DefaultOptions()
	note := func(changed bool) string {
		if changed {
			return ""
		}
		return "(default)"
	}
	rows := []views.Option{
		{Name: "leaseTime", Value: fmt.Sprintf("%d s", o.LeaseTime), Note: note(o.LeaseTime != d.LeaseTime)},
		{Name: "retryLimit", Value: fmt.Sprint(o.RetryLimit), Note: note(o.RetryLimit != d.RetryLimit)},
		{Name: "retryDelay", Value: fmt.Sprintf("%d ms", o.RetryDelay), Note: note(o.RetryDelay != d.RetryDelay)},
		{Name: "deadLetterQueue", Value: fmt.Sprint(o.DeadLetterQueue), Note: note(o.DeadLetterQueue != d.DeadLetterQueue)},
		{Name: "dlqAfterMaxRetries", Value: fmt.Sprint(o.DLQAfterMaxRetries), Note: note(o.DLQAfterMaxRetries != d.DLQAfterMaxRetries)},
		{Name: "delayedProcessing", Value: fmt.Sprintf("%d s", o.DelayedProcessing), Note: note(o.DelayedProcessing != d.DelayedProcessing)},
		{Name: "replayPausePercent", Value: pauseRule(o), Note: note(o.ReplayPausePercent != d.ReplayPausePercent || o.ReplayPauseWindow != d.ReplayPauseWindow)},
		{Name: "replayPauseWindow", Value: fmt.Sprint(o.ReplayPauseWindow), Note: note(o.ReplayPauseWindow != d.ReplayPauseWindow)},
		{Name: "completedRetentionSeconds", Value: retention(o.CompletedRetentionSeconds, "kept for ever once settled",
			"a message every group has settled is deleted %s after its last settlement"), Note: note(o.CompletedRetentionSeconds != d.CompletedRetentionSeconds)},
		{Name: "retentionSeconds", Value: retention(o.RetentionSeconds, "off",
			"any message is deleted %s after its push, settled or not (counted as expired for the groups that had not settled it)"), Note: note(o.RetentionSeconds != d.RetentionSeconds)},
		{Name: "deadLetterRetentionSeconds", Value: retention(o.DeadLetterRetentionSeconds, "kept until replayed or deleted",
			"a dead letter expires %s after it was filed"), Note: note(o.DeadLetterRetentionSeconds != d.DeadLetterRetentionSeconds)},
		{Name: "retryBackoff", Value: strconv.FormatFloat(o.RetryBackoff, 'g', -1, 64) + " (" + retrySchedule(o) + ")", Note: note(o.RetryBackoff != d.RetryBackoff)},
		{Name: "retryDelayMax", Value: fmt.Sprintf("%d ms (the longest a wait grows to: %s)", o.RetryDelayMax, views.Wait(time.Duration(o.RetryDelayMax)*time.Millisecond)), Note: note(o.RetryDelayMax != d.RetryDelayMax)},
		{Name: "maxReplays", Value: fmt.Sprint(o.MaxReplays), Note: note(o.MaxReplays != d.MaxReplays)},
		{Name: "deadLetterArchive", Value: fmt.Sprint(o.DeadLetterArchive), Note: note(o.DeadLetterArchive != d.DeadLetterArchive)},
		{Name: "holdAfterFailures", Value: breakerRule(o), Note: note(o.HoldAfterFailures != d.HoldAfterFailures)},
		{Name: "holdProbeSeconds", Value: fmt.Sprintf("%d s", o.HoldProbeSeconds), Note: note(o.HoldProbeSeconds != d.HoldProbeSeconds)},
		{Name: "maskPaths", Value: maskWords(o), Note: note(o.MaskPaths != d.MaskPaths)},
		{Name: "maskRevealRole", Value: string(o.RevealRole()) + " (and above may reveal the masked fields of a dead letter, audited; below it may not search or filter on them)",
			Note: note(o.RevealRole() != d.RevealRole())},
	}
	kept := o.Kept.Values()
	if v, ok := kept["maxWaitTimeSeconds"]; ok {
		rows = append(rows, views.Option{Name: "maxWaitTimeSeconds", Value: string(v) + " s (Queen's: a message is deleted this long after its push, as by retentionSeconds, when that is off or longer)"})
	}
	if v, ok := kept["windowBuffer"]; ok {
		value := string(v) + " s (off)"
		if w := o.Window(); w > 0 {
			value = string(v) + " s (Queen's: a partition is delivered once its newest message is " + broker.DurationWords(w) + " old; each push to it starts the wait again)"
		}
		rows = append(rows, views.Option{Name: "windowBuffer", Value: value})
	}
	for _, name := range o.NotEnforced() {
		rows = append(rows, views.Option{Name: name, Value: string(kept[name]), Note: "(kept, not enforced)"})
	}
	return rows
}

// maskWords says maskPaths in words.
func maskWords(o broker.Options) string {
	if o.MaskPaths == "" {
		return "none: payloads are shown whole"
	}
	return strings.Join(o.MaskPaths.List(), ", ") + " (shown as " + broker.MaskedValue + " in every page, API answer, search, diff and export)"
}

// retention says a retention option in words: off (0) as off says, else
// rule with the duration in words ("7 days", broker.DurationWords) in it.
func retention(seconds int, off, rule string) string {
	if seconds == 0 {
		return "0 (" + off + ")"
	}
	return fmt.Sprintf("%d s ("+rule+")", seconds, broker.DurationWords(time.Duration(seconds)*time.Second))
}

// retrySchedule says in words the wait before each of the queue's
// retries (broker.Options.RetryWait) and what follows the last: "retries
// wait 1 s, 2 s, 4 s, then the dead letters".
func retrySchedule(o broker.Options) string {
	waits := make([]time.Duration, o.RetryLimit)
	for k := range waits {
		waits[k] = o.RetryWait(k + 1)
	}
	s := views.RetrySchedule(waits, o.DeadLetterQueue && o.DLQAfterMaxRetries)
	if len(waits) == 0 {
		return s
	}
	return "retries wait " + s
}

// pauseRule says in words when a replay job of the queue pauses itself.
func pauseRule(o broker.Options) string {
	if o.ReplayPausePercent == 0 {
		return "0 (a replay job never pauses itself)"
	}
	return fmt.Sprintf("%d %% (a replay job pauses itself when more than %d %% of the last %d copies settled fail again)", o.ReplayPausePercent, o.ReplayPausePercent, o.ReplayPauseWindow)
}

func queueURL(name string) string { return "/queues/" + url.PathEscape(name) }

// deadLettersURL is the dead-letter list of a queue with a query.
func deadLettersURL(queue string, q url.Values) string {
	u := queueURL(queue) + "/dead-letters"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}
