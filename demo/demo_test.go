package demo_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/demo"
)

// syncBuffer is a log sink that the demo's goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDemoPilesUpDeadLettersWithinSecondsAndLogsNoPayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "demo.db"), db.SyncNormal)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	var logs syncBuffer
	b := broker.New(broker.Config{Store: d})

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- demo.Run(runCtx, demo.Config{
			Broker:      b,
			Logger:      slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Speed:       4,
			ReportEvery: 500 * time.Millisecond,
		})
	}()

	// Dead letters must appear within seconds, in more than one queue, and
	// the traffic must reach several tenants of every queue. Tenants are
	// drawn at random, so the test waits for both rather than assuming the
	// partitions are there once the dead letters are.
	queues := map[string]bool{}
	spread := func() bool {
		qs, err := b.Queues(ctx)
		if err != nil {
			t.Fatalf("queues: %v", err)
		}
		for _, q := range qs {
			if len(q.Partitions) < 2 {
				return false
			}
		}
		return len(qs) == 3
	}
	deadline := time.Now().Add(15 * time.Second)
	for (len(queues) < 2 || !spread()) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		page, err := b.DeadLetters(ctx, broker.DLQQuery{Limit: 1000})
		if err != nil {
			t.Fatalf("dead letters: %v", err)
		}
		for _, dl := range page.Items {
			queues[dl.Queue] = true
			if dl.Error == "" {
				t.Errorf("dead letter %s of %s/%s has no error text", dl.MessageID(), dl.Queue, dl.Group)
			}
		}
	}
	if len(queues) < 2 {
		t.Errorf("dead letters after 15s in queues %v, want at least two queues", queues)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context being cancelled")
	}

	qs, err := b.Queues(ctx)
	if err != nil {
		t.Fatalf("queues: %v", err)
	}
	if len(qs) != 3 {
		t.Errorf("demo made %d queues, want 3", len(qs))
	}
	for _, q := range qs {
		if len(q.Partitions) < 2 {
			t.Errorf("queue %s has %d partitions, want several", q.Name, len(q.Partitions))
		}
		if q.Options.RetryDelay > 1000 || q.Options.RetryLimit > 3 {
			t.Errorf("queue %s options %+v: retries too slow for dead letters within seconds", q.Name, q.Options)
		}
	}

	out := logs.String()
	if !strings.Contains(out, `"dead_lettered"`) {
		t.Errorf("the demo logged no counts:\n%s", out)
	}
	// Payload fields and values must never reach the log.
	for _, leak := range []string{"orderId", "paymentId", "last4", ".example", "card_declined", "panic"} {
		if strings.Contains(out, leak) {
			t.Errorf("log contains %q, which comes from a payload or an error text:\n%s", leak, out)
		}
	}
}
