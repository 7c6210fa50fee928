package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// clock is a clock the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// bundle is what a broker test works with.
type bundle struct {
	t     *testing.T
	ctx   context.Context
	b     *broker.Broker
	db    Store
	clock *clock
}

// setup returns a broker on a fresh store of h and a hand-moved clock.
// The broker's store runs every function given to Update twice, the
// first run rolled back (retryStore); s.db is the store itself. The
// store is opened with Options.NeverAlone, so that on PostgreSQL the
// broker's hot writes run as they do beside other processes (row locks),
// not as a process alone on its database writes them.
func setup(t *testing.T, harness Harness) *bundle {
	t.Helper()
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "lazarus.db"), Options{NeverAlone: true})
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	return &bundle{t: t, ctx: ctx, b: broker.New(broker.Config{Store: &retryStore{Store: d}, Clock: c}), db: d, clock: c}
}

// configure sets queue options, given as JSON values.
func (s *bundle) configure(queue string, opts map[string]any) {
	s.t.Helper()
	if err := s.configureErr(queue, opts); err != nil {
		s.t.Fatalf("configure %s: %v", queue, err)
	}
}

func (s *bundle) configureErr(queue string, opts map[string]any) error {
	raw := map[string]json.RawMessage{}
	for k, v := range opts {
		b, err := json.Marshal(v)
		if err != nil {
			s.t.Fatal(err)
		}
		raw[k] = b
	}
	_, err := s.b.Configure(s.ctx, queue, raw, "test")
	return err
}

// push pushes payloads {"n": i} with transactionIds tx-i to a partition.
func (s *bundle) push(queue, partition string, txids ...string) []broker.PushResult {
	s.t.Helper()
	items := make([]broker.PushItem, len(txids))
	for i, id := range txids {
		items[i] = broker.PushItem{Queue: queue, Partition: partition, TransactionID: id, Payload: json.RawMessage(fmt.Sprintf(`{"tx":%q}`, id))}
	}
	res, err := s.b.Push(s.ctx, items)
	if err != nil {
		s.t.Fatalf("push: %v", err)
	}
	return res
}

// pop pops up to batch messages for group; it fails the test on error.
func (s *bundle) pop(queue, group string, batch int) broker.PopResult {
	s.t.Helper()
	res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: queue, Group: group, Batch: batch})
	if err != nil {
		s.t.Fatalf("pop: %v", err)
	}
	return res
}

// popTxids pops and returns the transactionIds it got.
func (s *bundle) popTxids(queue, group string, batch int) ([]string, broker.PopResult) {
	s.t.Helper()
	res := s.pop(queue, group, batch)
	var ids []string
	for _, m := range res.Messages {
		ids = append(ids, m.TransactionID)
	}
	return ids, res
}

// ack acks a delivered message; it fails the test on error.
func (s *bundle) ack(d broker.Delivery, status, errText string) broker.AckResult {
	s.t.Helper()
	res, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: d.TransactionID, PartitionID: d.PartitionUUID, LeaseID: d.LeaseID, Status: status, Error: errText, Group: d.Group})
	if err != nil {
		s.t.Fatalf("ack %s %s: %v", d.TransactionID, status, err)
	}
	return res
}

// dead returns the group's dead letters in a queue, newest first.
func (s *bundle) dead(queue, group string) []broker.DeadLetter {
	s.t.Helper()
	page, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: queue, Group: group, Limit: 1000})
	if err != nil {
		s.t.Fatalf("dead letters: %v", err)
	}
	return page.Items
}

// stats returns the group's running totals in a queue.
func (s *bundle) stats(queue, group string) broker.Stats {
	s.t.Helper()
	q, err := s.b.Queue(s.ctx, queue)
	if err != nil {
		s.t.Fatalf("queue: %v", err)
	}
	for _, g := range q.Stats {
		if g.Group == group {
			return g.Stats
		}
	}
	return broker.Stats{}
}
