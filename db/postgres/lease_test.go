package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// On PostgreSQL the lookup of a shared lease can use its index (the
// query repeats the index's WHERE); pops of one partition leave it
// empty.
func TestPGSharedLeaseIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openStore(t, pgtest.Database(t, "db", Prepare))
	b := broker.New(broker.Config{Store: d})
	defer b.Close()
	for _, p := range []string{"p1", "p2"} {
		push(t, b, p, p+"-a")
	}
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "one", Batch: 1}); err != nil || len(res.Messages) != 1 {
		t.Fatal(res, err)
	}
	count := func() int {
		t.Helper()
		var n int
		if err := d.pool.QueryRow(ctx, `SELECT COUNT(*) FROM consumers WHERE substr(lease_id, 15, 1) = '8' AND substr(lease_id, 27, 1) IN ('0', '4', '8', 'c') AND substr(lease_id, 28, 9) = '000000000'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d rows for the index of shared leases after a pop of one partition", n)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "many", Batch: 10, Partitions: 2})
	if err != nil || len(res.Messages) != 2 {
		t.Fatal(res, err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d rows for the index of shared leases after a pop of 2 partitions, want 2", n)
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+translated(sqlcore.ConsumersBySharedLeaseSQL), res.LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "\n"); !strings.Contains(p, "consumers_lease_shared") {
		t.Errorf("a shared lease is looked up by:\n%s\nwant the index consumers_lease_shared", p)
	}
}

// push pushes a message of transaction txid to partition of queue q.
func push(t *testing.T, b *broker.Broker, partition, txid string) {
	t.Helper()
	if _, err := b.Push(context.Background(), []broker.PushItem{{Queue: "q", Partition: partition, TransactionID: txid, Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
}
