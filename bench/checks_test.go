package main

import (
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
