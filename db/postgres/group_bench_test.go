package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// BenchmarkPGGroupCommit: what group commit buys, counted rather than
// timed (the counts hold whatever the machine's load): H1's work in one
// process alone on its database (producers pushing 10 a call,
// consumers popping up to 100 and acking them in a batch, at once),
// with each write in a transaction of its own (ungrouped) and with
// group commit (grouped). Reported a message: the transactions
// PostgreSQL committed (pg_stat_database's xact_commit, each durable
// one a flush of its log; reads and the processes' count included), the
// store's write commits, round trips and statements.
func BenchmarkPGGroupCommit(b *testing.B) {
	for _, c := range []struct {
		name      string
		ungrouped bool
	}{{"ungrouped", true}, {"grouped", false}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			dsn := pgtest.Database(b, "db", Prepare)
			d, err := OpenWith(ctx, dsn, Options{Sync: SyncFull, Ungrouped: c.ungrouped})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { d.Close() })
			for deadline := time.Now().Add(20 * time.Second); !d.alone.Load(); {
				if time.Now().After(deadline) {
					b.Fatal("never counted alone")
				}
				time.Sleep(10 * time.Millisecond) // polling a condition
			}
			br := broker.New(broker.Config{Store: d})
			b.Cleanup(br.Close)
			if _, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Start: broker.Start{Now: true}}); err != nil {
				b.Fatal(err)
			}
			admin, err := pgx.Connect(ctx, dsn)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { admin.Close(ctx) })
			commits := func() (n int64) {
				if err := admin.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
					b.Fatal(err)
				}
				return n
			}
			const producers, consumers, pushes, batch = 4, 2, 50, 10
			msgs := b.N * producers * pushes * batch
			trips0, stmts0 := d.Wire()
			commits0 := d.Commits()
			xact0 := commits()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, producers+consumers)
			for p := range producers {
				wg.Go(func() {
					for i := range b.N * pushes {
						items := make([]broker.PushItem, batch)
						for j := range items {
							items[j] = broker.PushItem{Queue: "q", Partition: fmt.Sprintf("p%d", (p+i+j)%8), Payload: []byte(`{"n":1}`)}
						}
						if _, err := br.Push(ctx, items); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			var got sync.Mutex
			left := msgs
			for range consumers {
				wg.Go(func() {
					for {
						got.Lock()
						done := left <= 0
						got.Unlock()
						if done {
							return
						}
						res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 100, Wait: true, Timeout: 200 * time.Millisecond})
						if err != nil {
							errs <- err
							return
						}
						if len(res.Messages) == 0 {
							continue
						}
						acks := make([]broker.Ack, len(res.Messages))
						for i, m := range res.Messages {
							acks[i] = broker.Ack{TransactionID: m.TransactionID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
						}
						if _, err := br.AckBatch(ctx, "g", acks); err != nil {
							errs <- err
							return
						}
						got.Lock()
						left -= len(acks)
						got.Unlock()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			trips, stmts := d.Wire()
			ours := d.Commits() - commits0
			// A backend's statistics reach pg_stat_database at the latest
			// as it exits: the store is closed, and its backends' commits
			// (its writes', reads', and their counting's) waited for.
			d.Close()
			var xact int64
			for deadline := time.Now().Add(20 * time.Second); ; {
				if xact = commits(); xact-xact0 >= ours || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond) // polling a condition
			}
			b.ReportMetric(float64(ours)/float64(msgs), "writecommits/msg")
			b.ReportMetric(float64(xact-xact0)/float64(msgs), "xacts/msg")
			b.ReportMetric(float64(trips-trips0)/float64(msgs), "trips/msg")
			b.ReportMetric(float64(stmts-stmts0)/float64(msgs), "stmts/msg")
		})
	}
}
