package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// With delayedProcessing, ReadyConsumers returns only the consumers whose
// first message past the cursor is due, leaves the others marked ready,
// and NextWake names the moment the first of them becomes due (migration
// 0011).
func TestReadyConsumersWaitForDelayedProcessing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b, clk := openDelayed(t, `{"delayedProcessing":10}`)
	// The group reads the queue before anything is pushed.
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g"}); err != nil || len(res.Messages) != 0 {
		t.Fatalf("first pop: %+v, %v", res, err)
	}
	t0 := clk.Now()
	push(t, b, "p1", "a")
	clk.Advance(4 * time.Second)
	push(t, b, "p2", "b")

	look := func(at time.Time) (ready []string, wake time.Time, ok bool) {
		t.Helper()
		if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			q, err := tx.QueueByName(ctx, "q")
			if err != nil {
				return err
			}
			gid, err := tx.GroupID(ctx, "g", false)
			if err != nil {
				return err
			}
			cs, _, err := tx.ReadyConsumers(ctx, q.ID, gid, at, 10)
			if err != nil {
				return err
			}
			for _, c := range cs {
				p, err := tx.PartitionByID(ctx, c.PartitionID)
				if err != nil {
					return err
				}
				ready = append(ready, p.Name)
			}
			wake, ok, err = tx.NextWake(ctx, q.ID, gid, at)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ready, wake, ok
	}
	for _, tc := range []struct {
		at    time.Duration
		ready string
		wake  time.Duration // 0: none
	}{
		{5 * time.Second, "[]", 10 * time.Second},
		{10*time.Second - time.Millisecond, "[]", 10 * time.Second},
		{10 * time.Second, "[p1]", 14 * time.Second},
		{14 * time.Second, "[p1 p2]", 0},
	} {
		ready, wake, ok := look(t0.Add(tc.at))
		if got := fmt.Sprint(ready); got != tc.ready {
			t.Errorf("at +%v: ready %s, want %s", tc.at, got, tc.ready)
		}
		switch {
		case tc.wake == 0 && ok:
			t.Errorf("at +%v: wake at +%v, want none", tc.at, wake.Sub(t0))
		case tc.wake != 0 && (!ok || !wake.Equal(t0.Add(tc.wake))):
			t.Errorf("at +%v: wake at +%v (%v), want +%v", tc.at, wake.Sub(t0), ok, tc.wake)
		}
	}
}

// A pop reads past more ready consumers whose first message is not due
// yet than ReadyConsumers' longest scan (1,024) to the one behind them
// that is due, and a pop that finds none due among them ends too: each
// scan goes on where the one before stopped. The scans had started from
// the first ready consumer each time, so that from the seventh on they
// read the same 1,024 for ever, holding the writer.
func TestPopReadsPastMoreNotDueThanAScan(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, b, clk := openDelayed(t, `{"delayedProcessing":10}`)
	pop := func(partition string) broker.PopResult {
		t.Helper()
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Partition: partition, Group: "g"})
		if err != nil {
			t.Fatalf("pop %q: %v", partition, err)
		}
		return res
	}
	if res := pop(""); len(res.Messages) != 0 {
		t.Fatalf("first pop: %+v", res)
	}
	// Partition "due" is leased once, so that it comes after the
	// never-leased ones in ReadyConsumers' order, and gets a message.
	t0 := clk.Now()
	push(t, b, "due", "d1")
	clk.Advance(10 * time.Second)
	res := pop("due")
	if len(res.Messages) != 1 {
		t.Fatalf("pop due: %+v", res)
	}
	m := res.Messages[0]
	if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted, Group: "g"}); err != nil {
		t.Fatal(err)
	}
	push(t, b, "due", "d2") // due at +20
	clk.Advance(5 * time.Second)
	const notDue = 1100
	var items []broker.PushItem
	for i := range notDue {
		items = append(items, broker.PushItem{Queue: "q", Partition: fmt.Sprintf("w%04d", i), TransactionID: "w", Payload: []byte(`{}`)})
	}
	for _, part := range [][]broker.PushItem{items[:notDue/2], items[notDue/2:]} { // due at +25
		if _, err := b.Push(ctx, part); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(5 * time.Second)

	if res := pop(""); len(res.Messages) != 1 || res.Messages[0].TransactionID != "d2" {
		t.Fatalf("pop at +20: %+v, want d2", res)
	}
	if res := pop(""); len(res.Messages) != 0 {
		t.Fatalf("second pop at +20: %d messages, want none", len(res.Messages))
	}
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		q, err := tx.QueueByName(ctx, "q")
		if err != nil {
			return err
		}
		gid, err := tx.GroupID(ctx, "g", false)
		if err != nil {
			return err
		}
		wake, ok, err := tx.NextWake(ctx, q.ID, gid, clk.Now())
		if err == nil && (!ok || !wake.Equal(t0.Add(25*time.Second))) {
			t.Errorf("wake at +%v (%v), want +25s", wake.Sub(t0), ok)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	if res := pop(""); len(res.Messages) != 1 || res.Messages[0].Partition != "w0000" {
		t.Fatalf("pop at +25: %+v, want w0000's", res)
	}
}

// In a delayed queue a consumer under a live lease wakes when the lease
// runs out (NextWake reads no message row for it: its head was due when
// it was leased), and one without a lease when its head is due.
func TestNextWakeInADelayedQueueIsTheLeaseEndOrTheHeadDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b, clk := openDelayed(t, `{"delayedProcessing":10,"leaseTime":60}`)
	wake := func() (time.Duration, bool) {
		t.Helper()
		var at time.Time
		var ok bool
		if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			q, err := tx.QueueByName(ctx, "q")
			if err != nil {
				return err
			}
			gid, err := tx.GroupID(ctx, "g", false)
			if err != nil {
				return err
			}
			at, ok, err = tx.NextWake(ctx, q.ID, gid, clk.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return at.Sub(clk.Now()), ok
	}
	pop := func(want string) {
		t.Helper()
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g"})
		if err != nil || len(res.Messages) != 1 || res.Messages[0].TransactionID != want {
			t.Fatalf("pop: %+v, %v; want %s", res, err, want)
		}
	}
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g"}); err != nil || len(res.Messages) != 0 {
		t.Fatalf("first pop: %+v, %v", res, err)
	}
	push(t, b, "p", "a")
	push(t, b, "p", "b") // behind a: waits for a's lease
	clk.Advance(10 * time.Second)
	pop("a") // leased until +60s from now
	push(t, b, "late", "c")
	if w, ok := wake(); !ok || w != 10*time.Second {
		t.Fatalf("wake in %v (%v), want c's due in 10s", w, ok)
	}
	clk.Advance(10 * time.Second)
	pop("c")
	if w, ok := wake(); !ok || w != 50*time.Second {
		t.Fatalf("wake in %v (%v), want a's lease end in 50s", w, ok)
	}
}

// openDelayed opens a database in a temporary directory and a broker over
// it on a manual clock, with queue q configured with options (a JSON
// object, e.g. {"delayedProcessing":10}).
func openDelayed(t *testing.T, options string) (*Store, *broker.Broker, *manualClock) {
	t.Helper()
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	clk := newManualClock()
	b := broker.New(broker.Config{Store: d, Clock: clk})
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(options), &raw); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Configure(context.Background(), "q", raw, "test"); err != nil {
		t.Fatal(err)
	}
	return d, b, clk
}
