// Command bench measures Lazarus side by side with references run in the
// same process on the same SQLite settings (the query planner stability
// guarantee and temp_store included, checked at start): raw go-sqlite3
// doing the same work the most direct way, raw with group commit
// (raw+gc), maragu.dev/goqite v0.4.0 and River v0.51.2 on SQLite. The
// cases and their targets are those of PERF.md v2 (L1–L5, H1–H3, F1–F4,
// D1–D10, S1–S3, G1–G2, P1–P3 on PostgreSQL, C1; G3 and G4 for
// information); every verdict on a ratio is measured in one run,
// interleaved in rotating order (A B C, B C A, …), as the median of the
// repetitions' ratios (or their differences, for a target of the form
// "≤ reference + x"). Beside each timing is a load-independent figure:
// CPU time a message (the process's, or the HTTP server child's from
// /proc, on PostgreSQL with the cluster's processes'), instructions
// (callgrind: L1, G2, H1 with -instr), WAL pages, transactions,
// statements and fsyncs a message (F4). Absolute numbers are for
// information; the load average is written with every case
// (results.json: loadStart, loadEnd).
//
// Run it from the repository's root with `go tool task bench` (all cases
// but L1 and G1–G4, full sizes), `go tool task bench:quick` (smaller
// sizes, about a minute), `bench:instr` (L1, H1 with instructions),
// `bench:soak` (G1) and `bench:stored` (G2–G4), or from this directory:
//
//	go run -tags sqlite_trace . [-quick] [-cases L2,L3,D1] [-out results.json]
//
// The sqlite_trace tag lets the suite see the SQL the broker runs, for the
// EXPLAIN QUERY PLAN checks and the statement counts; without it those are
// reported as skipped.
//
// Lazarus is measured only through its public API: broker over db.Open,
// and web.New on 127.0.0.1:0 for the HTTP cases (for H1, in a child
// process of this binary, so that the server's CPU time is its own). The
// dashboard cases run on a generated database of dead letters, written
// straight into the schema (built by db.Open's migrations) and cached
// under .cache/, keyed by size and schema.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/db"
)

func main() {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := runChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	quick := flag.Bool("quick", false, "smaller sizes and 3 repetitions: the whole run in under a minute")
	cases := flag.String("cases", "", "comma-separated case ids to run (default all but L1 and G1-G4, which run only when named), e.g. L2,L4,D1")
	instr := flag.Bool("instr", false, "also count the HTTP server's instructions a message with callgrind (H1; valgrind needed)")
	callgrindOut := flag.String("callgrind-out", "", "with -instr, keep H1's callgrind files as <this>.<messages> (for callgrind_annotate)")
	out := flag.String("out", "results.json", "where to write the results as JSON (empty: nowhere)")
	merge := flag.Bool("merge", false, "replace only the cases run in -out's results, keeping the others (each case says when it ran and its load)")
	syncMode := flag.String("sync", string(db.SyncNormal), "SQLite synchronous mode of every database but H1's (which runs FULL and NORMAL): NORMAL or FULL")
	reps := flag.Int("reps", 0, "repetitions per case (default 5, 3 with -quick)")
	scale := flag.Float64("scale", 1, "multiply the full sizes by this (e.g. 0.25 for a shorter full run); -quick ignores it")
	cacheDir := flag.String("cache", ".cache", "where generated dashboard databases are kept between runs")
	list := flag.Bool("list", false, "list the cases and exit")
	verbose := flag.Bool("v", false, "log progress to stderr")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()

	if *list {
		for _, c := range allCases() {
			fmt.Printf("%-4s %s\n", c.id, c.title)
		}
		return nil
	}
	sync := db.Sync(strings.ToUpper(*syncMode))
	if sync != db.SyncNormal && sync != db.SyncFull {
		return fmt.Errorf("-sync must be NORMAL or FULL, got %q", *syncMode)
	}
	selected, err := selectCases(*cases)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	e, err := newEnv(ctx, envConfig{quick: *quick, instr: *instr, callgrindOut: *callgrindOut, reps: *reps, scale: *scale, sync: sync, cacheDir: *cacheDir, log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))})
	if err != nil {
		return err
	}
	defer e.close()
	defer stopPostgres() // the P cases' cluster, when one was started

	res := results{Machine: machineInfo(e), Started: time.Now().UTC().Format(time.RFC3339)}
	start := time.Now()
	fmt.Printf("Lazarus bench: %s mode, synchronous=%s, %d repetitions, %s, %d cores, %s, load average %s\n\n",
		e.modeName(), sync, e.reps, res.Machine.CPU, res.Machine.Cores, res.Machine.GoVersion, loadText(res.Machine.Load))
	if *scale <= 0 {
		return fmt.Errorf("-scale must be positive")
	}
	for _, c := range selected {
		caseStart, loadStart := time.Now(), loadAverage()
		e.log.Info("case", "id", c.id, "title", c.title)
		rows, err := c.run(ctx, e)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rows = append(rows, Row{Case: c.id, Measure: c.title, Verdict: verdictError, Note: err.Error()})
		}
		for i := range rows {
			rows[i].finish()
		}
		cr := CaseResult{ID: c.id, Title: c.title, Started: caseStart.UTC().Format(time.RFC3339), Seconds: roundTo(time.Since(caseStart).Seconds(), 1),
			LoadStart: loadStart, LoadEnd: loadAverage(), Rows: rows}
		res.Cases = append(res.Cases, cr)
		printRows(os.Stdout, rows)
		fmt.Printf("      (%s: %.1f s, load average %s → %s)\n", c.id, cr.Seconds, loadText(cr.LoadStart), loadText(cr.LoadEnd))
	}
	res.Seconds = roundTo(time.Since(start).Seconds(), 1)
	res.LoadEnd = loadAverage()
	fmt.Println()
	printSummary(os.Stdout, res)
	if *out != "" {
		if *merge {
			if res, err = mergeResults(*out, res); err != nil {
				return err
			}
		} else if strings.TrimSpace(*cases) == "" {
			// A run of all cases keeps the named ones' last results, when
			// the file is of a run like this one.
			if merged, err := mergeResults(*out, res); err == nil {
				res = merged
			}
		}
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("results: %w", err)
		}
		// Written aside and renamed, so that an interrupted run leaves the
		// last results whole.
		if err := os.WriteFile(*out+".tmp", append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("results: %w", err)
		}
		if err := os.Rename(*out+".tmp", *out); err != nil {
			return fmt.Errorf("results: %w", err)
		}
		fmt.Printf("results written to %s\n", *out)
	}
	return nil
}

