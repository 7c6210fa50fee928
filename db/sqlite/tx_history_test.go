package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// historyFixture pushes messages a, b, c, d to queue q partition p and
// makes groups g1 and g2; it returns their seqs by transactionId and the
// groups' ids.
func historyFixture(t *testing.T) (*Store, map[string]int64, int64, int64) {
	t.Helper()
	d, b := openBroker(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c", "d"} {
		push(t, b, "p", id)
	}
	seqs := map[string]int64{}
	var g1, g2 int64
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		q, err := tx.QueueByName(ctx, "q")
		if err != nil {
			return err
		}
		p, err := tx.PartitionByName(ctx, q.ID, "p")
		if err != nil {
			return err
		}
		for _, id := range []string{"a", "b", "c", "d"} {
			if seqs[id], err = tx.MessageSeq(ctx, p.ID, id); err != nil {
				return err
			}
		}
		if g1, err = tx.GroupID(ctx, "g1", true); err != nil {
			return err
		}
		g2, err = tx.GroupID(ctx, "g2", true)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, seqs, g1, g2
}

func execSQL(t *testing.T, d *Store, query string, args ...any) {
	t.Helper()
	if _, err := d.WriteDB().ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func view(t *testing.T, d *Store, fn func(tx broker.Tx) error) {
	t.Helper()
	if err := d.View(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func TestAttemptsAreKeptPerMessageAndGroup(t *testing.T) {
	t.Parallel()
	d, seqs, g1, g2 := historyFixture(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i := 1; i <= 3; i++ {
			if err := tx.InsertAttempt(ctx, seqs["a"], g1, broker.Attempt{Attempt: i, At: t0.Add(time.Duration(i) * time.Minute), Error: fmt.Sprintf("boom %d", i), ErrorBytes: 10 * i}); err != nil {
				return err
			}
		}
		// The same number again (a retried transaction) overwrites.
		if err := tx.InsertAttempt(ctx, seqs["a"], g1, broker.Attempt{Attempt: 3, At: t0.Add(3 * time.Minute), Error: "boom 3 again"}); err != nil {
			return err
		}
		return tx.InsertAttempt(ctx, seqs["a"], g2, broker.Attempt{Attempt: 1, At: t0, Error: "other group"})
	})
	if err != nil {
		t.Fatal(err)
	}
	view(t, d, func(tx broker.Tx) error {
		all, err := tx.Attempts(ctx, seqs["a"], g1, 100)
		if err != nil {
			return err
		}
		var got []string
		for _, a := range all {
			got = append(got, fmt.Sprintf("%d %s %s %d", a.Attempt, a.At.Format("15:04"), a.Error, a.ErrorBytes))
		}
		if want := "1 12:01 boom 1 10|2 12:02 boom 2 20|3 12:03 boom 3 again 0"; strings.Join(got, "|") != want {
			t.Errorf("attempts %q, want %q", strings.Join(got, "|"), want)
		}
		last, err := tx.Attempts(ctx, seqs["a"], g1, 2)
		if err != nil {
			return err
		}
		if len(last) != 2 || last[0].Attempt != 2 || last[1].Attempt != 3 {
			t.Errorf("latest two, oldest first: %+v", last)
		}
		none, err := tx.Attempts(ctx, seqs["b"], g1, 100)
		if err != nil || len(none) != 0 {
			t.Errorf("attempts of a message that never failed: %+v, %v", none, err)
		}
		return nil
	})
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error { return tx.DeleteAttempts(ctx, seqs["a"], g1) }); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, d, `SELECT seq, group_id, attempt, error FROM attempts`); got != fmt.Sprintf("%d %d 1 other group\n", seqs["a"], g2) {
		t.Errorf("after deleting g1's attempts:\n%s", got)
	}
}

