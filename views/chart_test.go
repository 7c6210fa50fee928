package views_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/views"
)

// rampSeries is n points from start, every step, with the values of value.
func rampSeries(start time.Time, step time.Duration, n int, value func(k int) float64) views.ChartSeries {
	s := views.ChartSeries{Name: "s"}
	for k := range n {
		s.Points = append(s.Points, views.ChartPoint{At: start.Add(time.Duration(k) * step), Value: value(k)})
	}
	return s
}

func tickLabels(ticks []views.ChartTick) []string {
	out := make([]string, len(ticks))
	for i, t := range ticks {
		out[i] = t.Label
	}
	return out
}

// The axes are labelled at round times and, for counts, at whole numbers.
func TestChartAxesAreRound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		chart  views.Chart
		xs, ys []string
	}{
		{"Hour", views.Chart{Whole: true, Series: []views.ChartSeries{
			rampSeries(time.Date(2026, 11, 29, 23, 13, 0, 0, time.UTC), time.Minute, 60, func(k int) float64 { return float64(k % 2) })}},
			[]string{"23:20", "23:30", "23:40", "23:50", "00:00", "00:10"}, []string{"0", "1"}},
		{"Day", views.Chart{Whole: true, Series: []views.ChartSeries{
			rampSeries(time.Date(2026, 11, 29, 0, 15, 0, 0, time.UTC), 15*time.Minute, 96, func(k int) float64 { return float64(k % 15) })}},
			[]string{"06:00", "12:00", "18:00", "Nov 30"}, []string{"0", "5", "10", "15"}},
		{"Week", views.Chart{Series: []views.ChartSeries{
			rampSeries(time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC), time.Hour, 168, func(k int) float64 { return 7.5 * float64(k) / 167 })}},
			[]string{"Nov 24", "Nov 25", "Nov 26", "Nov 27", "Nov 28", "Nov 29", "Nov 30"}, []string{"0", "2", "4", "6", "8"}},
		{"Percent", views.Chart{Whole: true, Unit: " %", Series: []views.ChartSeries{
			rampSeries(time.Date(2026, 11, 29, 0, 15, 0, 0, time.UTC), 15*time.Minute, 96, func(k int) float64 { return 83.33 * float64(k%2) })}},
			[]string{"06:00", "12:00", "18:00", "Nov 30"}, []string{"0 %", "20 %", "40 %", "60 %", "80 %", "100 %"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.chart.Layout()
			if got := tickLabels(l.XTicks); !slices.Equal(got, tc.xs) {
				t.Errorf("time axis: %q, want %q", got, tc.xs)
			}
			if got := tickLabels(l.YTicks); !slices.Equal(got, tc.ys) {
				t.Errorf("value axis: %q, want %q", got, tc.ys)
			}
		})
	}
}

// A month is labelled a week apart, at midnight.
func TestChartMonthAxis(t *testing.T) {
	t.Parallel()
	c := views.Chart{Series: []views.ChartSeries{
		rampSeries(time.Date(2026, 10, 31, 4, 0, 0, 0, time.UTC), 4*time.Hour, 180, func(k int) float64 { return 1 })}}
	xs := tickLabels(c.Layout().XTicks)
	if len(xs) < 4 || len(xs) > 5 {
		t.Fatalf("time axis: %q, want 4 or 5 labels", xs)
	}
	var prev time.Time
	for _, x := range xs {
		d, err := time.Parse("Jan 2 2006", x+" 2026")
		if err != nil {
			t.Fatalf("time axis label %q is not a date: %v", x, err)
		}
		if !prev.IsZero() && d.Sub(prev) != 7*24*time.Hour {
			t.Errorf("time axis: %q, want a week apart", xs)
		}
		prev = d
	}
}

// A rate of 0 % is data; a rate with nothing to divide is not.
func TestChartZeroRateIsData(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	zero := []views.ChartSeries{{Name: "failed acks", Points: []views.ChartPoint{{At: at}, {At: at.Add(time.Minute), Missing: true}}}}
	missing := []views.ChartSeries{{Name: "failed acks", Points: []views.ChartPoint{{At: at, Missing: true}}}}
	if !(views.Chart{Series: zero, ZeroIsData: true}).HasData() {
		t.Error("a rate chart with a 0 % point says it has no data")
	}
	if (views.Chart{Series: missing, ZeroIsData: true}).HasData() {
		t.Error("a rate chart with only missing points says it has data")
	}
	if (views.Chart{Series: zero}).HasData() {
		t.Error("a count chart of zeros says it has data")
	}
}

// A threshold is drawn as a rule with its label, and the value axis
// reaches up to it even when every value is below.
func TestChartThresholdIsDrawnAndOnTheAxis(t *testing.T) {
	t.Parallel()
	c := views.Chart{Whole: true, Thresholds: []views.ChartThreshold{{Value: 10, Label: "alert > 10"}}, Series: []views.ChartSeries{
		rampSeries(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), time.Minute, 60, func(k int) float64 { return float64(k % 4) })}}
	l := c.Layout()
	if ys := tickLabels(l.YTicks); ys[len(ys)-1] != "10" {
		t.Errorf("value axis %q, want it to reach 10", ys)
	}
	if len(l.Rules) != 1 || l.Rules[0].Label != "alert > 10" || l.Rules[0].Y != l.YTicks[len(l.YTicks)-1].Pos {
		t.Errorf("rules %+v, want one at the top tick %s", l.Rules, l.YTicks[len(l.YTicks)-1].Pos)
	}
	if got := c.Label(); !strings.HasSuffix(got, "; alert > 10") {
		t.Errorf("label %q, want the threshold in it", got)
	}
}
