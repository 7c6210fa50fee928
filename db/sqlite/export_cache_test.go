package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An export reads its pages through a small cache (dialect.ReadOnce):
// after exporting 8 MB of payloads, the reading connection holds no more
// than readOnceCacheKiB of pages, not the 12 MB it read, and its usual
// cache size is back for the reads after it (issue 37, bench's S3: the
// export of 1M dead letters filled the 32 MB cache). The payloads are
// small enough to stay in the table's own pages: SQLite reads overflow
// pages past its cache.
func TestExportReadsThroughASmallCache(t *testing.T) {
	d, b := openBroker(t)
	ctx := context.Background()
	d.read.SetMaxOpenConns(1) // the export's connection is the one measured
	d.read.SetMaxIdleConns(1)
	const n, batch = 10000, 1000
	pad := strings.Repeat("x", 800)
	for done := 0; done < n; done += batch {
		items := make([]broker.PushItem, batch)
		for i := range items {
			id := done + i
			items[i] = broker.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("t-%d", id),
				Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, id, pad))}
		}
		if _, err := b.Push(ctx, items); err != nil {
			t.Fatal(err)
		}
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: batch})
		if err != nil || len(res.Messages) != batch {
			t.Fatalf("pop: %d of %d: %v", len(res.Messages), batch, err)
		}
		acks := make([]broker.Ack, batch)
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "card declined"}
		}
		if _, err := b.AckBatch(ctx, "g", acks); err != nil {
			t.Fatal(err)
		}
	}
	var payloads int
	res, err := b.Export(ctx, broker.DLQQuery{Queue: "q"}, "ndjson", "test", func(page []broker.DeadLetter) (int, error) {
		for _, dl := range page {
			payloads += len(dl.Payload)
		}
		return len(page), nil
	})
	if err != nil || res.Rows != n || !res.Complete || payloads < n*len(pad) {
		t.Fatalf("export: %+v, %d bytes of payloads, %v", res, payloads, err)
	}
	c, err := d.read.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	used := -1
	if err := c.Raw(func(dc any) error { used = cacheUsed(dc.(*sqlite3.SQLiteConn)); return nil }); err != nil || used < 0 {
		t.Fatalf("cache used: %d, %v", used, err)
	}
	t.Logf("%d bytes of pages after the export", used)
	if limit := readOnceCacheKiB*1024 + 256<<10; used > limit {
		t.Errorf("the export's connection holds %d bytes of pages after reading %d of payloads, want at most %d", used, payloads, limit)
	}
	var size int
	if err := c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&size); err != nil || size != -connCacheKiB {
		t.Errorf("cache_size after the export: %d, %v; want %d", size, err, -connCacheKiB)
	}
}
