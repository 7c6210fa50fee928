package main

import (
	"bufio"
	"os"
	"runtime"
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
	Sync      string `json:"synchronous"` // durability mode of every database but T11's
	Journal   string `json:"journalMode"`
	Mode      string `json:"mode"` // full or quick
	Reps      int    `json:"repetitions"`
	Trace     bool   `json:"statementTrace"` // built with -tags sqlite_trace
	Date      string `json:"date"`
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
	}
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
