package views

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Chart is a line chart drawn as SVG on the server: no script, values on
// hover through SVG titles.
type Chart struct {
	Title  string
	Unit   string // appended to values: "", " %", ...
	TestID string
	Series []ChartSeries
	Empty  string // what to say when there is no data
	// Whole: the values are counts (or whole percents), so the y axis is
	// labelled at whole numbers only: no "2.5 dead letters".
	Whole bool
	// ZeroIsData: a zero is a value worth drawing (a failure rate of
	// 0 %); only missing points mean no data.
	ZeroIsData bool
	// Thresholds are the alert levels of the chart's metric, drawn as
	// labelled dashed lines; the value axis reaches up to them.
	Thresholds []ChartThreshold
	// Note says what the chart leaves out ("showing the 8 deepest of 295
	// series"), with links to the others (More); empty: nothing.
	Note string
	More []QuickRange
}

// ChartThreshold is an alert level, in the chart's unit.
type ChartThreshold struct {
	Value float64
	Label string // "alert > 4 h"
}

// Label is what the chart is for a screen reader: its title and its
// alert levels.
func (c Chart) Label() string {
	out := c.Title
	for _, t := range c.Thresholds {
		out += "; " + t.Label
	}
	return out
}

// ChartSeries is one line.
type ChartSeries struct {
	Name string
	// Colour names what the line is, for its colour (SeriesClass), when
	// Name is shorter than that ("billing" on the chart of one queue
	// for "orders / billing"): "" Name.
	Colour string
	Points []ChartPoint
}

// colourKey is what s's colour is derived from.
func (s ChartSeries) colourKey() string {
	if s.Colour != "" {
		return s.Colour
	}
	return s.Name
}

// ChartPoint is one value; Missing points break the line.
type ChartPoint struct {
	At      time.Time
	Value   float64
	Missing bool
}

// HasData reports whether any point has a non-zero value (any value at
// all with ZeroIsData).
func (c Chart) HasData() bool {
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !p.Missing && (p.Value != 0 || c.ZeroIsData) {
				return true
			}
		}
	}
	return false
}

// Chart geometry, in SVG user units.
const (
	// chartW is about the width the chart is drawn at on a laptop (two
	// charts side by side): the SVG stretches to its box, and text drawn
	// at another width would come out squeezed or stretched.
	chartW, chartH         = 600.0, 220.0
	padL, padR, padT, padB = 56.0, 12.0, 10.0, 26.0
)

// ChartLine is a series laid out for drawing.
type ChartLine struct {
	Name string
	// Class is the line's colour, its name's (SeriesClass); Key tells
	// its legend's toggle which line it shows and hides.
	Class  string
	Key    string
	Paths  []string // polyline point lists, one per unbroken run
	Dots   []ChartDot
	Legend string
}

// ChartDot is a hover target.
type ChartDot struct {
	X, Y  string
	Title string
	Alone bool // no neighbour to draw a line to: drawn as a dot
}

// ChartTick is an axis label.
type ChartTick struct {
	Pos   string
	Label string
}

// ChartRule is a threshold laid out for drawing: a line across the
// chart at Y, its label above its right end.
type ChartRule struct {
	Y, LabelY string
	Label     string
}

// ChartLayout is everything the SVG template needs.
type ChartLayout struct {
	ViewBox string
	Lines   []ChartLine
	Rules   []ChartRule
	YTicks  []ChartTick
	XTicks  []ChartTick
	Grid    []string // y positions of grid lines
	Left    string
	Right   string
	Bottom  string
}

