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

// The queries of jobs, restores, the history sweep and the audit's
// streams search their indexes: none scans a table that grows with the
// messages or the audit, none sorts.
func TestJobAndRestorePlans(t *testing.T) {
	t.Parallel()
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "plans.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	now := time.Now()
	byJobQ, byJobArgs := sqlcore.RestorableQuery(0, 0, 7, now, 500)
	bySeqQ, bySeqArgs := sqlcore.RestorableQuery(42, 3, 0, now, 0)
	people, peopleArgs := stmtText(sqlcore.AuditStmt(broker.AuditFilter{}, broker.Page{Limit: 50}))
	stream, streamArgs := stmtText(sqlcore.AuditStmt(broker.AuditFilter{Stream: broker.AuditStreamBroker}, broker.Page{Limit: 50, After: &broker.Cursor{ID: 1000}}))
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"JobFailures", sqlcore.JobFailuresQuery, []any{7, 50}, []string{"SEARCH o USING INDEX replay_outcomes_job (job_id=? AND outcome=?)"}},
		{"Restorable of a job", byJobQ, byJobArgs, []string{"SEARCH r USING INDEX removed_dead_letters_job (job_id=?)"}},
		{"Restorable of a message", bySeqQ, bySeqArgs, []string{"SEARCH r USING INDEX removed_dead_letters_seq (seq=?)"}},
		{"Audit, people's stream", people, peopleArgs, []string{"SEARCH audit USING INDEX audit_stream (broker=?)"}},
		{"Audit, broker's stream", stream, streamArgs, []string{"SEARCH audit USING INDEX audit_stream (broker=? AND id<?)"}},
	} {
		plan := queryPlan(t, d, c.query, c.args...)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan\n%s\nwants %q", c.name, plan, w)
			}
		}
		for _, bad := range []string{"TEMP B-TREE", "SCAN removed_dead_letters", "SCAN replay_outcomes", "SCAN audit", "SCAN dead_letters", "SCAN messages"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: plan\n%s\nhas %q", c.name, plan, bad)
			}
		}
	}
}
