package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// countingReader is a read transaction's executor that counts the
// statements it runs.
type countingReader struct {
	reader
	n *int
}

func (r countingReader) Query(ctx context.Context, query string, args []any) (sqlcore.Rows, error) {
	*r.n++
	return r.reader.Query(ctx, query, args)
}

func (r countingReader) QueryRow(ctx context.Context, query string, args []any) sqlcore.Row {
	*r.n++
	return r.reader.QueryRow(ctx, query, args)
}

func (r countingReader) QueryStmt(ctx context.Context, s *sqlcore.Stmt) (sqlcore.Rows, error) {
	*r.n++
	return r.reader.QueryStmt(ctx, s)
}

func (r countingReader) QueryRowStmt(ctx context.Context, s *sqlcore.Stmt) sqlcore.Row {
	*r.n++
	return r.reader.QueryRowStmt(ctx, s)
}

// The chart data of every queue (Series of queue 0) reads the same few
// statements whatever the number of queues and groups, not some a group
// (issue 30: at 5,000 queues, 15,000 statements a chart), by steps of a
// bucket and of several; and finds every group's buckets.
func TestSeriesOfEveryQueueReadsAFewStatements(t *testing.T) {
	d, b := openBroker(t)
	ctx := context.Background()
	fail := func(queue string) {
		t.Helper()
		if _, err := b.Push(ctx, []broker.PushItem{{Queue: queue, Partition: "p", TransactionID: "m-" + queue, Payload: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		res, err := b.Pop(ctx, broker.PopRequest{Queue: queue, Group: "g", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop %s: %v", queue, err)
		}
		m := res.Messages[0]
		if _, err := b.AckBatch(ctx, "g", []broker.Ack{{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}
	series := func(step time.Duration) (groups, statements int) {
		t.Helper()
		if err := b.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
		conn, err := d.read.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tx := sqlcore.NewTx(countingReader{reader{conn: conn}, &statements}, dialect{}, sqlcore.NoLocks{}, nil)
		now := time.Now()
		rows, err := tx.Series(ctx, 0, now.Add(-24*time.Hour).Truncate(step), now.Add(time.Hour), step)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[[2]int64]bool{}
		for _, r := range rows {
			seen[[2]int64{r.QueueID, r.GroupID}] = true
		}
		return len(seen), statements
	}
	for i := range 2 {
		fail(fmt.Sprintf("q-%d", i))
	}
	for _, step := range []time.Duration{15 * time.Minute, time.Hour} {
		few, fewReads := series(step)
		if few != 2 {
			t.Fatalf("step %s: %d groups' series of 2", step, few)
		}
		for i := 2; i < 12; i++ {
			fail(fmt.Sprintf("q-%d-%s", i, step))
		}
		many, manyReads := series(step)
		if many != 12 {
			t.Fatalf("step %s: %d groups' series of 12", step, many)
		}
		if manyReads != fewReads || manyReads > 5 {
			t.Errorf("step %s: %d statements for 12 queues, %d for 2; want the same few", step, manyReads, fewReads)
		}
		for i := 2; i < 12; i++ {
			if err := b.DeleteQueue(ctx, fmt.Sprintf("q-%d-%s", i, step), "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
}
