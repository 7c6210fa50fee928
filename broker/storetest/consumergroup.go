package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func testDeleteGroupRemovesCursorsAndLeasesKeepsDeadLetters(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p1", "a", "b")
	s.push("q", "p2", "c")
	s.push("other", "p", "x")
	s.fail("q", "g", 1, "boom") // a
	_, held := s.popTxids("q", "g", 1)
	s.drain("other", "g")
	s.drain("q", "h")
	res, err := s.b.DeleteGroup(s.ctx, broker.DeleteGroupRequest{Group: "g", Queue: "q", Actor: "alice"})
	if err != nil || !slices.Equal(res.Queues, []string{"q"}) || res.Partitions != 2 || res.Leases != 1 || res.DeadLetterJob != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	// Its lease is gone: the ack of the worker that held it is refused.
	d := held.Messages[0]
	if _, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: d.TransactionID, PartitionID: d.PartitionUUID, LeaseID: d.LeaseID, Status: broker.AckCompleted, Group: "g"}); err == nil {
		t.Fatal("an ack with the removed lease went through")
	}
	if len(s.dead("q", "g")) != 1 {
		t.Fatal("its dead letter went")
	}
	// It starts over: from the beginning (the default subscription mode).
	if got := s.drain("q", "g"); len(got) != 3 {
		t.Fatalf("g reads %v after its removal", got)
	}
	// Other groups and queues are untouched.
	if got := s.drain("q", "h"); len(got) != 0 {
		t.Fatalf("h reads %v", got)
	}
	if got := s.drain("other", "g"); len(got) != 0 {
		t.Fatalf("g reads %v of other", got)
	}
	entries, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditGroupDelete}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 1 || entries[0].Actor != "alice" || entries[0].Queue != "q" || entries[0].Group != "g" || !strings.Contains(entries[0].Detail, "kept") {
		t.Fatalf("audit %+v %v", entries, err)
	}
}

func testDeleteGroupEverywhereWithItsDeadLetters(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a")
	s.push("r", "p", "b")
	s.fail("q", "g", 1, "boom")
	s.fail("r", "g", 1, "boom")
	s.fail("q", "h", 1, "boom")
	res, err := s.b.DeleteGroup(s.ctx, broker.DeleteGroupRequest{Group: "g", DeleteDeadLetters: true, Actor: "alice"})
	if err != nil || !slices.Equal(res.Queues, []string{"q", "r"}) || res.DeadLetterJob == 0 {
		t.Fatalf("%+v %v", res, err)
	}
	j, err := s.b.RunJob(s.ctx, res.DeadLetterJob)
	if err != nil || j.Done != 2 {
		t.Fatalf("job %+v %v", j, err)
	}
	if len(s.dead("q", "g"))+len(s.dead("r", "g")) != 0 || len(s.dead("q", "h")) != 1 {
		t.Fatal("wrong dead letters deleted")
	}
	// Nothing to remove: no error, nothing done.
	for _, r := range []broker.DeleteGroupRequest{{Group: "g"}, {Group: "nobody"}, {Group: "h", Queue: "nowhere"}} {
		if res, err := s.b.DeleteGroup(s.ctx, r); err != nil || len(res.Queues) != 0 {
			t.Fatalf("%+v: %+v %v", r, res, err)
		}
	}
	if _, err := s.b.DeleteGroup(s.ctx, broker.DeleteGroupRequest{Group: "bad name"}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("bad name: %v", err)
	}
}
