package db

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// wantCounts checks the partitions' counts of messages (migration 0010),
// as the queue page and API read them, against want and against a count
// of the rows.
func wantCounts(t *testing.T, d *DB, b *broker.Broker, want map[string]int64) {
	t.Helper()
	ctx := context.Background()
	q, err := b.Queue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, p := range q.Partitions {
		got[p.Name] = p.Messages
	}
	rows, err := d.WriteDB().QueryContext(ctx, `SELECT p.name, COUNT(m.seq) FROM partitions p LEFT JOIN messages m ON m.partition_id = p.id GROUP BY p.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	counted := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		counted[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) || !maps.Equal(counted, want) {
		t.Fatalf("messages per partition: kept %v, counted %v, want %v", got, counted, want)
	}
}

// A partition's count of messages follows every write that adds to it:
// pushes of one partition and of several, duplicates (not counted),
// writes rolled back inside a group commit (not counted), replays, and a
// bulk replay part of whose copies were there already.
func TestPartitionCountsFollowWrites(t *testing.T) {
	t.Parallel()
	for _, every := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("folded every %v", every), func(t *testing.T) {
			t.Parallel()
			d, b := openBroker(t)
			d.foldEvery, d.foldedAt = every, time.Now()
			countWrites(t, d, b)
			// Folded at every commit, the kept counts are the rows'; never
			// folded, they are still the backfill's (none) and reads count
			// the rows past them.
			var wrong int
			if err := d.WriteDB().QueryRow(`SELECT COUNT(*) FROM partitions p WHERE p.messages <> ?1 *
				(SELECT COUNT(*) FROM messages m WHERE m.partition_id = p.id)`, b2i(every == 0)).Scan(&wrong); err != nil {
				t.Fatal(err)
			}
			if wrong != 0 {
				t.Fatalf("%d partitions keep a count other than expected", wrong)
			}
		})
	}
}

func countWrites(t *testing.T, d *DB, b *broker.Broker) {
	ctx := context.Background()
	push(t, b, "p", "m1")
	wantCounts(t, d, b, map[string]int64{"p": 1})

	items := []broker.PushItem{
		{Queue: "q", Partition: "p", TransactionID: "m2", Payload: []byte(`2`)},
		{Queue: "q", Partition: "x", TransactionID: "x1", Payload: []byte(`1`)},
		{Queue: "q", Partition: "x", TransactionID: "x2", Payload: []byte(`2`)},
		{Queue: "q", Partition: "p", TransactionID: "m1", Payload: []byte(`1`)}, // a duplicate
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, d, b, map[string]int64{"p": 2, "x": 2})

	// Three pushes share a transaction; the middle one fails after it
	// inserted, and is rolled back to its savepoint.
	boom := errors.New("boom")
	pushing := func(txid string, fail error) func(broker.Tx) error {
		return func(tx broker.Tx) error {
			p, err := partitionP(ctx, tx)
			if err != nil {
				return err
			}
			m := broker.Message{PartitionID: p.ID, TransactionID: txid, Payload: []byte(`{}`), CreatedAt: time.Now()}
			if _, err := tx.InsertMessage(ctx, &m); err != nil {
				return err
			}
			return fail
		}
	}
	release := holdWriter(d)
	errs := make(chan error, 3)
	for i, w := range []func(broker.Tx) error{pushing("m3", nil), pushing("rolled-back", boom), pushing("m4", nil)} {
		go func() { errs <- d.Update(ctx, w) }()
		waitQueued(d, i+1)
	}
	release()
	for range 3 {
		if err := <-errs; err != nil && !errors.Is(err, boom) {
			t.Fatal(err)
		}
	}
	wantCounts(t, d, b, map[string]int64{"p": 4, "x": 2})

	// Every message a dead letter; the copy of m2 is pushed by hand
	// first, so the bulk replay of m1, m2 and x1 makes two copies.
	for {
		if _, got := popAck(t, b, "g", broker.AckDLQ); len(got) == 0 {
			break
		}
	}
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, dl := range page.Items {
		ids[dl.TransactionID] = dl.MessageID()
	}
	if len(ids) != 6 {
		t.Fatalf("dead letters: %v, want m1-m4, x1 and x2", ids)
	}
	push(t, b, "p", broker.ReplayPrefix+ids["m2"])
	wantCounts(t, d, b, map[string]int64{"p": 5, "x": 2})
	res, err := b.ReplayIDs(ctx, []string{ids["m1"], ids["m2"], ids["x1"]}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 3 {
		t.Fatalf("replay = %+v, want 3 done", res)
	}
	wantCounts(t, d, b, map[string]int64{"p": 6, "x": 3})
	if res, err := b.Replay(ctx, ids["m3"], "test"); err != nil || res.Status != broker.StatusQueued {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	wantCounts(t, d, b, map[string]int64{"p": 7, "x": 3})
}

func TestPartitionCountsAreBackfilled(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	d.foldEvery, d.foldedAt = time.Hour, time.Now()
	push(t, b, "p", "m1")
	push(t, b, "p", "m2")
	push(t, b, "x", "x1")
	reapply(t, d, 10, "0010_partition_messages.sql", `ALTER TABLE partitions DROP COLUMN messages`, `ALTER TABLE partitions DROP COLUMN counted_seq`)
	var kept int64
	if err := d.WriteDB().QueryRow(`SELECT SUM(messages) FROM partitions WHERE counted_seq > 0`).Scan(&kept); err != nil || kept != 3 {
		t.Fatalf("backfilled %d messages (%v), want 3", kept, err)
	}
	wantCounts(t, d, b, map[string]int64{"p": 2, "x": 1})
	push(t, b, "x", "x2")
	wantCounts(t, d, b, map[string]int64{"p": 2, "x": 2})
}
