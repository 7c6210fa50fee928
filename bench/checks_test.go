package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestPlanIssues(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    string
		plan []string
		want []string
	}{
		{"count over a whole table", `SELECT COUNT(*) FROM dead_letters d WHERE d.queue_id = ?`,
			[]string{"SEARCH d USING COVERING INDEX dead_letters_queue (queue_id=?)"},
			[]string{"aggregate (COUNT/GROUP BY/SUM) over a big table"}},
		{"count capped by a LIMITed subquery", `SELECT COUNT(*) FROM (SELECT 1 FROM dead_letters d WHERE d.transaction_id = ? LIMIT ?)`,
			[]string{"CO-ROUTINE (subquery-1)", "  SEARCH d USING INDEX dead_letters_transaction (transaction_id=?)", "SCAN (subquery-1)"},
			nil},
		{"top errors of the newest N", `SELECT line, COUNT(*) AS n FROM (SELECT d.error FROM dead_letters d WHERE d.transaction_id = ? ORDER BY d.failed_at DESC LIMIT ?) d GROUP BY line ORDER BY n DESC LIMIT ?`,
			[]string{"CO-ROUTINE d", "  SEARCH d USING INDEX dead_letters_transaction (transaction_id=?)", "SCAN d", "USE TEMP B-TREE FOR GROUP BY", "USE TEMP B-TREE FOR ORDER BY"},
			nil},
		{"a LIMITed subquery that sorts its big table first", `SELECT COUNT(*) FROM (SELECT d.error FROM dead_letters d WHERE d.queue_id = ? ORDER BY d.error LIMIT ?) d`,
			[]string{"CO-ROUTINE d", "  SEARCH d USING INDEX dead_letters_queue (queue_id=?)", "  USE TEMP B-TREE FOR ORDER BY", "SCAN d"},
			[]string{"USE TEMP B-TREE FOR ORDER BY over a big table"}},
		{"a LIMITed subquery that scans its big table", `SELECT COUNT(*) FROM (SELECT 1 FROM dead_letters d WHERE d.error = ? LIMIT ?)`,
			[]string{"CO-ROUTINE (subquery-1)", "  SCAN d", "SCAN (subquery-1)"},
			[]string{"SCAN of dead_letters"}},
		{"a page along an index", `SELECT id FROM dead_letters d WHERE d.queue_id = ? ORDER BY d.failed_at DESC LIMIT ?`,
			[]string{"SEARCH d USING INDEX dead_letters_queue (queue_id=?)"},
			nil},
		{"a page that sorts", `SELECT id FROM dead_letters d WHERE d.error = ? ORDER BY d.failed_at DESC LIMIT ?`,
			[]string{"SCAN d", "USE TEMP B-TREE FOR ORDER BY"},
			[]string{"SCAN of dead_letters", "USE TEMP B-TREE FOR ORDER BY over a big table"}},
	} {
		if got := planIssues(tc.q, tc.plan); !slices.Equal(got, tc.want) {
			t.Errorf("%s: issues %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDifferenceTarget(t *testing.T) {
	s := Samples{"during": {12, 4, 5}, "idle": {1, 2, 1}}
	r := compareDiff(s, "D6", "p99", "ms", "during", "idle")
	if r.Diff == nil || *r.Diff != 4 {
		t.Fatalf("difference %v, want 4 (the median of 11, 2 and 4)", r.Diff)
	}
	r.Must, r.Goal = atMost("difference", 4.5, "≤ idle + 4.5 ms"), atMost("difference", 2, "≤ idle + 2 ms") // the ratio, 5, would miss it
	r.finish()
	if r.Verdict != verdictMust {
		t.Errorf("verdict %q, want %q", r.Verdict, verdictMust)
	}
	r.Verdict, r.Must = "", atMost("difference", 3, "≤ idle + 3 ms")
	r.finish()
	if r.Verdict != verdictMissed {
		t.Errorf("4 ms over with a must of 3: verdict %q, want %q", r.Verdict, verdictMissed)
	}
}

// Merging puts the cases run in place of the file's, keeps the others in
// the suite's order, and drops those the suite no longer has (v1's T1).
func TestMergeResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	old := results{Machine: Machine{Mode: "full", Sync: "NORMAL"}, Started: "then", Seconds: 100,
		Cases: []CaseResult{{ID: "T1", Seconds: 1}, {ID: "L2", Seconds: 60}, {ID: "D5", Seconds: 30, Rows: []Row{{Measure: "old"}}}, {ID: "S1", Seconds: 10}}}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	now := results{Machine: Machine{Mode: "full", Sync: "NORMAL", Load: []float64{1, 2, 3}}, Started: "now", LoadEnd: []float64{4, 5, 6},
		Cases: []CaseResult{{ID: "D6", Started: "now", Seconds: 5}, {ID: "D5", Started: "now", Seconds: 20, Rows: []Row{{Measure: "new"}}}}}
	got, err := mergeResults(path, now)
	if err != nil {
		t.Fatal(err)
	}
	var ids, started []string
	for _, c := range got.Cases {
		ids, started = append(ids, c.ID), append(started, c.Started)
	}
	if !slices.Equal(ids, []string{"L2", "S1", "D5", "D6"}) || !slices.Equal(started, []string{"then", "then", "now", "now"}) {
		t.Errorf("cases %q started %q", ids, started)
	}
	if got.Cases[2].Rows[0].Measure != "new" || got.Started != "then" || got.Seconds != 125 || len(got.Merged) != 1 {
		t.Errorf("merged %+v", got)
	}
	now.Machine.Mode = "quick"
	if _, err := mergeResults(path, now); err == nil {
		t.Error("a quick run merged into a full run's results")
	}
}
