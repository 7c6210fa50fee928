package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// chartRanges are the charts' ranges and the step each is drawn with.
var chartRanges = []struct {
	label      string
	span, step time.Duration
}{
	{"1h", time.Hour, time.Minute},
	{"24h", 24 * time.Hour, 15 * time.Minute},
	{"7d", 7 * 24 * time.Hour, time.Hour},
	{"30d", 30 * 24 * time.Hour, 4 * time.Hour},
}

// maxDepthLines caps the depth chart's lines: the deepest groups are drawn.
const maxDepthLines = 8

// showCharts renders page 5: DLQ depth, inflow and outflow, oldest age,
// failure rate and replay success over a range, from the maintained
// buckets.
func (s *Server) showCharts(c echo.Context) error {
	rng, queue := c.QueryParam("range"), c.QueryParam("queue")
	if rng == "" {
		rng = "24h"
	}
	idx := -1
	for i, r := range chartRanges {
		if r.label == rng {
			idx = i
		}
	}
	if idx < 0 {
		return badRequest("range must be 1h, 24h, 7d or 30d")
	}
	r := chartRanges[idx]
	from := 0
	if v := c.QueryParam("series"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return badRequest("series must be a number from 1")
		}
		from = n - 1
	}
	now := s.now()
	ctx := c.Request().Context()
	end := now.Truncate(r.step).Add(r.step) // the step now is in is drawn too
	if len(queue) > broker.MaxNameLength {
		return badRequest("queue: at most %d bytes", broker.MaxNameLength)
	}
	var series []broker.Series
	var err error
	if queue == "" || checkQueue(c, queue) == nil {
		series, err = s.broker.History(ctx, broker.HistoryQuery{Queue: queue, From: end.Add(-r.span), To: end, Step: r.step})
		series = inScope(ctx, series, func(s broker.Series) string { return s.Queue })
	} else {
		err = broker.ErrNotFound // out of the visitor's scope: as if absent
	}
	missing := queue != "" && errors.Is(err, broker.ErrNotFound)
	if err != nil && !missing {
		return err
	}
	// A queue of no such name (the picker is free text: part of a name,
	// typed): the page says so and offers the names that contain it.
	part := ""
	if missing {
		part = queue
	}
	suggest, all, err := s.broker.FindQueuesIn(ctx, part, views.MaxSuggest, scopeOf(ctx))
	if err != nil {
		return err
	}
	th, err := s.broker.Thresholds(ctx)
	if err != nil {
		return err
	}
	v := views.Charts{Page: s.page(c, "Charts", "charts"), Range: rng, Queue: queue, Suggest: suggest, QueueCount: all, SuggestURL: "/charts/queues"}
	for _, cr := range chartRanges {
		q := url.Values{"range": {cr.label}}
		if queue != "" {
			q.Set("queue", queue)
		}
		v.Ranges = append(v.Ranges, views.QuickRange{Label: cr.label, URL: "/charts?" + q.Encode(), Current: cr.label == rng})
	}
	lines := depthLines{from: from, url: func(from int) string {
		q := url.Values{"range": {rng}}
		if queue != "" {
			q.Set("queue", queue)
		}
		if from > 0 {
			q.Set("series", strconv.Itoa(from+1))
		}
		return "/charts?" + q.Encode()
	}}
	if missing {
		v.Missing = true
		for _, n := range suggest {
			v.Matches = append(v.Matches, views.QuickRange{Label: n, URL: "/charts?" + url.Values{"range": {rng}, "queue": {n}}.Encode()})
		}
		return renderPage(c, http.StatusOK, views.ChartsView(v), views.ChartsContent(v))
	}
	v.Charts = buildCharts(series, queue, r.step, chartLimits(th, queue), lines)
	if v.DemoUntil, err = s.demoUntil(c, end.Add(-r.span)); err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.ChartsView(v), views.ChartsContent(v))
}

// suggestQueues answers the charts' picker as a person types: up to
// views.MaxSuggest queue names that contain the text, as options.
func (s *Server) suggestQueues(c echo.Context) error {
	part := c.QueryParam("queue")
	if len(part) > broker.MaxNameLength {
		return badRequest("queue: at most %d bytes", broker.MaxNameLength)
	}
	names, _, err := s.broker.FindQueuesIn(c.Request().Context(), part, views.MaxSuggest, scopeOf(c.Request().Context()))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.QueueOptions(names))
}

// depthLines is which of the depth chart's lines to draw: from the
// from-th deepest (0: the deepest), maxDepthLines of them; url is the
// charts' view from another.
type depthLines struct {
	from int
	url  func(from int) string
}

// limitsShown are the thresholds the charts draw; a threshold that some
// queue overrides, drawn over every queue, is labelled the default.
type limitsShown struct {
	broker.Limits
	depth, oldest, failures, replays string // "" or " (default)"
}

