package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// sweep runs maintenance once and returns the messages task's report.
func (s *bundle) sweep() broker.TaskReport {
	s.t.Helper()
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		s.t.Fatalf("maintain: %v", err)
	}
	return rep.Task(broker.TaskMessages)
}

// kept returns the transactionIds of the messages still stored in a
// partition of queue, in push order, read from the store itself.
func (s *bundle) kept(queue, partition string) []string {
	s.t.Helper()
	var out []string
	if err := s.db.View(s.ctx, func(tx broker.Tx) error {
		q, err := tx.QueueByName(s.ctx, queue)
		if err != nil {
			return err
		}
		p, err := tx.PartitionByName(s.ctx, q.ID, partition)
		if err != nil {
			return err
		}
		ms, err := tx.MessagesAfter(s.ctx, p.ID, 0, 1_000_000)
		for _, m := range ms {
			out = append(out, m.TransactionID)
		}
		return err
	}); err != nil {
		s.t.Fatalf("messages of %s/%s: %v", queue, partition, err)
	}
	return out
}

// counts returns the queue page's count of a partition's messages and
// each group's lag.
func (s *bundle) counts(queue, partition string) (int64, map[string]int64) {
	s.t.Helper()
	q, err := s.b.Queue(s.ctx, queue)
	if err != nil {
		s.t.Fatalf("queue: %v", err)
	}
	var n int64 = -1
	for _, p := range q.Partitions {
		if p.Name == partition {
			n = p.Messages
		}
	}
	lags := map[string]int64{}
	for _, g := range q.Groups {
		lags[g.Name] = g.Lag
	}
	return n, lags
}

// subscribeAll makes groups read queue from its beginning (an empty pop).
func (s *bundle) subscribeAll(queue string, groups ...string) {
	s.t.Helper()
	for _, g := range groups {
		if res := s.pop(queue, g, 1); len(res.Messages) != 0 {
			s.t.Fatalf("subscribe %s: got %d messages", g, len(res.Messages))
		}
	}
}

func txids(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// completedRetentionSeconds: a message every group has settled is deleted
// the retention after its last settlement, not a second before; a slow
// group holds it however old it is; the counts of the queue page follow.
func testCompletedRetentionWaitsForTheLastGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"completedRetentionSeconds": 3600})
	s.subscribeAll("q", "fast", "slow")
	s.push("q", "p", "a", "b", "c")
	if got := s.drain("q", "fast"); len(got) != 3 {
		t.Fatalf("fast drained %v", got)
	}
	s.clock.Advance(48 * time.Hour)
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d while slow has read nothing", r.Removed)
	}
	if got := s.kept("q", "p"); len(got) != 3 {
		t.Fatalf("kept %v, want a b c: slow has not read them", got)
	}
	// slow settles a and b now: the last settlement of those two.
	ids, res := s.popTxids("q", "slow", 2)
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("slow got %v", ids)
	}
	for _, m := range res.Messages {
		s.ack(m, broker.AckCompleted, "")
	}
	s.sweep() // sees a and b settled by every group
	s.clock.Advance(3599 * time.Second)
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d a second before the retention had passed", r.Removed)
	}
	s.clock.Advance(time.Second)
	if r := s.sweep(); r.Removed != 2 {
		t.Fatalf("removed %d at the retention, want 2 (a, b)", r.Removed)
	}
	if got := s.kept("q", "p"); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("kept %v, want c: slow has not settled it", got)
	}
	n, lags := s.counts("q", "p")
	if n != 1 || lags["fast"] != 0 || lags["slow"] != 1 {
		t.Errorf("queue page: %d messages, lags %v; want 1, fast 0, slow 1", n, lags)
	}
	// Nothing expired: completed retention never removes an unsettled message.
	if st := s.stats("q", "slow"); st.Expired != 0 {
		t.Errorf("slow expired %d", st.Expired)
	}
	// slow still gets c, and nothing else.
	if ids, _ := s.popTxids("q", "slow", 10); !slices.Equal(ids, []string{"c"}) {
		t.Errorf("slow then got %v, want c", ids)
	}
}

