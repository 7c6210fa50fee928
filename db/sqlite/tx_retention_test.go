package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Every statement of retention finds its rows by an index: the
// messages of a partition by messages_partition_seq, dead letters by
// their seq, consumers by their key, settle marks by theirs or by
// settle_marks_due; none scans a big table.
func TestRetentionPlans(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"partitions", sqlcore.PartitionsAfterSQL, []any{1, 0, 500}, []string{"partitions"}},
		{"drop marks above", sqlcore.DropMarksAboveSQL, []any{"[1]"}, []string{"SEARCH settle_marks USING PRIMARY KEY (partition_id=?)", "SEARCH c USING PRIMARY KEY (partition_id=?)", "SEARCH s USING PRIMARY KEY (queue_id=?)"}},
		{"mark", sqlcore.MarkSettledSQL, []any{1, 1, "[1]", 1}, []string{"SEARCH c USING", "SEARCH s USING PRIMARY KEY (partition_id=?)", "SEARCH m EXISTS USING COVERING INDEX messages_partition_seq (partition_id=? AND seq<?)"}},
		{"due", sqlcore.DueSettledSQL, []any{1, 1}, []string{"SEARCH settle_marks USING INDEX settle_marks_due (queue_id=? AND at<?)"}},
		{"expiring", sqlcore.ExpiringPartitionsSQL, []any{1, 1}, []string{"SEARCH m USING COVERING INDEX messages_partition_seq (partition_id=?)", "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"drop marks", sqlcore.DropSettleMarksSQL, []any{1, 1}, []string{"SEARCH settle_marks USING PRIMARY KEY (partition_id=?)"}},
		{"leased", sqlcore.LeasedCursorSQL, []any{1, 1}, []string{"SEARCH consumers USING PRIMARY KEY (partition_id=?)"}},
		{"range", sqlcore.SweepRangeSQL, []any{1, 1, 500}, []string{"SEARCH messages USING INDEX messages_partition_seq (partition_id=? AND seq<?)"}},
		{"copy to dead letters", sqlcore.CopyToDeadLettersSQL, []any{"[1]"}, []string{"SEARCH dead_letters USING INDEX sqlite_autoindex_dead_letters_1 (seq=?)", "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"copy to deleted", sqlcore.CopyToRemovedSQL, []any{"[1]"}, []string{"SEARCH removed_dead_letters USING INDEX removed_dead_letters_seq (seq=?)"}},
		{"attempts", sqlcore.SweepAttemptsSQL, []any{"[1]"}, []string{"SEARCH attempts USING COVERING INDEX sqlite_autoindex_attempts_1 (seq=?)", "SEARCH d USING COVERING INDEX sqlite_autoindex_dead_letters_1 (seq=? AND group_id=?)"}},
		{"delete", sqlcore.DeleteMessagesSQL, []any{"[1]"}, []string{"SEARCH messages USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"ready", sqlcore.ReadyAfterSQL, []any{1, 1}, []string{"SEARCH messages USING COVERING INDEX messages_partition_seq (partition_id=? AND seq>?)"}},
		{"consumers", sqlcore.SweptConsumersSQL, []any{1}, []string{"SEARCH consumers USING PRIMARY KEY (partition_id=?)"}},
		{"one-group copies", sqlcore.CopiesForOneGroupSQL, []any{"[1]"}, []string{"SEARCH replays USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"outcomes", sqlcore.ExpireOutcomesSQL, []any{1, "[1]"}, []string{"SEARCH replay_outcomes USING PRIMARY KEY (copy_seq=?)"}},
	} {
		plan := queryPlan(t, d, c.query, c.args...)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan\n%s\nwants %q", c.name, plan, w)
			}
		}
		for _, bad := range []string{"SCAN messages", "SCAN m\n", "SCAN dead_letters", "SCAN d\n", "SCAN consumers", "SCAN c\n", "SCAN removed_dead_letters", "SCAN attempts", "SCAN settle_marks", "SCAN replay_outcomes"} {
			if strings.Contains(plan+"\n", bad) {
				t.Errorf("%s: plan\n%s\nhas %q", c.name, plan, strings.TrimSpace(bad))
			}
		}
	}
}

// A sweep that deletes the newest messages of the whole table leaves a
// placeholder one seq above them, so that the next push does not get a
// seq again (SQLite gives the highest rowid + 1): cursors, dead letters
// and replays name the old ones. The placeholder is no message of any
// partition and is counted nowhere.
func TestSweepKeepsSeqsGrowing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	for i := range 3 {
		push(t, b, "p", fmt.Sprintf("m%d", i))
	}
	var pid int64
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		p, err := partitionP(ctx, tx)
		pid = p.ID
		if err != nil {
			return err
		}
		out, err := tx.SweepMessages(ctx, broker.MessageSweep{PartitionID: p.ID, UpTo: 1 << 40, Limit: 500, Now: time.Now()})
		if err != nil || out.Removed != 3 || out.Through != 3 {
			return fmt.Errorf("swept %+v, %v", out, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	push(t, b, "p", "after")
	if err := d.View(ctx, func(tx broker.Tx) error {
		m, err := tx.MessageByTransaction(ctx, pid, "after")
		if err != nil {
			return err
		}
		if m.Seq <= 4 {
			t.Errorf("pushed after the sweep with seq %d, want above 4: seqs 1-3 were handed out, 4 holds them", m.Seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	q, err := b.Queue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Partitions) != 1 || q.Partitions[0].Messages != 1 {
		t.Errorf("partitions %+v, want p with 1 message", q.Partitions)
	}
}

// Deleting the queue that holds the newest messages keeps seqs growing
// too: another partition's own newest were swept (not the table's
// newest then, so no placeholder), its cursor is past them.
func TestDeleteQueueKeepsSeqsGrowing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	// a is seq 1 in p, o1 seq 2 in another queue.
	push(t, b, "p", "a")
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "other", TransactionID: "o1", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	popAck(t, b, "g", broker.AckCompleted) // g's cursor in p: 1
	var pid int64
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		p, err := partitionP(ctx, tx)
		pid = p.ID
		if err != nil {
			return err
		}
		out, err := tx.SweepMessages(ctx, broker.MessageSweep{PartitionID: p.ID, UpTo: 1, Limit: 500, Now: time.Now()})
		if err == nil && out.Removed != 1 {
			err = fmt.Errorf("swept %+v", out)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteQueue(ctx, "other", "test"); err != nil {
		t.Fatal(err)
	}
	push(t, b, "p", "b")
	if _, got := popAck(t, b, "g", broker.AckCompleted); len(got) != 1 || got[0] != "b" {
		t.Errorf("g got %v after the other queue went, want b (its seq must be above g's cursor)", got)
	}
	if err := d.View(ctx, func(tx broker.Tx) error {
		m, err := tx.MessageByTransaction(ctx, pid, "b")
		if err == nil && m.Seq <= 2 {
			t.Errorf("b has seq %d, want above 2", m.Seq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A sweep that moves a consumer's cursor marks it as its partition is
// (migration 0009): ready while something is left past the range, not
// ready when the sweep took everything.
func TestSweepKeepsTheReadyMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	// g subscribes (x0 is seq 1, settled), then p1 p2 r1 r2 are seqs 2-5.
	push(t, b, "x", "x0")
	if _, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Partition: "x", AutoAck: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"p", "r"} {
		push(t, b, p, p+"1")
		push(t, b, p, p+"2")
	}
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		q, err := tx.QueueByName(ctx, "q")
		if err != nil {
			return err
		}
		// p: both; r: r1 (seq 4) only.
		for name, upTo := range map[string]int64{"p": 1 << 40, "r": 4} {
			part, err := tx.PartitionByName(ctx, q.ID, name)
			if err != nil {
				return err
			}
			if _, err := tx.SweepMessages(ctx, broker.MessageSweep{PartitionID: part.ID, UpTo: upTo, Limit: 500, Now: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantReady(t, d, "g", map[string]bool{"p": false, "r": true})
}

// A sweep gives a deleted dead letter's record its message's push time
// always, and its payload only while the record can be restored: an
// expired dead letter's record, and one whose restore window ended,
// had their payloads cut on purpose and keep them cut.
func TestSweepCopiesPayloadsOnlyToRestorableRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := openBroker(t)
	clk := newManualClock()
	b := broker.New(broker.Config{Store: d, Clock: clk})
	configure := func(opt, v string) {
		t.Helper()
		if _, err := b.Configure(ctx, "q", map[string]json.RawMessage{opt: json.RawMessage(v)}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	maintain := func() {
		t.Helper()
		if _, err := b.Maintain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"expired", "window-ended", "restorable"} {
		push(t, b, "p", id)
	}
	if _, ids := popAck(t, b, "g", broker.AckDLQ); len(ids) != 3 {
		t.Fatalf("dead-lettered %v", ids)
	}
	byTx := map[string]broker.DeadLetter{}
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range page.Items {
		byTx[dl.TransactionID] = dl
	}
	del := func(txid string) {
		t.Helper()
		if n, err := b.Delete(ctx, byTx[txid].MessageID(), "g", "user:x"); err != nil || n != 1 {
			t.Fatalf("delete %s: %d, %v", txid, n, err)
		}
	}
	// window-ended is deleted and its window ends; restorable is
	// deleted a day later, still restorable; expired expires.
	del("window-ended")
	clk.Advance(broker.RestoreWindow + time.Minute)
	del("restorable")
	configure("deadLetterRetentionSeconds", "3600")
	maintain()
	var records int
	if err := d.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM removed_dead_letters WHERE (how = 'expired') OR (restore_until = 0 AND how = 'deleted')`).Scan(&records); err != nil || records != 2 {
		t.Fatalf("records expired or past their window: %d, %v; want 2", records, err)
	}
	configure("retentionSeconds", "60")
	maintain()
	rows, err := d.read.QueryContext(ctx, `SELECT transaction_id, how, payload, pushed_at FROM removed_dead_letters ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var txid, how string
		var payload []byte
		var pushed int64
		if err := rows.Scan(&txid, &how, &payload, &pushed); err != nil {
			t.Fatal(err)
		}
		seen++
		want := ""
		if txid == "restorable" {
			want = `{}`
		}
		if string(payload) != want || (want == "") != (payload == nil) {
			t.Errorf("%s (%s): payload %q after the sweep, want %q", txid, how, payload, want)
		}
		if pushed != byTx[txid].CreatedAt.UnixMilli() {
			t.Errorf("%s (%s): pushed_at %d, want %d", txid, how, pushed, byTx[txid].CreatedAt.UnixMilli())
		}
	}
	if err := rows.Err(); err != nil || seen != 3 {
		t.Fatalf("%d records, %v; want 3", seen, err)
	}
	if n, err := b.Restore(ctx, byTx["restorable"].MessageID(), "g", "user:x"); err != nil || n != 1 {
		t.Fatalf("restore: %d, %v", n, err)
	}
	detail, err := b.DeadLetter(ctx, byTx["restorable"].MessageID(), "g")
	if err != nil || string(detail.Payload) != `{}` {
		t.Fatalf("restored: %q, %v", detail.Payload, err)
	}
}
