package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Several workers of two groups pop one queue with several partitions,
// failing some messages: within a group no message is ever held by two
// workers at once, every message is completed exactly once, and each
// partition's messages complete in push order.
func testConcurrentWorkersKeepLeasesAndOrder(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	const partitions, perPartition, workers = 4, 40, 6
	s.configure("q", map[string]any{"retryLimit": 1000, "retryDelay": 0})
	for p := 0; p < partitions; p++ {
		var ids []string
		for i := 0; i < perPartition; i++ {
			ids = append(ids, fmt.Sprintf("%d", i))
		}
		s.push("q", fmt.Sprintf("p%d", p), ids...)
	}
	groups := []string{"g", "h"}

	var mu sync.Mutex
	held := map[string]map[int64]bool{}      // group -> seqs leased to a worker now
	done := map[string]map[string][]string{} // group -> partition -> completed txids in order
	for _, g := range groups {
		held[g] = map[int64]bool{}
		done[g] = map[string][]string{}
	}
	completed := map[string]int{}

	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	errs := make(chan error, workers*len(groups))
	fail := func(err error) {
		errs <- err
		cancel() // the others would wait on leases that are never settled
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(g string, seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, seed))
				for ctx.Err() == nil {
					mu.Lock()
					finished := completed[g] == partitions*perPartition
					mu.Unlock()
					if finished {
						return
					}
					res, err := s.b.Pop(ctx, broker.PopRequest{Queue: "q", Group: g, Batch: 1 + rng.IntN(4)})
					if err != nil {
						fail(err)
						return
					}
					mu.Lock()
					for _, m := range res.Messages {
						if held[g][m.Seq] {
							mu.Unlock()
							fail(fmt.Errorf("group %s: message %s/%s handed to two workers at once", g, m.Partition, m.TransactionID))
							return
						}
						held[g][m.Seq] = true
					}
					mu.Unlock()
					// Settle under the lock so that no other worker can see a
					// message between its ack and its release here.
					mu.Lock()
					for _, m := range res.Messages {
						status := broker.AckCompleted
						if rng.IntN(10) == 0 {
							status = broker.AckFailed
						}
						r, err := s.b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: status, Group: g, Error: "flaky"})
						if err != nil {
							mu.Unlock()
							fail(err)
							return
						}
						if status == broker.AckCompleted && !r.Requeued {
							done[g][m.Partition] = append(done[g][m.Partition], m.TransactionID)
							completed[g]++
						}
						delete(held[g], m.Seq)
					}
					mu.Unlock()
				}
			}(g, uint64(w+1)*uint64(len(g)))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("workers did not finish: %v", completed)
	}
	for _, g := range groups {
		for p := 0; p < partitions; p++ {
			got := done[g][fmt.Sprintf("p%d", p)]
			if len(got) != perPartition {
				t.Fatalf("group %s partition p%d: %d completed, want %d", g, p, len(got), perPartition)
			}
			for i, id := range got {
				if id != fmt.Sprintf("%d", i) {
					t.Fatalf("group %s partition p%d: completion %d is message %s: order broken (%v)", g, p, i, id, got)
				}
			}
		}
	}
}