func TestLineageCopiesAndDeletions(t *testing.T) {
	t.Parallel()
	d, seqs, g1, g2 := historyFixture(t)
	ctx := context.Background()
	at := func(m int) int64 { return time.Date(2026, 11, 1, 12, m, 0, 0, time.UTC).UnixMilli() }
	a, b, c, dd := seqs["a"], seqs["b"], seqs["c"], seqs["d"]
	// b copies a (every group, job 7), c copies b (g1 only, edited), d
	// copies a (g2 only).
	execSQL(t, d, `INSERT INTO replays (copy_seq, seq, group_id, job_id, actor, at, edited) VALUES (?, ?, 0, 7, 'user:alice', ?, 0), (?, ?, ?, 0, 'user:bob', ?, 1), (?, ?, ?, 0, 'user:carol', ?, 0)`,
		b, a, at(1), c, b, g1, at(2), dd, a, g2, at(3))
	execSQL(t, d, `INSERT INTO replay_outcomes (copy_seq, group_id, job_id, outcome, settled_at) VALUES (?, ?, 7, 2, ?), (?, ?, 7, 1, ?), (?, ?, 0, 0, 0)`,
		b, g1, at(4), b, g2, at(5), dd, g2)
	var qid, pid int64
	view(t, d, func(tx broker.Tx) error {
		m, err := tx.MessageRef(ctx, b)
		qid, pid = m.QueueID, m.PartitionID
		return err
	})
	// b failed again in g1: a dead letter now.
	execSQL(t, d, `INSERT INTO dead_letters (seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id) VALUES (?, ?, ?, ?, 'again', 0, ?, 'b')`, b, qid, pid, g1, at(4))
	execSQL(t, d, `INSERT INTO removed_dead_letters (dead_letter_id, seq, queue_id, partition_id, group_id, error, error_bytes, retry_count, failed_at, transaction_id, trace_id, fingerprint, how, at, actor, job_id, restore_until, restored_at, restored_by)
		VALUES (1, ?, ?, ?, ?, 'e', 0, 2, ?, 'a', '', 'e', 'deleted', ?, 'user:dave', 9, ?, 0, ''), (2, ?, ?, ?, ?, 'e', 0, 0, ?, 'a', '', 'e', 'deleted', ?, 'user:erin', 0, 0, ?, 'user:frank')`,
		a, qid, pid, g1, at(0), at(6), at(6)+86400000, a, qid, pid, g2, at(0), at(7), at(8))

	view(t, d, func(tx broker.Tx) error {
		m, err := tx.MessageRef(ctx, a)
		if err != nil || m.Queue != "q" || m.Partition != "p" || m.TransactionID != "a" || m.CreatedAt.IsZero() {
			t.Errorf("message ref %+v, %v", m, err)
		}
		if _, err := tx.MessageRef(ctx, 1<<40); !errors.Is(err, broker.ErrNotFound) {
			t.Errorf("message ref of nothing: %v, want ErrNotFound", err)
		}

		hops, err := tx.Lineage(ctx, c, 20)
		if err != nil {
			return err
		}
		var got []string
		for _, h := range hops {
			got = append(got, fmt.Sprintf("%d<-%d %s g=%s job=%d %s edited=%v id=%v", h.CopySeq, h.Seq, h.Queue, h.Group, h.JobID, h.Actor, h.Edited, h.OriginalID != "" && h.CopyID != ""))
		}
		want := []string{fmt.Sprintf("%d<-%d q g=g1 job=0 user:bob edited=true id=true", c, b), fmt.Sprintf("%d<-%d q g= job=7 user:alice edited=false id=true", b, a)}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("lineage of c:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if hops, err := tx.Lineage(ctx, c, 1); err != nil || len(hops) != 1 {
			t.Errorf("lineage of c, one hop: %+v, %v", hops, err)
		}
		if hops, err := tx.Lineage(ctx, a, 20); err != nil || len(hops) != 0 {
			t.Errorf("lineage of an original: %+v, %v", hops, err)
		}

		copies, err := tx.CopiesOf(ctx, a, 100)
		if err != nil {
			return err
		}
		got = nil
		for _, cp := range copies {
			s := fmt.Sprintf("%d mode=%q g=%s job=%d %s at=%d", cp.CopySeq, cp.Mode(), cp.Group, cp.JobID, cp.Actor, cp.At.UnixMilli())
			for _, o := range cp.Outcomes {
				s += fmt.Sprintf(" [%s %s dead=%v settled=%v]", o.Group, o.OutcomeName(), o.DeadLetter, !o.SettledAt.IsZero())
			}
			got = append(got, s)
		}
		want = []string{
			fmt.Sprintf(`%d mode="" g= job=7 user:alice at=%d [g1 failed dead=true settled=true] [g2 succeeded dead=false settled=true]`, b, at(1)),
			fmt.Sprintf(`%d mode="own" g=g2 job=0 user:carol at=%d [g2 pending dead=false settled=false]`, dd, at(3)),
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("copies of a:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if copies, err := tx.CopiesOf(ctx, a, 1); err != nil || len(copies) != 1 || len(copies[0].Outcomes) != 2 {
			t.Errorf("copies of a, one: %+v, %v", copies, err)
		}

		dels, err := tx.DeletionsOf(ctx, a)
		if err != nil {
			return err
		}
		if len(dels) != 2 || dels[0].DeadLetter.Group != "g1" || dels[0].Actor != "user:dave" || dels[0].JobID != 9 || dels[0].RestoreUntil.UnixMilli() != at(6)+86400000 || !dels[0].RestoredAt.IsZero() ||
			dels[1].DeadLetter.Group != "g2" || !dels[1].RestoreUntil.IsZero() || dels[1].RestoredAt.UnixMilli() != at(8) || dels[1].RestoredBy != "user:frank" {
			t.Errorf("deletions of a: %+v", dels)
		}
		return nil
	})
}

// Every read of a history is by a key of one message: no table is
// scanned.
func TestHistoryPlans(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string
		scans       []string // what may be scanned: the recursive chain, a subquery's rows
	}{
		{"Attempts", sqlcore.AttemptsQuery, []any{1, 2, 100}, []string{"SEARCH attempts USING INDEX sqlite_autoindex_attempts_1 (seq=? AND group_id=?)"}, nil},
		{"DeleteAttempts", sqlcore.DeleteAttemptsQuery, []any{1, 2}, []string{"SEARCH attempts USING INDEX sqlite_autoindex_attempts_1 (seq=? AND group_id=?)"}, nil},
		{"MessageRef", sqlcore.MessageRefQuery, []any{1}, []string{"SEARCH m USING INTEGER PRIMARY KEY (rowid=?)",
			"SEARCH d USING INDEX sqlite_autoindex_dead_letters_1 (seq=?)", "SEARCH r USING INDEX removed_dead_letters_seq (seq=?)",
			"SEARCH c USING INDEX replays_seq (seq=?)"},
			[]string{"x", "(subquery-2)", "(subquery-4)", "(subquery-6)"}}, // one-row co-routines
		{"Lineage", sqlcore.LineageQuery, []any{1, 20}, []string{"SEARCH replays USING INTEGER PRIMARY KEY (rowid=?)", "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)"}, []string{"c", "chain"}},
		{"Copies", sqlcore.CopiesQuery, []any{1, 100}, []string{"SEARCH replays USING INDEX replays_seq (seq=?)", "SEARCH o USING PRIMARY KEY (copy_seq=?)", "SEARCH d USING"}, []string{"r"}},
		{"Deletions", sqlcore.DeletionsQuery, []any{1}, []string{"SEARCH r USING INDEX removed_dead_letters_seq (seq=?)"}, nil},
	} {
		text := queryPlan(t, d, c.query, c.args...)
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: plan\n%s\nwants %q", c.name, text, w)
			}
		}
		for _, line := range strings.Split(text, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "SCAN" && !slices.Contains(c.scans, f[1]) {
				t.Errorf("%s: plan\n%s\nscans %s", c.name, text, f[1])
			}
		}
	}
}
