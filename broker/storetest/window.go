package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// windowBuffer (Queen's): a partition is not delivered while its newest
// message was pushed less than windowBuffer seconds ago, by a pop of the
// queue or of the partition, to any group; once quiet that long, all of
// its messages are delivered as usual.
func testWindowBufferHoldsAPartitionUntilItIsQuiet(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"windowBuffer": 10})
	s.push("q", "p", "a", "b")

	for _, g := range []string{"g", "h"} {
		if ids, _ := s.popTxids("q", g, 10); len(ids) != 0 {
			t.Fatalf("at +0s, group %s: got %v", g, ids)
		}
	}
	s.clock.Advance(10*time.Second - time.Millisecond)
	if ids, _ := s.popTxids("q", "g", 10); len(ids) != 0 {
		t.Fatalf("at +9.999s: got %v", ids)
	}
	r, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10})
	if err != nil || len(r.Messages) != 0 {
		t.Fatalf("pop of p at +9.999s: %+v, %v", r, err)
	}

	s.clock.Advance(time.Millisecond) // +10s: quiet for the window
	if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("at +10s: got %v, want [a b]", ids)
	}
	r, err = s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p", Group: "h", Batch: 10})
	if err != nil || len(r.Messages) != 2 {
		t.Fatalf("pop of p by h at +10s: %+v, %v", r, err)
	}
}

// Each push to the partition starts its window again: messages pushed
// before it wait with it; a lease that runs out inside the window hands
// its messages back only once the window ends.
func testWindowBufferIsRearmedByEachPush(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"windowBuffer": 10, "leaseTime": 5})
	s.push("q", "p", "a")
	s.clock.Advance(6 * time.Second)
	s.push("q", "p", "b") // the window now ends at +16s
	s.clock.Advance(4 * time.Second)
	if ids, _ := s.popTxids("q", "g", 10); len(ids) != 0 {
		t.Fatalf("at +10s, 4s after the second push: got %v", ids)
	}
	s.clock.Advance(6 * time.Second)
	if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("at +16s: got %v, want [a b]", ids)
	}
	// Leased at +16s until +21s; c pushed at +18s holds the partition
	// until +28s, past the lease.
	s.clock.Advance(2 * time.Second)
	s.push("q", "p", "c")
	s.clock.Advance(4 * time.Second) // +22s: the lease is over, the window not
	if ids, _ := s.popTxids("q", "g", 10); len(ids) != 0 {
		t.Fatalf("at +22s, the lease over inside the window: got %v", ids)
	}
	s.clock.Advance(6 * time.Second) // +28s
	if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("at +28s: got %v, want [a b c]", ids)
	}
}

// A partition in its window does not hold back the others of the queue:
// a pop passes it by for a quiet one, though it comes first in the order
// of pops (never leased, made first).
func testWindowBufferHoldsOnlyItsPartition(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"windowBuffer": 10})
	s.push("q", "busy", "a0")
	s.push("q", "quiet", "c")
	s.clock.Advance(10 * time.Second)
	s.push("q", "busy", "a1")
	for _, g := range []string{"g", "h"} {
		if ids, _ := s.popTxids("q", g, 10); !slices.Equal(ids, []string{"c"}) {
			t.Fatalf("group %s: got %v, want [c]", g, ids)
		}
		if ids, _ := s.popTxids("q", g, 10); len(ids) != 0 {
			t.Fatalf("group %s, second pop: got %v", g, ids)
		}
	}
	s.clock.Advance(10 * time.Second)
	if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, []string{"a0", "a1"}) {
		t.Fatalf("after the window: got %v, want [a0 a1]", ids)
	}
}

// A pop that waits is woken when the window of the partition it waits
// for ends, with no push to say so: of the queue, and of the partition.
func testWaitingPopWakesWhenTheWindowEnds(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"windowBuffer": 1})
	s.push("q", "p", "a")
	type answer struct {
		group string
		ids   []string
	}
	got := make(chan answer, 2)
	for _, req := range []broker.PopRequest{
		{Queue: "q", Group: "g", Wait: true, Timeout: 30 * time.Second},
		{Queue: "q", Partition: "p", Group: "h", Wait: true, Timeout: 30 * time.Second},
	} {
		go func() {
			r, err := s.b.Pop(s.ctx, req)
			if err != nil {
				t.Error(err)
			}
			var ids []string
			for _, m := range r.Messages {
				ids = append(ids, m.TransactionID)
			}
			got <- answer{req.Group, ids}
		}()
	}
	// Both have looked and found the partition in its window.
	deadline := time.Now().Add(20 * time.Second)
	for s.b.Waiting() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pops waiting, want 2", s.b.Waiting())
		}
		time.Sleep(time.Millisecond)
	}
	s.clock.Advance(time.Second) // the window is over; nobody pushes
	for range 2 {
		select {
		case a := <-got:
			if !slices.Equal(a.ids, []string{"a"}) {
				t.Fatalf("woken pop of %s got %v", a.group, a.ids)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a waiting pop was not woken by the end of the window")
		}
	}
}

// windowBuffer 0 (Queen's clients send it on every create) is no window,
// and windowBuffer is enforced: not reported as kept only.
func testWindowBufferZeroIsNoWindow(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"windowBuffer": 0, "maxSize": 0})
	s.push("q", "p", "a")
	ids, res := s.popTxids("q", "g", 10)
	if !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("windowBuffer 0: got %v", ids)
	}
	s.ack(res.Messages[0], broker.AckCompleted, "")
	s.configure("q", map[string]any{"windowBuffer": 5})
	s.configure("q", map[string]any{"windowBuffer": nil}) // back to the default: none
	s.push("q", "p", "b")
	if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, []string{"b"}) {
		t.Fatalf("windowBuffer null: got %v", ids)
	}
	s.configure("q", map[string]any{"windowBuffer": 5})
	q, err := s.b.Queue(s.ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if q.Options.Window() != 5*time.Second || !slices.Equal(q.Options.NotEnforced(), []string{"maxSize"}) {
		t.Fatalf("window %v, not enforced %v", q.Options.Window(), q.Options.NotEnforced())
	}
}