// chartLimits are the limits of queue, or the defaults over every queue.
func chartLimits(th broker.Thresholds, queue string) limitsShown {
	if queue != "" {
		return limitsShown{Limits: th.For(queue)}
	}
	l := limitsShown{Limits: th.Default}
	const dflt = " (default)"
	for _, q := range th.Queues {
		if q.Depth != th.Default.Depth {
			l.depth = dflt
		}
		if q.OldestHours != th.Default.OldestHours {
			l.oldest = dflt
		}
		if q.FailurePct != th.Default.FailurePct {
			l.failures = dflt
		}
		if q.ReplayMinPct != th.Default.ReplayMinPct {
			l.replays = dflt
		}
	}
	return l
}

// pct writes a percentage threshold: 5, 2.5.
func pct(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + " %" }

// buildCharts turns the history into the five charts: of every queue, or
// of one when queue is set, with the alert thresholds of lim.
func buildCharts(series []broker.Series, queue string, step time.Duration, lim limitsShown, lines depthLines) []views.Chart {
	oneQueue := queue != ""
	depth := views.Chart{Title: "Dead letters waiting, per queue and group", TestID: "depth", Empty: "No dead letters in this range.", Whole: true}
	if oneQueue {
		depth.Title = "Dead letters waiting in " + queue + ", per consumer group"
	}
	flow := views.Chart{Title: "Dead letters filed vs replayed vs deleted, per " + stepName(step), TestID: "flow",
		Empty: "No dead letters were filed, replayed or deleted in this range.", Whole: true}
	oldest := views.Chart{Title: "Age of the oldest dead letter", TestID: "oldest", Empty: "No dead letter waited in this range."}
	// A rate of 0 % is good news, not a lack of data: only steps without
	// acks (or settled copies) are missing.
	failures := views.Chart{Title: "Failures among acks", Unit: " %", TestID: "failures", Empty: "No acks in this range.", Whole: true, ZeroIsData: true}
	replays := views.Chart{Title: "Replayed copies that then succeeded", Unit: " %", TestID: "replays", Empty: "No replayed copy was settled in this range.", Whole: true, ZeroIsData: true}

	// The deepest groups get a line each.
	sort.SliceStable(series, func(i, j int) bool { return peak(series[i]) > peak(series[j]) })
	n := 0
	if len(series) > 0 {
		n = len(series[0].Points)
	}
	in := views.ChartSeries{Name: "filed"}
	out := views.ChartSeries{Name: "replayed"}
	del := views.ChartSeries{Name: "deleted"}
	age := views.ChartSeries{Name: "oldest"}
	var ages []time.Duration
	fail := views.ChartSeries{Name: "failed acks"}
	succ := views.ChartSeries{Name: "replays that succeeded"}
	// Only the lines with dead letters in the range count; the others
	// would lie on the axis.
	deep := 0
	for deep < len(series) && peak(series[deep]) > 0 {
		deep++
	}
	first := min(lines.from, max(deep-1, 0))
	if deep > maxDepthLines || first > 0 {
		last := min(first+maxDepthLines, deep)
		what := "queue and group"
		if oneQueue {
			what = "group"
		}
		depth.Note = fmt.Sprintf("Showing lines %d–%d of %d (one a %s), by their peak in this range, deepest first.", first+1, last, deep, what)
		if first == 0 {
			depth.Note = fmt.Sprintf("Showing the %d deepest of %d lines (one a %s).", last-first, deep, what)
		}
		if first > 0 {
			depth.More = append(depth.More, views.QuickRange{Label: "‹ deeper " + strconv.Itoa(min(maxDepthLines, first)), URL: lines.url(max(first-maxDepthLines, 0))})
		}
		if last < deep {
			depth.More = append(depth.More, views.QuickRange{Label: "next " + strconv.Itoa(min(maxDepthLines, deep-last)) + " ›", URL: lines.url(last)})
		}
		if !oneQueue {
			depth.Note += " Pick a queue above to see its groups."
		}
	}
	for i, s := range series {
		// Lines at zero are left out of a long chart (they lie on the
		// axis); a short one draws them: "none all day" is news too.
		short := first == 0 && deep <= maxDepthLines
		if i >= first && i < first+maxDepthLines && (i < max(deep, 1) || short) {
			name := s.Queue + " / " + s.Group
			if oneQueue {
				name = s.Group
			}
			line := views.ChartSeries{Name: name, Colour: s.Queue + " / " + s.Group}
			for _, p := range s.Points {
				line.Points = append(line.Points, views.ChartPoint{At: p.At, Value: float64(p.Depth)})
			}
			depth.Series = append(depth.Series, line)
		}
	}
	for k := 0; k < n; k++ {
		var sum broker.Stats
		var at time.Time
		var maxAge time.Duration
		for _, s := range series {
			p := s.Points[k]
			at = p.At
			sum.DeadLettered += p.DeadLettered
			sum.Replayed += p.Replayed
			sum.Deleted += p.Deleted
			sum.Completed += p.Completed
			sum.Failed += p.Failed
			sum.ReplayCompleted += p.ReplayCompleted
			sum.ReplayFailed += p.ReplayFailed
			maxAge = max(maxAge, p.OldestAge)
		}
		in.Points = append(in.Points, views.ChartPoint{At: at, Value: float64(sum.DeadLettered)})
		out.Points = append(out.Points, views.ChartPoint{At: at, Value: float64(sum.Replayed)})
		del.Points = append(del.Points, views.ChartPoint{At: at, Value: float64(sum.Deleted)})
		ages = append(ages, maxAge)
		age.Points = append(age.Points, views.ChartPoint{At: at})
		fail.Points = append(fail.Points, rate(at, sum.Failed, sum.Completed+sum.Failed))
		succ.Points = append(succ.Points, rate(at, sum.ReplayCompleted, sum.ReplayCompleted+sum.ReplayFailed))
	}
	// Ages in minutes while they are short, in hours beyond, in days
	// beyond two.
	unit, perUnit := " h", time.Hour
	switch longest := slices.Max(append(ages, 0)); {
	case longest < 2*time.Hour:
		unit, perUnit = " min", time.Minute
	case longest >= 48*time.Hour:
		unit, perUnit = " d", 24*time.Hour
	}
	oldest.Unit = unit
	for k, a := range ages {
		age.Points[k].Value = float64(a) / float64(perUnit)
	}
	limit := time.Duration(lim.OldestHours * float64(time.Hour))
	oldest.Thresholds = []views.ChartThreshold{{Value: float64(limit) / float64(perUnit), Label: "alert > " + views.Age(limit) + lim.oldest}}
	depth.Thresholds = []views.ChartThreshold{{Value: float64(lim.Depth), Label: "alert > " + strconv.FormatInt(lim.Depth, 10) + lim.depth}}
	failures.Thresholds = []views.ChartThreshold{{Value: lim.FailurePct, Label: "alert > " + pct(lim.FailurePct) + lim.failures}}
	replays.Thresholds = []views.ChartThreshold{{Value: lim.ReplayMinPct, Label: "alert < " + pct(lim.ReplayMinPct) + lim.replays}}
	flow.Series = []views.ChartSeries{in, out, del}
	oldest.Series = []views.ChartSeries{age}
	failures.Series = []views.ChartSeries{fail}
	replays.Series = []views.ChartSeries{succ}
	return []views.Chart{depth, flow, oldest, failures, replays, retentionChart(series, oneQueue, step)}
}