// mergeResults puts the cases of res in place of the same cases of the
// results in path (those it does not have after them, in the suite's
// order), keeping the file's others and its machine. The file's mode and
// synchronous setting must be res's.
func mergeResults(path string, res results) (results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	var old results
	if err := json.Unmarshal(b, &old); err != nil {
		return res, fmt.Errorf("merge %s: %w", path, err)
	}
	if old.Machine.Mode != res.Machine.Mode || old.Machine.Sync != res.Machine.Sync {
		return res, fmt.Errorf("merge: %s is of a %s run at synchronous=%s, this one %s at %s", path, old.Machine.Mode, old.Machine.Sync, res.Machine.Mode, res.Machine.Sync)
	}
	order := map[string]int{}
	for i, c := range allCases() {
		order[c.id] = i
	}
	byID := map[string]CaseResult{}
	for _, c := range old.Cases {
		if _, ok := order[c.ID]; !ok {
			continue // a case the suite no longer has
		}
		if c.Started == "" {
			c.Started = old.Started // the file's run
		}
		byID[c.ID] = c
	}
	for _, c := range res.Cases {
		byID[c.ID] = c
		old.Seconds += c.Seconds
	}
	old.Cases = old.Cases[:0]
	for _, c := range byID {
		old.Cases = append(old.Cases, c)
	}
	sort.Slice(old.Cases, func(i, j int) bool { return order[old.Cases[i].ID] < order[old.Cases[j].ID] })
	old.Merged = append(old.Merged, fmt.Sprintf("%s: %s (load average %s → %s)", res.Started, strings.Join(caseIDs(res.Cases), ","), loadText(res.Machine.Load), loadText(res.LoadEnd)))
	return old, nil
}

