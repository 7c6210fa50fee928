package main

import (
	"testing"
	"time"
)

// g1Curve is a soak's samples, a second apart, with the file's size at
// each second given by size.
func g1Curve(n int, size func(s int) int64) []g1Sample {
	out := make([]g1Sample, n)
	for i := range out {
		out[i] = g1Sample{at: time.Duration(i) * time.Second, file: size(i)}
	}
	return out
}

func TestG1JudgesThePlateau(t *testing.T) {
	c := g1Config{dur: 100 * time.Second, retention: 10, rate: 100}
	const mb = 1 << 20
	for _, tc := range []struct {
		name        string
		size        func(s int) int64
		plateaus    bool
		withinBound bool
	}{
		// 1 MiB a second until the first window's end, then flat at 12.
		{"plateau", func(s int) int64 { return int64(min(s, 12)) * mb }, true, true},
		// Flat, but at 3 windows: it plateaus above the goal.
		{"high plateau", func(s int) int64 { return int64(min(s, 10)+min(max(s-10, 0), 20)) * mb }, true, false},
		// Flat for a while, then growing again in the last quarter.
		{"late growth", func(s int) int64 { return int64(min(s, 12)+max(s-80, 0)) * mb }, false, false},
		// Never stops growing.
		{"growth", func(s int) int64 { return int64(s) * mb }, false, false},
	} {
		rows := g1Rows(c, g1Curve(100, tc.size))
		if len(rows) != 2 {
			t.Fatalf("%s: %d rows", tc.name, len(rows))
		}
		for i := range rows {
			rows[i].finish()
		}
		if got := *rows[0].MustMet; got != tc.plateaus {
			t.Errorf("%s: plateaus %v (%+v), want %v", tc.name, got, rows[0], tc.plateaus)
		}
		if got := *rows[1].GoalMet; got != tc.withinBound {
			t.Errorf("%s: within 2 windows %v (ratio %v), want %v", tc.name, got, *rows[1].Ratio, tc.withinBound)
		}
		if n := len(rows[1].Samples["file_bytes"]); n != 100 {
			t.Errorf("%s: the curve has %d points, want 100", tc.name, n)
		}
	}
	if rows := g1Rows(c, g1Curve(3, func(int) int64 { return 1 })); rows[0].Verdict != verdictError {
		t.Errorf("a run too short for a verdict: %+v", rows)
	}
}
