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
	for q, st := range d.main.raw.stmts {
		if strings.HasPrefix(strings.TrimSpace(q), prefix) {
			n += runs(st)
		}
	}
	return n
}

// A filing runs each of its statements once. The counts a completed ack
// left waiting in memory (broker.StatsDelay) for the same group and
// minute join the dead letter's in one upsert of group_stats and of each
// bucket, not one upsert for each (those of another minute are written
// apart, in their own minute's buckets); the group's oldest dead letter
// is read within that upsert, and left as it is by counts that move no
// depth; and the dead letter's insert itself finds that the group holds
// the message already (a second filing of it files nothing, counts
// nothing, logs nothing for the text index), with no read before it.
// What is written is what two upserts and the reads wrote.
func TestAFilingWritesItsCountsInOneUpsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 12, 4, 10, 0, 30, 0, time.UTC)
	first := at
	d, b := openBrokerAt(t, &at)
	pop := func(txid string) broker.Ack {
		t.Helper()
		if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: txid, Payload: json.RawMessage(`{"n":1}`)}}); err != nil {
			t.Fatal(err)
		}
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop %s: %d messages, %v", txid, len(res.Messages), err)
		}
		return ackOf(res)
	}
	complete := func(txid string) {
		t.Helper()
		if _, err := b.Ack(ctx, pop(txid)); err != nil {
			t.Fatal(err)
		}
	}
	upserts := func() map[string]int {
		return map[string]int{
			"group_stats": runsOf(d, "INSERT INTO group_stats ("), "stats_minute": runsOf(d, "INSERT INTO stats_minute ("),
			"stats_quarter": runsOf(d, "INSERT INTO stats_quarter ("), "stats_hour": runsOf(d, "INSERT INTO stats_hour ("),
			"reads of dead letters": runsOf(d, "SELECT d.id,") + runsOf(d, "SELECT failed_at FROM dead_letters"),
		}
	}
	// file acks a, txid's pop, into the dead letters and checks that its
	// filing ran each count's upsert want times.
	file := func(txid string, a broker.Ack, want int) {
		t.Helper()
		a.Status, a.Error = broker.AckDLQ, "boom"
		before := upserts()
		out, err := b.AckBatch(ctx, "", []broker.Ack{a})
		if err != nil || len(out) != 1 || !out[0].DLQ {
			t.Fatalf("ack %s into the dead letters: %+v %v", txid, out, err)
		}
		for what, n := range upserts() {
			w := want
			if what == "reads of dead letters" {
				w = 0
			}
			if n-before[what] != w {
				t.Errorf("filing %s ran %s %d times, want %d", txid, what, n-before[what], w)
			}
		}
	}
	type bucket struct{ completed, deadLettered, depth int64 }
	// check reads group_stats and the buckets of the minutes from 10:00
	// as written (no count waits in memory when it is called).
	check := func(when string, completed, deadLettered, depth int64, buckets []bucket) {
		t.Helper()
		err := d.View(ctx, func(tx broker.Tx) error {
			q, err := tx.QueueByName(ctx, "q")
			if err != nil {
				return err
			}
			gs, err := tx.Stats(ctx, q.ID)
			if err != nil {
				return err
			}
			if len(gs) != 1 {
				t.Fatalf("%s: group_stats %+v, want one group", when, gs)
			}
			g := gs[0]
			if g.Completed != completed || g.DeadLettered != deadLettered || g.Depth != depth || !g.OldestFailedAt.Equal(first) {
				t.Errorf("%s: group_stats completed %d, dead lettered %d, depth %d, oldest %v; want %d, %d, %d, %v",
					when, g.Completed, g.DeadLettered, g.Depth, g.OldestFailedAt, completed, deadLettered, depth, first)
			}
			from := first.Truncate(time.Minute)
			bs, err := tx.Series(ctx, q.ID, from, from.Add(time.Duration(len(buckets))*time.Minute), time.Minute)
			if err != nil {
				return err
			}
			if len(bs) != len(buckets) {
				t.Fatalf("%s: buckets %+v, want %d", when, bs, len(buckets))
			}
			for i, w := range buckets {
				got := bucket{bs[i].Completed, bs[i].DeadLettered, bs[i].Depth}
				if got != w || !bs[i].OldestAt.Equal(first) {
					t.Errorf("%s: the bucket of %v: %+v, oldest %v; want %+v, oldest %v", when, bs[i].At, got, bs[i].OldestAt, w, first)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	complete("c1")           // waits in memory
	file("d1", pop("d1"), 1) // the same minute: joins the filing's counts
	check("the first filing", 1, 1, 1, []bucket{{1, 1, 1}})

	at = at.Add(20 * time.Second)
	complete("c2") // waits, of 10:00
	d2 := pop("d2")
	at = at.Add(20 * time.Second)
	file("d2", d2, 2) // 10:01: c2's count written apart, in 10:00's buckets
	check("a filing of the next minute", 2, 2, 2, []bucket{{2, 1, 1}, {0, 1, 2}})

	at = at.Add(10 * time.Second)
	complete("c3")
	if err := b.FlushStats(ctx); err != nil { // moves no depth: the oldest stays
		t.Fatal(err)
	}
	check("counts that move no depth", 3, 2, 2, []bucket{{2, 1, 1}, {1, 1, 2}})

	// d1's message filed again into the same group: nothing filed,
	// counted or logged.
	logged := func() (seq, inGroup int64) {
		t.Helper()
		if err := d.read.QueryRowContext(ctx, `SELECT (SELECT seq FROM sqlite_sequence WHERE name = 'text_index_added'),
			(SELECT dead_letters FROM error_groups)`).Scan(&seq, &inGroup); err != nil {
			t.Fatal(err)
		}
		return seq, inGroup
	}
	seqBefore, groupBefore := logged()
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		dls, err := tx.ListDeadLetters(ctx, broker.Filter{TransactionID: "d1"}, broker.Page{Limit: 10})
		if err != nil || len(dls) != 1 {
			t.Fatalf("d1's dead letters: %+v %v", dls, err)
		}
		again := dls[0]
		filed, err := tx.FileDeadLetters(ctx, []*broker.DeadLetter{&again})
		if err != nil {
			return err
		}
		if len(filed) != 1 || filed[0] {
			t.Errorf("a second filing of d1's message: filed %v, want [false]", filed)
		}
		after, err := tx.DeadLettersOfMessage(ctx, dls[0].Seq)
		if err != nil || len(after) != 1 || after[0].ID != dls[0].ID {
			t.Errorf("d1's dead letters after a second filing: %+v %v, want the first alone", after, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seq, inGroup := logged(); seq != seqBefore || inGroup != groupBefore {
		t.Errorf("a second filing logged for the text index up to %d (was %d) and counted %d in the error group (was %d)", seq, seqBefore, inGroup, groupBefore)
	}
	check("a second filing", 3, 2, 2, []bucket{{2, 1, 1}, {1, 1, 2}})
}
