package sqlite

import (
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The messages pushed during maintenance mode are counted by the
// messages' primary key, from the seq it was turned on at: a read as long
// as they are many, not of the whole table.
func TestMessagesAfterASeqAreCountedByThePrimaryKey(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	if plan := queryPlan(t, d, sqlcore.CountMessagesAfterSQL, 10); !strings.Contains(plan, "INTEGER PRIMARY KEY (rowid>?)") {
		t.Errorf("the messages above a seq are counted by:\n%s\nwant the primary key's range", plan)
	}
}
