package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// fileErrors dead-letters one message per error text in group g of q.
func fileErrors(t *testing.T, b *broker.Broker, errs ...string) {
	t.Helper()
	ctx := context.Background()
	for i, e := range errs {
		push(t, b, "p", fmt.Sprintf("e%d", i))
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop = %+v, %v", res, err)
		}
		m := res.Messages[0]
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: e, Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
}

// dump lists rows of a query as text, one a line.
func dump(t *testing.T, d *Store, query string) string {
	t.Helper()
	rows, err := d.WriteDB().QueryContext(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&out, vals...)
	}
	return out.String()
}

// Migration 0014 gives the dead letters of a database made before it
// their fingerprints (lazarus_fingerprint, broker.Fingerprint in SQL),
// and counts their groups and trends as filing them would have.
func TestErrorGroupsAreBackfilled(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	fileErrors(t, b, "timeout after 30s\nstack", "timeout after 31s", "card 4242 declined", "", "timeout after 5s")
	const fps = `SELECT id, fingerprint FROM dead_letters ORDER BY id`
	const groups = `SELECT queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at, sample_error FROM error_groups ORDER BY fingerprint`
	const hours = `SELECT * FROM error_group_hours ORDER BY fingerprint, hour`
	wantFps, wantGroups, wantHours := dump(t, d, fps), dump(t, d, groups), dump(t, d, hours)
	if !strings.Contains(wantGroups, "timeout after <n>s 3 ") || !strings.Contains(wantGroups, broker.NoErrorText+" 1 ") {
		t.Fatalf("groups as filed:\n%s", wantGroups)
	}

	const states = `SELECT queue_id, group_id, fingerprint, state, filed, first_filed_at, last_filed_at FROM error_group_states ORDER BY fingerprint`
	wantStates := dump(t, d, states)
	reapply(t, d, 14, "0014_error_groups.sql", append(undo33,
		`DROP INDEX dead_letters_fingerprint`,
		`ALTER TABLE dead_letters DROP COLUMN fingerprint`,
		`DROP TABLE error_groups`, `DROP TABLE error_group_hours`,
		`CREATE TABLE error_counts (queue_id INTEGER NOT NULL, group_id INTEGER NOT NULL, line TEXT NOT NULL, count INTEGER NOT NULL,
			PRIMARY KEY (queue_id, group_id, line)) STRICT, WITHOUT ROWID`)...)
	// 0033 then makes each group's state (open) and whole-life funnel
	// from the dead letters it holds: here, all it ever filed.
	reapply(t, d, 33, "0033_error_group_states.sql")
	if got := dump(t, d, states); got != wantStates {
		t.Errorf("error groups' states after the migrations:\n%s\nas filed:\n%s", got, wantStates)
	}

	if got := dump(t, d, fps); got != wantFps {
		t.Errorf("fingerprints after the migration:\n%s\nas filed:\n%s", got, wantFps)
	}
	if got := dump(t, d, groups); got != wantGroups {
		t.Errorf("error groups after the migration:\n%s\nas filed:\n%s", got, wantGroups)
	}
	if got := dump(t, d, hours); got != wantHours {
		t.Errorf("hourly counts after the migration:\n%s\nas filed:\n%s", got, wantHours)
	}
	// The filter by group finds them.
	page, err := b.DeadLetters(context.Background(), broker.DLQQuery{Queue: "q", Fingerprint: "timeout after <n>s", WithTotal: true})
	if err != nil || len(page.Items) != 3 || page.Total != 3 {
		t.Fatalf("the group after the migration: %d items, total %d, %v", len(page.Items), page.Total, err)
	}
}

// Deleting a queue deletes its error groups and their hours.
func TestDeleteQueueDeletesItsErrorGroups(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	fileErrors(t, b, "boom 1", "boom 2")
	if err := b.DeleteQueue(context.Background(), "q", "test"); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, d, `SELECT 'group', fingerprint FROM error_groups UNION ALL SELECT 'hour', fingerprint FROM error_group_hours`); got != "" {
		t.Fatalf("left after the queue was deleted:\n%s", got)
	}
}

