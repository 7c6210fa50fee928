package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// pointTitles are the hover titles of a chart's points, by the time they
// start with.
func pointTitles(r response, chart string) map[string]string {
	out := map[string]string{}
	r.doc().Find(`[data-testid="chart-` + chart + `"] [data-testid="chart-point"] title`).Each(func(_ int, s *goquery.Selection) {
		at, _, _ := strings.Cut(s.Text(), " · ")
		out[at] = s.Text()
	})
	return out
}

// The oldest dead letter's age is said at the end of each step, and at
// the clock's now for the step now is in: never at the end of a step that
// has not ended (a 5 minute old dead letter was shown 60 minutes old over
// 7 days).
func TestChartsOldestAgeIsNeverMeasuredInTheFuture(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rng  string
		want map[time.Duration]string // step start after 12:00 → the age shown
	}{
		// Filed at 12:05, now 12:25: the 12:00 step ended at 12:15.
		{"1h", map[time.Duration]string{4 * time.Minute: "", 5 * time.Minute: "1 min", 6 * time.Minute: "2 min", 24 * time.Minute: "20 min", 25 * time.Minute: "20 min"}},
		{"24h", map[time.Duration]string{0: "10 min", 15 * time.Minute: "20 min"}},
		{"7d", map[time.Duration]string{0: "20 min"}},
		{"30d", map[time.Duration]string{0: "20 min"}},
	}
	for _, tc := range cases {
		t.Run(tc.rng, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			noon := s.clock.Now()
			s.clock.Advance(5 * time.Minute)
			s.fail("orders", "", "billing", "ord-1", `{}`, "boom")
			s.clock.Advance(20 * time.Minute)
			b, _ := s.loggedIn(broker.RoleViewer)
			titles := pointTitles(b.get("/charts?range="+tc.rng).want(http.StatusOK), "oldest")
			for off, age := range tc.want {
				at := views.Exact(noon.Add(off))
				if got := titles[at]; age != "" && got != at+" · oldest: "+age {
					t.Errorf("step of %s: %q, want the age %s", at, got, age)
				}
			}
			// Nothing is drawn past the step now is in.
			for at := range titles {
				if tm, err := time.Parse("2006-01-02 15:04:05.000 UTC", at); err != nil || tm.After(s.clock.Now()) {
					t.Errorf("a point at %s (%v), after now %s", at, err, views.Exact(s.clock.Now()))
				}
			}
		})
	}
}

// thresholdLabels are the alert lines drawn on a chart.
func thresholdLabels(r response, chart string) []string {
	var out []string
	r.doc().Find(`[data-testid="chart-` + chart + `"] [data-testid="chart-threshold"]`).Each(func(_ int, s *goquery.Selection) {
		out = append(out, strings.TrimSpace(s.Text()))
	})
	return out
}

// Every chart that has a monitoring threshold draws it as a labelled line:
// the defaults over every queue, a queue's own limits over that queue.
func TestChartsDrawTheAlertThresholds(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	s.clock.Advance(2 * time.Minute)
	orders := broker.Limits{Depth: 3, OldestHours: 0.5, FailurePct: 2, ReplayMinPct: 90}
	if err := s.broker.SetThresholds(s.ctx, broker.Thresholds{Default: broker.DefaultLimits(), Queues: map[string]broker.Limits{"orders": orders}}, "test"); err != nil {
		t.Fatal(err)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	for _, tc := range []struct {
		path string
		want map[string]string // chart → its line's label; "" none
	}{
		// Over every queue the defaults (said so, as orders has its own);
		// emails has none of its own.
		{"/charts?range=1h", map[string]string{"depth": "alert > 10 (default)", "oldest": "alert > 4 h (default)", "failures": "alert > 5 % (default)", "flow": ""}},
		{"/charts?range=1h&queue=emails", map[string]string{"depth": "alert > 10", "oldest": "alert > 4 h", "failures": "alert > 5 %", "flow": ""}},
		{"/charts?range=1h&queue=orders", map[string]string{"depth": "alert > 3", "oldest": "alert > 30 min", "failures": "alert > 2 %", "flow": ""}},
	} {
		r := b.get(tc.path).want(http.StatusOK)
		for chart, want := range tc.want {
			got := thresholdLabels(r, chart)
			if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
				t.Errorf("%s: the %s chart's threshold lines %q, want %q", tc.path, chart, got, want)
			}
		}
	}
}
