package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Two brokers over one PostgreSQL database are two processes: what one
// removes, the other's cache forgets before its next lookup, also when a
// write that looks nothing up (maintenance) came between. Only on
// a store several processes share (Harness.SeveralProcesses).
func testAQueueRemovedByAnotherProcessIsForgotten(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	dsn := harness.New(t, "lazarus")
	open := func() *broker.Broker {
		d, err := harness.Open(ctx, dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
		b := broker.New(broker.Config{Store: d, Clock: c, Notifier: d.Notifier()})
		t.Cleanup(b.Close)
		return b
	}
	a, b := open(), open()
	push := func(br *broker.Broker, txid string) {
		t.Helper()
		if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: txid, Payload: []byte(`{}`)}}); err != nil {
			t.Fatalf("push %s: %v", txid, err)
		}
	}
	push(b, "old") // b's cache holds q and its partition p
	if err := a.DeleteQueue(ctx, "q", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Maintain(ctx); err != nil { // a write of b's that looks nothing up
		t.Fatal(err)
	}
	push(b, "new")
	res, err := a.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 10})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].TransactionID != "new" {
		t.Fatalf("pop after the queue was removed and pushed to again: %+v %v, want new alone", res.Messages, err)
	}
}
