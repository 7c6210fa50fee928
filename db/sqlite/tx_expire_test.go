package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Dead-letter expiry reads and writes by index: the due dead letters of a
// queue from the oldest end of dead_letters_queue (no sort, no scan), the
// "expire within 24 h" count as a range of the queue's or the group's
// index, the records by removed_dead_letters_seq, the attempts by their
// primary key.
func TestExpiryPlans(t *testing.T) {
	t.Parallel()
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "plans.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	check := func(name, plan string, wants []string, bad ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan\n%s\nwants %q", name, plan, w)
			}
		}
		for _, b := range append(bad, "TEMP B-TREE") {
			if strings.Contains(plan, b) {
				t.Errorf("%s: plan\n%s\nhas %q", name, plan, b)
			}
		}
	}
	check("due", queryPlan(t, d, sqlcore.DueDeadLettersSQL, 1, 1000, 500), []string{"SEARCH d USING INDEX dead_letters_queue (queue_id=? AND failed_at<?)"}, "SCAN")
	for _, c := range []struct {
		f     broker.Filter
		index string
	}{
		{broker.Filter{QueueID: 1, To: time.UnixMilli(1000)}, "dead_letters_queue (queue_id=? AND failed_at<?)"},
		{broker.Filter{QueueID: 1, GroupID: 2, To: time.UnixMilli(1000)}, "dead_letters_group (queue_id=? AND group_id=? AND failed_at<?)"},
	} {
		w, args := whereOf(c.f)
		plan := queryPlan(t, d, `SELECT COUNT(*) FROM (SELECT 1 FROM dead_letters d`+w+` LIMIT ?)`, append(args, broker.ExpiringCap+1)...)
		check("expiring count", plan, []string{"USING COVERING INDEX " + c.index}, "SCAN d")
	}
	check("mark", queryPlan(t, d, sqlcore.MarkExpiredSQL, "[1]", "[2]", 60), []string{"USING INDEX removed_dead_letters_seq (seq=?)"}, "SCAN removed_dead_letters")
	check("attempts", queryPlan(t, d, sqlcore.ExpiredAttemptsSQL, "[[1,2]]"), []string{"SEARCH attempts USING"}, "SCAN attempts")
	check("rules", queryPlan(t, d, sqlcore.ExpiryRulesSQL, 1), []string{"USING INDEX removed_dead_letters_seq (seq=?)"}, "SCAN")
}

// DueDeadLetters returns the oldest first, only the queue's, only those
// failed before the cut, at most limit.
func TestDueDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "due.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i, q := range []int64{1, 2, 1, 1, 1} {
			// failed at t0+4 s, t0+3 s, ... : ids and times in opposite orders
			if err := tx.InsertDeadLetter(ctx, &broker.DeadLetter{Seq: int64(i + 1), QueueID: q, PartitionID: 1, GroupID: 1, Error: "e",
				FailedAt: t0.Add(time.Duration(4-i) * time.Second), Fingerprint: "f"}, true); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []int64
	if err := d.View(ctx, func(tx broker.Tx) error {
		keys, err := tx.DueDeadLetters(ctx, 1, t0.Add(4*time.Second), 2)
		for _, k := range keys {
			got = append(got, k.Seq)
			if k.QueueID != 1 || k.Fingerprint != "f" || k.GroupID != 1 || k.PartitionID != 1 {
				t.Errorf("key %+v", k)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// queue 1 failed at t0 (seq 5), t0+1 s (4), t0+2 s (3), t0+4 s (1): the
	// cut t0+4 s leaves seq 1 out, the limit takes the two oldest.
	if len(got) != 2 || got[0] != 5 || got[1] != 4 {
		t.Errorf("due %v, want [5 4]", got)
	}
}

// BenchmarkExpiringCount is the list's "expire within 24 h" count at its
// cap (PERF.md D3: a count on a page).
func BenchmarkExpiringCount(b *testing.B) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(b.TempDir(), "count.db"), SyncNormal)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i := range 3 * broker.ExpiringCap {
			if err := tx.InsertDeadLetter(ctx, &broker.DeadLetter{Seq: int64(i + 1), QueueID: 1, PartitionID: 1, GroupID: int64(1 + i%2), Error: "e",
				FailedAt: t0.Add(time.Duration(i) * time.Second), Fingerprint: "f"}, true); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    broker.Filter
	}{
		{"queue", broker.Filter{QueueID: 1, To: t0.Add(24 * time.Hour)}},
		{"group", broker.Filter{QueueID: 1, GroupID: 2, To: t0.Add(24 * time.Hour)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := d.View(ctx, func(tx broker.Tx) error {
					n, err := tx.CountDeadLettersUpTo(ctx, c.f, broker.ExpiringCap+1)
					if err == nil && n != broker.ExpiringCap+1 {
						b.Fatalf("counted %d", n)
					}
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// MarkExpired cuts an expiry's records to what the page says: the
// retention kept, the error text and the payload (taken from a message
// that retention removed) gone, the push time kept; a delete's record of
// the same message is left as it was.
func TestMarkExpiredCutsTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "mark.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var keys []broker.DeadLetterKey
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for g := int64(1); g <= 2; g++ {
			dl := &broker.DeadLetter{Seq: 7, QueueID: 1, PartitionID: 1, GroupID: g, Error: "secret error", FailedAt: t0, Fingerprint: "f"}
			if err := tx.InsertDeadLetter(ctx, dl, true); err != nil {
				return err
			}
			if err := tx.InsertAttempt(ctx, 7, g, broker.Attempt{Attempt: 1, At: t0, Error: "first"}); err != nil {
				return err
			}
			keys = append(keys, broker.DeadLetterKey{ID: dl.ID, Seq: 7, QueueID: 1, PartitionID: 1, GroupID: g})
		}
		// As the message sweep leaves them once it removed the message.
		if _, err := tx.(*sqlcore.Tx).Exec(ctx, `UPDATE dead_letters SET payload = CAST('{"card":"4111"}' AS BLOB), pushed_at = ?`, sqlcore.MS(t0.Add(-time.Hour))); err != nil {
			return err
		}
		if err := tx.DeleteDeadLetters(ctx, []int64{keys[0].ID}, &broker.Removal{How: broker.RemovedExpired, At: t0, Actor: broker.BrokerActor}); err != nil {
			return err
		}
		if err := tx.DeleteDeadLetters(ctx, []int64{keys[1].ID}, &broker.Removal{How: broker.RemovedDeleted, At: t0, Actor: "user:a", RestoreUntil: t0.Add(time.Hour)}); err != nil {
			return err
		}
		return tx.MarkExpired(ctx, keys[:1], 48*time.Hour)
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := d.read.QueryContext(ctx, `SELECT how, retention, error, payload IS NULL, pushed_at FROM removed_dead_letters ORDER BY group_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var how, errText string
		var retention, pushed int64
		var noPayload bool
		if err := rows.Scan(&how, &retention, &errText, &noPayload, &pushed); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d %q %v %v", how, retention, errText, noPayload, pushed == sqlcore.MS(t0.Add(-time.Hour))))
	}
	if want := []string{`expired 172800 "" true true`, `deleted 0 "secret error" false true`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("records %v, want %v", got, want)
	}
	var attempts []int64
	for g := int64(1); g <= 2; g++ {
		var n int64
		if err := d.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM attempts WHERE seq = 7 AND group_id = ?`, g).Scan(&n); err != nil {
			t.Fatal(err)
		}
		attempts = append(attempts, n)
	}
	if attempts[0] != 0 || attempts[1] != 1 {
		t.Errorf("attempts left per group %v, want [0 1]: the expired group's go", attempts)
	}
}
