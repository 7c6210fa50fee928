package views

import (
	"slices"
	"testing"
	"time"
)

// A series' colour is its name's: the same on every chart and range,
// whatever is drawn beside it, and one of the palette's.
func TestSeriesClassIsTheNamesAlone(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pt := []ChartPoint{{At: at, Value: 1}, {At: at.Add(time.Minute), Value: 2}}
	alone := Chart{Series: []ChartSeries{{Name: "orders / billing", Points: pt}}}.Layout()
	second := Chart{Series: []ChartSeries{{Name: "emails / mailer", Points: pt}, {Name: "billing", Colour: "orders / billing", Points: pt}}}.Layout()
	if alone.Lines[0].Class != second.Lines[1].Class || alone.Lines[0].Class != SeriesClass("orders / billing") {
		t.Fatalf("orders / billing drawn %q alone, %q second", alone.Lines[0].Class, second.Lines[1].Class)
	}
	seen := map[string]bool{}
	for _, name := range []string{"a", "b", "c", "orders", "payments", "emails", "exports", "ledger", "notify", "mailer", "shipping", "billing", "x/y", "", "ü"} {
		c := SeriesClass(name)
		if !slices.Contains([]string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11"}, c) {
			t.Fatalf("SeriesClass(%q) = %q", name, c)
		}
		seen[c] = true
	}
	if len(seen) < 6 {
		t.Fatalf("15 names got %d colours", len(seen))
	}
}

// A chart's table has a row a time, newest first, a column a series, and
// no value where a series has none.
func TestChartTableIsNewestFirst(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := Chart{Unit: " %", Series: []ChartSeries{
		{Name: "a", Points: []ChartPoint{{At: at, Value: 1}, {At: at.Add(time.Hour), Missing: true}}},
		{Name: "b", Points: []ChartPoint{{At: at, Value: 2.5}, {At: at.Add(time.Hour), Value: 3}}},
	}}
	tb := c.Table()
	if !slices.Equal(tb.Series, []string{"a", "b"}) || len(tb.Rows) != 2 {
		t.Fatalf("table %+v", tb)
	}
	if !tb.Rows[0].At.Equal(at.Add(time.Hour)) || !slices.Equal(tb.Rows[0].Values, []string{"", "3 %"}) || !slices.Equal(tb.Rows[1].Values, []string{"1 %", "2.5 %"}) {
		t.Fatalf("rows %+v", tb.Rows)
	}
}
