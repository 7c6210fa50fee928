package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/lazarus-dlq/lazarus/db"
)

// envConfig is what the command line decides.
type envConfig struct {
	quick bool
	instr bool // count instructions with callgrind where a case can (H1)
	// callgrindOut, when set, keeps H1's callgrind files (for
	// callgrind_annotate) with this prefix: <prefix>.<messages>.
	callgrindOut string
	reps         int
	scale        float64 // of the full sizes
	sync         db.Sync
	cacheDir     string
	log          *slog.Logger
}

// env is what every case shares: the mode, a temporary directory for the
// databases, the references' SQLite settings and what earlier cases
// measured that later ones need.
type env struct {
	envConfig
	tmp      string
	settings sqliteSettings
	// dlq is the generated dashboard database, built on first use.
	dlq *dlqFixture
	// bin is the lazarus binary built for H1 (lazarusBinary), once.
	binOnce sync.Once
	bin     string
	binErr  error
}

func newEnv(ctx context.Context, cfg envConfig) (*env, error) {
	if cfg.reps <= 0 {
		cfg.reps = 5
		if cfg.quick {
			cfg.reps = 3
		}
	}
	tmp, err := os.MkdirTemp("", "lazarus-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{envConfig: cfg, tmp: tmp}
	if e.settings, err = probeSettings(ctx, filepath.Join(tmp, "probe.db"), cfg.sync); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	installTrace()
	return e, nil
}

func (e *env) close() {
	if e.dlq != nil {
		e.dlq.close()
	}
	os.RemoveAll(e.tmp)
}

func (e *env) modeName() string {
	switch {
	case e.quick:
		return "quick"
	case e.scale != 1:
		return fmt.Sprintf("full×%g", e.scale)
	}
	return "full"
}

// size picks the full size (scaled) or the quick size.
func (e *env) size(full, quick int) int {
	if e.quick {
		return quick
	}
	return max(1, int(float64(full)*e.scale))
}

// dur picks the full or the quick duration.
func (e *env) dur(full, quick time.Duration) time.Duration {
	if e.quick {
		return quick
	}
	return full
}

// path returns a fresh database path in the temporary directory.
func (e *env) path(name string) string {
	dir, err := os.MkdirTemp(e.tmp, name+"-")
	if err != nil {
		panic(err) // the temporary directory is ours; this cannot fail but for a full disk
	}
	return filepath.Join(dir, name+".db")
}

// removeDB deletes a database file with its WAL and shared-memory files
// and its directory.
func removeDB(path string) {
	os.RemoveAll(filepath.Dir(path))
}

// Target is a "must" or a "goal" of PERF.md: a bound on the ratio, or on
// ours' own value when the target is absolute.
type Target struct {
	On    string  `json:"on"` // "ratio", "ours" or "difference" (ours minus the reference)
	Op    string  `json:"op"` // ">=" or "<="
	Value float64 `json:"value"`
	Text  string  `json:"text"` // as PERF.md says it
}

func atLeast(on string, v float64, text string) *Target {
	return &Target{On: on, Op: ">=", Value: v, Text: text}
}

func atMost(on string, v float64, text string) *Target {
	return &Target{On: on, Op: "<=", Value: v, Text: text}
}

func (t *Target) met(r *Row) *bool {
	if t == nil {
		return nil
	}
	v := r.Ratio
	switch t.On {
	case "ours":
		v = r.Ours
	case "difference":
		v = r.Diff
	}
	if v == nil || math.IsNaN(*v) {
		return nil
	}
	ok := *v >= t.Value
	if t.Op == "<=" {
		ok = *v <= t.Value
	}
	return &ok
}

// Verdicts of a row.
const (
	verdictGoal    = "goal met"
	verdictMust    = "must met"
	verdictMissed  = "MISSED"
	verdictNoGoal  = "goal missed" // a row with a goal and no must
	verdictInfo    = "info"
	verdictError   = "ERROR"
	verdictSkipped = "skipped"
	verdictPass    = "pass"
	verdictFail    = "FAIL"
)

// Row is one line of the table: a measure of ours, the reference it is
// compared with, the ratio and the targets.
type Row struct {
	Case    string   `json:"case"`
	Measure string   `json:"measure"`
	Unit    string   `json:"unit,omitempty"`
	Ours    *float64 `json:"ours,omitempty"`
	RefName string   `json:"reference,omitempty"`
	Ref     *float64 `json:"referenceValue,omitempty"`
	Ratio   *float64 `json:"ratio,omitempty"` // median of the repetitions' ratios
	// Diff is the median of the repetitions' differences (ours minus the
	// reference), for targets of the form "≤ reference + x".
	Diff    *float64 `json:"difference,omitempty"`
	Must    *Target  `json:"must,omitempty"`
	Goal    *Target  `json:"goal,omitempty"`
	MustMet *bool    `json:"mustMet,omitempty"`
	GoalMet *bool    `json:"goalMet,omitempty"`
	Verdict string   `json:"verdict"`
	Reps    int      `json:"reps,omitempty"`
	Note    string   `json:"note,omitempty"`
	Samples Samples  `json:"samples,omitempty"` // per repetition, by variant
	Details []string `json:"details,omitempty"` // query plans and the like
}

// Samples are the values of every repetition, by variant.
type Samples map[string][]float64

// finish sets the verdict from the targets, unless the case set one.
func (r *Row) finish() {
	r.MustMet, r.GoalMet = r.Must.met(r), r.Goal.met(r)
	if r.Verdict != "" {
		return
	}
	switch {
	case r.Must == nil && r.Goal == nil:
		r.Verdict = verdictInfo
	case r.MustMet == nil && r.GoalMet == nil:
		r.Verdict = verdictError
	case r.MustMet != nil && !*r.MustMet:
		r.Verdict = verdictMissed
	case r.GoalMet != nil && *r.GoalMet:
		r.Verdict = verdictGoal
	case r.Must == nil:
		r.Verdict = verdictNoGoal
	default:
		r.Verdict = verdictMust
	}
}

func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	v = roundSig(v, 4)
	return &v
}

