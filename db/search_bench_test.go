package db_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// BenchmarkPushWithSearchIndex measures what an index on messages would
// cost every push (issue 14: searching by traceId or transactionId across
// partitions): pushes of 1 and of 100 messages with a traceId each, on a
// database with no extra index, with a partial index on trace_id, and with
// an index on transaction_id. Run interleaved: -count 5.
func BenchmarkPushWithSearchIndex(b *testing.B) {
	for _, batch := range []int{1, 100} {
		for _, ix := range []struct{ name, sql string }{
			{"none", ""},
			{"trace", `CREATE INDEX x ON messages (trace_id) WHERE trace_id <> ''`},
			{"txid", `CREATE INDEX x ON messages (transaction_id)`},
		} {
			b.Run(fmt.Sprintf("batch%d/%s", batch, ix.name), func(b *testing.B) {
				ctx := context.Background()
				d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				if ix.sql != "" {
					if _, err := d.WriteDB().ExecContext(ctx, ix.sql); err != nil {
						b.Fatal(err)
					}
				}
				br := broker.New(broker.Config{Store: d})
				body := []byte(`{"order":12345,"status":"paid"}`)
				items := make([]broker.PushItem, batch)
				n := 0
				push := func() {
					for i := range items {
						n++
						items[i] = broker.PushItem{Queue: "q", Payload: body, TraceID: randomHex(), TransactionID: randomHex()}
					}
					if _, err := br.Push(ctx, items); err != nil {
						b.Fatal(err)
					}
				}
				for range 20000 / batch { // a table that is not empty
					push()
				}
				b.ResetTimer()
				for b.Loop() {
					push()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
			})
		}
	}
}

// randomHex is 32 random hex digits, as W3C trace ids and random
// transactionIds are: index entries land anywhere in the tree.
func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
