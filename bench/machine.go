package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where and how the numbers were measured.
type Machine struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	GoVersion string `json:"goVersion"`
	SQLite    string `json:"sqliteVersion"`
	Sync      string `json:"synchronous"` // durability mode of every database but H1's (FULL and NORMAL)
	Journal   string `json:"journalMode"`
	Mode      string `json:"mode"` // full or quick
	Reps      int    `json:"repetitions"`
	Trace     bool   `json:"statementTrace"` // built with -tags sqlite_trace
	Date      string `json:"date"`
	// Load is the load average (1, 5 and 15 minutes, /proc/loadavg) as
	// the run started: on a shared machine it says how far the absolute
	// numbers can be trusted.
	Load []float64 `json:"loadAverage,omitempty"`
}

func machineInfo(e *env) Machine {
	return Machine{
		GOOS:      runtime.GOOS,
		GOARCH:    runtime.GOARCH,
		CPU:       cpuModel(),
		Cores:     runtime.NumCPU(),
		GoVersion: runtime.Version(),
		SQLite:    e.settings.version,
		Sync:      string(e.sync),
		Journal:   e.settings.journalMode,
		Mode:      e.modeName(),
		Reps:      e.reps,
		Trace:     traceAvailable,
		Date:      time.Now().UTC().Format("2006-01-02"),
		Load:      loadAverage(),
	}
}

// loadAverage reads the 1, 5 and 15 minute load averages from
// /proc/loadavg (nil elsewhere), what uptime shows.
func loadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil
	}
	out := make([]float64, 0, 3)
	for _, x := range f[:3] {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// loadText is a load average as uptime writes it.
func loadText(l []float64) string {
	if len(l) != 3 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f, %.2f, %.2f", l[0], l[1], l[2])
}

// cpuModel reads the CPU's model name from /proc/cpuinfo ("unknown"
// elsewhere).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
