package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
)

// C1: a cold first run, measured by cold-run.sh (a fresh clone, empty Go
// caches, go tool task run until the first page answers), which writes
// c1.json; the row reads it. It is not measured by each run: it downloads
// and builds everything from nothing.

// c1Record is c1.json.
type c1Record struct {
	Date         string  `json:"date"`
	Commit       string  `json:"commit"`
	Seconds      float64 `json:"seconds"`
	DownloadedMB float64 `json:"downloadedMB"`
	LoadStart    string  `json:"loadStart"`
	LoadEnd      string  `json:"loadEnd"`
	Cores        int     `json:"cores"`
	How          string  `json:"how"`
}

const c1File = "c1.json"

func caseC1(context.Context, *env) ([]Row, error) {
	b, err := os.ReadFile(c1File)
	if err != nil {
		return []Row{{Case: "C1", Measure: "a cold first go tool task run", Verdict: verdictSkipped, Note: "no " + c1File + ": run sh bench/cold-run.sh"}}, nil
	}
	var c c1Record
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", c1File, err)
	}
	r := Row{Case: "C1", Measure: "first go tool task run, fresh clone, empty Go caches, to the first page", Unit: "s", Ours: ptr(c.Seconds), Reps: 1,
		Must: atMost("ours", 240, "≤ 4 min"), Goal: atMost("ours", 120, "≤ 2 min"),
		Note: fmt.Sprintf("measured %s on commit %s, %d cores, load %s → %s, %.0f MB downloaded (%s, recorded in bench/%s; not measured by this run)",
			c.Date, c.Commit, c.Cores, c.LoadStart, c.LoadEnd, c.DownloadedMB, c.How, c1File)}
	return []Row{r}, nil
}
