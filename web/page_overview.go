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

// showOverview renders page 1: every queue at a glance, judged against the
// monitoring thresholds.
func (s *Server) showOverview(c echo.Context) error {
	ctx, cancel := withTimeout(c, 10*time.Second)
	defer cancel()
	health, th, err := s.broker.Health(ctx)
	if err != nil {
		return err
	}
	groups, err := s.broker.TopErrorGroups(ctx, overviewErrorGroups)
	if err != nil {
		return err
	}
	now := s.now()
	v := views.Overview{Page: s.page(c, "Overview", "overview")}
	var depth, replayed, deepest int64
	var window broker.Health
	var oldest time.Duration
	for _, q := range health {
		row := views.QueueRow{Name: q.Name, URL: queueURL(q.Name), DLQURL: deadLettersURL(q.Name, nil), Partitions: len(q.Partitions), Depth: q.Health.Depth}
		for _, g := range q.Stats {
			gd := views.GroupDepth{Group: g.Group, Depth: g.Depth, URL: deadLettersURL(q.Name, url.Values{"group": {g.Group}})}
			if !g.OldestFailedAt.IsZero() && g.Depth > 0 {
				gd.Oldest = views.Age(now.Sub(g.OldestFailedAt))
			}
			row.Groups = append(row.Groups, gd)
			replayed += g.Replayed
		}
		if q.Health.Oldest > 0 {
			row.Oldest = views.Age(q.Health.Oldest)
		}
		for _, br := range q.Breaches {
			row.Alerts = append(row.Alerts, br.Text)
		}
		spark := make([]float64, len(q.DepthSeries))
		for k, d := range q.DepthSeries {
			spark[k] = float64(d)
		}
		row.Spark = views.MakeSparkline(spark, "Dead letters of "+q.Name+" over the last 24 h")
		row.Spark.Class = views.SeriesClass(q.Name) // its colour on the charts
		for _, g := range groups[q.Name] {
			row.ErrorGroups = append(row.ErrorGroups, views.TopError{Error: g.Fingerprint, Count: g.DeadLetters,
				URL: deadLettersURL(q.Name, url.Values{"fingerprint": {g.Fingerprint}})})
		}
		depth += q.Health.Depth
		deepest = max(deepest, q.Health.Depth)
		oldest = max(oldest, q.Health.Oldest)
		window.Acks += q.Health.Acks
		window.Failed += q.Health.Failed
		window.ReplayEnds += q.Health.ReplayEnds
		window.ReplayOK += q.Health.ReplayOK
		v.Queues = append(v.Queues, row)
	}
	l := th.Default
	v.Tiles = []views.Tile{
		{Label: "Queues", Value: views.Count(int64(len(health))), TestID: "queues"},
		{Label: "Dead letters", Value: views.Count(depth), Note: fmt.Sprintf("alert above %d in a queue", l.Depth), Status: status(deepest <= l.Depth), TestID: "depth"},
		oldestTile(oldest, l),
		failureTile(window.Acks-window.Failed, window.Failed, l),
		replayTile(window, replayed, l),
	}
	if v.DemoUntil, err = s.demoUntil(c, now.Add(-broker.HealthWindow)); err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.OverviewView(v), views.OverviewContent(v))
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
		t.Value = fmt.Sprintf("%.0f %%", pct)
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
	ctx, cancel := withTimeout(c, 10*time.Second)
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
	return renderPage(c, http.StatusOK, views.QueueView(v), views.QueueContent(v))
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
