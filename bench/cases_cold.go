package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// C1: a cold first run, measured by cold-run.sh (a fresh clone, empty Go
// caches, the README's first command until the first page answers), which
// writes c1.json; the row reads it. It is not measured by each run: it
// downloads and builds everything from nothing. c1check.go tells when it
// must be measured again.

// c1Record is c1.json, which cold-run.sh writes.
type c1Record struct {
	Date   string `json:"date"`
	Commit string `json:"commit"`
	// GoSum is go.sum's SHA-256 at Commit: the module graph measured
	// (c1Stale compares it with the checkout's).
	GoSum string `json:"goSum"`
	// Command is the first command measured (the README's).
	Command string  `json:"command"`
	Seconds float64 `json:"seconds"`
	// CPUSeconds is user+system time of everything the command ran, to
	// the first page: unlike Seconds, it hardly moves with the load.
	CPUSeconds   float64 `json:"cpuSeconds"`
	DownloadedMB float64 `json:"downloadedMB"`
	LoadStart    string  `json:"loadStart"`
	LoadEnd      string  `json:"loadEnd"`
	Cores        int     `json:"cores"`
	How          string  `json:"how"`
}

// readC1 reads c1.json at path.
func readC1(path string) (c1Record, error) {
	var c c1Record
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

const c1File = "c1.json"

func caseC1(context.Context, *env) ([]Row, error) {
	if _, err := os.Stat(c1File); errors.Is(err, fs.ErrNotExist) {
		return []Row{{Case: "C1", Measure: "the README's first command, cold", Verdict: verdictSkipped, Note: "no " + c1File + ": run sh bench/cold-run.sh"}}, nil
	}
	c, err := readC1(c1File)
	if err != nil {
		return nil, err
	}
	r := Row{Case: "C1", Measure: "the README's first command (" + c.Command + "), fresh clone, empty Go caches, to the first page", Unit: "s", Ours: ptr(c.Seconds), Reps: 1,
		Must: atMost("ours", 240, "≤ 4 min"), Goal: atMost("ours", 120, "≤ 2 min"),
		Note: fmt.Sprintf("measured %s on commit %s, %d cores, load %s → %s, %.0f CPU-s, %.0f MB downloaded (%s, recorded in bench/%s; not measured by this run)",
			c.Date, c.Commit, c.Cores, c.LoadStart, c.LoadEnd, c.CPUSeconds, c.DownloadedMB, c.How, c1File)}
	return []Row{r}, nil
}
