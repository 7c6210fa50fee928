package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An attempt keeps the wait it was given (migration 0025): written and
// read back to the millisecond, overwritten with the attempt; one made
// before the migration reads as a wait not known, not as 0.
func TestAttemptsKeepTheirWait(t *testing.T) {
	t.Parallel()
	d, seqs, g1, _ := historyFixture(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	waits := []time.Duration{0, 1500 * time.Millisecond, 5 * time.Minute}
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i, w := range waits {
			if err := tx.InsertAttempt(ctx, seqs["a"], g1, broker.Attempt{Attempt: i + 1, At: t0, Error: "boom", Wait: w, WaitKnown: true}); err != nil {
				return err
			}
		}
		return tx.InsertAttempt(ctx, seqs["b"], g1, broker.Attempt{Attempt: 1, At: t0, Error: "no wait given"})
	})
	if err != nil {
		t.Fatal(err)
	}
	read := func(seq int64) []broker.Attempt {
		var out []broker.Attempt
		view(t, d, func(tx broker.Tx) error {
			var err error
			out, err = tx.Attempts(ctx, seq, g1, 100)
			return err
		})
		return out
	}
	got := read(seqs["a"])
	if len(got) != len(waits) {
		t.Fatalf("attempts %+v", got)
	}
	for i, a := range got {
		if !a.WaitKnown || a.Wait != waits[i] {
			t.Errorf("attempt %d: wait %v (known %v), want %v", a.Attempt, a.Wait, a.WaitKnown, waits[i])
		}
	}
	if b := read(seqs["b"]); len(b) != 1 || b[0].WaitKnown {
		t.Errorf("an attempt written without a wait: %+v, want it not known", b)
	}

	// Before 0025 there was no wait_ms: such an attempt reads as unknown.
	execSQL(t, d, `DELETE FROM attempts`)
	reapply(t, d, 25, "0025_attempt_wait.sql", `ALTER TABLE attempts DROP COLUMN wait_ms`,
		fmt.Sprintf(`INSERT INTO attempts (seq, group_id, attempt, at, error) VALUES (%d, %d, 1, 0, 'old')`, seqs["a"], g1))
	if old := read(seqs["a"]); len(old) != 1 || old[0].WaitKnown || old[0].Error != "old" {
		t.Errorf("an attempt from before migration 0025: %+v, want its wait not known", old)
	}
}
