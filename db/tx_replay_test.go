package db

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// eachStore runs test on a fresh SQLite file and on a fresh PostgreSQL
// database, each with a broker over it, as subtests.
func eachStore(t *testing.T, test func(t *testing.T, d *DB, b *broker.Broker)) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			dsn := filepath.Join(t.TempDir(), "l.db")
			if store == "postgres" {
				dsn = pgtest.Database(t, "db", Prepare)
			}
			d, err := Open(context.Background(), dsn, SyncNormal)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			test(t, d, broker.New(broker.Config{Store: d}))
		})
	}
}

// PushCopies takes any mix of edited and plain copies, in any order: each
// copy goes in in cs's order (its seq above those before it), each copy
// inserted has its one row of replays (edited when it was), each edited
// one its row of replay_edits, and a copy its partition has already is
// read back, not pushed again.
func TestPushCopiesTakesAnyMixInItsOrder(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d *DB, b *broker.Broker) {
		ctx := context.Background()
		for i := range 5 {
			if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: fmt.Sprint("m", i), Payload: []byte(fmt.Sprintf(`{"m":%d}`, i))}}); err != nil {
				t.Fatal(err)
			}
		}
		edit := func(i int) []byte { return []byte(fmt.Sprintf(`{"m":%d,"edited":true}`, i)) }
		// Plain, edited, edited, plain, plain, edited: runs of both kinds,
		// each kind first and last somewhere. Then again, with one more
		// copy of each kind: the six are the partition's already.
		kinds := []bool{false, true, true, false, false, true}
		var seqs []int64
		var p broker.Partition
		copies := func(n int) []broker.Copy {
			cs := make([]broker.Copy, n)
			for i := range cs {
				cs[i] = broker.Copy{Seq: seqs[i%len(seqs)], PartitionID: p.ID, TransactionID: fmt.Sprint("copy-", i)}
				if i < len(kinds) && kinds[i] || i == 7 {
					cs[i].Payload = edit(i % len(seqs))
				}
			}
			return cs
		}
		var first, again []broker.Copy
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			var err error
			if p, err = partitionQP(ctx, tx); err != nil {
				return err
			}
			ms, err := tx.MessagesAfter(ctx, p.ID, 0, 10)
			if err != nil {
				return err
			}
			for _, m := range ms {
				seqs = append(seqs, m.Seq)
			}
			first = copies(len(kinds))
			return tx.PushCopies(ctx, first, now, broker.ReplayBy{Actor: "test", JobID: 3})
		}); err != nil {
			t.Fatalf("push a mix: %v", err)
		}
		for i, c := range first {
			if !c.Inserted || !c.CopyCreatedAt.Equal(now) || i > 0 && c.CopySeq <= first[i-1].CopySeq {
				t.Fatalf("copy %d: %+v, want inserted after copy %d (%+v)", i, c, i-1, first[max(i-1, 0)])
			}
		}
		if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			again = copies(len(kinds) + 2)
			return tx.PushCopies(ctx, again, now.Add(time.Minute), broker.ReplayBy{Actor: "test"})
		}); err != nil {
			t.Fatalf("push the mix again, and two more: %v", err)
		}
		for i, c := range again {
			if i < len(first) && (c.Inserted || c.CopySeq != first[i].CopySeq || !c.CopyCreatedAt.Equal(now)) {
				t.Errorf("copy %d again: %+v, want copy %d of the first push read back (%+v)", i, c, i, first[i])
			}
			if i >= len(first) && (!c.Inserted || c.CopySeq <= again[i-1].CopySeq && i > len(first)) {
				t.Errorf("new copy %d: %+v, want inserted in order", i, c)
			}
		}
		if again[len(first)].CopySeq <= first[len(first)-1].CopySeq {
			t.Errorf("new copies %+v, want after the first push's", again[len(first):])
		}
		if err := d.View(ctx, func(tx broker.Tx) error {
			st := tx.(*sqlcore.Tx)
			for i, c := range again {
				var payload []byte
				var edited, rows, edits int64
				var original, kept []byte
				if err := st.QueryRow(ctx, `SELECT payload FROM messages WHERE seq = ?`, c.CopySeq).Scan(&payload); err != nil {
					return err
				}
				if err := st.QueryRow(ctx, `SELECT COUNT(*), COALESCE(MAX(edited), -1) FROM replays WHERE copy_seq = ? AND seq = ?`, c.CopySeq, c.Seq).Scan(&rows, &edited); err != nil {
					return err
				}
				if err := st.QueryRow(ctx, `SELECT COUNT(*) FROM replay_edits WHERE copy_seq = ?`, c.CopySeq).Scan(&edits); err != nil {
					return err
				}
				want := fmt.Sprintf(`{"m":%d}`, i%len(seqs))
				if c.Payload != nil {
					want = string(c.Payload)
				}
				if string(payload) != want || rows != 1 || edited != sqlcore.B2I(c.Payload != nil) || edits != edited {
					t.Errorf("copy %d: payload %s, %d rows of replays (edited %d), %d of replay_edits; want %s, 1 row, edited %v",
						i, payload, rows, edited, edits, want, c.Payload != nil)
				}
				if c.Payload == nil {
					continue
				}
				if err := st.QueryRow(ctx, `SELECT original, edited FROM replay_edits WHERE copy_seq = ?`, c.CopySeq).Scan(&original, &kept); err != nil {
					return err
				}
				if string(original) != fmt.Sprintf(`{"m":%d}`, i%len(seqs)) || string(kept) != string(c.Payload) {
					t.Errorf("copy %d: replay_edits %s -> %s", i, original, kept)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// ExpectReplayOutcomes counts a pair into its job's replayed count once,
// the first time it is noted: noted again, alone or beside new pairs, by
// the same job or another, it is not counted again (measured before:
// {A} then {A, B} counted 3).
func TestExpectReplayOutcomesCountsEachPairOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d *DB, _ *broker.Broker) {
		ctx := context.Background()
		const job, other = 7, 8
		const g1, g2 = 100, 200
		a, b, c, e := [3]int64{1, g1, 11}, [3]int64{2, g1, 11}, [3]int64{3, g2, 12}, [3]int64{4, g1}
		for _, step := range []struct {
			pairs [][3]int64
			job   int64
		}{
			{[][3]int64{a}, job},
			{[][3]int64{a, b}, job},       // a again beside a new one
			{[][3]int64{b, a}, job},       // nothing new
			{[][3]int64{c, a, b, c}, job}, // c listed twice, once new
			{[][3]int64{a, e}, other},     // a is job's; e is other's
			{[][3]int64{e, a}, 0},         // a single replay's notes count nowhere
		} {
			if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
				return tx.ExpectReplayOutcomes(ctx, step.pairs, step.job)
			}); err != nil {
				t.Fatalf("expect %v for job %d: %v", step.pairs, step.job, err)
			}
		}
		got := map[string]int64{}
		if err := d.View(ctx, func(tx broker.Tx) error {
			rows, err := tx.(*sqlcore.Tx).Query(ctx, `SELECT job_id, group_id, replayed FROM job_outcomes`)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var j, g, n int64
				if err := rows.Scan(&j, &g, &n); err != nil {
					return err
				}
				got[fmt.Sprint(j, "/", g)] = n
			}
			return rows.Err()
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{fmt.Sprint(job, "/", g1): 2, fmt.Sprint(job, "/", g2): 1, fmt.Sprint(other, "/", g1): 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("job_outcomes (job/group: replayed) %v, want %v", got, want)
		}
		// Each pair is noted once, for the job that noted it first.
		var owners string
		if err := d.View(ctx, func(tx broker.Tx) error {
			ids, err := tx.(*sqlcore.Tx).QueryIDs(ctx, `SELECT job_id FROM replay_outcomes ORDER BY copy_seq, group_id`)
			owners = fmt.Sprint(ids)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint([]int64{job, job, job, other}); owners != want {
			t.Errorf("replay_outcomes' jobs %s, want %s", owners, want)
		}
		// Each keeps the error group it was noted with (none: 0).
		var groups string
		if err := d.View(ctx, func(tx broker.Tx) error {
			ids, err := tx.(*sqlcore.Tx).QueryIDs(ctx, `SELECT error_group FROM replay_outcomes ORDER BY copy_seq, group_id`)
			groups = fmt.Sprint(ids)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint([]int64{11, 11, 12, 0}); groups != want {
			t.Errorf("replay_outcomes' error groups %s, want %s", groups, want)
		}
	})
}

// partitionQP is partition p of queue q.
func partitionQP(ctx context.Context, tx broker.Tx) (broker.Partition, error) {
	q, err := tx.QueueByName(ctx, "q")
	if err != nil {
		return broker.Partition{}, err
	}
	return tx.PartitionByName(ctx, q.ID, "p")
}
