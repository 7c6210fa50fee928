package web

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// Monitoring thresholds (DASHBOARD.md, "Monitoring").
const (
	alertDepth       = 10
	alertOldest      = 4 * time.Hour
	alertFailureRate = 0.05
)

// showOverview renders page 1: every queue at a glance.
func (s *Server) showOverview(c echo.Context) error {
	ctx, cancel := withTimeout(c, 10*time.Second)
	defer cancel()
	briefs, err := s.broker.Briefs(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	v := views.Overview{Page: s.page(c, "Overview", "overview")}
	var depth, completed, failed, replayed, deepest int64
	var oldest time.Time
	for _, b := range briefs {
		row := views.QueueRow{Name: b.Name, URL: queueURL(b.Name), DLQURL: deadLettersURL(b.Name, nil), Partitions: len(b.Partitions), Depth: b.Depth()}
		var qOldest time.Time
		var qCompleted, qFailed int64
		for _, g := range b.Stats {
			gd := views.GroupDepth{Group: g.Group, Depth: g.Depth, URL: deadLettersURL(b.Name, url.Values{"group": {g.Group}})}
			if !g.OldestFailedAt.IsZero() {
				gd.Oldest = views.Age(now.Sub(g.OldestFailedAt))
				if qOldest.IsZero() || g.OldestFailedAt.Before(qOldest) {
					qOldest = g.OldestFailedAt
				}
			}
			row.Groups = append(row.Groups, gd)
			qCompleted += g.Completed
			qFailed += g.Failed
			replayed += g.Replayed
		}
		if !qOldest.IsZero() {
			row.Oldest = views.Age(now.Sub(qOldest))
			if oldest.IsZero() || qOldest.Before(oldest) {
				oldest = qOldest
			}
		}
		row.Alerts = alerts(row.Depth, qOldest, now, qCompleted, qFailed)
		depth += row.Depth
		deepest = max(deepest, row.Depth)
		completed += qCompleted
		failed += qFailed
		v.Queues = append(v.Queues, row)
	}
	v.Tiles = []views.Tile{
		{Label: "Queues", Value: views.Count(int64(len(briefs))), TestID: "queues"},
		{Label: "Dead letters", Value: views.Count(depth), Note: fmt.Sprintf("alert above %d in a queue", alertDepth), Status: status(deepest <= alertDepth), TestID: "depth"},
		oldestTile(oldest, now),
		failureTile(completed, failed),
		{Label: "Replayed", Value: views.Count(replayed), Note: "dead letters pushed again", TestID: "replayed"},
	}
	return renderPage(c, http.StatusOK, views.OverviewView(v), views.OverviewContent(v))
}

func status(ok bool) string {
	if ok {
		return "ok"
	}
	return "alert"
}

func oldestTile(oldest, now time.Time) views.Tile {
	t := views.Tile{Label: "Oldest dead letter", Value: "–", Note: "none waiting", Status: "ok", TestID: "oldest"}
	if !oldest.IsZero() {
		age := now.Sub(oldest)
		t.Value, t.Note, t.Status = views.Age(age), "alert above 4 h", status(age <= alertOldest)
	}
	return t
}

func failureTile(completed, failed int64) views.Tile {
	t := views.Tile{Label: "Failures among acks", Value: "–", Note: "no acks yet", TestID: "failures"}
	if n := completed + failed; n > 0 {
		rate := float64(failed) / float64(n)
		t.Value = fmt.Sprintf("%.1f %%", rate*100)
		t.Note = fmt.Sprintf("%s of %s acks; alert above 5 %%", views.Count(failed), views.Count(n))
		t.Status = status(rate <= alertFailureRate)
	}
	return t
}

// alerts names the thresholds a queue breaches.
func alerts(depth int64, oldest, now time.Time, completed, failed int64) []string {
	var out []string
	if depth > alertDepth {
		out = append(out, fmt.Sprintf("%s dead letters (> %d)", views.Count(depth), alertDepth))
	}
	if !oldest.IsZero() && now.Sub(oldest) > alertOldest {
		out = append(out, "oldest "+views.Age(now.Sub(oldest))+" (> 4 h)")
	}
	if n := completed + failed; n > 0 && float64(failed)/float64(n) > alertFailureRate {
		out = append(out, fmt.Sprintf("%.1f %% of acks failed (> 5 %%)", float64(failed)*100/float64(n)))
	}
	return out
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
	now := s.now()
	v := views.QueueDetail{
		Page:      s.page(c, "Queue "+q.Name, "overview", views.Crumb{Label: "Overview", URL: "/"}, views.Crumb{Label: q.Name}),
		Name:      q.Name,
		CreatedAt: q.CreatedAt,
		Depth:     q.Depth(),
		DLQURL:    deadLettersURL(q.Name, nil),
		Options:   optionRows(q.Options),
	}
	for _, p := range q.Partitions {
		v.Partitions = append(v.Partitions, views.PartitionRow{Name: p.Name, ID: p.UUID, Messages: p.Messages, DLQURL: deadLettersURL(q.Name, url.Values{"partition": {p.Name}})})
	}
	stats := map[string]broker.GroupStats{}
	for _, g := range q.Stats {
		stats[g.Group] = g
	}
	seen := map[string]bool{}
	addGroup := func(name string, lag, leased int64) {
		seen[name] = true
		st := stats[name]
		row := views.GroupRow{Name: name, Lag: lag, Leased: leased, Depth: st.Depth, DeadLettered: st.DeadLettered, Replayed: st.Replayed, Deleted: st.Deleted, Dropped: st.Dropped,
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
	return []views.Option{
		{Name: "leaseTime", Value: fmt.Sprintf("%d s", o.LeaseTime), Note: note(o.LeaseTime != d.LeaseTime)},
		{Name: "retryLimit", Value: fmt.Sprint(o.RetryLimit), Note: note(o.RetryLimit != d.RetryLimit)},
		{Name: "retryDelay", Value: fmt.Sprintf("%d ms", o.RetryDelay), Note: note(o.RetryDelay != d.RetryDelay)},
		{Name: "deadLetterQueue", Value: fmt.Sprint(o.DeadLetterQueue), Note: note(o.DeadLetterQueue != d.DeadLetterQueue)},
		{Name: "dlqAfterMaxRetries", Value: fmt.Sprint(o.DLQAfterMaxRetries), Note: note(o.DLQAfterMaxRetries != d.DLQAfterMaxRetries)},
	}
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
