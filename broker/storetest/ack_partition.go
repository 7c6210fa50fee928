package storetest

import (
	"errors"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An ack by a group that exists, naming a partition of a queue that group
// has never read, is refused (409) and changes nothing: it had found no
// consumer, lost that error to a shadowed variable and panicked in the
// write (500).
func testAckOfAPartitionTheGroupDoesNotReadIsRefused(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("read", "", "a")
	s.push("other", "", "b")
	_, res := s.popTxids("read", "g", 1) // g exists and reads "read" only
	other := s.push("other", "", "b")[0]
	for _, a := range []broker.Ack{
		{TransactionID: "b", PartitionID: other.PartitionID, Status: broker.AckCompleted, Group: "g"},
		{TransactionID: "b", PartitionID: other.PartitionID, LeaseID: res.LeaseID, Status: broker.AckFailed, Error: "x", Group: "g"},
	} {
		_, err := s.b.Ack(s.ctx, a)
		var be *broker.Error
		if !errors.As(err, &be) || !errors.Is(err, broker.ErrConflict) {
			t.Fatalf("ack %+v: err %v, want a conflict", a, err)
		}
		results, err := s.b.AckBatch(s.ctx, "g", []broker.Ack{a})
		if err != nil || len(results) != 1 || results[0].Success {
			t.Fatalf("ack batch %+v: %+v, %v; want one refusal", a, results, err)
		}
	}
	// The lease of "read" is untouched: its message is still acked.
	s.ack(res.Messages[0], broker.AckCompleted, "")
	if st := s.stats("other", "g"); st != (broker.Stats{}) {
		t.Fatalf("stats of other for g: %+v, want none", st)
	}
}

// A lease id no lease has, NUL included, is refused as not leased, on
// both stores (PostgreSQL's text cannot hold a NUL: the locking read of
// several processes' acks binds it as text it can hold).
func testAckByALeaseIDNoLeaseHasIsRefused(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a")
	s.pop("q", "g", 1)
	for _, lease := range []string{"\x00", "a\x00b", "not-a-lease"} {
		_, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: "a", LeaseID: lease, Status: broker.AckCompleted, Group: "g"})
		if !errors.Is(err, broker.ErrConflict) {
			t.Errorf("ack by lease %q: %v, want a conflict", lease, err)
		}
	}
}