// roundSig rounds v to n significant digits, for readable JSON.
func roundSig(v float64, n int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	d := math.Ceil(math.Log10(math.Abs(v)))
	p := math.Pow(10, float64(n)-d)
	return math.Round(v*p) / p
}

func roundTo(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}

// variant is one contender of an interleaved measurement; run measures one
// repetition and returns its value.
type variant struct {
	name string
	run  func(ctx context.Context, rep int) (float64, error)
}

// interleave runs every variant reps times, in rotating order (A B C, B C
// A, C A B, …), and returns the values by variant name.
func interleave(ctx context.Context, e *env, reps int, vs ...variant) (Samples, error) {
	out := Samples{}
	for rep := 0; rep < reps; rep++ {
		for k := range vs {
			v := vs[(rep+k)%len(vs)]
			if err := ctx.Err(); err != nil {
				return out, err
			}
			x, err := v.run(ctx, rep)
			if err != nil {
				return out, fmt.Errorf("%s (repetition %d): %w", v.name, rep+1, err)
			}
			e.log.Info("measured", "variant", v.name, "rep", rep+1, "value", roundSig(x, 4))
			out[v.name] = append(out[v.name], x)
		}
	}
	return out, nil
}

// median of xs (NaN when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratios returns a[i]/b[i] for every repetition.
func ratios(a, b []float64) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, n)
	for i := range n {
		out[i] = a[i] / b[i]
	}
	return out
}

// compare builds a row from interleaved samples: ours' median, the
// reference's median and the median of the per-repetition ratios.
func compare(s Samples, id, measure, unit, oursName, refName string) Row {
	r := Row{Case: id, Measure: measure, Unit: unit, RefName: refName, Reps: len(s[oursName])}
	r.Ours = ptr(median(s[oursName]))
	r.Ref = ptr(median(s[refName]))
	r.Ratio = ptr(median(ratios(s[oursName], s[refName])))
	r.Samples = Samples{oursName: roundAll(s[oursName]), refName: roundAll(s[refName])}
	return r
}

// compareDiff is compare, with the median of the per-repetition
// differences (ours minus the reference) as well.
func compareDiff(s Samples, id, measure, unit, oursName, refName string) Row {
	r := compare(s, id, measure, unit, oursName, refName)
	a, b := s[oursName], s[refName]
	d := make([]float64, min(len(a), len(b)))
	for i := range d {
		d[i] = a[i] - b[i]
	}
	r.Diff = ptr(median(d))
	return r
}