// maxRetentionLines caps the retention chart's lines: the biggest are
// drawn, and the caption says how many more removed something.
const maxRetentionLines = 8

// retentionChart draws what retention removed, per step: messages
// retentionSeconds deleted before a group settled them (expired unread)
// and dead letters deadLetterRetentionSeconds expired, a line per queue
// and group (per group of one queue) that lost any in the range, each
// named with its total, the biggest first.
func retentionChart(series []broker.Series, oneQueue bool, step time.Duration) views.Chart {
	c := views.Chart{Title: "Removed by retention, per " + stepName(step), TestID: "retention",
		Empty: "Retention removed nothing in this range.", Whole: true}
	type line struct {
		s     views.ChartSeries
		total int64
	}
	var lines []line
	for _, s := range series {
		name := s.Queue + " / " + s.Group
		if oneQueue {
			name = s.Group
		}
		for _, k := range []struct {
			what string
			of   func(broker.Bucket) int64
		}{
			{"messages expired unread", func(p broker.Bucket) int64 { return p.Expired }},
			{"dead letters expired", func(p broker.Bucket) int64 { return p.DeadLettersExpired }},
		} {
			var l line
			for _, p := range s.Points {
				n := k.of(p)
				l.total += n
				l.s.Points = append(l.s.Points, views.ChartPoint{At: p.At, Value: float64(n)})
			}
			if l.total > 0 {
				l.s.Name = name + ": " + k.what + " (" + views.Count(l.total) + ")"
				lines = append(lines, l)
			}
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].total > lines[j].total })
	if len(lines) > maxRetentionLines {
		c.Title += " (the " + strconv.Itoa(maxRetentionLines) + " biggest of " + strconv.Itoa(len(lines)) + ")"
		lines = lines[:maxRetentionLines]
	}
	for _, l := range lines {
		c.Series = append(c.Series, l.s)
	}
	return c
}

// rate is part/whole in percent, missing when there is no whole.
func rate(at time.Time, part, whole int64) views.ChartPoint {
	if whole == 0 {
		return views.ChartPoint{At: at, Missing: true}
	}
	return views.ChartPoint{At: at, Value: 100 * float64(part) / float64(whole)}
}

func peak(s broker.Series) int64 {
	var m int64
	for _, p := range s.Points {
		m = max(m, p.Depth)
	}
	return m
}

func stepName(d time.Duration) string {
	switch d {
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	}
	return views.Age(d)
}
