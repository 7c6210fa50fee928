package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// countsOf reads, from the rows themselves, the messages of each
// partition of queue q and each group's lag there (messages past its
// cursors).
func countsOf(t *testing.T, d *Store) (messages, lag map[string]int64) {
	t.Helper()
	return queryMap[int64](t, d, `SELECT p.name, (SELECT COUNT(*) FROM messages m WHERE m.partition_id = p.id) FROM partitions p`),
		queryMap[int64](t, d, `SELECT g.name, (SELECT COUNT(*) FROM consumers c JOIN messages m ON m.partition_id = c.partition_id AND m.seq > c.cursor WHERE c.group_id = g.id)
			FROM subscriptions s JOIN groups g ON g.id = s.group_id`)
}

// openFolding is openBroker with the counts brought up to date every
// foldEvery (negative: at every commit), the first time foldEvery after
// it opened.
func openFolding(t *testing.T, foldEvery time.Duration) (*Store, *broker.Broker) {
	t.Helper()
	d, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "l.db"), Options{Sync: SyncNormal, FoldEvery: foldEvery})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.wmu.Lock()
	d.folds.FoldedAt = time.Now()
	d.wmu.Unlock()
	return d, broker.New(broker.Config{Store: d})
}

// wantCounts checks the partitions' counts of messages and the groups'
// lags (migration 0010), as the queue page and API read them, against
// want and against the rows.
func wantCounts(t *testing.T, d *Store, b *broker.Broker, messages, lag map[string]int64) {
	t.Helper()
	q, err := b.Queue(context.Background(), "q")
	if err != nil {
		t.Fatal(err)
	}
	gotMessages, gotLag := map[string]int64{}, map[string]int64{}
	for _, p := range q.Partitions {
		gotMessages[p.Name] = p.Messages
	}
	for _, g := range q.Groups {
		gotLag[g.Name] = g.Lag
	}
	rowMessages, rowLag := countsOf(t, d)
	if !maps.Equal(gotMessages, messages) || !maps.Equal(rowMessages, messages) {
		t.Fatalf("messages per partition: read %v, in the rows %v, want %v", gotMessages, rowMessages, messages)
	}
	if !maps.Equal(gotLag, lag) || !maps.Equal(rowLag, lag) {
		t.Fatalf("lag per group: read %v, in the rows %v, want %v", gotLag, rowLag, lag)
	}
}

// The counts the queue page shows follow every write: pushes of one
// partition and of several, duplicates (not counted), writes rolled back
// inside a group commit (not counted), replays, a bulk replay part of
// whose copies were there already, acks and dead letters moving cursors,
// and groups starting from the beginning, from now and from a time. They
// are right whether the writer has folded them at every commit or never.
func TestCountsFollowWrites(t *testing.T) {
	t.Parallel()
	for _, every := range []time.Duration{-1, time.Hour} {
		t.Run(fmt.Sprintf("folded every %v", max(every, 0)), func(t *testing.T) {
			t.Parallel()
			d, _ := openFolding(t, every)
			countWrites(t, d)
			if every > 0 {
				return
			}
			// Folded at every commit, the kept counts are the rows'.
			var wrong int
			if err := d.WriteDB().QueryRow(`SELECT
				(SELECT COUNT(*) FROM partitions p WHERE p.messages <> (SELECT COUNT(*) FROM messages m WHERE m.partition_id = p.id)) +
				(SELECT COUNT(*) FROM consumers c WHERE c.passed_seq <> c.cursor OR c.passed <> (SELECT COUNT(*) FROM messages m WHERE m.partition_id = c.partition_id AND m.seq <= c.cursor))`).Scan(&wrong); err != nil {
				t.Fatal(err)
			}
			if wrong != 0 {
				t.Fatalf("%d partitions or consumers keep counts other than the rows'", wrong)
			}
		})
	}
}