// single builds a row of ours' value alone (absolute targets).
func single(s Samples, id, measure, unit, name string) Row {
	r := Row{Case: id, Measure: measure, Unit: unit, Reps: len(s[name])}
	r.Ours = ptr(median(s[name]))
	r.Samples = Samples{name: roundAll(s[name])}
	return r
}

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = roundSig(x, 4)
	}
	return out
}

// percentile returns the p-th percentile (0 < p ≤ 1) of durations, in
// milliseconds, by the nearest-rank method.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(math.Ceil(p*float64(len(s)))) - 1
	k = max(0, min(k, len(s)-1))
	return float64(s[k]) / float64(time.Millisecond)
}

// rate is n items over d, per second.
func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// CaseResult is one case's rows in results.json.
type CaseResult struct {
	ID      string  `json:"id"`
	Title   string  `json:"title"`
	Started string  `json:"started,omitempty"` // when the case ran (RFC 3339)
	Seconds float64 `json:"seconds"`
	// LoadStart and LoadEnd are the load averages (1, 5, 15 min) as the
	// case started and ended.
	LoadStart []float64 `json:"loadStart,omitempty"`
	LoadEnd   []float64 `json:"loadEnd,omitempty"`
	Rows      []Row     `json:"rows"`
}

// results is results.json.
type results struct {
	Machine Machine   `json:"machine"`
	Started string    `json:"started"`
	Seconds float64   `json:"seconds"`
	LoadEnd []float64 `json:"loadAverageAtEnd,omitempty"`
	// Merged lists the runs (-merge) whose cases replaced this run's.
	Merged []string     `json:"merged,omitempty"`
	Cases  []CaseResult `json:"cases"`
}

// formatValue writes a value with its unit, compactly.
func formatValue(v *float64, unit string) string {
	if v == nil {
		return "-"
	}
	x := *v
	var s string
	switch {
	case unit == "×" && x < 0.1:
		return fmt.Sprintf("%.3f×", x)
	case unit == "×" && x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case unit == "×":
		return fmt.Sprintf("%.2f×", x)
	case math.Abs(x) >= 100:
		s = humanInt(int64(math.Round(x)))
	case math.Abs(x) >= 10:
		s = fmt.Sprintf("%.1f", x)
	case math.Abs(x) >= 1:
		s = fmt.Sprintf("%.2f", x)
	default:
		s = fmt.Sprintf("%.3f", x)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

func humanInt(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func targetText(t *Target) string {
	if t == nil {
		return ""
	}
	return t.Text
}

// printRows writes a case's rows as table lines, then their notes.
func printRows(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		writeRow(tw, r)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Note != "" {
			fmt.Fprintf(w, "      %s: %s\n", strings.TrimSpace(r.Measure), r.Note)
		}
	}
}

func writeRow(w io.Writer, r Row) {
	ref := ""
	if r.RefName != "" {
		ref = r.RefName + " " + formatValue(r.Ref, r.Unit)
	}
	ratio := ""
	if r.Ratio != nil {
		ratio = formatValue(r.Ratio, "×")
	}
	if r.Diff != nil {
		ratio = strings.TrimSpace(ratio + fmt.Sprintf(" (%+.2f %s)", *r.Diff, r.Unit))
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Case, r.Measure, formatValue(r.Ours, r.Unit), ref, ratio, targetText(r.Must), targetText(r.Goal), r.Verdict)
}

// printSummary writes the whole table again, aligned, and the tally.
func printSummary(w io.Writer, res results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tmeasure\tours\treference\tratio\tmust\tgoal\tverdict")
	tally := map[string]int{}
	for _, c := range res.Cases {
		for _, r := range c.Rows {
			writeRow(tw, r)
			tally[r.Verdict]++
		}
	}
	tw.Flush()
	var parts []string
	for _, v := range []string{verdictGoal, verdictMust, verdictNoGoal, verdictMissed, verdictPass, verdictFail, verdictInfo, verdictSkipped, verdictError} {
		if tally[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", tally[v], v))
		}
	}
	fmt.Fprintf(w, "\n%s; %.0f s in all (%s mode, synchronous=%s); load average %s at the start, %s at the end (%d cores)\n", strings.Join(parts, ", "), res.Seconds,
		res.Machine.Mode, res.Machine.Sync, loadText(res.Machine.Load), loadText(res.LoadEnd), res.Machine.Cores)
}
