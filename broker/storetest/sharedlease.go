package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// popParts pops up to batch messages of up to n partitions of queue for
// group, and returns the result and its deliveries by partition.
func (s *bundle) popParts(queue, group string, n, batch int) (broker.PopResult, map[string][]broker.Delivery) {
	s.t.Helper()
	res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: queue, Group: group, Batch: batch, Partitions: n})
	if err != nil {
		s.t.Fatalf("pop of %d partitions: %v", n, err)
	}
	by := map[string][]broker.Delivery{}
	for _, d := range res.Messages {
		by[d.Partition] = append(by[d.Partition], d)
	}
	return res, by
}

// pushParts pushes transaction ids p-1 … p-n to each partition p.
func (s *bundle) pushParts(queue string, n int, parts ...string) {
	s.t.Helper()
	for _, p := range parts {
		var ids []string
		for i := 1; i <= n; i++ {
			ids = append(ids, p+"-"+string(rune('0'+i)))
		}
		s.push(queue, p, ids...)
	}
}

// A pop of several partitions puts them all under one lease id, Queen's
// shared lease, which every message carries; a pop of one partition (one
// named, partitions=1, or autoAck) keeps its lease id naming that
// partition.
func testPopOfSeveralPartitionsSharesOneLease(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.pushParts("q", 2, "p1", "p2", "p3", "p4")
	res, by := s.popParts("q", "g", 3, 100)
	if len(res.Messages) != 6 || len(by) != 3 {
		t.Fatalf("popped %d messages of %d partitions, want 6 of 3", len(res.Messages), len(by))
	}
	if !broker.IsSharedLease(res.LeaseID) {
		t.Fatalf("lease %s is not a shared lease", res.LeaseID)
	}
	if _, _, ok := broker.LeaseConsumer(res.LeaseID); ok {
		t.Fatalf("shared lease %s names one partition", res.LeaseID)
	}
	for _, d := range res.Messages {
		if d.LeaseID != res.LeaseID {
			t.Fatalf("message %s of %s under lease %s, the pop's is %s", d.TransactionID, d.Partition, d.LeaseID, res.LeaseID)
		}
	}
	// A pop that may lease several but finds one still shares its lease
	// the same way.
	one, by := s.popParts("q", "g", 3, 100)
	if len(by) != 1 || len(by["p4"]) != 2 || !broker.IsSharedLease(one.LeaseID) || one.LeaseID == res.LeaseID {
		t.Fatalf("second pop: %d partitions, lease %s (first %s)", len(by), one.LeaseID, res.LeaseID)
	}

	s.pushParts("r", 2, "p1", "p2")
	for _, req := range []broker.PopRequest{
		{Queue: "r", Group: "g", Batch: 1},
		{Queue: "r", Group: "g", Batch: 1, Partitions: 3, Partition: "p2"},
	} {
		res, err := s.b.Pop(s.ctx, req)
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop %+v: %+v %v", req, res, err)
		}
		if _, _, ok := broker.LeaseConsumer(res.LeaseID); !ok || broker.IsSharedLease(res.LeaseID) {
			t.Fatalf("pop %+v: lease %s, want one naming its partition", req, res.LeaseID)
		}
	}
	auto, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "r", Group: "auto", Batch: 10, Partitions: 2, AutoAck: true})
	if err != nil || len(auto.Messages) != 4 || auto.LeaseID != "" {
		t.Fatalf("autoAck pop of 2 partitions: %+v %v", auto, err)
	}
	for _, d := range auto.Messages {
		if d.LeaseID != "" {
			t.Fatalf("autoAck delivery %s has lease %s", d.TransactionID, d.LeaseID)
		}
	}
}