// A group that subscribes from the beginning after a partition's
// messages were seen settled keeps what is still there: the marks made
// before it came no longer count, and it sees what is kept.
func testCompletedRetentionAndAGroupAddedLater(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"completedRetentionSeconds": 3600})
	s.subscribeAll("q", "a")
	s.push("q", "p", "m1", "m2")
	s.drain("q", "a")
	s.sweep() // a mark: m1, m2 settled by every group
	s.clock.Advance(time.Hour)
	if r := s.sweep(); r.Removed != 2 {
		t.Fatalf("removed %d, want m1 m2", r.Removed)
	}
	s.push("q", "p", "m3", "m4")
	s.drain("q", "a")
	s.sweep() // a mark for m3, m4
	s.clock.Advance(10 * time.Minute)
	// b subscribes from the beginning: it sees m3 and m4 (m1, m2 are gone).
	if ids, _ := s.popTxids("q", "b", 10); !slices.Equal(ids, []string{"m3", "m4"}) {
		t.Fatalf("b from the beginning got %v, want m3 m4", ids)
	}
	s.sweep()
	s.clock.Advance(time.Hour) // the mark made before b came is due; b's lease ran out
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d that b has not settled", r.Removed)
	}
	ids, res := s.popTxids("q", "b", 10)
	if !slices.Equal(ids, []string{"m3", "m4"}) {
		t.Fatalf("b again got %v, want m3 m4", ids)
	}
	for _, m := range res.Messages {
		s.ack(m, broker.AckCompleted, "")
	}
	s.sweep()
	s.clock.Advance(59 * time.Minute)
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d less than the retention after b settled them", r.Removed)
	}
	s.clock.Advance(time.Hour/8 + time.Minute)
	if r := s.sweep(); r.Removed != 2 {
		t.Fatalf("removed %d within the lateness bound, want 2", r.Removed)
	}
}

// A group that subscribes from the beginning and settles the old
// messages between two runs (no run saw its cursor behind them) is the
// last to settle them: the marks made before it came no longer count,
// and the messages stay the retention after its settlement.
func testCompletedRetentionAfterALateGroupSettled(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"completedRetentionSeconds": 3600})
	s.subscribeAll("q", "a")
	s.push("q", "p", "m1", "m2")
	s.drain("q", "a")
	s.sweep() // a mark: m1, m2 settled by every group
	s.clock.Advance(2 * time.Hour)
	if got := s.drain("q", "b"); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("b from the beginning got %v, want m1 m2", got)
	}
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d just after b settled them", r.Removed)
	}
	s.clock.Advance(59 * time.Minute)
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d less than the retention after b settled them", r.Removed)
	}
	s.clock.Advance(time.Hour/8 + time.Minute)
	if r := s.sweep(); r.Removed != 2 {
		t.Fatalf("removed %d within the lateness bound, want 2", r.Removed)
	}
}

// retentionSeconds: what is older goes, settled or not; each group counts
// what it had not settled as expired; the queue page's counts and the
// lags are right after, and the groups go on from there.
func testRetentionExpiresUnreadMessages(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60})
	s.subscribeAll("q", "a", "b")
	s.push("q", "p", txids(5, "m")...)
	ids, res := s.popTxids("q", "a", 2)
	for _, m := range res.Messages {
		s.ack(m, broker.AckCompleted, "")
	}
	if len(ids) != 2 {
		t.Fatalf("a got %v", ids)
	}
	s.clock.Advance(30 * time.Second)
	s.push("q", "p", "young")
	s.clock.Advance(30 * time.Second)
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d at exactly the retention", r.Removed)
	}
	s.clock.Advance(time.Millisecond)
	if r := s.sweep(); r.Removed != 5 {
		t.Fatalf("removed %d, want the 5 older than 60 s", r.Removed)
	}
	if got := s.kept("q", "p"); !slices.Equal(got, []string{"young"}) {
		t.Fatalf("kept %v", got)
	}
	if a, b := s.stats("q", "a").Expired, s.stats("q", "b").Expired; a != 3 || b != 5 {
		t.Errorf("expired unread: a %d, b %d; want 3 and 5", a, b)
	}
	n, lags := s.counts("q", "p")
	if n != 1 || lags["a"] != 1 || lags["b"] != 1 {
		t.Errorf("queue page: %d messages, lags %v; want 1, a 1, b 1", n, lags)
	}
	for _, g := range []string{"a", "b"} {
		if ids, _ := s.popTxids("q", g, 10); !slices.Equal(ids, []string{"young"}) {
			t.Errorf("%s then got %v, want young", g, ids)
		}
	}
	s.push("q", "p", "later")
	s.sweep() // the counts are kept as events happen (the fold) after a sweep too
	n, lags = s.counts("q", "p")
	if n != 2 || lags["a"] != 2 || lags["b"] != 2 {
		t.Errorf("after a push: %d messages, lags %v; want 2, a 2, b 2 (young is leased, not settled)", n, lags)
	}
}

