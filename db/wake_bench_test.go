package db_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// BenchmarkEmptyPopBesideLeasedPartitions measures a pop that finds
// nothing in a queue whose 50 partitions each have a 1 MiB message under a
// live lease, without and with delayedProcessing: it must not read those
// messages' rows (created_at comes after the payload, so reading it walks
// the payload's overflow pages). "notdue" is the case a delay cannot help:
// 50 partitions whose 1 MiB message is not due yet, whose heads every
// empty pop reads. "window10" is a windowBuffer of 10 s: leased, and
// "inwindow", 50 partitions pushed to within their window, whose newest
// messages every empty pop reads.
func BenchmarkEmptyPopBesideLeasedPartitions(b *testing.B) {
	for _, tc := range []struct {
		name   string
		delay  string // delayedProcessing in seconds, "" for none
		leased bool
		option string // the option delay sets
	}{
		{"delay0", "", true, ""},
		{"delay10", "10", true, "delayedProcessing"},
		{"delay10/notdue", "10", false, "delayedProcessing"},
		{"window10", "10", true, "windowBuffer"},
		{"window10/inwindow", "10", false, "windowBuffer"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			d, err := db.Open(ctx, filepath.Join(b.TempDir(), "l.db"), db.SyncNormal)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			var now atomic.Int64
			now.Store(time.Now().UnixMilli())
			br := broker.New(broker.Config{Store: d, Clock: broker.ClockFunc(func() time.Time { return time.UnixMilli(now.Load()) })})
			if tc.delay != "" {
				if _, err := br.Configure(ctx, "q", map[string]json.RawMessage{tc.option: json.RawMessage(tc.delay)}, "bench"); err != nil {
					b.Skip("no "+tc.option+":", err)
				}
			}
			const parts = 50
			big := []byte(`"` + strings.Repeat("x", 1<<20-2) + `"`)
			for i := range parts {
				if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p" + strconv.Itoa(i), Payload: big}}); err != nil {
					b.Fatal(err)
				}
			}
			if tc.leased {
				now.Add(10_000) // the messages are due
				for range parts {
					if res, err := br.Pop(ctx, broker.PopRequest{Queue: "q"}); err != nil || len(res.Messages) != 1 {
						b.Fatal(len(res.Messages), err)
					}
				}
			}
			for b.Loop() {
				res, err := br.Pop(ctx, broker.PopRequest{Queue: "q"})
				if err != nil || len(res.Messages) != 0 {
					b.Fatal(len(res.Messages), err)
				}
			}
		})
	}
}