// Each partition under a shared lease is acked on its own: with its
// partitionId, or without (its transactionId says which partition), one
// at a time or in a batch. A partition whose messages are all settled
// leaves the lease (the group reads it again) while the others stay under
// it.
func testSharedLeaseAcksSettleEachPartition(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.pushParts("q", 2, "p1", "p2", "p3")
	res, by := s.popParts("q", "g", 3, 100)
	lease := res.LeaseID
	// p1: one ack with its partition, one without.
	if r := s.ack(by["p1"][0], broker.AckCompleted, ""); !r.Success {
		t.Fatalf("ack with partitionId: %+v", r)
	}
	if _, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: "p1-2", LeaseID: lease, Group: "g", Status: broker.AckCompleted}); err != nil {
		t.Fatalf("ack by the shared lease without partitionId: %v", err)
	}
	// p1 is free again: a new message there is popped under a new lease,
	// while p2 and p3 are still under the shared one.
	s.push("q", "p1", "p1-3")
	again, by2 := s.popParts("q", "g", 3, 100)
	if len(again.Messages) != 1 || len(by2["p1"]) != 1 || again.LeaseID == lease {
		t.Fatalf("after p1 was settled: %+v", again.Messages)
	}
	// p2 and p3 in one batch, with and without partitionId.
	results, err := s.b.AckBatch(s.ctx, "g", []broker.Ack{
		{TransactionID: "p2-1", PartitionID: by["p2"][0].PartitionUUID, LeaseID: lease, Status: broker.AckCompleted},
		{TransactionID: "p2-2", LeaseID: lease, Status: broker.AckCompleted},
		{TransactionID: "p3-2", LeaseID: lease, Status: broker.AckCompleted},
		{TransactionID: "p3-1", LeaseID: lease, Status: broker.AckCompleted},
		{TransactionID: "p3-1", LeaseID: lease, Status: broker.AckCompleted}, // settled just before
		{TransactionID: "p1-3", LeaseID: lease, Status: broker.AckCompleted}, // another lease's
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results[:4] {
		if !r.Success {
			t.Fatalf("ack %d: %+v", i, r)
		}
	}
	for i, r := range results[4:] {
		if r.Success {
			t.Fatalf("ack %d: %+v, want refused", 4+i, r)
		}
	}
	if st := s.stats("q", "g"); st.Completed != 6 {
		t.Fatalf("completed %d, want 6", st.Completed)
	}
	if _, err := s.b.ExtendLease(s.ctx, lease, 60); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("extend of a lease all of whose partitions are settled: %v, want not found", err)
	}
	s.ack(by2["p1"][0], broker.AckCompleted, "")
	if got, _ := s.popTxids("q", "g", 10); got != nil {
		t.Fatalf("left after every ack: %v", got)
	}
}

// A failure in one partition of a shared lease voids the rest of that
// partition's lease only (its next messages come back with it, after the
// retry's wait; so do they after a last try's failure, at once): the
// other partitions stay under the lease, and their acks go through.
func testSharedLeaseFailureVoidsOnlyItsPartition(t *testing.T, harness Harness) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		retryLimit int
		wait       time.Duration
	}{
		{"RetryLeft", 3, time.Second},
		{"LastTry", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.configure("q", map[string]any{"retryLimit": tc.retryLimit, "retryDelay": 1000, "deadLetterQueue": true})
			s.pushParts("q", 2, "p1", "p2")
			res, by := s.popParts("q", "g", 2, 100)
			if r := s.ack(by["p1"][0], broker.AckFailed, "boom"); !r.Success || r.DLQ != (tc.retryLimit == 0) {
				t.Fatalf("fail p1-1: %+v", r)
			}
			// The rest of p1 comes back: its ack is answered, and changes
			// nothing.
			if r := s.ack(by["p1"][1], broker.AckCompleted, ""); !r.Success || !r.Requeued {
				t.Fatalf("ack p1-2 after p1-1 failed: %+v, want requeued", r)
			}
			// p2 is still under the lease: extended, and acked.
			if _, err := s.b.ExtendLease(s.ctx, res.LeaseID, 60); err != nil {
				t.Fatalf("extend after p1's failure: %v", err)
			}
			for _, d := range by["p2"] {
				if r := s.ack(d, broker.AckCompleted, ""); !r.Success || r.Requeued {
					t.Fatalf("ack %s: %+v", d.TransactionID, r)
				}
			}
			s.clock.Advance(tc.wait)
			got, next := s.popTxids("q", "g", 10)
			want := []string{"p1-1", "p1-2"}
			if tc.retryLimit == 0 {
				want = want[1:] // p1-1 is a dead letter
			}
			if !slices.Equal(got, want) || next.LeaseID == res.LeaseID {
				t.Fatalf("after the failure: %v under %s, want %v under a new lease", got, next.LeaseID, want)
			}
		})
	}
}