// A live lease is never cut: its messages (and what lies past them)
// wait until it ends.
func testRetentionSparesALiveLease(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60, "leaseTime": 300})
	s.subscribeAll("q", "a")
	s.push("q", "p", "m1", "m2", "m3")
	_, res := s.popTxids("q", "a", 2)
	s.clock.Advance(2 * time.Minute)
	if r := s.sweep(); r.Removed != 0 {
		t.Fatalf("removed %d under a live lease", r.Removed)
	}
	for _, m := range res.Messages {
		if r := s.ack(m, broker.AckCompleted, ""); !r.Success {
			t.Fatalf("ack under the lease after a sweep: %+v", r)
		}
	}
	if r := s.sweep(); r.Removed != 3 {
		t.Fatalf("removed %d after the lease, want 3", r.Removed)
	}
	if st := s.stats("q", "a"); st.Expired != 1 || st.Completed != 2 {
		t.Errorf("a: expired %d, completed %d; want 1 (m3) and 2", st.Expired, st.Completed)
	}
}

// A message waiting for its retry that expires leaves the consumer clean:
// the next pop gets the next message at once (the retry delay was the
// expired message's), and the old lease's late ack changes nothing.
func testRetentionOfAWaitingRetry(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60, "retryDelay": 600_000, "retryLimit": 5})
	s.subscribeAll("q", "a")
	s.push("q", "p", "m1")
	s.clock.Advance(30 * time.Second)
	s.push("q", "p", "m2")
	_, res := s.popTxids("q", "a", 2)
	if len(res.Messages) != 2 {
		t.Fatalf("popped %d", len(res.Messages))
	}
	if r := s.ack(res.Messages[0], broker.AckFailed, "try later"); !r.Success {
		t.Fatalf("failed ack: %+v", r)
	}
	if ids, _ := s.popTxids("q", "a", 1); len(ids) != 0 {
		t.Fatalf("got %v during the retry delay", ids)
	}
	s.clock.Advance(31 * time.Second)
	if r := s.sweep(); r.Removed != 1 {
		t.Fatalf("removed %d, want m1", r.Removed)
	}
	ids, next := s.popTxids("q", "a", 5)
	if !slices.Equal(ids, []string{"m2"}) || next.Messages[0].RetryCount != 0 {
		t.Fatalf("next pop got %v (%+v), want m2 at once, first try", ids, next.Messages)
	}
	// The old lease's acks are answered and change nothing: m1's is
	// refused (it is gone), m2's is the late ack of a batch a failure
	// ended (requeued: it changed nothing).
	for _, m := range res.Messages {
		r, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckCompleted, Group: "a"})
		if err == nil && r.Success && !r.Requeued {
			t.Errorf("late ack of %s under the old lease counted: %+v", m.TransactionID, r)
		}
	}
	if r := s.ack(next.Messages[0], broker.AckCompleted, ""); !r.Success {
		t.Fatalf("ack m2: %+v", r)
	}
	if st := s.stats("q", "a"); st.Expired != 1 || st.Completed != 1 {
		t.Errorf("a: expired %d, completed %d; want 1 and 1", st.Expired, st.Completed)
	}
	if n, lags := s.counts("q", "p"); n != 1 || lags["a"] != 0 {
		t.Errorf("queue page: %d messages, lag %d; want 1 and 0", n, lags["a"])
	}
}

