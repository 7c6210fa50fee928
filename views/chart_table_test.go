package views

import (
	"slices"
	"strconv"
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

// Within one chart, lines whose names share a colour get different
// ones: the first by name keeps its own, the later takes the next free
// colour; the table's columns have the lines' colours.
func TestChartLinesDoNotShareAColour(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pt := []ChartPoint{{At: at, Value: 1}, {At: at.Add(time.Minute), Value: 2}}
	// Two names of one colour, found rather than hard-coded.
	first, later := "", ""
	byClass := map[string]string{}
	for i := 0; later == ""; i++ {
		n := "q" + strconv.Itoa(i)
		if o, ok := byClass[SeriesClass(n)]; ok {
			first, later = min(o, n), max(o, n) // by name
		}
		byClass[SeriesClass(n)] = n
	}
	var series []ChartSeries
	// Later first: the order drawn does not decide which one moves; the
	// others come after both by name.
	for _, n := range []string{later, "z-orders", "z-payments", "z-emails", "z-exports", "z-ledger", "z-notify", first} {
		series = append(series, ChartSeries{Name: n, Points: pt})
	}
	c := Chart{Series: series}
	l, tab := c.Layout(), c.Table()
	seen := map[string]string{}
	for i, line := range l.Lines {
		if o, ok := seen[line.Class]; ok {
			t.Fatalf("%s and %s share %s", o, line.Name, line.Class)
		}
		seen[line.Class] = line.Name
		if tab.Classes[i] != line.Class {
			t.Fatalf("%s: table %s, line %s", line.Name, tab.Classes[i], line.Class)
		}
	}
	if l.Lines[7].Class != SeriesClass(first) || l.Lines[0].Class == SeriesClass(later) {
		t.Fatalf("%s drawn %s (its own %s), %s drawn %s", first, l.Lines[7].Class, SeriesClass(first), later, l.Lines[0].Class)
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