// Extending a shared lease extends every partition still under it, to
// the same end, which the extend answers; a partition that left the lease
// (settled) is not leased again, and each partition's lease runs out at
// its end, after which the lease is gone.
func testSharedLeaseExtendExtendsEveryPartitionUnderIt(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"leaseTime": 10})
	s.pushParts("q", 1, "p1", "p2", "p3")
	res, by := s.popParts("q", "g", 3, 100)
	s.ack(by["p1"][0], broker.AckCompleted, "")
	s.clock.Advance(5 * time.Second)
	until, err := s.b.ExtendLease(s.ctx, res.LeaseID, 60)
	if err != nil || !until.Equal(s.clock.Now().Add(60*time.Second)) {
		t.Fatalf("extend: %s %v, want %s", until, err, s.clock.Now().Add(60*time.Second))
	}
	// Past the lease's first end: p2 and p3 are still leased, p1 is free.
	s.clock.Advance(30 * time.Second)
	s.push("q", "p1", "p1-2")
	got, _ := s.popParts("q", "g", 3, 100)
	if len(got.Messages) != 1 || got.Messages[0].TransactionID != "p1-2" {
		t.Fatalf("pop while p2 and p3 are extended: %+v", got.Messages)
	}
	s.ack(got.Messages[0], broker.AckCompleted, "")
	s.ack(by["p2"][0], broker.AckCompleted, "")
	// p3 runs out at the extended end: it comes back, under a new lease,
	// and the old one is gone.
	s.clock.Advance(30 * time.Second)
	if _, err := s.b.ExtendLease(s.ctx, res.LeaseID, 60); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("extend of a lease that ran out: %v, want not found", err)
	}
	again, _ := s.popParts("q", "g", 3, 100)
	if len(again.Messages) != 1 || again.Messages[0].TransactionID != "p3-1" || again.Messages[0].RetryCount != 0 || again.LeaseID == res.LeaseID {
		t.Fatalf("after the lease ran out: %+v", again)
	}
	for _, a := range []broker.Ack{
		{TransactionID: "p3-1", LeaseID: res.LeaseID, Group: "g", Status: broker.AckCompleted},
		{TransactionID: "p3-1", PartitionID: by["p3"][0].PartitionUUID, LeaseID: res.LeaseID, Group: "g", Status: broker.AckCompleted},
	} {
		if _, err := s.b.Ack(s.ctx, a); !errors.Is(err, broker.ErrConflict) {
			t.Fatalf("ack %+v by the lease that ran out: %v, want a conflict", a, err)
		}
	}
	if r := s.ack(again.Messages[0], broker.AckCompleted, ""); !r.Success {
		t.Fatalf("ack by the new lease: %+v", r)
	}
}

// A transactionId that two partitions of a shared lease both hold is
// refused without a partitionId (nothing says which one) and settled with
// it.
func testSharedLeaseAckOfATransactionIDInTwoPartitions(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p1", "same")
	s.push("q", "p2", "same")
	res, by := s.popParts("q", "g", 2, 10)
	_, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: "same", LeaseID: res.LeaseID, Group: "g", Status: broker.AckCompleted})
	if !errors.Is(err, broker.ErrConflict) || !strings.Contains(err.Error(), "partitionId") {
		t.Fatalf("ack of a transactionId of both partitions: %v, want a conflict asking for partitionId", err)
	}
	for _, p := range []string{"p1", "p2"} {
		if r := s.ack(by[p][0], broker.AckCompleted, ""); !r.Success {
			t.Fatalf("ack in %s: %+v", p, r)
		}
	}
	if st := s.stats("q", "g"); st.Completed != 2 {
		t.Fatalf("completed %d, want 2", st.Completed)
	}
}