func countWrites(t *testing.T, d *Store) {
	ctx := context.Background()
	clk := newManualClock()
	b := broker.New(broker.Config{Store: d, Clock: clk})
	push(t, b, "p", "m1")
	wantCounts(t, d, b, map[string]int64{"p": 1}, map[string]int64{})
	clk.Advance(5 * time.Millisecond) // times are kept in milliseconds
	afterM1 := clk.Now()
	clk.Advance(5 * time.Millisecond)

	items := []broker.PushItem{
		{Queue: "q", Partition: "p", TransactionID: "m2", Payload: []byte(`2`)},
		{Queue: "q", Partition: "x", TransactionID: "x1", Payload: []byte(`1`)},
		{Queue: "q", Partition: "x", TransactionID: "x2", Payload: []byte(`2`)},
		{Queue: "q", Partition: "p", TransactionID: "m1", Payload: []byte(`1`)}, // a duplicate
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	// A group that reads everything, one from now; both pop nothing yet.
	pop := func(group, partition string, start broker.Start, autoAck bool) {
		t.Helper()
		if _, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: group, Partition: partition, Batch: 10, Start: start, AutoAck: autoAck}); err != nil {
			t.Fatal(err)
		}
	}
	pop("now", "", broker.Start{Now: true}, true)
	wantCounts(t, d, b, map[string]int64{"p": 2, "x": 2}, map[string]int64{"now": 0})

	// Three pushes share a transaction; the middle one fails after it
	// inserted, and is rolled back to its savepoint.
	boom := errors.New("boom")
	pushing := func(txid string, fail error) func(broker.Tx) error {
		return func(tx broker.Tx) error {
			p, err := partitionP(ctx, tx)
			if err != nil {
				return err
			}
			m := broker.Message{PartitionID: p.ID, TransactionID: txid, Payload: []byte(`{}`), CreatedAt: clk.Now()}
			if _, err := tx.InsertMessage(ctx, &m); err != nil {
				return err
			}
			return fail
		}
	}
	release := holdWriter(d)
	errs := make(chan error, 3)
	for i, w := range []func(broker.Tx) error{pushing("m3", nil), pushing("rolled-back", boom), pushing("m4", nil)} {
		go func() { errs <- d.Update(ctx, broker.UpdateOptions{}, w) }()
		waitQueued(d, i+1)
	}
	release()
	for range 3 {
		if err := <-errs; err != nil && !errors.Is(err, boom) {
			t.Fatal(err)
		}
	}
	wantCounts(t, d, b, map[string]int64{"p": 4, "x": 2}, map[string]int64{"now": 2})

	// Group g dead-letters everything, lease by lease; group "now" reads
	// p's two new messages; a group from after m1 leases some and has the
	// rest to read.
	for {
		if _, got := popAck(t, b, "g", broker.AckDLQ); len(got) == 0 {
			break
		}
	}
	pop("now", "", broker.Start{}, true)
	pop("since", "", broker.Start{From: afterM1}, false)
	wantCounts(t, d, b, map[string]int64{"p": 4, "x": 2}, map[string]int64{"g": 0, "now": 0, "since": 5})

	// The copy of m2 is pushed by hand first, so the bulk replay of m1,
	// m2 and x1 makes two copies; every group has them to read.
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
	wantCounts(t, d, b, map[string]int64{"p": 5, "x": 2}, map[string]int64{"g": 1, "now": 1, "since": 6})
	res, err := b.ReplayIDs(ctx, []string{ids["m1"], ids["m2"], ids["x1"]}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 3 {
		t.Fatalf("replay = %+v, want 3 done", res)
	}
	wantCounts(t, d, b, map[string]int64{"p": 6, "x": 3}, map[string]int64{"g": 3, "now": 3, "since": 8})
	if res, err := b.Replay(ctx, ids["m3"], "test"); err != nil || res.Status != broker.StatusQueued {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	pop("g", "p", broker.Start{}, true)
	wantCounts(t, d, b, map[string]int64{"p": 7, "x": 3}, map[string]int64{"g": 1, "now": 4, "since": 9})
}

func TestCountsAreBackfilled(t *testing.T) {
	t.Parallel()
	d, b := openFolding(t, time.Hour)
	push(t, b, "p", "m1")
	push(t, b, "p", "m2")
	push(t, b, "x", "x1")
	if _, ids := popAck(t, b, "g", broker.AckCompleted); len(ids) == 0 {
		t.Fatal("pop got nothing")
	}
	reapply(t, d, 10, "0010_message_counts.sql",
		`DROP INDEX partitions_empty`, // 0022's, on a column of 0010
		`ALTER TABLE partitions DROP COLUMN messages`, `ALTER TABLE partitions DROP COLUMN counted_seq`,
		`ALTER TABLE consumers DROP COLUMN passed`, `ALTER TABLE consumers DROP COLUMN passed_seq`)
	var kept, passed int64
	if err := d.WriteDB().QueryRow(`SELECT (SELECT SUM(messages) FROM partitions WHERE counted_seq > 0), (SELECT SUM(passed) FROM consumers WHERE passed_seq > 0)`).Scan(&kept, &passed); err != nil {
		t.Fatal(err)
	}
	_, lag := countsOf(t, d)
	if kept != 3 || passed != 3-lag["g"] {
		t.Fatalf("backfilled %d messages and %d passed, want 3 and %d", kept, passed, 3-lag["g"])
	}
	wantCounts(t, d, b, map[string]int64{"p": 2, "x": 1}, lag)
	push(t, b, "x", "x2")
	lag["g"]++
	wantCounts(t, d, b, map[string]int64{"p": 2, "x": 2}, lag)
}

// keptCounts is what the writer has folded: each partition's messages
// and each consumer's passed, by partition name (and group).
func keptCounts(t *testing.T, d *Store) map[string]int64 {
	t.Helper()
	return queryMap[int64](t, d, `SELECT 'partition ' || p.name, p.messages FROM partitions p
		UNION ALL SELECT 'consumer ' || p.name || '/' || g.name, c.passed FROM consumers c JOIN partitions p ON p.id = c.partition_id JOIN groups g ON g.id = c.group_id`)
}

// Close folds what the last second left, so that a restart reads none
// of it again.
func TestCloseFoldsTheCounts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := OpenWith(context.Background(), path, Options{Sync: SyncNormal, FoldEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b := broker.New(broker.Config{Store: d})
	push(t, b, "p", "m1") // the first commit folds: none before it
	push(t, b, "p", "m2")
	push(t, b, "p", "m3")
	popAck(t, b, "g", broker.AckCompleted)
	if got, want := fmt.Sprint(keptCounts(t, d)), "map[consumer p/g:0 partition p:1]"; got != want {
		t.Fatalf("kept before close: %s, want %s", got, want)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Open(context.Background(), path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got, want := fmt.Sprint(keptCounts(t, d)), "map[consumer p/g:3 partition p:3]"; got != want {
		t.Fatalf("kept after close: %s, want %s", got, want)
	}
}

// A fold that fails costs the writes of its commit nothing: they commit,
// the failure is logged, the counts stay right, and the fold is done at a
// later commit.
func TestAFailingFoldFailsNoWrite(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	d, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "l.db"), Options{Sync: SyncNormal, FoldEvery: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	push(t, b, "p", "m1")
	if _, err := d.WriteDB().Exec(`CREATE TRIGGER no_fold BEFORE UPDATE OF messages ON partitions BEGIN SELECT RAISE(ABORT, 'no fold today'); END`); err != nil {
		t.Fatal(err)
	}
	push(t, b, "p", "m2")
	if !strings.Contains(logs.String(), "no fold today") {
		t.Fatalf("the failed fold is not logged: %q", logs.String())
	}
	wantCounts(t, d, b, map[string]int64{"p": 2}, map[string]int64{})
	if got := keptCounts(t, d)["partition p"]; got != 1 {
		t.Fatalf("kept %d messages for p, want the 1 of before the trigger", got)
	}
	if _, err := d.WriteDB().Exec(`DROP TRIGGER no_fold`); err != nil {
		t.Fatal(err)
	}
	push(t, b, "p", "m3")
	if got := keptCounts(t, d)["partition p"]; got != 3 {
		t.Fatalf("kept %d messages for p after the trigger, want 3", got)
	}
}

// A consumer whose cursor went back (nothing moves one back today) is
// counted again from its partition's start.
func TestACursorMovedBackIsCountedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := OpenWith(ctx, filepath.Join(t.TempDir(), "l.db"), Options{Sync: SyncNormal, FoldEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	for _, tx := range []string{"m1", "m2", "m3"} {
		push(t, b, "p", tx)
	}
	popAck(t, b, "g", broker.AckCompleted)
	wantCounts(t, d, b, map[string]int64{"p": 3}, map[string]int64{"g": 0})
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		p, err := partitionP(ctx, tx)
		if err != nil {
			return err
		}
		gid, err := tx.GroupID(ctx, "g", false)
		if err != nil {
			return err
		}
		c, err := tx.Consumer(ctx, p.ID, gid)
		if err != nil {
			return err
		}
		first, err := tx.MessagesAfter(ctx, p.ID, 0, 1)
		if err != nil || len(first) != 1 {
			return fmt.Errorf("messages: %v, %v", first, err)
		}
		c.Cursor = first[0].Seq
		return tx.SaveConsumer(ctx, &c)
	}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, d, b, map[string]int64{"p": 3}, map[string]int64{"g": 2})
	if got := keptCounts(t, d)["consumer p/g"]; got != 1 {
		t.Fatalf("kept %d passed for g, want 1", got)
	}
}

// When writes stop, the writer brings the counts up to date within about
// foldEvery, with a commit of its own: a look then counts nothing past
// them.
func TestIdleWriterFoldsTheCounts(t *testing.T) {
	t.Parallel()
	d, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "l.db"), Options{Sync: SyncNormal, FoldEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	push(t, b, "p", "m1")
	d.wmu.Lock()
	d.folds.FoldedAt = time.Now().Add(time.Hour) // neither the push nor the idle writer folds yet
	d.wmu.Unlock()
	push(t, b, "p", "m2")
	if got := keptCounts(t, d)["partition p"]; got != 1 {
		t.Fatalf("kept %d messages for p right after the push, want 1", got)
	}
	d.wmu.Lock()
	d.folds.FoldedAt = time.Now() // the last fold was just now: the idle writer folds foldEvery after it
	d.wmu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for keptCounts(t, d)["partition p"] != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("kept %v 5 s after the last write, want p folded to 2", keptCounts(t, d))
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCounts(t, d, b, map[string]int64{"p": 2}, map[string]int64{})
}