func caseIDs(cs []CaseResult) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// selectCases returns the cases named in list (all when empty), in the
// suite's order.
func selectCases(list string) ([]benchCase, error) {
	all := allCases()
	if strings.TrimSpace(list) == "" {
		var out []benchCase
		for _, c := range all {
			if !c.named {
				out = append(out, c)
			}
		}
		return out, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(list, ",") {
		id = strings.ToUpper(strings.TrimSpace(id))
		if id == "" {
			continue
		}
		found := false
		for _, c := range all {
			if c.id == id {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown case %q (see -list)", id)
		}
		want[id] = true
	}
	var out []benchCase
	for _, c := range all {
		if want[c.id] {
			out = append(out, c)
		}
	}
	return out, nil
}

// benchCase is one case of PERF.md.
type benchCase struct {
	id    string
	title string
	run   func(ctx context.Context, e *env) ([]Row, error)
	// named: run only when -cases names it.
	named bool
}

// allCases lists the suite in PERF.md's order (but D5 and D6 after the S
// cases, whose database they change). A case marked named runs
// only when -cases names it (each has a task of its own: bench:instr,
// bench:soak, bench:stored); a run of all cases keeps their last results
// from -out.
func allCases() []benchCase {
	return []benchCase{
		{"L1", "push→pop→ack one at a time: instructions a message vs goqite (callgrind)", caseL1, true},
		{"L2", "push→pop→ack one at a time: wall time vs goqite, raw and River, interleaved", caseL2, false},
		{"L3", "push, one message a call, 8 concurrent callers, vs raw+gc", caseL3, false},
		{"L4", "lifecycle batched 100 (push, pop, ack) vs raw batched", caseL4, false},
		{"L5", "a pop+ack pair's fixed cost in CPU", caseL5, false},
		{"H1", "over HTTP at FULL and NORMAL: server CPU a message (H1) and throughput (H2), push 10, pop 100, batch ack", caseH1, false},
		{"H3", "paced end-to-end latency over HTTP at 1k msg/s, long-poll consumer", caseH3, false},
		{"F1", "fan-out: CPU a delivery, 10 groups vs 1", caseF1, false},
		{"F2", "10,000 partitions vs 1", caseF2, false},
		{"F3", "5 % failing through retries into the DLQ, popped one at a time: CPU a delivery", caseF3, false},
		{"F3N", "F3 with notifications: a rule matching nothing, and one matching with a no-op sender, vs none: CPU a delivery", caseF3N, false},
		{"F4", "WAL pages, transactions, statements and fsyncs a message vs goqite", caseF4, false},
		{"Q", "EXPLAIN QUERY PLAN of the hot queries", caseQueryPlans, false},
		{"D1", "dead letters page, 50 newest of a group, at depths first … last", caseD1, false},
		{"D2", "dead letters page over HTTP, whole and htmx fragment", caseD2, false},
		{"D3", "depth per group and totals (tiles, badges)", caseD3, false},
		{"D4", "depth chart 24 h and 30 d", caseD4, false},
		{"D9", "the overview and the charts page over HTTP at 5,000 queues: time and bytes", caseD9, false},
		{"S1", "search in dead letters: payload fields, payload and error free text", caseS1, false},
		{"S2", "error groups of a queue from their kept counts", caseS2, false},
		{"S3", "export a group's dead letters as NDJSON: memory", caseS3, false},
		{"D8", "error contains at the big group, rare and absent text: time and CPU a call, after vs before", caseD8, false},
		{"D10", "the error groups page at 10,000 groups: the list, a group, the badge", caseD10, false},
		{"M1", "masking's cost on the dead-letter pages at 1M: a group's list, one dead letter, the API's 100, masked vs plain", caseM1, false},
		// D10 adds error groups to the dashboard's database, after S2,
		// which reads that database's own. D5 and D6 replay and delete
		// dead letters of that database, which the D and S cases share:
		// they run after the cases that count them (S2 and S3 check the
		// group's whole count).
		{"D5", "replay 10k by filter as a job vs raw set-based in the same chunk size", caseD5, false},
		{"D6", "a producer's push p99 while D5's job runs", caseD6, false},
		{"D7", "replay 1M dead letters by filter flat out; a producer's push p99 beside a job at its default pace", caseD7, false},
		{"G1", "storage under steady load with completedRetentionSeconds short: the file plateaus", caseG1, true},
		{"G2", "CPU and instructions a message with 10M messages stored vs 1k", caseG2, true},
		{"G3", "a producer's push p99 while a retention sweep of 200k messages runs (info)", caseG3, true},
		{"G4", "what auto_vacuum=INCREMENTAL costs the lifecycle (info)", caseG4, true},
		// P1-P3 start a throwaway PostgreSQL cluster (pgtest; Debian's
		// postgresql, which go tool task setup installs) or use the server
		// LAZARUS_TEST_POSTGRES names; it is stopped when the run ends.
		{"P1", "PostgreSQL store (fsync on) vs SQLite: server CPU a message, H1's HTTP load", caseP1, false},
		{"P2", "PostgreSQL: 3 server processes on one database vs 1, throughput", caseP2, false},
		{"P3", "PostgreSQL: a push on process A wakes a long poll on process B, p50 and p99", caseP3, false},
		{"P4", "PostgreSQL: one /ack/batch filing 1,000 dead letters vs SQLite's, and a push of another process during it", caseP4, false},
		{"P5", "PostgreSQL: Lazarus vs a plain FOR UPDATE SKIP LOCKED queue on the same server, CPU a message", caseP5, false},
		{"C1", "the README's first command, cold (measured by bench/cold-run.sh)", caseC1, false},
	}
}