// A dead letter keeps its payload once retention removed its message:
// the list, the page, the payload search and export show it; a delete
// and restore keeps it; a replay makes a copy with it; an edit and
// replay keeps the original in the audit of edits.
func testDeadLetterSurvivesItsMessage(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60})
	s.subscribeAll("q", "a")
	s.push("q", "p", "m1", "m2", "m3")
	s.fail("q", "a", 3, "boom")
	s.clock.Advance(2 * time.Minute)
	if r := s.sweep(); r.Removed != 3 {
		t.Fatalf("removed %d, want 3", r.Removed)
	}
	if got := s.kept("q", "p"); len(got) != 0 {
		t.Fatalf("kept %v", got)
	}
	want := func(tx string) string { return fmt.Sprintf(`{"tx":%q}`, tx) }
	byTx := map[string]broker.DeadLetter{}
	for _, d := range s.dead("q", "a") {
		byTx[d.TransactionID] = d
		if string(d.Payload) != want(d.TransactionID) {
			t.Errorf("listed %s: payload %q", d.TransactionID, d.Payload)
		}
	}
	if len(byTx) != 3 {
		t.Fatalf("dead letters %v", byTx)
	}
	m1 := byTx["m1"]
	detail, err := s.b.DeadLetter(s.ctx, m1.MessageID(), "a")
	if err != nil || string(detail.Payload) != want("m1") || detail.Error != "boom" {
		t.Fatalf("page of m1: %+v, %v", detail.DeadLetter, err)
	}
	found, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Fields: []string{"tx=m2"}, Limit: 10})
	if err != nil || len(found.Items) != 1 || found.Items[0].TransactionID != "m2" {
		t.Fatalf("field search tx=m2: %+v, %v", found.Items, err)
	}
	found, err = s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Text: "m3", Limit: 10})
	if err != nil || len(found.Items) != 1 || found.Items[0].TransactionID != "m3" {
		t.Fatalf("text search m3: %+v, %v", found.Items, err)
	}
	var exported []broker.DeadLetter
	if _, err := s.b.Export(s.ctx, broker.DLQQuery{Queue: "q"}, "ndjson", "user:x", func(dls []broker.DeadLetter) (int, error) {
		exported = append(exported, dls...)
		return len(dls), nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(exported) != 3 {
		t.Fatalf("exported %d", len(exported))
	}
	for _, d := range exported {
		if string(d.Payload) != want(d.TransactionID) {
			t.Errorf("exported %s: payload %q", d.TransactionID, d.Payload)
		}
	}

	// Delete and restore m2: its payload comes back with it.
	if n, err := s.b.Delete(s.ctx, byTx["m2"].MessageID(), "a", "user:x"); err != nil || n != 1 {
		t.Fatalf("delete m2: %d, %v", n, err)
	}
	if n, err := s.b.Restore(s.ctx, byTx["m2"].MessageID(), "a", "user:x"); err != nil || n != 1 {
		t.Fatalf("restore m2: %d, %v", n, err)
	}
	detail, err = s.b.DeadLetter(s.ctx, byTx["m2"].MessageID(), "a")
	if err != nil || string(detail.Payload) != want("m2") {
		t.Fatalf("m2 restored: %+v, %v", detail.DeadLetter, err)
	}
	found, err = s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Text: "m2", Limit: 10})
	if err != nil || len(found.Items) != 1 {
		t.Fatalf("text search m2 after the restore: %+v, %v", found.Items, err)
	}

	// Replay m1 (named by its partition and transactionId, as Queen's
	// clients do: the dead letter knows it), edit and replay m3: the
	// copies carry the payloads.
	if _, err := s.b.ReplayTransaction(s.ctx, m1.PartitionKey, "m1", "user:x"); err != nil {
		t.Fatalf("replay m1: %v", err)
	}
	if _, err := s.b.ReplayWith(s.ctx, byTx["m3"].MessageID(), broker.ReplayOptions{Actor: "user:x", Payload: []byte(`{"tx":"m3","fixed":true}`)}); err != nil {
		t.Fatalf("edit and replay m3: %v", err)
	}
	_, res := s.popTxids("q", "a", 10)
	if len(res.Messages) != 2 {
		t.Fatalf("copies popped: %+v (kept %v)", res.Messages, s.kept("q", "p"))
	}
	if got := string(res.Messages[0].Payload); got != want("m1") || res.Messages[0].TransactionID != broker.ReplayPrefix+m1.MessageID() {
		t.Errorf("copy of m1: %s %s", res.Messages[0].TransactionID, got)
	}
	if got := string(res.Messages[1].Payload); got != `{"tx":"m3","fixed":true}` {
		t.Errorf("edited copy of m3: %s", got)
	}
	h := s.history(byTx["m3"].MessageID(), "a")
	if len(h.Replays) != 1 || !h.Replays[0].Edited {
		t.Errorf("history of m3: %+v", h.Replays)
	}
}

