package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Counting what arrived since a bulk action's bound reads one short range
// (the newest row ids), never every older dead letter of the filter.
func TestBulkCountAboveSearchesOnlyTheNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.Bound{FailedAt: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), ID: 10}
	for name, f := range map[string]broker.Filter{
		"Queue":           {QueueID: 1},
		"Group":           {QueueID: 1, GroupID: 2},
		"ErrorEverywhere": {ErrorContains: "timeout"},
		"Transaction":     {QueueID: 1, TransactionID: "t"},
	} {
		for _, job := range []int64{0, 7} {
			query, args := stmtText(sqlcore.CountAboveStmt(f, b, job))
			text := queryPlan(t, d, query, args...)
			if strings.Contains(text, "SCAN dead_letters") || strings.Contains(text, "SCAN d USING") || strings.Contains(text, "SCAN r") ||
				!strings.Contains(text, "SEARCH dead_letters USING INTEGER PRIMARY KEY (rowid>?)") {
				t.Errorf("%s (except job %d): plan\n%s\nwants a search of the newest row ids and no scan of the dead letters", name, job, text)
			}
		}
	}
}
