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

// The maintenance sweeps find their rows by an index from the oldest end
// (the audit by its primary key), delete by primary key, and never sort.
func TestMaintainPlans(t *testing.T) {
	t.Parallel()
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "plans.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for b, index := range map[broker.BucketTable]string{
		broker.BucketMinute:         "stats_minute_time (minute<?)",
		broker.BucketQuarter:        "stats_quarter_time (quarter<?)",
		broker.BucketHour:           "stats_hour_time (hour<?)",
		broker.BucketErrorGroupHour: "error_group_hours_sweep (hour<?)",
	} {
		q, _ := sqlcore.BucketSweepSQL(b)
		plan := queryPlan(t, d, q, 100, 500)
		if !strings.Contains(plan, "USING COVERING INDEX "+index) && !strings.Contains(plan, "USING INDEX "+index) {
			t.Errorf("bucket %d: plan\n%s\nwants %q", b, plan, index)
		}
		for _, bad := range []string{"TEMP B-TREE", "SCAN stats", "SCAN error_group_hours"} {
			if strings.Contains(plan, bad) {
				t.Errorf("bucket %d: plan\n%s\nhas %q", b, plan, bad)
			}
		}
	}
	plan := queryPlan(t, d, sqlcore.SweepAuditSQL, 100, 500)
	if !strings.Contains(plan, "SEARCH audit USING INTEGER PRIMARY KEY (rowid=?)") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("audit sweep: plan\n%s", plan)
	}
	// sessions: a scan of a table a few rows a person, by design.
	if plan := queryPlan(t, d, sqlcore.SweepSessionsSQL, 100, 100, 500); strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("sessions sweep: plan\n%s", plan)
	}
}

// SweepBuckets deletes exactly the buckets before the cut, at most limit
// a call, oldest first.
func TestSweepBuckets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "sweep.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const minutes = 1200
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i := range minutes {
			if err := tx.AddStats(ctx, 1, 1, broker.Stats{Completed: 1}, t0.Add(time.Duration(i)*time.Minute)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	count := func(table string) (n int64) {
		if err := d.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	cut := t0.Add(700 * time.Minute) // minutes 0-699 go; the minute at the cut stays
	var took []int64
	for {
		var n int64
		if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) (err error) {
			n, err = tx.(*sqlcore.Tx).SweepBuckets(ctx, broker.BucketMinute, cut, 300)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		took = append(took, n)
		if n < 300 {
			break
		}
	}
	if len(took) != 3 || took[0] != 300 || took[1] != 300 || took[2] != 100 {
		t.Errorf("chunks %v, want [300 300 100]", took)
	}
	if n := count("stats_minute"); n != minutes-700 {
		t.Errorf("%d minute buckets left, want %d", n, minutes-700)
	}
	var first int64
	if err := d.read.QueryRowContext(ctx, `SELECT MIN(minute) FROM stats_minute`).Scan(&first); err != nil || first != cut.Unix()/60 {
		t.Errorf("oldest minute left %d (%v), want the cut's %d", first, err, cut.Unix()/60)
	}
	// Hours: 20 of them; those that end at or before the cut (11 h 40 m) go: 11.
	before := count("stats_hour")
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		_, err := tx.(*sqlcore.Tx).SweepBuckets(ctx, broker.BucketHour, cut, 500)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := count("stats_hour"); before != 20 || n != 9 {
		t.Errorf("hour buckets %d then %d, want 20 then 9", before, n)
	}
}
