package sqlite

import (
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The import's checks are index probes: none scans dead_letters,
// messages or removed_dead_letters.
func TestArchiveImportPlans(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"dup by transactionId", sqlcore.ImportDupTxSQL, []any{1, 1, "t"}, []string{"SEARCH dead_letters USING INDEX dead_letters_transaction (transaction_id=?)"}},
		{"same message", sqlcore.ImportSameSQL, []any{1, 1, "t", 0, 1}, []string{
			"SEARCH messages USING INTEGER PRIMARY KEY (rowid=?)",
			"SEARCH removed_dead_letters USING INDEX removed_dead_letters_seq (seq=?)",
			"SEARCH dead_letters USING COVERING INDEX sqlite_autoindex_dead_letters_1 (seq=? AND group_id=?)"}},
	} {
		plan := queryPlan(t, d, c.query, c.args...)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan\n%s\nwants %q", c.name, plan, w)
			}
		}
		for _, bad := range []string{"SCAN messages", "SCAN dead_letters", "SCAN removed_dead_letters"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: plan\n%s\nhas %q", c.name, plan, bad)
			}
		}
	}
}
