package views

import (
	"fmt"
	"math"
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
}

// ChartSeries is one line.
type ChartSeries struct {
	Name   string
	Points []ChartPoint
}

// ChartPoint is one value; Missing points break the line.
type ChartPoint struct {
	At      time.Time
	Value   float64
	Missing bool
}

// HasData reports whether any point has a non-zero value.
func (c Chart) HasData() bool {
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !p.Missing && p.Value != 0 {
				return true
			}
		}
	}
	return false
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 720.0, 220.0
	padL, padR, padT, padB = 56.0, 12.0, 10.0, 26.0
)

// ChartLine is a series laid out for drawing.
type ChartLine struct {
	Name   string
	Class  string
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

// ChartLayout is everything the SVG template needs.
type ChartLayout struct {
	ViewBox string
	Lines   []ChartLine
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
	top := niceCeil(maxV)
	span := t1.Sub(t0)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return padL
		}
		return padL + (chartW-padL-padR)*float64(t.Sub(t0))/float64(span)
	}
	y := func(v float64) float64 { return chartH - padB - (chartH-padT-padB)*v/top }
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		l.YTicks = append(l.YTicks, ChartTick{Pos: f(y(v)), Label: short(v) + c.Unit})
		l.Grid = append(l.Grid, f(y(v)))
	}
	for i := 0; i <= 4 && span > 0; i++ {
		t := t0.Add(time.Duration(float64(span) * float64(i) / 4))
		l.XTicks = append(l.XTicks, ChartTick{Pos: f(x(t)), Label: tickTime(t, span)})
	}
	for i, s := range c.Series {
		line := ChartLine{Name: s.Name, Class: fmt.Sprintf("s%d", i%8)}
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

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
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

func tickTime(t time.Time, span time.Duration) string {
	t = t.UTC()
	if span > 36*time.Hour {
		return t.Format("Jan 2 15:04")
	}
	return t.Format("15:04")
}

// Sparkline is a small depth line for the overview.
type Sparkline struct {
	Points string // polyline points in a 100 x 24 box
	Title  string
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
	return Sparkline{Points: strings.Join(pts, " "), Title: title}
}
