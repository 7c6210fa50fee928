package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// recordingNotifier is a LocalNotifier that also keeps the keys notified
// and tells who watches.
type recordingNotifier struct {
	broker.LocalNotifier
	mu      sync.Mutex
	keys    []string
	watched chan string
}

func (n *recordingNotifier) Watch(key string) <-chan struct{} {
	ch := n.LocalNotifier.Watch(key)
	select {
	case n.watched <- key:
	default:
	}
	return ch
}

func (n *recordingNotifier) Notify(keys ...string) {
	n.mu.Lock()
	n.keys = append(n.keys, keys...)
	n.mu.Unlock()
	n.LocalNotifier.Notify(keys...)
}

func (n *recordingNotifier) notified() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.keys)
}

// The news of a write goes through the broker's Notifier once the write
// has committed, and not for a write refused: a Notifier shared by two
// brokers over one store (as processes will share one over PostgreSQL)
// wakes a long-poll of one with a push on the other.
func testNewsGoesThroughTheNotifier(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	news := &recordingNotifier{watched: make(chan string, 1)}
	a := broker.New(broker.Config{Store: s.db, Clock: s.clock, Notifier: news})
	b := broker.New(broker.Config{Store: s.db, Clock: s.clock, Notifier: news})
	ctx := context.Background()

	if _, err := a.Push(ctx, []broker.PushItem{{Queue: "q", Payload: []byte(`{nope`)}}); err == nil {
		t.Fatal("a push of a payload that is not JSON succeeded")
	}
	if got := news.notified(); len(got) != 0 {
		t.Fatalf("a refused push notified %v", got)
	}
	if _, err := a.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: "first", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	if first, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g"}); err != nil || len(first.Messages) != 1 {
		t.Fatalf("first pop %+v %v", first, err)
	}
	select { // the plain pop's watch
	case <-news.watched:
	default:
	}

	// b waits (nothing left for g) until a's push wakes it.
	got := make(chan broker.PopResult, 1)
	errc := make(chan error, 1)
	go func() {
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Wait: true, Timeout: time.Minute})
		got <- res
		errc <- err
	}()
	// Once b watches the queue, a's push reaches it (through the look it
	// is about to make, or by waking it); a pop not woken would wait a
	// minute.
	if key := <-news.watched; key != "q" {
		t.Fatalf("b watches %q", key)
	}
	// (another partition: the first message's lease holds its own)
	if _, err := a.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p2", Payload: []byte(`2`)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-got:
		if err := <-errc; err != nil || len(res.Messages) != 1 {
			t.Fatalf("the waiting pop: %+v, %v", res, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting pop was not woken by the other broker's push")
	}
	if !slices.Contains(news.notified(), "q") {
		t.Fatalf("news %v, want q", news.notified())
	}
}
