package db_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// BenchmarkPushConcurrent8 is bench L3's shape for profiling: pushes of
// one message from 8 callers at once, which the writer commits in groups.
// cpu-µs/push is the process's CPU (user and system) over the run. The
// "failing" cases make one write in 8 a lease extension that fails inside
// its transaction (an unknown lease), as a group commit meets them.
func BenchmarkPushConcurrent8(b *testing.B) {
	for _, sync := range []struct {
		name    string
		mode    db.Sync
		failing bool
	}{{"normal", db.SyncNormal, false}, {"full", db.SyncFull, false}, {"normal-failing", db.SyncNormal, true}, {"full-failing", db.SyncFull, true}} {
		b.Run(sync.name, func(b *testing.B) {
			ctx := context.Background()
			d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), sync.mode)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			br := broker.New(broker.Config{Store: d})
			item := []broker.PushItem{{Queue: "q", Payload: []byte(`{"order":12345,"status":"paid"}`)}}
			if _, err := br.Push(ctx, item); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			var cpu time.Duration
			b.ResetTimer()
			start := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				n := 0
				for pb.Next() {
					if n++; sync.failing && n%8 == 0 {
						if _, err := br.ExtendLease(ctx, "no-such-lease", 60); err == nil {
							b.Error("an unknown lease was extended")
							return
						}
						continue
					}
					if _, err := br.Push(ctx, item); err != nil {
						b.Error(err)
						return
					}
				}
			})
			cpu = cpuTime(b) - start
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/push")
		})
	}
}