// Layout computes the drawing of c.
func (c Chart) Layout() ChartLayout {
	l := ChartLayout{ViewBox: fmt.Sprintf("0 0 %g %g", chartW, chartH), Left: f(padL), Right: f(chartW - padR), Bottom: f(chartH - padB)}
	var t0, t1 time.Time
	maxV := 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			if t0.IsZero() || p.At.Before(t0) {
				t0 = p.At
			}
			if p.At.After(t1) {
				t1 = p.At
			}
			if !p.Missing {
				maxV = math.Max(maxV, p.Value)
			}
		}
	}
	for _, t := range c.Thresholds {
		maxV = math.Max(maxV, t.Value)
	}
	step := yStep(maxV, c.Whole)
	top := math.Ceil(maxV/step-1e-9) * step
	top = math.Max(top, step)
	span := t1.Sub(t0)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return padL
		}
		return padL + (chartW-padL-padR)*float64(t.Sub(t0))/float64(span)
	}
	y := func(v float64) float64 { return chartH - padB - (chartH-padT-padB)*v/top }
	for i := 0; float64(i)*step <= top+step/1e6; i++ {
		v := float64(i) * step
		l.YTicks = append(l.YTicks, ChartTick{Pos: f(y(v)), Label: short(v) + c.Unit})
		l.Grid = append(l.Grid, f(y(v)))
	}
	if span > 0 {
		every := xStep(span)
		for t := ceilTime(t0, every); !t.After(t1); t = t.Add(every) {
			l.XTicks = append(l.XTicks, ChartTick{Pos: f(x(t)), Label: tickTime(t, span, every)})
		}
	}
	for _, t := range c.Thresholds {
		// The label stands above its line, or below it at the top.
		ty := y(t.Value)
		ly := ty - 4
		if ly < padT+8 {
			ly = ty + 13
		}
		l.Rules = append(l.Rules, ChartRule{Y: f(ty), LabelY: f(ly), Label: t.Label})
	}
	classes := c.classes()
	for i, s := range c.Series {
		line := ChartLine{Name: s.Name, Class: classes[i], Key: strconv.Itoa(i)}
		var run []string
		present := func(k int) bool { return k >= 0 && k < len(s.Points) && !s.Points[k].Missing }
		for k, p := range s.Points {
			if p.Missing {
				if len(run) > 0 {
					line.Paths = append(line.Paths, strings.Join(run, " "))
					run = nil
				}
				continue
			}
			px, py := x(p.At), y(p.Value)
			run = append(run, f(px)+","+f(py))
			line.Dots = append(line.Dots, ChartDot{X: f(px), Y: f(py), Title: fmt.Sprintf("%s · %s: %s%s", Exact(p.At), s.Name, short(p.Value), c.Unit),
				Alone: !present(k-1) && !present(k+1)})
		}
		if len(run) > 0 {
			line.Paths = append(line.Paths, strings.Join(run, " "))
		}
		l.Lines = append(l.Lines, line)
	}
	return l
}

