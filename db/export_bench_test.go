package db_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// BenchmarkExportSearch: an export (NDJSON's pages, emit discarding) of
// every dead letter of a queue matching free text (q=visa: every error
// text and payload) or a field filter (brand = visa: every payload), at
// 10k and 40k matches, with as many dead letters of another queue
// matching too. A page used to match and sort the whole search again
// (n²); the index-driven pages walk the index in docid order.
func BenchmarkExportSearch(b *testing.B) {
	for _, n := range []int{10_000, 40_000} {
		ctx := context.Background()
		d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
		if err != nil {
			b.Fatal(err)
		}
		w := d.WriteDB()
		for _, stmt := range []string{
			`INSERT INTO queues (id, name, lease_time, retry_limit, retry_delay, dead_letter_queue, dlq_after_max_retries, created_at) VALUES (1, 'orders', 300, 3, 1000, 1, 1, 0), (2, 'refunds', 300, 3, 1000, 1, 1, 0)`,
			`INSERT INTO groups (id, name) VALUES (1, 'billing')`,
			`INSERT INTO partitions (id, queue_id, name, uuid, created_at) VALUES (1, 1, 'p', 'uuid-1', 0), (2, 2, 'p', 'uuid-2', 0)`,
			fmt.Sprintf(`WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < %d)
				INSERT INTO messages (seq, partition_id, transaction_id, payload, trace_id, created_at)
				SELECT x, 1 + x %% 2, 'ord-' || x, CAST('{"orderId":"o-' || x || '","amount":12.5,"brand":"visa"}' AS BLOB), '', 1780000000000 + x FROM i`, 2*n),
			`INSERT INTO dead_letters (seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id)
				SELECT seq, partition_id, partition_id, 1, 'card declined by visa', 3, created_at + 5, transaction_id FROM messages`,
		} {
			if _, err := w.ExecContext(ctx, stmt); err != nil {
				b.Fatalf("%.80s: %v", stmt, err)
			}
		}
		if err := d.RebuildTextIndex(ctx); err != nil {
			b.Fatal(err)
		}
		br := broker.New(broker.Config{Store: d})
		for _, c := range []struct {
			name string
			q    broker.DLQQuery
		}{
			{"q=visa", broker.DLQQuery{Queue: "orders", Text: "visa"}},
			{"field=brand=visa", broker.DLQQuery{Queue: "orders", Fields: []string{"brand = visa"}}},
		} {
			b.Run(fmt.Sprintf("%dk/%s", n/1000, c.name), func(b *testing.B) {
				for b.Loop() {
					var rows int
					res, err := br.Export(ctx, c.q, "ndjson", "bench", func(p []broker.DeadLetter) (int, error) { rows += len(p); return len(p), nil })
					if err != nil || !res.Complete || rows != n {
						b.Fatalf("%+v, %v: %d rows, want %d", res, err, rows, n)
					}
				}
			})
		}
		d.Close()
	}
}
