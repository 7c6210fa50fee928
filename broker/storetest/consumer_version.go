package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// ackVersion pops one message of group and acks it with status, errText
// and a consumer version.
func (s *bundle) ackVersion(queue, group, status, errText, version string) broker.AckResult {
	s.t.Helper()
	_, res := s.popTxids(queue, group, 1)
	if len(res.Messages) != 1 {
		s.t.Fatalf("nothing to pop for %s", group)
	}
	d := res.Messages[0]
	r, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: d.TransactionID, PartitionID: d.PartitionUUID, LeaseID: d.LeaseID,
		Status: status, Error: errText, Group: d.Group, ConsumerVersion: version})
	if err != nil {
		s.t.Fatalf("ack %s %s %q: %v", d.TransactionID, status, version, err)
	}
	return r
}

// groupVersions reads the versions of an error group from the store.
func (s *bundle) groupVersions(d broker.DeadLetter) string {
	s.t.Helper()
	var vs []broker.ErrorGroupVersion
	if err := s.db.View(s.ctx, func(tx broker.Tx) error {
		var err error
		vs, err = tx.ErrorGroupVersions(s.ctx, d.QueueID, d.GroupID, d.Fingerprint)
		return err
	}); err != nil {
		s.t.Fatalf("versions: %v", err)
	}
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%s %d %s %s", v.Version, v.Filed, v.FirstSeen.UTC().Format("15:04"), v.LastSeen.UTC().Format("15:04")))
	}
	return strings.Join(out, "\n")
}

// An ack's consumer version is kept with the failed attempt it made and
// with the dead letter it filed (and through a delete and its restore);
// the error group counts the versions that filed into it, first and last
// seen, the one last seen first; an ack without one counts none.
func testConsumerVersionIsKept(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 1, "retryDelay": 0})
	s.push("q", "p", "a", "b", "c", "d")

	if r := s.ackVersion("q", "g", broker.AckFailed, "card declined", "v1.0"); !r.Success || r.DLQ {
		t.Fatalf("first try: %+v", r)
	}
	s.clock.Advance(time.Minute)
	if r := s.ackVersion("q", "g", broker.AckFailed, "card declined", "v1.1"); !r.DLQ {
		t.Fatalf("last try: %+v", r)
	}
	dead := s.dead("q", "g")
	if len(dead) != 1 || dead[0].ConsumerVersion != "v1.1" {
		t.Fatalf("dead letters %+v: want one of v1.1", dead)
	}
	a := dead[0]
	detail, err := s.b.DeadLetter(s.ctx, a.MessageID(), "g")
	if err != nil || detail.ConsumerVersion != "v1.1" {
		t.Fatalf("the dead letter's page: %q %v", detail.ConsumerVersion, err)
	}
	h := s.history(a.MessageID(), "g")
	if len(h.Attempts) != 1 || h.Attempts[0].ConsumerVersion != "v1.0" {
		t.Fatalf("attempts %+v: want the first try's v1.0", h.Attempts)
	}

	// Two more of the group: one of v1.0 later, one that says none.
	s.clock.Advance(time.Hour)
	s.ackVersion("q", "g", broker.AckDLQ, "card declined", "v1.0")
	s.clock.Advance(time.Minute)
	s.ackVersion("q", "g", broker.AckDLQ, "card declined", "")
	if got, want := s.groupVersions(a), "v1.0 1 13:01 13:01\nv1.1 1 12:01 12:01"; got != want {
		t.Fatalf("versions of the group:\n%s\nwant\n%s", got, want)
	}
	if d := s.dead("q", "g"); len(d) != 3 || d[0].ConsumerVersion != "" || d[1].ConsumerVersion != "v1.0" {
		t.Fatalf("dead letters, newest first: %+v", d)
	}

	// The list filters by version, its total too; bulk actions by it.
	page, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", ConsumerVersion: "v1.1", WithTotal: true})
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != a.ID || page.Total != 1 {
		t.Fatalf("list of v1.1: %+v %v", page, err)
	}
	page, err = s.b.DeadLetters(s.ctx, broker.DLQQuery{Group: "g", ConsumerVersion: "v1.0"})
	if err != nil || len(page.Items) != 1 || page.Items[0].ConsumerVersion != "v1.0" {
		t.Fatalf("list of v1.0 across queues: %+v %v", page, err)
	}
	if page, err = s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", ConsumerVersion: "v9"}); err != nil || len(page.Items) != 0 {
		t.Fatalf("list of v9: %+v %v", page, err)
	}
	if c, err := s.b.CountMatching(s.ctx, broker.DLQQuery{Queue: "q", ConsumerVersion: "v1.0"}); err != nil || c.Count != 1 {
		t.Fatalf("count of v1.0: %+v %v", c, err)
	}

	// A delete and its restore keep the version.
	if n, err := s.b.Delete(s.ctx, a.MessageID(), "g", "user:dev"); err != nil || n != 1 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if n, err := s.b.Restore(s.ctx, a.MessageID(), "g", "user:dev"); err != nil || n != 1 {
		t.Fatalf("restore: %d %v", n, err)
	}
	if detail, err := s.b.DeadLetter(s.ctx, a.MessageID(), "g"); err != nil || detail.ConsumerVersion != "v1.1" {
		t.Fatalf("restored: %q %v", detail.ConsumerVersion, err)
	}
	// The versions stay when the group's dead letters are all gone.
	if res, err := s.b.DeleteMatching(s.ctx, broker.DLQQuery{Queue: "q"}, "user:dev"); err != nil || res.Done != 3 {
		t.Fatalf("delete all: %+v %v", res, err)
	}
	if got := s.groupVersions(a); !strings.HasPrefix(got, "v1.0 1 ") {
		t.Fatalf("versions after the group emptied: %q", got)
	}
}