// Deduplication holds while the message is kept: inside the window a
// push of the same transactionId is a duplicate; once retention removed
// it, the same transactionId is a new message.
func testDeduplicationWindow(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60})
	first := s.push("q", "p", "order-1")[0]
	s.clock.Advance(59 * time.Second)
	again := s.push("q", "p", "order-1")[0]
	if again.Status != broker.StatusDuplicate || again.MessageID != first.MessageID {
		t.Fatalf("inside the window: %+v, want a duplicate of %s", again, first.MessageID)
	}
	s.clock.Advance(2 * time.Second)
	if r := s.sweep(); r.Removed != 1 {
		t.Fatalf("removed %d", r.Removed)
	}
	past := s.push("q", "p", "order-1")[0]
	if past.Status != broker.StatusQueued || past.MessageID == first.MessageID {
		t.Fatalf("past the window: %+v, want a new message", past)
	}
}

// Each sweep runs in chunks of at most 500 messages, one transaction
// each, and reports what it removed.
func testMessageSweepInChunks(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60})
	s.subscribeAll("q", "a")
	for i := 0; i < 1200; i += 100 {
		s.push("q", "p", txids(100, fmt.Sprintf("b%d-", i))...)
	}
	s.push("q", "other", "o1")
	s.clock.Advance(time.Hour)
	r := s.sweep()
	// 500 + 500 + 200 in p, 1 in other; and the settle marks' one
	// transaction of completed retention (default 7 days).
	if r.Removed != 1201 || r.Chunks != 5 {
		t.Errorf("removed %d in %d chunks, want 1201 in 5", r.Removed, r.Chunks)
	}
	if st := s.stats("q", "a"); st.Expired != 1201 {
		t.Errorf("expired %d", st.Expired)
	}
	if r := s.sweep(); r.Removed != 0 || r.Chunks != 1 {
		t.Errorf("second run: %+v, want nothing in the marks' one transaction", r)
	}
}

// A replayed copy that retention removes before the group settled it is
// settled as expired: the job's copies are no longer pending.
func testRetentionSettlesPendingCopiesAsExpired(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.subscribeAll("q", "a")
	s.push("q", "p", "m1", "m2")
	s.fail("q", "a", 2, "boom")
	dead := s.dead("q", "a")
	s.configure("q", map[string]any{"retentionSeconds": 60})
	job, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Actor: "user:x"})
	if err != nil {
		t.Fatalf("start job: %v", err)
	}
	if job, err = s.b.RunJob(s.ctx, job.ID); err != nil || job.State != broker.JobDone {
		t.Fatalf("run job: %+v, %v", job, err)
	}
	view, err := s.b.JobDetail(s.ctx, job.ID)
	if err != nil || len(view.Outcomes) != 1 || view.Outcomes[0].Pending() != 2 {
		t.Fatalf("job before: %+v, %v", view.Outcomes, err)
	}
	s.clock.Advance(2 * time.Minute)
	if r := s.sweep(); r.Removed != 4 {
		t.Fatalf("removed %d, want 2 originals and 2 copies", r.Removed)
	}
	view, err = s.b.JobDetail(s.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o := view.Outcomes[0]; o.Pending() != 0 || o.Expired != 2 || o.Replayed != 2 {
		t.Errorf("job after: %+v, want 2 expired, none pending", o)
	}
	// The history of an original (gone, its dead letter replayed) still
	// reads, from what its replay kept, and says how its copy ended.
	h := s.history(dead[0].MessageID(), "a")
	if h.Message.TransactionID != dead[0].TransactionID || len(h.Replays) != 1 || len(h.Replays[0].Outcomes) != 1 || h.Replays[0].Outcomes[0].OutcomeName() != "expired" {
		t.Errorf("history of %s: %+v, copies %+v", dead[0].TransactionID, h.Message, h.Replays)
	}
}

