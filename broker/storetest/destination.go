package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func testReplayElsewhere(t *testing.T, harness Harness) {
	t.Parallel()
	cases := []struct {
		name      string
		dest      broker.Destination
		queue     string // where the copy must be
		partition string
	}{
		{"QueueAndPartition", broker.Destination{Queue: "q2", Partition: "x"}, "q2", "x"},
		{"QueueKeepsThePartitionName", broker.Destination{Queue: "q2"}, "q2", "p"},
		{"PartitionOfTheSameQueue", broker.Destination{Partition: "x"}, "q", "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.push("q", "p", "a", "b")
			s.fail("q", "billing", 1, "declined")   // a
			s.fail("q", "analytics", 1, "bad data") // a
			id := s.dead("q", "billing")[0].MessageID()
			dest := tc.dest
			res, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "alice", Destination: &dest})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != broker.StatusQueued || !res.Elsewhere || res.Queue != tc.queue || res.Partition != tc.partition ||
				res.FromQueue != "q" || res.FromPartition != "p" || res.DeadLetterID != id || res.OriginalTransactionID != "a" ||
				res.TransactionID != "dlq:"+id {
				t.Fatalf("result %+v", res)
			}
			if n := len(s.dead("q", "billing")) + len(s.dead("q", "analytics")); n != 0 {
				t.Fatalf("%d dead letters left", n)
			}
			// The copy is at the end of the destination, and nowhere else.
			got, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: tc.queue, Partition: tc.partition, Group: "newcomer", Batch: 10, AutoAck: true})
			if err != nil || len(got.Messages) == 0 || got.Messages[len(got.Messages)-1].TransactionID != "dlq:"+id {
				t.Fatalf("partition %s of %s: %+v %v", tc.partition, tc.queue, got.Messages, err)
			}
			for _, g := range []string{"billing", "analytics"} {
				if tc.queue == "q" { // two partitions: in either order
					if got := s.drain("q", g); !slices.Contains(got, "b") || !slices.Contains(got, "dlq:"+id) || len(got) != 2 {
						t.Errorf("%s reads %v from q", g, got)
					}
					continue
				}
				if got := s.drain("q", g); !slices.Equal(got, []string{"b"}) {
					t.Errorf("%s reads %v from q: the copy went elsewhere", g, got)
				}
				if got := s.drain(tc.queue, g); !slices.Equal(got, []string{"dlq:" + id}) {
					t.Errorf("%s reads %v from %s", g, got, tc.queue)
				}
			}
			parts, err := s.b.Queue(s.ctx, tc.queue)
			if err != nil {
				t.Fatal(err)
			}
			if parts.Options != broker.DefaultOptions() && tc.queue == "q2" {
				t.Errorf("made queue has options %+v, want the defaults", parts.Options)
			}
			entries, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditReplay}, broker.Page{Limit: 10})
			if err != nil || len(entries) != 1 || !strings.Contains(entries[0].Detail, `to queue "`+tc.queue+`" partition "`+tc.partition+`"`) {
				t.Fatalf("audit %+v %v", entries, err)
			}
			if _, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "alice", Destination: &dest}); !errors.Is(err, broker.ErrNotFound) {
				t.Fatalf("second replay: %v, want ErrNotFound", err)
			}
		})
	}
}

func testReplayElsewhereRefusesABadNameAndChangesNothing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a")
	s.fail("q", "g", 1, "x")
	id := s.dead("q", "g")[0].MessageID()
	for _, d := range []broker.Destination{{Queue: "no spaces"}, {Partition: strings.Repeat("p", 300)}} {
		if _, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "a", Destination: &d}); !errors.Is(err, broker.ErrInvalid) {
			t.Fatalf("destination %+v: %v, want ErrInvalid", d, err)
		}
	}
	if len(s.dead("q", "g")) != 1 {
		t.Fatal("the dead letter went")
	}
}

// A copy to its own group only may go elsewhere too: the other groups
// reading the destination pass it by.
func testReplayElsewhereToOwnGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a")
	s.fail("q", "billing", 1, "x")
	s.drain("q2", "other") // other reads q2 from its start
	id := s.dead("q", "billing")[0].MessageID()
	res, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "a", Mode: broker.ReplayOwnGroup, Destination: &broker.Destination{Queue: "q2"}})
	if err != nil || res.Queue != "q2" {
		t.Fatalf("%+v %v", res, err)
	}
	if got := s.drain("q2", "other"); len(got) != 0 {
		t.Fatalf("other reads %v", got)
	}
	if got := s.drain("q2", "billing"); !slices.Equal(got, []string{res.TransactionID}) {
		t.Fatalf("billing reads %v", got)
	}
}

func testReplayTransactionElsewhereAndGone(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	r := s.push("q", "p", "a")
	s.fail("q", "g", 1, "x")
	o := broker.ReplayOptions{Actor: "dev", Destination: &broker.Destination{Queue: "q2", Partition: "x"}}
	res, err := s.b.ReplayTransactionWith(s.ctx, r[0].PartitionID, "a", o)
	if err != nil || res.Queue != "q2" || res.Partition != "x" || res.DeadLetterID != r[0].MessageID {
		t.Fatalf("%+v %v", res, err)
	}
	// Asked again (a client that timed out): nothing more, and the
	// message it looked for is named.
	again, err := s.b.ReplayTransactionWith(s.ctx, r[0].PartitionID, "a", o)
	if !errors.Is(err, broker.ErrNotFound) || again.DeadLetterID != r[0].MessageID {
		t.Fatalf("again %+v %v", again, err)
	}
	if got := s.drain("q2", "g"); !slices.Equal(got, []string{"dlq:" + r[0].MessageID}) {
		t.Fatalf("q2 holds %v", got)
	}
}

// A bulk replay's destination is kept with its job: a broker that takes
// the job over (after a restart) sends the copies there too.
func testBulkReplayElsewhereKeepsItsDestination(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a", "b", "c")
	s.fail("q", "g", 3, "x")
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Actor: "dev",
		Destination: &broker.Destination{Queue: "retry", Partition: "slow"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.Description, `to queue "retry", partition "slow"`) {
		t.Fatalf("description %q", j.Description)
	}
	other := broker.New(broker.Config{Store: s.db, Clock: s.clock})
	t.Cleanup(other.Close)
	done, err := other.RunJob(s.ctx, j.ID)
	if err != nil || done.Done != 3 || done.Scope.Destination == nil || *done.Scope.Destination != (broker.Destination{Queue: "retry", Partition: "slow"}) {
		t.Fatalf("job %+v %v", done, err)
	}
	if got := s.drain("q", "g"); len(got) != 0 {
		t.Fatalf("q got copies %v", got)
	}
	if got := s.drain("retry", "g"); len(got) != 3 {
		t.Fatalf("retry holds %v, want 3 copies", got)
	}
	if _, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobDelete, IDs: []string{"x"}, Actor: "dev",
		Destination: &broker.Destination{Queue: "retry"}}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("a delete with a destination: %v", err)
	}
}
