package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The statements an ack reads its consumer and its lease's messages
// with, when the writer's memo does not have them.
const (
	memoConsumerSQL = `SELECT ` + sqlcore.ConsumerCols + ` FROM consumers WHERE partition_id = ? AND group_id = ?`
	memoRangeSQL    = `SELECT seq, transaction_id, trace_id, created_at FROM messages WHERE partition_id = ? AND seq > ? AND seq <= ? ORDER BY seq`
	memoLeaseSQL    = `SELECT ` + sqlcore.ConsumerCols + ` FROM consumers WHERE partition_id = ? AND group_id = ? AND lease_id = ?`
)

// ackReads is how many times the writer has run the ack's two reads.
func ackReads(d *Store) int {
	n := 0
	for _, q := range []string{memoConsumerSQL, memoRangeSQL, memoLeaseSQL} {
		if st, ok := d.main.raw.stmts[q]; ok {
			n += runs(st)
		}
	}
	return n
}

// pushPop pushes one message to queue q and pops it.
func pushPop(t *testing.T, b *broker.Broker) broker.PopResult {
	t.Helper()
	ctx := context.Background()
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", Payload: json.RawMessage(`{"n":1}`)}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 {
		t.Fatalf("popped %d messages, want 1", len(res.Messages))
	}
	return res
}

func ackOf(res broker.PopResult) broker.Ack {
	m := res.Messages[0]
	return broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
}

// An ack that follows its pop takes the consumer and the lease's
// messages from the writer's memo: it reads neither again, and settles
// the message as one that read them would. Odd rounds ack by the lease
// alone (no partition), as a client that kept only the lease id does.
func TestAckAfterPopReadsNothingAgain(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	ctx := context.Background()
	for i := range 4 {
		res := pushPop(t, b)
		a := ackOf(res)
		if i%2 == 1 {
			a.PartitionID = ""
		}
		before := ackReads(d)
		if _, err := b.Ack(ctx, a); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
		if n := ackReads(d) - before; n != 0 {
			t.Fatalf("ack %d read its consumer or messages %d times, want 0", i, n)
		}
		// A second ack of the same message finds it settled (the lease
		// ended), as it would reading the database.
		if _, err := b.Ack(ctx, a); err == nil {
			t.Fatalf("ack %d again: accepted, want refused", i)
		}
	}
	again, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Messages) != 0 {
		t.Fatalf("after four acks a pop got %d messages, want 0", len(again.Messages))
	}
}

// What changes a consumer behind the memo's back empties it: a commit
// of another connection (another process would do the same) and a
// statement of the writer that the memo does not know. Either way the
// ack reads the consumer again, finds the lease gone, and is refused.
func TestMemoSeesChangesItDidNotMake(t *testing.T) {
	t.Parallel()
	const endLease = `UPDATE consumers SET lease_id = NULL, lease_until = 0, lease_last = 0`
	cases := []struct {
		name   string
		change func(t *testing.T, d *Store)
	}{
		{"another connection", func(t *testing.T, d *Store) {
			if _, err := d.WriteDB().ExecContext(context.Background(), endLease); err != nil {
				t.Fatal(err)
			}
		}},
		{"a statement of the writer", func(t *testing.T, d *Store) {
			err := d.Update(context.Background(), broker.UpdateOptions{}, func(tx broker.Tx) error {
				_, err := tx.(*sqlcore.Tx).Exec(context.Background(), endLease)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, b := openBroker(t)
			res := pushPop(t, b)
			c.change(t, d)
			before := ackReads(d)
			_, err := b.Ack(context.Background(), ackOf(res))
			if err == nil {
				t.Fatal("ack of a lease that was ended: accepted, want refused")
			}
			if ackReads(d) == before {
				t.Fatal("the ack did not read its consumer again")
			}
		})
	}
}

// The groups of a queue pop one partition at cursors of their own; each
// one's ack finds its lease's messages in the memo, whichever group
// popped after it (the memo keeps several ranges of a partition), and
// settles its message.
func TestAcksOfGroupsAtTheirOwnCursorsReadNothingAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// No fold of the counts between the pops and the acks (it empties
	// the memo): only the first commit folds.
	d, err := OpenWith(ctx, filepath.Join(t.TempDir(), "l.db"), Options{Sync: SyncNormal, FoldEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	b := broker.New(broker.Config{Store: d})
	const groups = 10
	items := make([]broker.PushItem, 2*groups)
	for i := range items {
		items[i] = broker.PushItem{Queue: "q", Payload: json.RawMessage(`{"n":1}`)}
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	ack := func(g int, res broker.PopResult) error {
		a := ackOf(res)
		a.Group = fmt.Sprintf("g%d", g)
		_, err := b.Ack(ctx, a)
		return err
	}
	pop := func(g int) broker.PopResult {
		t.Helper()
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: fmt.Sprintf("g%d", g), Batch: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) != 1 {
			t.Fatalf("group %d popped %d messages, want 1", g, len(res.Messages))
		}
		return res
	}
	// Group g settles its first g messages: its cursor is at the g-th.
	for g := range groups {
		for range g {
			if err := ack(g, pop(g)); err != nil {
				t.Fatal(err)
			}
		}
	}
	leases := make([]broker.PopResult, groups)
	for g := range groups {
		leases[g] = pop(g)
	}
	before := ackReads(d)
	for g, res := range leases {
		if err := ack(g, res); err != nil {
			t.Fatalf("group %d: %v", g, err)
		}
	}
	if n := ackReads(d) - before; n != 0 {
		t.Fatalf("the %d groups' acks read their consumers or messages %d times, want 0", groups, n)
	}
	for g := range groups {
		if next := pop(g); next.Messages[0].TransactionID == leases[g].Messages[0].TransactionID {
			t.Fatalf("group %d got its acked message again", g)
		}
	}
}
