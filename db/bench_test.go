package db_test

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

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
		lifecycle(b, br, "", body)
	}
}

// lifecycle pushes one message to the partition of queue q, pops it (from
// any partition) and acks it.
func lifecycle(b *testing.B, br *broker.Broker, partition string, body []byte) {
	ctx := context.Background()
	if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: partition, Payload: body}}); err != nil {
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

// BenchmarkReplayMatching is PERF.md's D5 for profiling: replay every dead
// letter of a group by filter, 10k of them.
func BenchmarkReplayMatching(b *testing.B) {
	ctx := context.Background()
	b.StopTimer()
	for range b.N {
		d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
		if err != nil {
			b.Fatal(err)
		}
		br := broker.New(broker.Config{Store: d})
		const n = 10_000
		items := make([]broker.PushItem, 1000)
		for i := range items {
			items[i] = broker.PushItem{Queue: "q", Payload: []byte(`{"order":12345,"status":"paid","note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)}
		}
		for range n / len(items) {
			if _, err := br.Push(ctx, items); err != nil {
				b.Fatal(err)
			}
		}
		for done := 0; done < n; {
			res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1000})
			if err != nil {
				b.Fatal(err)
			}
			acks := make([]broker.Ack, len(res.Messages))
			for i, m := range res.Messages {
				acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "boom: the payment service said no\nstack"}
			}
			if _, err := br.AckBatch(ctx, "g", acks); err != nil {
				b.Fatal(err)
			}
			done += len(acks)
		}
		b.StartTimer()
		res, err := br.ReplayMatching(ctx, broker.DLQQuery{Queue: "q", Group: "g"}, "bench")
		if err != nil || res.Done != n {
			b.Fatal(res, err)
		}
		b.StopTimer()
		d.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*10_000), "µs/msg")
}

// BenchmarkManyPartitions is PERF.md's T9 for profiling: messages spread
// over many partitions, so that each pop of 100 gets the 20 of one.
func BenchmarkManyPartitions(b *testing.B) {
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	br := broker.New(broker.Config{Store: d})
	const parts = 500
	items := make([]broker.PushItem, 1000)
	for b.Loop() {
		b.StopTimer()
		for range 10 {
			for i := range items {
				items[i] = broker.PushItem{Queue: "q", Partition: "p" + strconv.Itoa(i%parts), Payload: []byte(`{"order":12345,"status":"paid"}`)}
			}
			if _, err := br.Push(ctx, items); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for got := 0; got < 10*len(items); {
			res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 100})
			if err != nil || len(res.Messages) == 0 {
				b.Fatal(res, err)
			}
			acks := make([]broker.Ack, len(res.Messages))
			for i, m := range res.Messages {
				acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
			}
			if _, err := br.AckBatch(ctx, "", acks); err != nil {
				b.Fatal(err)
			}
			got += len(acks)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*parts), "µs/cycle")
}

// BenchmarkIdlePartitions measures a push, pop and ack on one busy
// partition of a queue whose other partitions have all been drained: a
// pop must not pay for the idle ones.
func BenchmarkIdlePartitions(b *testing.B) {
	for _, idle := range []int{0, 10000} {
		b.Run(strconv.Itoa(idle), func(b *testing.B) {
			ctx := context.Background()
			d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			br := broker.New(broker.Config{Store: d})
			body := []byte(`{"order":12345,"status":"paid"}`)
			items := make([]broker.PushItem, 0, 1000)
			for i := 0; i < idle; i++ {
				items = append(items, broker.PushItem{Queue: "q", Partition: "idle" + strconv.Itoa(i), Payload: body})
				if len(items) == cap(items) || i == idle-1 {
					if _, err := br.Push(ctx, items); err != nil {
						b.Fatal(err)
					}
					items = items[:0]
				}
			}
			for drained := 0; drained < idle; {
				res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 10, AutoAck: true})
				if err != nil || len(res.Messages) == 0 {
					b.Fatal(res, err)
				}
				drained += len(res.Messages)
			}
			for b.Loop() {
				lifecycle(b, br, "busy", body)
			}
		})
	}
}

// BenchmarkPopAck is PERF.md's L5 for profiling: with messages waiting,
// one pop of `batch` messages and one batch ack of them, reporting the
// process's CPU (user + system) a pair and a message. The fixed cost of a
// pair is what batch 1 costs beyond the per-message share that batch 100
// shows (bench/ gives the verdict).
func BenchmarkPopAck(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(strconv.Itoa(batch), func(b *testing.B) {
			ctx := context.Background()
			d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			br := broker.New(broker.Config{Store: d})
			items := make([]broker.PushItem, 1000)
			for i := range items {
				items[i] = broker.PushItem{Queue: "q", Payload: []byte(`{"order":12345,"status":"paid"}`)}
			}
			fill := func() {
				for range 20 {
					if _, err := br.Push(ctx, items); err != nil {
						b.Fatal(err)
					}
				}
			}
			fill()
			left := 20 * len(items)
			var cpu time.Duration
			for b.Loop() {
				if left < batch {
					b.StopTimer()
					fill()
					left += 20 * len(items)
					b.StartTimer()
				}
				start := cpuTime(b)
				res, err := br.Pop(ctx, broker.PopRequest{Queue: "q", Batch: batch})
				if err != nil || len(res.Messages) != batch {
					b.Fatal(len(res.Messages), err)
				}
				acks := make([]broker.Ack, len(res.Messages))
				for i, m := range res.Messages {
					acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
				}
				if _, err := br.AckBatch(ctx, "", acks); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime(b) - start
				left -= batch
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/pair")
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N*batch), "cpu-µs/msg")
		})
	}
}

// cpuTime is the process's CPU time so far (user + system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
