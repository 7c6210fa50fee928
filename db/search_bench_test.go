package db_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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

// BenchmarkSearch1M is the header search at scale: 1M messages in 10,000
// partitions, every one a dead letter (with a traceId), searched through
// broker.Search for each kind of text. The rows are written with SQL, in
// push order, 1 ms apart.
func BenchmarkSearch1M(b *testing.B) {
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	const n, parts = 1_000_000, 10_000
	start := int64(1_780_000_000_000)
	w := d.WriteDB()
	for _, stmt := range []string{
		`INSERT INTO queues (id, name, lease_time, retry_limit, retry_delay, dead_letter_queue, dlq_after_max_retries, created_at) VALUES (1, 'orders', 300, 3, 1000, 1, 1, 0)`,
		`INSERT INTO groups (id, name) VALUES (1, 'billing')`,
		fmt.Sprintf(`WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < %d)
			INSERT INTO partitions (id, queue_id, name, uuid, created_at) SELECT x, 1, 'p' || x, 'uuid-' || x, 0 FROM i`, parts),
		fmt.Sprintf(`WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < %d)
			INSERT INTO messages (seq, partition_id, transaction_id, payload, trace_id, created_at)
			SELECT x, 1 + x %% %d, 'ord-' || x, CAST('{"orderId":' || x || ',"amount":12.5}' AS BLOB), printf('%%032x', x * 7919), %d + x FROM i`, n, parts, start),
		`INSERT INTO dead_letters (seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id, trace_id)
			SELECT seq, 1, partition_id, 1, 'card declined', 3, created_at + 5, transaction_id, trace_id FROM messages`,
	} {
		if _, err := w.ExecContext(ctx, stmt); err != nil {
			b.Fatalf("%.80s: %v", stmt, err)
		}
	}
	br := broker.New(broker.Config{Store: d})
	const x = 654_321
	id := broker.MessageID(time.UnixMilli(start+x), x)
	for _, c := range []struct{ name, q string }{
		{"whole-id", id},
		{"short-id", id[:8] + "…" + id[len(id)-4:]},
		{"txid", fmt.Sprintf("ord-%d", x)},
		{"txid-prefix", fmt.Sprintf("ord-%d", x/10)}, // 11 matches: ord-65432, ord-654320…ord-654329
		{"traceId", fmt.Sprintf("%032x", x*7919)},
		{"none", "no-such-thing"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := br.Search(ctx, c.q, 50)
				if err != nil || (c.name != "none" && len(res.Hits) == 0) {
					b.Fatalf("%s: %+v %v", c.q, res, err)
				}
			}
		})
	}
}