// BenchmarkMaintainMessagesIdle measures a maintenance run's messages task over
// a queue of 10,000 partitions, each with a message every group has
// settled (marked already) and none due, with retentionSeconds set too
// (nothing older than it): what a run costs when nothing is due, on a
// store of harness (call it from a Benchmark function of the store's
// package).
func BenchmarkMaintainMessagesIdle(b *testing.B, harness Harness) {
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(b, "lazarus.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	s := &bundle{ctx: ctx, b: broker.New(broker.Config{Store: d, Clock: c}), db: d, clock: c}
	const parts = 10_000
	if _, err := s.b.Configure(ctx, "q", map[string]json.RawMessage{"retentionSeconds": json.RawMessage(`86400`)}, "test"); err != nil {
		b.Fatal(err)
	}
	if _, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g"}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < parts; i += 500 {
		items := make([]broker.PushItem, 500)
		for j := range items {
			items[j] = broker.PushItem{Queue: "q", Partition: fmt.Sprintf("p%05d", i+j), Payload: []byte(`1`)}
		}
		if _, err := s.b.Push(s.ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	for {
		res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 10, AutoAck: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Messages) == 0 {
			break
		}
	}
	if _, err := s.b.Maintain(s.ctx); err != nil { // the marks
		b.Fatal(err)
	}
	b.ResetTimer()
	var chunks int
	var took time.Duration
	for b.Loop() {
		s.clock.Advance(time.Minute)
		rep, err := s.b.Maintain(s.ctx)
		if err != nil {
			b.Fatal(err)
		}
		r := rep.Task(broker.TaskMessages)
		if r.Removed != 0 {
			b.Fatalf("removed %d", r.Removed)
		}
		chunks = r.Chunks
		took += r.Took
	}
	b.ReportMetric(float64(chunks), "chunks/run")
	b.ReportMetric(float64(took.Microseconds())/float64(b.N)/1000, "task-ms/run")
}

// Past the deduplication window a new push may take a dead letter's
// transactionId: a replay by (partition, transactionId) still finds the
// dead letter (the new message is none), not the new message.
func testReplayTransactionPastTheDeduplicationWindow(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 60})
	s.subscribeAll("q", "a")
	first := s.push("q", "p", "order-1")[0]
	s.fail("q", "a", 1, "boom")
	s.clock.Advance(2 * time.Minute)
	if r := s.sweep(); r.Removed != 1 {
		t.Fatalf("removed %d", r.Removed)
	}
	again := s.push("q", "p", "order-1")[0]
	if again.Status != broker.StatusQueued || again.MessageID == first.MessageID {
		t.Fatalf("push past the window: %+v", again)
	}
	res, err := s.b.ReplayTransaction(s.ctx, first.PartitionID, "order-1", "user:x")
	if err != nil {
		t.Fatalf("replay of order-1 past the window: %v", err)
	}
	if res.TransactionID != broker.ReplayPrefix+first.MessageID {
		t.Errorf("replayed as %s, want the copy of %s", res.TransactionID, first.MessageID)
	}
	if dls := s.dead("q", "a"); len(dls) != 0 {
		t.Errorf("dead letters after the replay: %+v", dls)
	}
	ids, _ := s.popTxids("q", "a", 10)
	if !slices.Equal(ids, []string{"order-1", broker.ReplayPrefix + first.MessageID}) {
		t.Errorf("a got %v, want the new order-1 and the copy", ids)
	}
	// The new message is no dead letter, and none with its transactionId
	// is left: not found.
	if _, err := s.b.ReplayTransaction(s.ctx, first.PartitionID, "nope", "user:x"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("replay of an unknown transactionId: %v", err)
	}
}