func f(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// yStep is the step between the y axis's labels: 1, 2, 2.5 or 5 times a
// power of ten (not 2.5 nor below 1 when whole), the smallest that labels
// 0 to maxV in at most 5 steps.
func yStep(maxV float64, whole bool) float64 {
	if maxV <= 0 {
		maxV = 1
	}
	p := math.Pow(10, math.Floor(math.Log10(maxV/5)))
	for {
		for _, m := range []float64{1, 2, 2.5, 5} {
			s := m * p
			if whole && (s < 1 || m == 2.5) {
				continue
			}
			if math.Ceil(maxV/s-1e-9) <= 5 {
				return s
			}
		}
		p *= 10
	}
}

// xSteps are the steps the time axis is labelled in, at round times.
var xSteps = []time.Duration{
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// xStep is the smallest of xSteps that puts at most 7 labels on span.
func xStep(span time.Duration) time.Duration {
	for _, s := range xSteps {
		if span/s < 7 {
			return s
		}
	}
	return xSteps[len(xSteps)-1]
}

// ceilTime is the first multiple of every at or after t, in UTC (weeks
// start on Monday).
func ceilTime(t time.Time, every time.Duration) time.Time {
	t = t.UTC()
	c := t.Truncate(every)
	if c.Before(t) {
		c = c.Add(every)
	}
	return c
}

// short writes a value compactly: 3, 2.5, 1.2k, 3.4M.
func short(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	case v >= 100 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	}
}

// tickTime labels a time axis tick: the date at midnight on axes longer
// than a few hours, the time of day otherwise.
func tickTime(t time.Time, span, every time.Duration) string {
	t = t.UTC()
	if every >= 24*time.Hour || (span > 6*time.Hour && t.Hour() == 0 && t.Minute() == 0) {
		return t.Format("Jan 2")
	}
	return t.Format("15:04")
}

// Sparkline is a small depth line for the overview.
type Sparkline struct {
	Points string // polyline points in a 100 x 24 box
	Title  string
	Class  string // its colour (SeriesClass of what it shows), "" the accent
	// Top and Bottom label the scale: the box's top is the highest value
	// (1 when all are 0), its bottom 0.
	Top, Bottom string
}

// MakeSparkline draws values (oldest first) into a 100 x 24 box.
func MakeSparkline(values []float64, title string) Sparkline {
	if len(values) < 2 {
		return Sparkline{Title: title}
	}
	maxV := 0.0
	for _, v := range values {
		maxV = math.Max(maxV, v)
	}
	if maxV == 0 {
		maxV = 1
	}
	pts := make([]string, len(values))
	for i, v := range values {
		pts[i] = f(100*float64(i)/float64(len(values)-1)) + "," + f(22-20*v/maxV)
	}
	if slices.Max(values) == 0 {
		// A line on the axis: a scale would only say 1.
		return Sparkline{Points: strings.Join(pts, " "), Title: title + " (0 throughout)"}
	}
	title += fmt.Sprintf(" (between %s and %s; scale 0 to %s)", num(slices.Min(values)), num(maxV), num(maxV))
	return Sparkline{Points: strings.Join(pts, " "), Title: title, Top: num(maxV), Bottom: "0"}
}

// num writes a whole count with thousands separators, else one decimal.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return Count(int64(v))
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// seriesColours is how many colours SeriesClass picks from (static/live.css
// c0 to c11, each in a light and a dark shade).
const seriesColours = 12

// SeriesClass is the colour class of a queue, a queue and group, or any
// series: derived from its name alone (FNV-1a), so that the same name has
// the same colour on every chart, range and page. Two names may share
// one: on a chart, Chart.classes moves the later of two to a free colour.
func SeriesClass(name string) string {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return "c" + strconv.Itoa(int(h%seriesColours))
}

// classes is the colour of each of c's lines: its name's (SeriesClass),
// but where two lines of the chart would share one, the later by name
// takes the next colour no line has (while one is free): eight lines
// get eight colours, and a line keeps its own but beside a line whose
// name comes first and has it too.
func (c Chart) classes() []string {
	out := make([]string, len(c.Series))
	order := make([]int, len(c.Series))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(c.Series[a].colourKey(), c.Series[b].colourKey()) })
	used := map[string]bool{}
	for _, i := range order {
		cls := SeriesClass(c.Series[i].colourKey())
		if used[cls] && len(used) < seriesColours {
			n, _ := strconv.Atoi(cls[1:])
			for used[cls] {
				n = (n + 1) % seriesColours
				cls = "c" + strconv.Itoa(n)
			}
		}
		used[cls] = true
		out[i] = cls
	}
	return out
}

// ChartTable is a chart's values as a table, for those who read it
// rather than see it (a screen reader, the keyboard): a row a time, a
// column a series.
type ChartTable struct {
	Series  []string
	Classes []string // each series' colour
	Rows    []ChartTableRow
}

// ChartTableRow is the values of every series at one time ("" where the
// series has no value then).
type ChartTableRow struct {
	At     time.Time
	Values []string
}

// Table lays c's values out as a table, newest first (as the lists are:
// what a reader looks for first is now).
func (c Chart) Table() ChartTable {
	var t ChartTable
	at := map[time.Time]int{}
	var times []time.Time
	t.Classes = c.classes()
	for _, s := range c.Series {
		t.Series = append(t.Series, s.Name)
		for _, p := range s.Points {
			if _, ok := at[p.At]; !ok {
				at[p.At] = 0
				times = append(times, p.At)
			}
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return b.Compare(a) })
	for i, tm := range times {
		at[tm] = i
		t.Rows = append(t.Rows, ChartTableRow{At: tm, Values: make([]string, len(c.Series))})
	}
	for k, s := range c.Series {
		for _, p := range s.Points {
			if !p.Missing {
				t.Rows[at[p.At]].Values[k] = short(p.Value) + c.Unit
			}
		}
	}
	return t
}

// TableTime writes a time of a chart's table: to the minute, in UTC, as
// its buckets are.
func TableTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }
