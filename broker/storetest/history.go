package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// attemptCounter is a store that counts the statements of the attempts
// table the broker asks for.
type attemptCounter struct {
	broker.Store
	inserts, deletes atomic.Int64
}

func (c *attemptCounter) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return c.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(attemptCountingTx{tx, c}) })
}

type attemptCountingTx struct {
	broker.Tx
	c *attemptCounter
}

func (t attemptCountingTx) InsertAttempt(ctx context.Context, seq, groupID int64, a broker.Attempt) error {
	t.c.inserts.Add(1)
	return t.Tx.InsertAttempt(ctx, seq, groupID, a)
}

func (t attemptCountingTx) DeleteAttempts(ctx context.Context, seq, groupID int64) error {
	t.c.deletes.Add(1)
	return t.Tx.DeleteAttempts(ctx, seq, groupID)
}

// failOnce pops one message for group and acks it with status and
// errText; it returns the ack's result.
func (s *bundle) failOnce(queue, group, status, errText string) broker.AckResult {
	s.t.Helper()
	_, res := s.popTxids(queue, group, 1)
	if len(res.Messages) != 1 {
		s.t.Fatalf("nothing to pop for %s", group)
	}
	return s.ack(res.Messages[0], status, errText)
}

// history reads a message's history; it fails the test on error.
func (s *bundle) history(id, group string) broker.DeadLetterHistory {
	s.t.Helper()
	h, err := s.b.DeadLetterHistory(s.ctx, id, group)
	if err != nil {
		s.t.Fatalf("history of %s: %v", id, err)
	}
	return h
}

func attemptsText(as []broker.Attempt) string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%d %s %q %d", a.Attempt, a.At.Format("15:04"), a.Error, a.ErrorBytes))
	}
	return strings.Join(out, "\n")
}

// With retryLimit 3 a message fails four times before it is a dead
// letter: the three failed attempts that left it retries are kept, with
// their errors and times, and the fourth is the dead letter's error.
func testAttemptsAreRecorded(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 3, "retryDelay": 0})
	s.push("q", "p", "a")
	long := strings.Repeat("x", broker.MaxErrorText+100)
	errs := []string{"timeout after 30s\n  at pay()", long, "card declined", "card declined again"}
	for _, e := range errs {
		s.clock.Advance(time.Minute)
		s.failOnce("q", "billing", broker.AckFailed, e)
	}
	d := s.dead("q", "billing")
	if len(d) != 1 || d[0].Error != "card declined again" || d[0].RetryCount != 3 {
		t.Fatalf("dead letters %+v", d)
	}
	h := s.history(d[0].MessageID(), "")
	if len(h.Attempts) != 3 || h.Attempts[0].Error != errs[0] || h.Attempts[1].ErrorBytes != len(long) || len(h.Attempts[1].Error) > broker.MaxErrorText+len("…") ||
		h.Attempts[2].Error != "card declined" || !h.Attempts[2].At.Equal(time.Date(2026, 11, 1, 12, 3, 0, 0, time.UTC)) {
		t.Fatalf("attempts:\n%s", attemptsText(h.Attempts))
	}
	if h.Group != "billing" || h.Message.Queue != "q" || h.Message.Partition != "p" || h.Message.TransactionID != "a" {
		t.Errorf("history of %+v in %q", h.Message, h.Group)
	}
	// Another group's history of the message is its own.
	if h := s.history(d[0].MessageID(), "analytics"); len(h.Attempts) != 0 {
		t.Errorf("analytics' attempts: %+v", h.Attempts)
	}
}

// Attempts say nothing once the message completes or is dropped: they go.
// A message that never failed costs no statement of the attempts table.
func testAttemptsGoWhenTheMessageSettles(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	counter := &attemptCounter{Store: s.db}
	s.b = broker.New(broker.Config{Store: counter, Clock: s.clock})
	s.configure("q", map[string]any{"retryLimit": 2, "retryDelay": 0})
	s.push("q", "p", "ok", "flaky", "drop")

	s.failOnce("q", "g", broker.AckCompleted, "")
	if n, m := counter.inserts.Load(), counter.deletes.Load(); n != 0 || m != 0 {
		t.Fatalf("a completed ack of a message that never failed ran %d inserts and %d deletes of attempts", n, m)
	}

	s.failOnce("q", "g", broker.AckFailed, "e1")
	s.failOnce("q", "g", broker.AckFailed, "e2")
	if n := counter.inserts.Load(); n != 2 {
		t.Fatalf("%d inserts for two failed acks", n)
	}
	id := s.push("q", "p", "flaky")[0].MessageID // the duplicate names the message
	if h := s.history(id, "g"); len(h.Attempts) != 2 {
		t.Fatalf("attempts before completion: %s", attemptsText(h.Attempts))
	}
	s.failOnce("q", "g", broker.AckCompleted, "")
	if h := s.history(id, "g"); len(h.Attempts) != 0 {
		t.Fatalf("attempts after completion: %s", attemptsText(h.Attempts))
	}

	// Dropped after failing: the queue keeps no dead letters of it.
	s.configure("q", map[string]any{"dlqAfterMaxRetries": false})
	drop := s.push("q", "p", "drop")[0].MessageID
	s.failOnce("q", "g", broker.AckFailed, "d1")
	s.failOnce("q", "g", broker.AckFailed, "d2")
	if r := s.failOnce("q", "g", broker.AckFailed, "d3"); !r.Dropped {
		t.Fatalf("ack %+v, want dropped", r)
	}
	if h := s.history(drop, "g"); len(h.Attempts) != 0 || len(h.DeadLetters) != 0 {
		t.Fatalf("a dropped message's attempts: %s", attemptsText(h.Attempts))
	}
	if n := counter.deletes.Load(); n != 2 {
		t.Errorf("%d deletes of attempts, want 2 (a completion and a drop after failures)", n)
	}
}

// A message replayed, failed again and replayed again: its history reads
// the chain both ways, and says what became of each dead letter.
func testReplayChainReadsBothWays(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a")
	s.fail("q", "billing", 1, "declined")
	orig := s.dead("q", "billing")[0].MessageID()

	s.clock.Advance(time.Minute)
	r1, err := s.b.Replay(s.ctx, orig, "user:alice")
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(time.Minute)
	if ids, res := s.popTxids("q", "billing", 1); len(ids) != 1 || ids[0] != "dlq:"+orig {
		t.Fatalf("billing reads %v", ids)
	} else {
		s.ack(res.Messages[0], broker.AckDLQ, "declined again")
	}
	s.clock.Advance(time.Minute)
	r2, err := s.b.Replay(s.ctx, r1.MessageID, "user:bob")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Backwards", func(t *testing.T) {
		h := s.history(r2.MessageID, "")
		if len(h.ReplayOf) != 2 {
			t.Fatalf("lineage %+v", h.ReplayOf)
		}
		if hop := h.ReplayOf[0]; hop.CopyID != r2.MessageID || hop.OriginalID != r1.MessageID || hop.Actor != "user:bob" || !hop.At.Equal(s.clock.Now()) || hop.Queue != "q" || hop.GroupID != 0 {
			t.Errorf("first hop %+v", hop)
		}
		if hop := h.ReplayOf[1]; hop.CopyID != r1.MessageID || hop.OriginalID != orig || hop.Actor != "user:alice" {
			t.Errorf("second hop %+v", hop)
		}
	})
	t.Run("Forwards", func(t *testing.T) {
		h := s.history(orig, "billing")
		if len(h.Replays) != 1 || h.Replays[0].CopyID != r1.MessageID || h.Replays[0].Actor != "user:alice" || h.Replays[0].TransactionID != "dlq:"+orig {
			t.Fatalf("copies of the original %+v", h.Replays)
		}
		o, ok := h.Replays[0].Outcome(h.GroupID)
		if !ok || o.Outcome != broker.CopyFailed || o.DeadLetter || o.SettledAt.IsZero() {
			t.Errorf("the copy's outcome in billing: %+v %v (failed again; its dead letter replayed since)", o, ok)
		}
		f, ok := h.Fate(h.GroupID)
		if !ok || f.How != broker.FateReplayed || f.Copy == nil || f.Copy.CopyID != r1.MessageID || f.Actor != "user:alice" {
			t.Errorf("fate %+v %v", f, ok)
		}
		mid := s.history(r1.MessageID, "")
		if len(mid.ReplayOf) != 1 || len(mid.Replays) != 1 || mid.Replays[0].CopyID != r2.MessageID {
			t.Fatalf("the middle copy: back %+v, forwards %+v", mid.ReplayOf, mid.Replays)
		}
		if o := mid.Replays[0].Outcomes; len(o) != 1 || o[0].Group != "billing" || o[0].Outcome != broker.CopyPending {
			t.Errorf("the last copy's outcomes %+v, want pending in billing", o)
		}
	})
	t.Run("OutcomeKept", func(t *testing.T) {
		s.drain("q", "billing")
		h := s.history(r1.MessageID, "")
		if o := h.Replays[0].Outcomes; len(o) != 1 || o[0].Outcome != broker.CopySucceeded {
			t.Errorf("after billing completed the copy: %+v", o)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		for _, id := range []string{"nope", broker.MessageID(s.clock.Now(), 999999), broker.MessageID(s.clock.Now().Add(time.Hour), 1)} {
			if _, err := s.b.DeadLetterHistory(s.ctx, id, ""); !errors.Is(err, broker.ErrNotFound) {
				t.Errorf("history of %s: %v, want ErrNotFound", id, err)
			}
		}
	})
}

// Deleted dead letters say by whom, when, and until when they can be
// restored; restored ones are dead letters again.
func testHistoryOfDeletes(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a", "b")
	s.fail("q", "billing", 1, "declined")
	s.fail("q", "analytics", 1, "bad data")
	id := s.dead("q", "billing")[0].MessageID()
	s.clock.Advance(time.Minute)
	if _, err := s.b.Delete(s.ctx, id, "billing", "user:carol"); err != nil {
		t.Fatal(err)
	}
	h := s.history(id, "billing")
	f, ok := h.Fate(h.GroupID)
	if !ok || f.How != broker.FateDeleted || f.Actor != "user:carol" || !f.At.Equal(s.clock.Now()) || f.Deletion == nil ||
		!f.Deletion.RestoreUntil.Equal(s.clock.Now().Add(broker.RestoreWindow)) {
		t.Fatalf("fate of the deleted one %+v %v", f, ok)
	}
	if _, live := h.DeadLetter(h.GroupID); live {
		t.Fatal("the deleted dead letter is still there")
	}
	if len(h.DeadLetters) != 1 || h.DeadLetters[0].Group != "analytics" {
		t.Errorf("the other group's dead letter: %+v", h.DeadLetters)
	}
	if _, ok := h.Fate(h.DeadLetters[0].GroupID); ok {
		t.Error("a live dead letter has a fate")
	}

	s.clock.Advance(time.Hour)
	if n, err := s.b.Restore(s.ctx, id, "billing", "user:dave"); err != nil || n != 1 {
		t.Fatalf("restore = %d, %v", n, err)
	}
	h = s.history(id, "billing")
	if _, ok := h.Fate(h.GroupID); ok {
		t.Errorf("a restored dead letter has a fate: %+v", h.Fates)
	}
	if _, live := h.DeadLetter(h.GroupID); !live || len(h.Deletions) != 1 || h.Deletions[0].RestoredBy != "user:dave" {
		t.Errorf("restored: live %v, deletions %+v", live, h.Deletions)
	}

	// Never a dead letter: the message exists, and there is nothing to say.
	other := s.push("q", "p", "b")[0].MessageID
	if h := s.history(other, "billing"); len(h.Fates) != 0 || len(h.DeadLetters) != 0 || h.Message.TransactionID != "b" {
		t.Errorf("history of a message never dead-lettered: %+v", h)
	}
}

// Replayed to its own group: only that group's dead letter is replayed,
// and says so; the other group's stays.
func testHistoryOfAnOwnGroupReplay(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a")
	s.fail("q", "billing", 1, "declined")
	s.fail("q", "analytics", 1, "bad data")
	id := s.dead("q", "billing")[0].MessageID()
	res, err := s.b.ReplayWith(s.ctx, id, broker.ReplayOptions{Actor: "user:erin", Mode: broker.ReplayOwnGroup, Group: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	h := s.history(id, "billing")
	f, ok := h.Fate(h.GroupID)
	if !ok || f.How != broker.FateReplayed || f.Copy.CopyID != res.MessageID || f.Copy.Mode() != broker.ReplayOwnGroup || f.Copy.Group != "billing" {
		t.Fatalf("billing's fate %+v %v", f, ok)
	}
	if !strings.HasPrefix(f.Copy.TransactionID, "dlq:"+id) {
		t.Errorf("copy transactionId %q", f.Copy.TransactionID)
	}
	if len(h.DeadLetters) != 1 || h.DeadLetters[0].Group != "analytics" || len(h.Fates) != 1 {
		t.Errorf("dead letters %+v, fates %+v", h.DeadLetters, h.Fates)
	}
	copyH := s.history(res.MessageID, "")
	if len(copyH.ReplayOf) != 1 || copyH.ReplayOf[0].Group != "billing" || copyH.ReplayOf[0].OriginalID != id {
		t.Errorf("the copy's lineage %+v", copyH.ReplayOf)
	}
}

// An autoAck pop that completes a message which had failed before forgets
// its attempts, as a completed ack does.
func testAttemptsGoWhenAnAutoAckCompletesTheMessage(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 2, "retryDelay": 0})
	id := s.push("q", "p", "flaky")[0].MessageID
	s.failOnce("q", "g", broker.AckFailed, "boom")
	if h := s.history(id, "g"); len(h.Attempts) != 1 {
		t.Fatalf("attempts after a failure: %s", attemptsText(h.Attempts))
	}
	res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", AutoAck: true})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].RetryCount != 1 {
		t.Fatalf("autoAck pop %+v %v", res, err)
	}
	if h := s.history(id, "g"); len(h.Attempts) != 0 {
		t.Fatalf("attempts after an autoAck completed it: %s", attemptsText(h.Attempts))
	}
}
