package sqlite

import (
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The message list walks messages backwards by an index and sorts
// nothing: one partition by messages_partition_seq, every partition by
// the primary key.
func TestRecentMessagesPlans(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	for _, c := range []struct {
		name, query string
		args        []any
		want        string
	}{
		{"one partition", sqlcore.RecentMessagesSQL, []any{0, 1, 10, 1}, "SEARCH messages USING INDEX messages_partition_seq (partition_id=?)"},
		{"every partition", sqlcore.RecentMessagesAllSQL, []any{0, 1, 10}, "SCAN messages"},
	} {
		plan := queryPlan(t, d, c.query, c.args...)
		if !strings.Contains(plan, c.want) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan\n%s\nwants %q and no sort", c.name, plan, c.want)
		}
	}
}