// A list of an error group reads its index, whatever else the filter
// says; the pages of a queue and of a group still read theirs; the error
// groups' own reads are searches of a key, never scans.
func TestErrorGroupPlans(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		f     broker.Filter
		index string
	}{
		"Group of a queue":             {broker.Filter{QueueID: 1, Fingerprint: "x"}, "dead_letters_fingerprint"},
		"Group of a consumer group":    {broker.Filter{QueueID: 1, GroupID: 2, Fingerprint: "x"}, "dead_letters_fingerprint"},
		"Group of a partition":         {broker.Filter{QueueID: 1, GroupID: 2, PartitionID: 3, Fingerprint: "x"}, "dead_letters_fingerprint"},
		"Group and time":               {broker.Filter{QueueID: 1, Fingerprint: "x", From: at}, "dead_letters_fingerprint"},
		"Group and transaction":        {broker.Filter{QueueID: 1, Fingerprint: "x", TransactionID: "t"}, "dead_letters_transaction"},
		"Queue (unchanged)":            {broker.Filter{QueueID: 1}, "dead_letters_queue"},
		"Consumer group (unchanged)":   {broker.Filter{QueueID: 1, GroupID: 2}, "dead_letters_group"},
		"Group in a bulk action bound": {broker.Filter{QueueID: 1, Fingerprint: "x", MaxID: 10, MaxFailedAt: at}, "dead_letters_fingerprint"},
		"Version of a queue":           {broker.Filter{QueueID: 1, ConsumerVersion: "v1"}, "dead_letters_version"},
		"Version of a consumer group":  {broker.Filter{QueueID: 1, GroupID: 2, ConsumerVersion: "v1"}, "dead_letters_version"},
		"Version of a partition":       {broker.Filter{QueueID: 1, GroupID: 2, PartitionID: 3, ConsumerVersion: "v1"}, "dead_letters_version"},
		"Version in a bulk action":     {broker.Filter{QueueID: 1, ConsumerVersion: "v1", MaxID: 10, MaxFailedAt: at}, "dead_letters_version"},
		"Version and group":            {broker.Filter{QueueID: 1, GroupID: 2, Fingerprint: "x", ConsumerVersion: "v1"}, "dead_letters_fingerprint"},
	} {
		w, args := whereOf(c.f)
		for _, page := range []string{"", " AND (d.failed_at, d.id) < (?, ?)"} {
			pargs := args
			if page != "" {
				pargs = append(append([]any{}, args...), 1, 1)
			}
			text := queryPlan(t, d, `SELECT d.id FROM dead_letters d`+w+page+` ORDER BY d.failed_at DESC, d.id DESC LIMIT 10`, pargs...)
			if !strings.Contains(text, "INDEX "+c.index+" (") || strings.Contains(text, "TEMP B-TREE") {
				t.Errorf("%s%s: plan\n%s\nwants %s, in its order", name, page, text, c.index)
			}
		}
	}
	for name, c := range map[string]struct {
		query string
		args  []any
		want  string
	}{
		"one":          {sqlcore.GroupOneSQL, []any{1, 2, "x"}, "SEARCH error_groups USING INDEX sqlite_autoindex_error_groups_1 (queue_id=? AND group_id=? AND fingerprint=?)"},
		"top":          {sqlcore.GroupTopSQL, []any{1, 2, 10}, "SEARCH error_groups USING INDEX error_groups_top (queue_id=? AND group_id=?)"},
		"top covering": {sqlcore.GroupTopFingerprintsSQL, []any{1, 2, 10}, "SEARCH error_groups USING COVERING INDEX error_groups_top (queue_id=? AND group_id=?)"},
		"across":       {sqlcore.GroupAcrossSQL, []any{1, `["x"]`}, "SEARCH error_groups USING INDEX sqlite_autoindex_error_groups_1 (queue_id=? AND group_id=? AND fingerprint=?)"},
		"versions":     {sqlcore.GroupVersionsSQL, []any{1, 2, "x"}, "SEARCH error_group_versions USING PRIMARY KEY (queue_id=? AND group_id=? AND fingerprint=?)"},
		"hours":        {sqlcore.GroupHoursSQL, []any{1, `["x"]`, 5, 2}, "SEARCH error_group_hours USING PRIMARY KEY (queue_id=? AND group_id=? AND fingerprint=? AND hour>?)"},
		"hours across": {sqlcore.GroupHoursAcrossSQL, []any{1, `["x"]`, 5, 0}, "SEARCH error_group_hours USING PRIMARY KEY (queue_id=? AND group_id=? AND fingerprint=? AND hour>?)"},
		// Error groups you own: one by id, a queue's fingerprint (a
		// page's panel, a banner), the funnels' windows of a page's groups.
		"state by id":   {sqlcore.StateByIDSQL, []any{1}, "SEARCH s USING INTEGER PRIMARY KEY (rowid=?)"},
		"state by key":  {sqlcore.StateByKeySQL, []any{1, "x", 0, 10}, "SEARCH s USING INDEX sqlite_autoindex_error_group_states_1 (queue_id=? AND fingerprint=?)"},
		"state by keys": {sqlcore.StateByKeysSQL, []any{1, `["x", "y"]`, 0, 200}, "SEARCH s USING INDEX sqlite_autoindex_error_group_states_1 (queue_id=? AND fingerprint=?)"},
		// A week from its days and the hours at its edge, a day from its
		// hours: each by its primary key.
		"windows, day":       {sqlcore.WindowsSQL, []any{`[1, 2]`, 5, 6}, "SEARCH h USING PRIMARY KEY (queue_id=? AND group_id=? AND fingerprint=? AND hour>?)"},
		"windows, week days": {sqlcore.WindowsSQL, []any{`[1, 2]`, 5, 6}, "SEARCH d USING PRIMARY KEY (queue_id=? AND group_id=? AND fingerprint=? AND day>?)"},
		"windows, week edge": {sqlcore.WindowsSQL, []any{`[1, 2]`, 5, 6}, "SEARCH h USING PRIMARY KEY (queue_id=? AND group_id=? AND fingerprint=? AND hour>? AND hour<?)"},
		"versions of":        {sqlcore.VersionsOfSQL, []any{`[1, 2]`}, "SEARCH v USING PRIMARY KEY (queue_id=? AND group_id=? AND fingerprint=?)"},
		"counts":             {`SELECT queue_id, COUNT(*), SUM(regressed) FROM error_group_states WHERE state = 'open' GROUP BY queue_id`, nil, "SCAN error_group_states USING COVERING INDEX error_group_states_open"},
	} {
		text := queryPlan(t, d, c.query, c.args...)
		if !strings.Contains(text, c.want) || (strings.Contains(text, "SCAN error_group") && !strings.Contains(c.want, "COVERING INDEX error_group_states_open")) {
			t.Errorf("%s: plan\n%s\nwants %s", name, text, c.want)
		}
	}
	// The lists of error groups walk an index in their order, with no
	// sort of error_group_states: only the page's rows are sorted again
	// once joined (after the co-routine's "SCAN s").
	for name, c := range map[string]struct {
		query string
		args  []any
		want  string
	}{
		"list":       {sqlcore.StateFilteredSQL, []any{0, 0, "", "", "", 100, "", 0, 4}, "SEARCH s USING INDEX error_group_states_list ("},
		"queue list": {sqlcore.StateOfQueueSQL, []any{1, 0, "", "", "", 100, "", 0, 1}, "SEARCH s USING INDEX error_group_states_queue_list (queue_id=? AND"},
	} {
		text := queryPlan(t, d, c.query, c.args...)
		inner, _, _ := strings.Cut(text, "SCAN s")
		if !strings.Contains(inner, c.want) || strings.Contains(inner, "TEMP B-TREE") {
			t.Errorf("%s: plan\n%s\nwants %s, in its order", name, text, c.want)
		}
	}
}
