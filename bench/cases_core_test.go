package main

import (
	"math"
	"os"
	"testing"
)

// pairCost recovers the fixed cost of a pair and each message's share
// from the CPU a message at two batch sizes: c(b) = F/b + m.
func TestPairCostSolvesTwoBatchSizes(t *testing.T) {
	const fixed, perMsg = 92.0, 6.5
	c := func(b int) float64 { return fixed/float64(b) + perMsg }
	for _, sizes := range [][2]int{{1, 100}, {100, 1}, {10, 50}} {
		f, m := pairCost(sizes[0], c(sizes[0]), sizes[1], c(sizes[1]))
		if math.Abs(f-fixed) > 1e-9 || math.Abs(m-perMsg) > 1e-9 {
			t.Errorf("sizes %v: F %v, m %v; want %v, %v", sizes, f, m, fixed, perMsg)
		}
	}
	if f, m := pairCost(5, 1, 5, 2); !math.IsNaN(f) || !math.IsNaN(m) {
		t.Errorf("one batch size twice: F %v, m %v, want NaN (unsolvable)", f, m)
	}
}

// perItem cancels what every run costs whatever its size.
func TestPerItemCancelsStartUp(t *testing.T) {
	count := func(n int) (float64, error) { return 5_000_000 + 386_000*float64(n), nil }
	got, err := perItem(200, 600, count)
	if err != nil || got != 386_000 {
		t.Errorf("perItem: %v, %v; want 386000", got, err)
	}
	if _, err := perItem(600, 200, count); err == nil {
		t.Error("perItem accepted a second run smaller than the first")
	}
}

// utime and stime are fields 14 and 15 of /proc/<pid>/stat, counted after
// the command name, which may hold spaces and parentheses.
func TestParseStatCPU(t *testing.T) {
	line := "4242 (bench (child) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 37 0 0 20 0 9 0 123 456 789"
	got, err := parseStatCPU(line)
	if err != nil || got.Milliseconds() != 2870 {
		t.Errorf("parseStatCPU: %v, %v; want 2.87 s (287 ticks)", got, err)
	}
	if _, err := parseStatCPU("4242 bench S 1"); err == nil {
		t.Error("a line without a command name parsed")
	}
}

// The server child's CPU is read from /proc: our own process's must be
// there and grow with work.
func TestProcCPUOfThisProcess(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	x := 0.0
	for i := range 50_000_000 {
		x += math.Sqrt(float64(i))
	}
	after, err := procCPU(os.Getpid())
	if err != nil || after <= before || x == 0 {
		t.Errorf("CPU before %v, after %v (%v)", before, after, err)
	}
}
