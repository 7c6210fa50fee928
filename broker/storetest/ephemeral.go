package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// recordingStore is the store, noting for every write whether it
// was marked ephemeral and whether it committed.
type recordingStore struct {
	Store
	mu     sync.Mutex
	writes []write
}

type write struct {
	ephemeral, committed bool
}

func (s *recordingStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	err := s.Store.Update(ctx, o, fn)
	s.mu.Lock()
	s.writes = append(s.writes, write{ephemeral: o.Ephemeral, committed: err == nil})
	s.mu.Unlock()
	return err
}

// take returns the writes since the last take.
func (s *recordingStore) take() []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.writes
	s.writes = nil
	return w
}

// A pop that only takes a lease is an ephemeral write; a pop that must
// first subscribe its group, an autoAck pop, a push and an ack are not.
// Whichever way a pop ran, its messages and lease work the same.
func testOnlyLeasesAreEphemeral(t *testing.T, harness Harness) {
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "l.db"), Options{SyncFull: true, NeverAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st := &recordingStore{Store: d}
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	b := broker.New(broker.Config{Store: st, Clock: c})
	items := []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "a", Payload: []byte(`{}`)},
		{Queue: "q", Partition: "p", TransactionID: "b", Payload: []byte(`{}`)},
		{Queue: "q", Partition: "p", TransactionID: "c", Payload: []byte(`{}`)}}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	for _, w := range st.take() {
		if w.ephemeral {
			t.Errorf("push: an ephemeral write")
		}
	}

	// The group's first pop subscribes it: the ephemeral attempt stops
	// without committing and the pop runs as an ordinary write.
	first, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
	if err != nil || len(first.Messages) != 1 || first.Messages[0].TransactionID != "a" {
		t.Fatalf("first pop = %+v, %v; want message a", first, err)
	}
	if got, want := st.take(), []write{{ephemeral: true, committed: false}, {ephemeral: false, committed: true}}; !equalWrites(got, want) {
		t.Errorf("first pop of a group: writes %+v, want %+v", got, want)
	}
	if _, err := b.Ack(ctx, broker.Ack{TransactionID: "a", PartitionID: first.Messages[0].PartitionUUID, LeaseID: first.LeaseID, Status: broker.AckCompleted, Group: "g"}); err != nil {
		t.Fatal(err)
	}
	if got := st.take(); len(got) != 1 || got[0].ephemeral {
		t.Errorf("ack: writes %+v, want one that is not ephemeral", got)
	}

	// Once subscribed, a pop is a lease alone.
	second, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
	if err != nil || len(second.Messages) != 1 || second.Messages[0].TransactionID != "b" {
		t.Fatalf("second pop = %+v, %v; want message b", second, err)
	}
	if got, want := st.take(), []write{{ephemeral: true, committed: true}}; !equalWrites(got, want) {
		t.Errorf("pop of a subscribed group: writes %+v, want %+v", got, want)
	}
	res, err := b.Ack(ctx, broker.Ack{TransactionID: "b", PartitionID: second.Messages[0].PartitionUUID, LeaseID: second.LeaseID, Status: broker.AckCompleted, Group: "g"})
	if err != nil || !res.Success {
		t.Fatalf("ack under the ephemeral lease = %+v, %v", res, err)
	}
	st.take()

	// autoAck settles the messages: not ephemeral.
	auto, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1, AutoAck: true})
	if err != nil || len(auto.Messages) != 1 || auto.Messages[0].TransactionID != "c" {
		t.Fatalf("autoAck pop = %+v, %v; want message c", auto, err)
	}
	if got, want := st.take(), []write{{ephemeral: false, committed: true}}; !equalWrites(got, want) {
		t.Errorf("autoAck pop: writes %+v, want %+v", got, want)
	}

	// Nothing left, nothing delivered twice.
	if empty, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10}); err != nil || len(empty.Messages) != 0 {
		t.Errorf("pop after all were settled = %+v, %v; want none", empty, err)
	}
}

func equalWrites(a, b []write) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