// hookStore is the store calling after once every write has
// committed (or failed).
type hookStore struct {
	Store
	after func()
}

func (h *hookStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	err := h.Store.Update(ctx, o, fn)
	if h.after != nil {
		h.after()
	}
	return err
}

// A sweep reads its queue's options again in each chunk's transaction: an
// option turned off or made longer while a run deletes stops it at the
// next chunk (the next run finds what is due under the new value); one
// made shorter lets it go on.
func testRetentionRereadsItsOptionEachChunk(t *testing.T, harness Harness) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		option         string
		from, to       int
		removed, after int64 // removed by the run, then by the next one
	}{
		{"retention off", "retentionSeconds", 60, 0, 500, 0},
		{"retention longer", "retentionSeconds", 60, 7200, 500, 0},
		{"retention shorter", "retentionSeconds", 1800, 60, 1200, 0},
		{"completed retention off", "completedRetentionSeconds", 60, 0, 500, 0},
		{"completed retention longer", "completedRetentionSeconds", 60, 7200, 500, 0},
		{"completed retention shorter", "completedRetentionSeconds", 1800, 60, 1200, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			hs := &hookStore{Store: s.db}
			s.b = broker.New(broker.Config{Store: hs, Clock: s.clock})
			s.configure("q", map[string]any{tc.option: tc.from})
			s.subscribeAll("q", "a")
			for i := 0; i < 1200; i += 100 {
				s.push("q", "p", txids(100, fmt.Sprintf("b%d-", i))...)
			}
			if tc.option == "completedRetentionSeconds" {
				if got := s.drain("q", "a"); len(got) != 1200 {
					t.Fatalf("drained %d", len(got))
				}
				s.sweep() // the settle marks
			}
			s.clock.Advance(time.Hour)
			fired := false
			hs.after = func() {
				if !fired && len(s.kept("q", "p")) < 1200 {
					fired = true
					s.configure("q", map[string]any{tc.option: tc.to})
				}
			}
			if r := s.sweep(); r.Removed != tc.removed {
				t.Errorf("removed %d, want %d (%s %d -> %d after the first chunk)", r.Removed, tc.removed, tc.option, tc.from, tc.to)
			}
			if !fired {
				t.Fatal("the option was not changed during the run")
			}
			if r := s.sweep(); r.Removed != tc.after {
				t.Errorf("the next run removed %d, want %d", r.Removed, tc.after)
			}
			if got := int64(len(s.kept("q", "p"))); got != 1200-tc.removed-tc.after {
				t.Errorf("kept %d", got)
			}
		})
	}
}

// The search box finds a dead letter by the message id and the short id
// its page shows, before and after retention removed its message (the
// dead letter keeps the message's seq and push time); a removed message
// with no dead letter is found no more.
func testSearchFindsADeadLetterWhoseMessageWasRemoved(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retentionSeconds": 600})
	s.subscribeAll("q", "a")
	// Over several windows of 65.5 s, so that the binary searches have
	// boundaries to find: every third a dead letter, the others
	// completed.
	var dead []broker.Delivery
	var done []string
	for i := range 30 {
		s.push("q", "p", fmt.Sprintf("m%d", i))
		if i%3 == 0 {
			dead = append(dead, s.failFor("q", "a", "boom"))
		} else {
			_, res := s.popTxids("q", "a", 1)
			s.ack(res.Messages[0], broker.AckCompleted, "")
			done = append(done, res.Messages[0].ID())
		}
		s.clock.Advance(10 * time.Second)
	}
	short := func(id string) string { return id[:8] + "…" + id[len(id)-4:] }
	check := func(when string) {
		t.Helper()
		for _, d := range dead {
			id := d.ID()
			want := "q/a/" + d.TransactionID + "/"
			wantHits(t, when+" "+id, s.search(id), want+broker.MatchMessageID)
			wantHits(t, when+" "+short(id), s.search(short(id)), want+broker.MatchShortID)
		}
	}
	check("kept")
	s.clock.Advance(time.Hour)
	if r := s.sweep(); r.Removed != 30 {
		t.Fatalf("removed %d", r.Removed)
	}
	// Newer messages past the removed ones.
	s.push("q", "p", "later-1", "later-2")
	check("removed")
	for _, id := range done[:3] {
		wantHits(t, id, s.search(id))
		wantHits(t, short(id), s.search(short(id)))
	}
}

