package db_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// BenchmarkLifecycle1 is PERF.md's T1 for profiling: push, pop and ack one
// message at a time (the verdicts are bench/'s, against its references).
func BenchmarkLifecycle1(b *testing.B) {
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	br := broker.New(broker.Config{Store: d})
	body := []byte(`{"order":12345,"status":"paid"}`)
	b.ResetTimer()
	for b.Loop() {
		if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Payload: body}}); err != nil {
			b.Fatal(err)
		}
		res, err := br.Pop(ctx, broker.PopRequest{Queue: "q"})
		if err != nil || len(res.Messages) != 1 {
			b.Fatal(res, err)
		}
		m := res.Messages[0]
		if _, err := br.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}); err != nil {
			b.Fatal(err)
		}
	}
}
