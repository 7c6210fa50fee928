package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// showThresholds renders the admin page of the monitoring thresholds.
func (s *Server) showThresholds(c echo.Context) error {
	th, err := s.broker.Thresholds(c.Request().Context())
	if err != nil {
		return err
	}
	v, err := s.thresholdsForm(c, th)
	if err != nil {
		return err
	}
	if v.Flash, _, err = s.takeFlash(c); err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.ThresholdsView(v), views.ThresholdsContent(v))
}

func (s *Server) thresholdsForm(c echo.Context, th broker.Thresholds) (views.ThresholdsForm, error) {
	v := views.ThresholdsForm{Page: s.page(c, "Monitoring thresholds", "thresholds"), Default: limitRow("", th.Default)}
	sc := scopeOf(c.Request().Context())
	for _, q := range th.QueueNames() {
		if sc.Allows(q) {
			v.Overrides = append(v.Overrides, limitRow(q, th.Queues[q]))
		}
	}
	names, err := s.broker.QueueNames(c.Request().Context())
	if err != nil {
		return v, err
	}
	names = inScope(c.Request().Context(), names, func(n string) string { return n })
	for _, n := range names {
		if _, ok := th.Queues[n]; !ok {
			v.Queues = append(v.Queues, n)
		}
	}
	return v, nil
}

func limitRow(queue string, l broker.Limits) views.LimitRow {
	g := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	return views.LimitRow{Queue: queue, Depth: strconv.FormatInt(l.Depth, 10), OldestHours: g(l.OldestHours), FailurePct: g(l.FailurePct), ReplayPct: g(l.ReplayMinPct)}
}

// saveThresholds stores the thresholds of the form: defaults, overrides
// (minus those marked for removal) and a new override.
func (s *Server) saveThresholds(c echo.Context) error {
	if !scopeOf(c.Request().Context()).All() {
		// The form holds the overrides of the queues the admin sees: saved
		// by one limited to some queues, it would drop the others'.
		return s.renderError(c, http.StatusForbidden, "The thresholds are every queue's: an admin who sees every queue sets them.")
	}
	form, err := c.FormParams()
	if err != nil {
		return badRequest("the form could not be read")
	}
	ctx := c.Request().Context()
	th, err := s.broker.Thresholds(ctx)
	if err != nil {
		return err
	}
	next := broker.Thresholds{Queues: map[string]broker.Limits{}}
	if next.Default, err = readLimits(form, "default", th.Default); err != nil {
		return s.thresholdsError(c, th, err)
	}
	for i := 0; form.Has(fmt.Sprintf("q%d_queue", i)); i++ {
		prefix := fmt.Sprintf("q%d", i)
		q := form.Get(prefix + "_queue")
		if form.Get(prefix+"_remove") == "1" {
			continue
		}
		l, err := readLimits(form, prefix, th.For(q))
		if err != nil {
			return s.thresholdsError(c, th, fmt.Errorf("%s: %w", q, err))
		}
		next.Queues[q] = l
	}
	if q := strings.TrimSpace(form.Get("new_queue")); q != "" {
		if _, ok := next.Queues[q]; !ok {
			next.Queues[q] = next.Default
		}
	}
	if err := s.broker.SetThresholds(ctx, next, s.pageActor(c)); err != nil {
		return s.thresholdsError(c, th, err)
	}
	if err := s.setFlash(c, views.Flash{Kind: "ok", Text: "Thresholds saved."}, ""); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/thresholds")
}

// thresholdsError shows the form again, unchanged, with what was wrong.
func (s *Server) thresholdsError(c echo.Context, th broker.Thresholds, cause error) error {
	v, err := s.thresholdsForm(c, th)
	if err != nil {
		return err
	}
	_, msg, ok := statusOf(cause)
	if !ok {
		msg = cause.Error()
	}
	v.Error = "Nothing was saved: " + msg
	return render(c, http.StatusBadRequest, views.ThresholdsView(v))
}

// readLimits reads one row of the form; fields left empty keep base's.
func readLimits(form url.Values, prefix string, base broker.Limits) (broker.Limits, error) {
	l := base
	num := func(field, what string, dst *float64) error {
		v := strings.TrimSpace(form.Get(prefix + "_" + field))
		if v == "" {
			return nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s must be a number, got %q", what, v)
		}
		*dst = f
		return nil
	}
	depth := float64(l.Depth)
	if err := num("depth", "dead letters", &depth); err != nil {
		return l, err
	}
	if depth != float64(int64(depth)) {
		return l, fmt.Errorf("dead letters must be a whole number")
	}
	l.Depth = int64(depth)
	if err := num("oldest", "oldest age", &l.OldestHours); err != nil {
		return l, err
	}
	if err := num("failure", "failure rate", &l.FailurePct); err != nil {
		return l, err
	}
	if err := num("replay", "replay success", &l.ReplayMinPct); err != nil {
		return l, err
	}
	return l, nil
}