// queueTxStore counts, once counting is set, the committed or failed
// write transactions that touch queue's retention: read the queue by id
// (a chunk's re-read of its options), sweep messages or drop settle
// marks. after is called once each write has ended.
type queueTxStore struct {
	broker.Store
	queueID  int64
	counting bool
	n        int
	after    func()
}

type queueTxTx struct {
	broker.Tx
	s       *queueTxStore
	touched *bool
}

func (t queueTxTx) QueueByID(ctx context.Context, id int64) (broker.Queue, error) {
	if id == t.s.queueID {
		*t.touched = true
	}
	return t.Tx.QueueByID(ctx, id)
}

func (t queueTxTx) SweepMessages(ctx context.Context, s broker.MessageSweep) (broker.SweptMessages, error) {
	*t.touched = true
	return t.Tx.SweepMessages(ctx, s)
}

func (t queueTxTx) DropSettleMarks(ctx context.Context, partitionID, through int64) (int64, error) {
	*t.touched = true
	return t.Tx.DropSettleMarks(ctx, partitionID, through)
}

func (s *queueTxStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	touched := false
	err := s.Store.Update(ctx, o, func(tx broker.Tx) error {
		touched = false
		return fn(queueTxTx{tx, s, &touched})
	})
	if touched && s.counting {
		s.n++
	}
	if s.after != nil {
		s.after()
	}
	return err
}

// A retention option turned off or made longer while a run sweeps one of
// several due partitions stops the queue's sweep there: the chunk that
// reads the new value is the queue's last transaction of the run (no
// chunk nor settle-mark drop for the partitions left), and the next run
// finds nothing due under the new value.
func testRetentionStoppedSweepsNoOtherPartition(t *testing.T, harness Harness) {
	t.Parallel()
	for _, tc := range []struct {
		option   string
		from, to int
	}{
		{"retentionSeconds", 60, 0},
		{"retentionSeconds", 60, 7200},
		{"completedRetentionSeconds", 60, 0},
		{"completedRetentionSeconds", 60, 7200},
	} {
		t.Run(fmt.Sprintf("%s %d to %d", tc.option, tc.from, tc.to), func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			qs := &queueTxStore{Store: s.db}
			s.b = broker.New(broker.Config{Store: qs, Clock: s.clock})
			s.configure("q", map[string]any{tc.option: tc.from})
			s.subscribeAll("q", "a")
			parts := []string{"p0", "p1", "p2"}
			for _, p := range parts {
				s.push("q", p, txids(500, p+"-a")...)
				s.push("q", p, txids(100, p+"-b")...)
			}
			if tc.option == "completedRetentionSeconds" {
				if got := s.drain("q", "a"); len(got) != 1800 {
					t.Fatalf("drained %d", len(got))
				}
				s.sweep() // the settle marks
			}
			q, err := s.b.Queue(s.ctx, "q")
			if err != nil {
				t.Fatal(err)
			}
			qs.queueID = q.ID
			kept := func() (n int) {
				for _, p := range parts {
					n += len(s.kept("q", p))
				}
				return n
			}
			s.clock.Advance(time.Hour)
			fired := false
			qs.after = func() {
				if !fired && kept() < 1800 {
					fired = true
					s.configure("q", map[string]any{tc.option: tc.to})
					qs.counting = true
				}
			}
			if r := s.sweep(); r.Removed != 500 {
				t.Errorf("removed %d, want the first chunk's 500", r.Removed)
			}
			if !fired {
				t.Fatal("the option was not changed during the run")
			}
			if qs.n != 1 {
				t.Errorf("%d transactions of the queue after the change, want 1 (the chunk that read it)", qs.n)
			}
			if r := s.sweep(); r.Removed != 0 {
				t.Errorf("the next run removed %d, want 0", r.Removed)
			}
			if got := kept(); got != 1300 {
				t.Errorf("kept %d, want 1300", got)
			}
		})
	}
}