// A consumer version that is too long, not UTF-8, or holds a control
// character refuses the ack, the whole batch and the whole transaction,
// and nothing changes.
func testConsumerVersionRefused(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a", "b")
	res := s.pop("q", "g", 2)
	if len(res.Messages) != 2 {
		t.Fatalf("popped %d", len(res.Messages))
	}
	ack := func(i int, v string) broker.Ack {
		d := res.Messages[i]
		return broker.Ack{TransactionID: d.TransactionID, PartitionID: d.PartitionUUID, LeaseID: d.LeaseID, Status: broker.AckDLQ, Error: "x", Group: "g", ConsumerVersion: v}
	}
	for name, v := range map[string]string{
		"too long": strings.Repeat("v", broker.MaxConsumerVersion+1),
		"not utf8": "v1\xff",
		"newline":  "v1\nv2",
		"nul":      "v\x00",
		"escape":   "v\x1b[31m",
		"c1":       "v\u0085",
	} {
		if _, err := s.b.Ack(s.ctx, ack(0, v)); !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "consumerVersion") {
			t.Errorf("%s: ack: %v", name, err)
		}
		if _, err := s.b.AckBatch(s.ctx, "g", []broker.Ack{ack(0, "ok"), ack(1, v)}); !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "acknowledgments[1]") {
			t.Errorf("%s: batch: %v", name, err)
		}
		ops := []broker.Operation{{Type: "ack", Ack: ack(0, "ok")}, {Type: "ack", Ack: ack(1, v)}}
		if _, err := s.b.Transaction(s.ctx, ops); !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "operations[1]") {
			t.Errorf("%s: transaction: %v", name, err)
		}
	}
	if d := s.dead("q", "g"); len(d) != 0 {
		t.Fatalf("refused acks filed %d dead letters", len(d))
	}
	// The longest version, in many bytes per character, is taken.
	longest := strings.Repeat("é", broker.MaxConsumerVersion/2)
	if r, err := s.b.AckBatch(s.ctx, "g", []broker.Ack{ack(0, longest), ack(1, "")}); err != nil || !r[0].DLQ || !r[1].DLQ {
		t.Fatalf("a batch after the refusals: %+v %v", r, err)
	}
	if d := s.dead("q", "g"); len(d) != 2 || d[1].ConsumerVersion != longest || d[0].ConsumerVersion != "" {
		t.Fatalf("dead letters: %+v", d)
	}
}
