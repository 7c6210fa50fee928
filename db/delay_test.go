package db

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
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	clk := newManualClock()
	b := broker.New(broker.Config{Store: d, Clock: clk})
	if _, err := b.Configure(ctx, "q", map[string]json.RawMessage{"delayedProcessing": json.RawMessage("10")}, "test"); err != nil {
		t.Fatal(err)
	}
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
		if err := d.Update(ctx, func(tx broker.Tx) error {
			q, err := tx.QueueByName(ctx, "q")
			if err != nil {
				return err
			}
			gid, err := tx.GroupID(ctx, "g", false)
			if err != nil {
				return err
			}
			cs, err := tx.ReadyConsumers(ctx, q.ID, gid, at, 10)
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
