package sqlite

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// runsOf is how many times the writer has run its kept statements that
// begin with prefix.
func runsOf(d *Store, prefix string) int {
	n := 0
	for q, st := range d.raw.stmts {
		if strings.HasPrefix(strings.TrimSpace(q), prefix) {
			n += runs(st)
		}
	}
	return n
}

// A filing runs each of its statements once. The counts a completed ack
// left waiting in memory (broker.StatsDelay) for the same group and
// minute join the dead letter's in one upsert of group_stats and of each
// bucket, not one upsert for each; the group's oldest dead letter is
// read within that upsert; and the dead letter's insert itself finds
// that the group holds the message already (a second filing of it files
// nothing), with no read before it. What is written is what two
// upserts and the reads wrote: the completed count, the dead letter, the
// depth and the oldest dead letter's time, in group_stats and in the
// minute's bucket.
func TestAFilingWritesItsCountsInOneUpsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 12, 4, 10, 0, 30, 0, time.UTC)
	d, b := openBrokerAt(t, at)
	push := func(txid string) broker.PopResult {
		t.Helper()
		if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: txid, Payload: json.RawMessage(`{"n":1}`)}}); err != nil {
			t.Fatal(err)
		}
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop %s: %d messages, %v", txid, len(res.Messages), err)
		}
		return res
	}
	if _, err := b.Ack(ctx, ackOf(push("done"))); err != nil {
		t.Fatal(err)
	}
	res := push("boom")
	a := ackOf(res)
	a.Status, a.Error = broker.AckDLQ, "boom"
	upserts := func() map[string]int {
		return map[string]int{
			"group_stats": runsOf(d, "INSERT INTO group_stats ("), "stats_minute": runsOf(d, "INSERT INTO stats_minute ("),
			"stats_quarter": runsOf(d, "INSERT INTO stats_quarter ("), "stats_hour": runsOf(d, "INSERT INTO stats_hour ("),
			"reads of dead letters": runsOf(d, "SELECT d.id,") + runsOf(d, "SELECT failed_at FROM dead_letters"),
		}
	}
	before := upserts()
	out, err := b.AckBatch(ctx, "", []broker.Ack{a})
	if err != nil || len(out) != 1 || !out[0].DLQ {
		t.Fatalf("ack into the dead letters: %+v %v", out, err)
	}
	for what, n := range upserts() {
		want := 1
		if what == "reads of dead letters" {
			want = 0
		}
		if n-before[what] != want {
			t.Errorf("the filing ran %s %d times, want %d", what, n-before[what], want)
		}
	}

	var dl broker.DeadLetter
	err = d.View(ctx, func(tx broker.Tx) error {
		q, err := tx.QueueByName(ctx, "q")
		if err != nil {
			return err
		}
		gs, err := tx.Stats(ctx, q.ID)
		if err != nil {
			return err
		}
		if len(gs) != 1 {
			t.Fatalf("group_stats: %+v, want one group", gs)
		}
		g := gs[0]
		if g.Completed != 1 || g.DeadLettered != 1 || g.Depth != 1 || !g.OldestFailedAt.Equal(at.Truncate(time.Millisecond)) {
			t.Errorf("group_stats: completed %d, dead lettered %d, depth %d, oldest %v; want 1, 1, 1, %v", g.Completed, g.DeadLettered, g.Depth, g.OldestFailedAt, at)
		}
		bs, err := tx.Series(ctx, q.ID, at.Truncate(time.Minute), at.Add(time.Minute), time.Minute)
		if err != nil {
			return err
		}
		if len(bs) != 1 || bs[0].Completed != 1 || bs[0].DeadLettered != 1 || bs[0].Depth != 1 || !bs[0].OldestAt.Equal(at.Truncate(time.Millisecond)) {
			t.Errorf("the minute's buckets: %+v, want one with completed 1, dead lettered 1, depth 1, oldest %v", bs, at)
		}
		dls, err := tx.DeadLettersOfMessage(ctx, res.Messages[0].Seq)
		if err != nil || len(dls) != 1 {
			t.Fatalf("dead letters of the message: %+v %v", dls, err)
		}
		dl = dls[0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The same message filed again into the same group: nothing filed,
	// no count moved.
	err = d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		again := dl
		filed, err := tx.FileDeadLetters(ctx, []*broker.DeadLetter{&again})
		if err != nil {
			return err
		}
		if len(filed) != 1 || filed[0] {
			t.Errorf("a second filing of the message: filed %v, want [false]", filed)
		}
		dls, err := tx.DeadLettersOfMessage(ctx, dl.Seq)
		if err != nil || len(dls) != 1 || dls[0].ID != dl.ID {
			t.Errorf("dead letters of the message after a second filing: %+v %v, want the first alone", dls, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
