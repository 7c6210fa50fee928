package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// daysOffBy returns the rows of error_group_days that are not the sums
// of their hours in error_group_hours, and the sums that have no such
// row; "" when every day is the sum of its hours.
func daysOffBy(t *testing.T, d *Store) string {
	t.Helper()
	const sums = `SELECT queue_id, group_id, fingerprint, hour / 24, SUM(filed), SUM(replayed), SUM(succeeded), SUM(failed_again), SUM(deleted), SUM(expired)
		FROM error_group_hours GROUP BY queue_id, group_id, fingerprint, hour / 24`
	const days = `SELECT queue_id, group_id, fingerprint, day, filed, replayed, succeeded, failed_again, deleted, expired FROM error_group_days`
	var out string
	for _, q := range []string{days + ` EXCEPT ` + sums, sums + ` EXCEPT ` + days} {
		rows, err := d.WriteDB().QueryContext(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var q, g, day, f, r, s, fa, de, ex int64
			var fp string
			if err := rows.Scan(&q, &g, &fp, &day, &f, &r, &s, &fa, &de, &ex); err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprintf("[%d %d %q day %d: %d %d %d %d %d %d] ", q, g, fp, day, f, r, s, fa, de, ex)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		out += "| "
	}
	if out == "| | " {
		return ""
	}
	return out
}

// Migration 0042's error_group_days is each day's sums of the hours of
// error_group_hours, whatever writes them: filled from the hours there
// are, then kept by its triggers through inserts, the upserts of a
// filing and of a funnel's counts, an hour moved to another day, the
// sweep's deletes and a queue's deletion; a day's row goes with its
// last hour.
func TestErrorGroupDaysAreTheSumsOfTheirHours(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	w := d.WriteDB()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := w.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	step := func(name string, wantDays int) {
		t.Helper()
		if off := daysOffBy(t, d); off != "" {
			t.Fatalf("%s: error_group_days off its hours: %s", name, off)
		}
		var n int
		if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM error_group_days`).Scan(&n); err != nil || n != wantDays {
			t.Fatalf("%s: %d days, %v; want %d", name, n, err, wantDays)
		}
	}
	// Hours of two groups of a queue 77 over three days, from before the
	// migration.
	for h := int64(24*1000 - 5); h < 24*1002+3; h++ {
		exec(`INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed, replayed, succeeded, failed_again, deleted, expired)
			VALUES (77, 1, 'a', ?1, ?1 % 7, ?1 % 3, ?1 % 2, ?1 % 5, 1, ?1 % 4), (77, 2, 'b', ?1, 1, 0, 0, 0, 0, 0)`, h)
	}
	reapply(t, d, 42, "0042_error_group_days.sql", `DROP TRIGGER error_group_days_insert`, `DROP TRIGGER error_group_days_update`,
		`DROP TRIGGER error_group_days_move`, `DROP TRIGGER error_group_days_delete`, `DROP TABLE error_group_days`)
	step("filled by the migration", 8)

	exec(`INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed) VALUES (77, 1, 'a', ?, 1)
		ON CONFLICT (queue_id, group_id, fingerprint, hour) DO UPDATE SET filed = error_group_hours.filed + 1`, 24*1001+4)
	exec(`INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed) VALUES (77, 1, 'a', ?, 1)
		ON CONFLICT (queue_id, group_id, fingerprint, hour) DO UPDATE SET filed = error_group_hours.filed + 1`, 24*1005)
	step("a filing's upserts", 9)
	exec(`UPDATE error_group_hours SET replayed = replayed + 2, succeeded = succeeded + 1, expired = 0 WHERE fingerprint = 'a' AND hour % 24 = 3`)
	step("a funnel's counts", 9)
	exec(`UPDATE error_group_hours SET hour = ? WHERE fingerprint = 'a' AND hour = ?`, 24*1007+1, 24*1005)
	exec(`UPDATE error_group_hours SET group_id = 3 WHERE fingerprint = 'b' AND hour = ?`, 24*1001)
	step("hours moved", 10)
	exec(`DELETE FROM error_group_hours WHERE (queue_id, group_id, fingerprint, hour) IN
		(SELECT queue_id, group_id, fingerprint, hour FROM error_group_hours WHERE hour < ?1 ORDER BY hour LIMIT 100)`, 24*1000+2)
	step("swept to the middle of a day", 8)
	exec(`DELETE FROM error_group_hours WHERE hour < ?`, 24*1001)
	step("swept to a day's end", 6)

	// The broker's own writes: a queue's filings and deletes, then the
	// queue deleted with them.
	for i, e := range []string{"card declined", "card declined", "gateway timeout"} {
		push(t, b, "p", fmt.Sprintf("order-%d", i))
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop: %+v %v", res, err)
		}
		m := res.Messages[0]
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: e, Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	var q int64
	if err := w.QueryRowContext(ctx, `SELECT id FROM queues WHERE name = 'q'`).Scan(&q); err != nil {
		t.Fatal(err)
	}
	var first int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM error_group_days WHERE queue_id = ?`, q).Scan(&first); err != nil || first == 0 {
		t.Fatalf("the queue's days after its filings: %d, %v", first, err)
	}
	step("filed by the broker", 6+first)
	if err := b.DeleteQueue(ctx, "q", "dev"); err != nil {
		t.Fatal(err)
	}
	step("the queue deleted", 6)
}
