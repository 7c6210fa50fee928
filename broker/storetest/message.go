package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

func testMessageStateFollowsEachGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	r := s.push("q", "p", "a", "b")
	s.drain("q", "fast") // fast reads q from its start: both settled
	s.drain("q", "slow")
	s.push("q", "p", "c")
	state := func(txid string) broker.MessageState {
		t.Helper()
		m, err := s.b.MessageState(s.ctx, r[0].PartitionID, txid)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := state("a"); m.Status() != broker.MessageCompleted || !m.Kept || m.Queue.Name != "q" || m.Partition.Name != "p" || len(m.Groups) != 2 {
		t.Fatalf("a: %s %+v", m.Status(), m)
	}
	if m := state("c"); m.Status() != broker.MessagePending {
		t.Fatalf("c: %s %+v", m.Status(), m.Groups)
	}
	s.pop("q", "fast", 1) // fast holds c
	m := state("c")
	if m.Status() != broker.MessageProcessing || m.Groups[0].Name != "fast" || m.Groups[0].LeaseUntil.IsZero() || !m.Groups[1].LeaseUntil.IsZero() {
		t.Fatalf("c leased: %s %+v", m.Status(), m.Groups)
	}
	s.clock.Advance(time.Hour) // the lease ran out
	if m := state("c"); m.Status() != broker.MessagePending {
		t.Fatalf("c after its lease: %s %+v", m.Status(), m.Groups)
	}
	s.fail("q", "slow", 1, "boom") // c
	m = state("c")
	if m.Status() != broker.MessageDeadLetter || len(m.DeadLetters) != 1 || !m.Groups[1].DeadLetter || !m.Groups[1].Consumed || m.Groups[0].Consumed {
		t.Fatalf("c dead-lettered: %s %+v", m.Status(), m)
	}
	if _, err := s.b.MessageState(s.ctx, r[0].PartitionID, "nope"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := s.b.MessageState(s.ctx, "no-partition", "a"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("unknown partition: %v", err)
	}
}

func testDeleteTransactionDeletesDeadLettersNeverAMessage(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	r := s.push("q", "p", "a", "b")
	s.fail("q", "g", 1, "boom") // a
	res, err := s.b.DeleteTransaction(s.ctx, r[0].PartitionID, "a", "", "alice")
	if err != nil || res.Deleted != 1 || res.MessageID != r[0].MessageID || !res.RestorableUntil.After(s.clock.Now()) {
		t.Fatalf("%+v %v", res, err)
	}
	if len(s.dead("q", "g")) != 0 {
		t.Fatal("the dead letter stayed")
	}
	entries, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditDelete}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 1 || entries[0].Actor != "alice" {
		t.Fatalf("audit %+v %v", entries, err)
	}
	// b is live (no dead letter): refused, and still delivered.
	if _, err := s.b.DeleteTransaction(s.ctx, r[0].PartitionID, "b", "", "alice"); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("live message: %v", err)
	}
	if got := s.drain("q", "g"); len(got) != 1 || got[0] != "b" {
		t.Fatalf("g reads %v", got)
	}
	// a again (a retried delete): its dead letter is gone, as for a
	// message not known; the message is kept.
	if _, err := s.b.DeleteTransaction(s.ctx, r[0].PartitionID, "a", "", "alice"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("again: %v", err)
	}
	if _, err := s.b.DeleteTransaction(s.ctx, r[0].PartitionID, "nope", "", "alice"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}