// A transaction requiring a shared lease finds each partition still
// under it: an ack that names neither lease nor partition goes through
// the partition holding its transactionId; the lease is live while one
// partition is under it.
func testTransactionRequiringASharedLease(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.pushParts("q", 1, "p1", "p2")
	res, _ := s.popParts("q", "g", 2, 10)
	out, err := s.b.Transaction(s.ctx, []broker.Operation{
		{Type: "ack", Ack: broker.Ack{TransactionID: "p2-1", Status: broker.AckCompleted}},
		{Type: "push", Items: []broker.PushItem{{Queue: "next", TransactionID: "n1", Payload: []byte(`1`)}}},
	}, res.LeaseID)
	if err != nil || !out[0].Ack.Success {
		t.Fatalf("transaction: %+v %v", out, err)
	}
	out, err = s.b.Transaction(s.ctx, []broker.Operation{
		{Type: "ack", Ack: broker.Ack{TransactionID: "p1-1", Status: broker.AckCompleted}},
	}, res.LeaseID)
	if err != nil || !out[0].Ack.Success {
		t.Fatalf("second transaction: %+v %v", out, err)
	}
	// Both partitions left the lease: it is no longer live.
	_, err = s.b.Transaction(s.ctx, []broker.Operation{
		{Type: "push", Items: []broker.PushItem{{Queue: "next", TransactionID: "n2", Payload: []byte(`2`)}}},
	}, res.LeaseID)
	if !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("transaction requiring a settled shared lease: %v, want a conflict", err)
	}
	if got, _ := s.popTxids("next", "g", 10); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("pushed by the transactions: %v", got)
	}
}

// Several processes over one PostgreSQL database: a shared lease popped by
// one is extended and acked, partition by partition, by the others at once
// (the consumers' rows are the lease). Always on PostgreSQL.
func testSharedLeaseAcrossProcesses(t *testing.T, harness Harness) {
	t.Parallel()
	ctx := context.Background()
	dsn := harness.New(t, "lazarus")
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	open := func() *broker.Broker {
		d, err := harness.Open(ctx, dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		b := broker.New(broker.Config{Store: d, Clock: c, Notifier: d.Notifier()})
		t.Cleanup(b.Close)
		return b
	}
	procs := []*broker.Broker{open(), open(), open()}
	parts := []string{"p1", "p2", "p3", "p4", "p5", "p6"}
	for _, p := range parts {
		for i := range 3 {
			if _, err := procs[0].Push(ctx, []broker.PushItem{{Queue: "q", Partition: p, TransactionID: p + "-" + string(rune('1'+i)), Payload: []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := procs[0].Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 100, Partitions: len(parts)})
	if err != nil || len(res.Messages) != 18 {
		t.Fatalf("pop: %d messages, %v", len(res.Messages), err)
	}
	if _, err := procs[1].ExtendLease(ctx, res.LeaseID, 600); err != nil {
		t.Fatalf("extend on another process: %v", err)
	}
	// Each partition acked by one process, the processes at once; p1's
	// acks name no partition.
	var wg sync.WaitGroup
	errs := make(chan error, len(res.Messages))
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := procs[i%len(procs)]
			for _, d := range res.Messages {
				if d.Partition != p {
					continue
				}
				a := broker.Ack{TransactionID: d.TransactionID, PartitionID: d.PartitionUUID, LeaseID: res.LeaseID, Group: "g", Status: broker.AckCompleted}
				if p == "p1" {
					a.PartitionID = ""
				}
				if _, err := b.Ack(ctx, a); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("ack: %v", err)
	}
	if _, err := procs[2].ExtendLease(ctx, res.LeaseID, 60); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("extend after every partition was settled: %v, want not found", err)
	}
	// Every message was settled: past the extended lease nothing comes
	// back.
	c.Advance(time.Hour)
	for _, b := range procs {
		if again, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 100, Partitions: len(parts)}); err != nil || len(again.Messages) != 0 {
			t.Fatalf("pop after the acks: %+v %v", again.Messages, err)
		}
	}
}
