package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
)

// fileDeadLetters files n more dead letters in queue q, pushed, popped
// and given up on a batch at a time; their payloads hold n (counting on
// from first) and the word EUR, as every payload of a real queue may.
func fileDeadLetters(t *testing.T, b *broker.Broker, first, n int) {
	t.Helper()
	ctx := context.Background()
	const batch = 1000
	for done := 0; done < n; {
		k := min(batch, n-done)
		items := make([]broker.PushItem, k)
		for i := range items {
			id := first + done + i
			items[i] = broker.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("t-%d", id),
				Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"currency":"EUR","orderId":"o-%d"}`, id, id))}
		}
		if _, err := b.Push(ctx, items); err != nil {
			t.Fatal(err)
		}
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: k})
		if err != nil || len(res.Messages) != k {
			t.Fatalf("pop: %d of %d: %v", len(res.Messages), k, err)
		}
		acks := make([]broker.Ack, k)
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "card declined"}
		}
		if _, err := b.AckBatch(ctx, "g", acks); err != nil {
			t.Fatal(err)
		}
		done += k
	}
}

// A search for a word that every payload holds looks at about as many
// rows (SQLite's VM steps) with ten times the dead letters: a window of the newest, read
// newest first in the full-text index too (migration 0040), never the
// word's whole list (issue 37: 246 ms a page at a million dead letters).
// Its page is the newest dead letters, in order, and says it read a
// window. (Not parallel: it makes the search's limits small.)
func TestCommonWordSearchReadsAWindow(t *testing.T) {
	defer broker.SetSearchLimits(100, 500)()
	d, b := openBroker(t)
	ctx := context.Background()
	d.read.SetMaxOpenConns(1) // the search's connection is the one measured
	d.read.SetMaxIdleConns(1)
	reads := func() int64 {
		t.Helper()
		c, err := d.read.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var n int64
		if err := c.Raw(func(dc any) error { n = VMSteps(dc.(*sqlite3.SQLiteConn)); return nil }); err != nil || n < 0 {
			t.Fatalf("VM steps: %d, %v", n, err)
		}
		return n
	}
	search := func(total int) int64 {
		t.Helper()
		q := broker.DLQQuery{Queue: "q", Text: "eur", Limit: 50, WithTotal: true}
		b.DeadLetters(ctx, q) // once first: the statements' preparation is not the search
		before := reads()
		page, err := b.DeadLetters(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n := reads() - before
		if len(page.Items) != 50 || page.Next == nil || !page.MatchCapped {
			t.Fatalf("%d dead letters: %d found, next %v, capped %v; want a full page of 50 and more", total, len(page.Items), page.Next, page.MatchCapped)
		}
		for i, dl := range page.Items {
			var p struct{ N int }
			if err := json.Unmarshal(dl.Payload, &p); err != nil || p.N != total-1-i {
				t.Fatalf("%d dead letters: item %d is n=%d (%v), want %d: the newest first", total, i, p.N, err, total-1-i)
			}
		}
		return n
	}
	const few, many = 2_000, 20_000
	fileDeadLetters(t, b, 0, few)
	fewReads := search(few)
	fileDeadLetters(t, b, few, many-few)
	manyReads := search(many)
	t.Logf("VM steps: %d at %d dead letters, %d at %d", fewReads, few, manyReads, many)
	if manyReads > fewReads*13/10 {
		t.Errorf("a search for a word of every payload ran %d VM steps at %d dead letters, %d at %d: want about as many (a window)", manyReads, many, fewReads, few)
	}
}
