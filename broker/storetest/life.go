package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// One case per row of SPEC.md section 3's table: what one ending does to
// the message and to the group's view of its partition.
func testEndings(t *testing.T, harness Harness) {
	t.Parallel()
	type want struct {
		nextNow    []string      // what the group pops right after the ending
		nextLater  []string      // what it pops after advance
		advance    time.Duration // how long to wait before nextLater
		retryLater int           // retryCount of the first message of nextLater
		dead       int           // dead letters of the group
		deadError  string
		deadTries  int
		stats      broker.Stats
	}
	cases := []struct {
		name   string
		status string // "" lets the lease run out
		retry  int    // retries spent on "a" before this ending (failed acks)
		want   want
	}{
		{name: "CompletedMovesPast", status: broker.AckCompleted,
			want: want{nextNow: []string{"b"}, stats: broker.Stats{Completed: 1}}},
		{name: "FailedWithRetriesLeftComesBackAfterDelay", status: broker.AckFailed,
			want: want{nextNow: nil, advance: 500 * time.Millisecond, nextLater: []string{"a"}, retryLater: 1, stats: broker.Stats{Failed: 1}}},
		{name: "RetryComesBackAtOnceFree", status: broker.AckRetry,
			want: want{nextNow: []string{"a"}}},
		{name: "LeaseRunsOutComesBackAtOnceFree", status: "",
			want: want{nextNow: nil, advance: 10 * time.Second, nextLater: []string{"a"}, retryLater: 0}},
		{name: "FailedWithoutRetriesLeftIsDeadLettered", status: broker.AckFailed, retry: 2,
			want: want{nextNow: []string{"b"}, dead: 1, deadError: "boom", deadTries: 2, stats: broker.Stats{Failed: 3, DeadLettered: 1, Depth: 1}}},
		{name: "DLQIsDeadLetteredAtOnce", status: broker.AckDLQ,
			want: want{nextNow: []string{"b"}, dead: 1, deadError: "boom", deadTries: 0, stats: broker.Stats{DeadLettered: 1, Depth: 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.configure("q", map[string]any{"retryLimit": 2, "retryDelay": 500, "leaseTime": 10})
			s.push("q", "", "a", "b")
			// Spend the retries the case asks for.
			for i := 0; i < tc.retry; i++ {
				_, res := s.popTxids("q", "g", 1)
				s.ack(res.Messages[0], broker.AckFailed, "boom")
				s.clock.Advance(500 * time.Millisecond)
			}
			ids, res := s.popTxids("q", "g", 1)
			if !slices.Equal(ids, []string{"a"}) {
				t.Fatalf("first pop: got %v, want [a]", ids)
			}
			if got := res.Messages[0].RetryCount; got != tc.retry {
				t.Fatalf("retryCount before the ending: got %d, want %d", got, tc.retry)
			}
			if tc.status != "" {
				s.ack(res.Messages[0], tc.status, "boom")
			}
			ids, res = s.popTxids("q", "g", 1)
			if !slices.Equal(ids, tc.want.nextNow) {
				t.Fatalf("pop right after: got %v, want %v", ids, tc.want.nextNow)
			}
			if tc.status == broker.AckRetry && res.Messages[0].RetryCount != 0 {
				t.Fatalf("retry spent a retry: retryCount %d", res.Messages[0].RetryCount)
			}
			if tc.want.nextLater != nil {
				s.clock.Advance(tc.want.advance - time.Millisecond)
				if ids, _ := s.popTxids("q", "g", 1); ids != nil {
					t.Fatalf("pop 1 ms before it is due: got %v, want nothing", ids)
				}
				s.clock.Advance(time.Millisecond)
				ids, res := s.popTxids("q", "g", 1)
				if !slices.Equal(ids, tc.want.nextLater) {
					t.Fatalf("pop after %v: got %v, want %v", tc.want.advance, ids, tc.want.nextLater)
				}
				if got := res.Messages[0].RetryCount; got != tc.want.retryLater {
					t.Fatalf("retryCount: got %d, want %d", got, tc.want.retryLater)
				}
			}
			dead := s.dead("q", "g")
			if len(dead) != tc.want.dead {
				t.Fatalf("dead letters: got %d, want %d", len(dead), tc.want.dead)
			}
			if tc.want.dead > 0 {
				d := dead[0]
				if d.Error != tc.want.deadError || d.RetryCount != tc.want.deadTries || d.TransactionID != "a" || d.Group != "g" || d.Queue != "q" || d.Partition != broker.DefaultPartition || string(d.Payload) != `{"tx":"a"}` {
					t.Fatalf("dead letter: %+v", d)
				}
			}
			if got := s.stats("q", "g"); got != tc.want.stats {
				t.Fatalf("stats: got %+v, want %+v", got, tc.want.stats)
			}
		})
	}
}

func testRetryDelayHoldsOnlyThatPartitionForThatGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryDelay": 5000})
	s.push("q", "p1", "a1", "a2")
	s.push("q", "p2", "b1")
	res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p1", Group: "g"})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop p1: %v %v", res, err)
	}
	s.ack(res.Messages[0], broker.AckFailed, "transient")
	// p1 waits for g: a2 is not handed out while a1 waits.
	ids, _ := s.popTxids("q", "g", 10)
	if !slices.Equal(ids, []string{"b1"}) {
		t.Fatalf("group g during the delay: got %v, want [b1]", ids)
	}
	// Another group reads p1 as if nothing happened.
	res, err = s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p1", Group: "other", Batch: 10})
	if err != nil || len(res.Messages) != 2 {
		t.Fatalf("other group: %+v %v", res, err)
	}
	s.clock.Advance(5 * time.Second)
	ids, _ = s.popTxids("q", "g", 10)
	if !slices.Equal(ids, []string{"a1", "a2"}) {
		t.Fatalf("after the delay: got %v, want [a1 a2]", ids)
	}
}

func testRetriesCountPerMessageAndStartAtZeroForTheNext(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 1, "retryDelay": 0})
	s.push("q", "", "a", "b")
	for i := 0; i < 2; i++ {
		_, res := s.popTxids("q", "g", 1)
		if res.Messages[0].TransactionID != "a" || res.Messages[0].RetryCount != i {
			t.Fatalf("try %d: %+v", i, res.Messages[0])
		}
		s.ack(res.Messages[0], broker.AckFailed, "e")
	}
	_, res := s.popTxids("q", "g", 1)
	if m := res.Messages[0]; m.TransactionID != "b" || m.RetryCount != 0 {
		t.Fatalf("next message: %+v", m)
	}
}

func testRetryLimitZeroEndsAtFirstFailure(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	s.push("q", "", "a")
	_, res := s.popTxids("q", "g", 1)
	if r := s.ack(res.Messages[0], broker.AckFailed, "nope"); !r.DLQ {
		t.Fatalf("ack result %+v, want DLQ", r)
	}
	if d := s.dead("q", "g"); len(d) != 1 || d[0].RetryCount != 0 {
		t.Fatalf("dead letters: %+v", d)
	}
}

func testCrashLoopNeverReachesTheDeadLetters(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 1, "leaseTime": 1})
	s.push("q", "", "a")
	for i := 0; i < 10; i++ {
		_, res := s.popTxids("q", "g", 1)
		if len(res.Messages) != 1 || res.Messages[0].RetryCount != 0 {
			t.Fatalf("round %d: %+v", i, res)
		}
		s.clock.Advance(time.Second) // the worker died; the lease runs out
	}
	if d := s.dead("q", "g"); len(d) != 0 {
		t.Fatalf("dead letters: %+v", d)
	}
}

// Drop mode (SPEC.md section 3, point 3): nothing is kept, drops are counted.
func testDropMode(t *testing.T, harness Harness) {
	t.Parallel()
	cases := []struct {
		name       string
		opts       map[string]any
		status     string
		wantDead   int
		wantDrop   int64
		wantResult broker.AckResult
	}{
		{"NoDLQExhaustedIsDropped", map[string]any{"deadLetterQueue": false, "retryLimit": 0}, broker.AckFailed, 0, 1, broker.AckResult{Dropped: true}},
		{"NoDLQAckDLQIsDropped", map[string]any{"deadLetterQueue": false}, broker.AckDLQ, 0, 1, broker.AckResult{Dropped: true}},
		{"NoDLQAfterMaxRetriesExhaustedIsDropped", map[string]any{"dlqAfterMaxRetries": false, "retryLimit": 0}, broker.AckFailed, 0, 1, broker.AckResult{Dropped: true}},
		{"NoDLQAfterMaxRetriesAckDLQIsKept", map[string]any{"dlqAfterMaxRetries": false}, broker.AckDLQ, 1, 0, broker.AckResult{DLQ: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.configure("q", tc.opts)
			s.push("q", "", "a", "b")
			_, res := s.popTxids("q", "g", 1)
			r := s.ack(res.Messages[0], tc.status, "e")
			if r.DLQ != tc.wantResult.DLQ || r.Dropped != tc.wantResult.Dropped {
				t.Fatalf("ack result %+v", r)
			}
			if d := s.dead("q", "g"); len(d) != tc.wantDead {
				t.Fatalf("dead letters: %d, want %d", len(d), tc.wantDead)
			}
			if got := s.stats("q", "g").Dropped; got != tc.wantDrop {
				t.Fatalf("dropped: %d, want %d", got, tc.wantDrop)
			}
			if ids, _ := s.popTxids("q", "g", 1); !slices.Equal(ids, []string{"b"}) {
				t.Fatalf("next: %v", ids)
			}
		})
	}
}

// SPEC.md section 3, point 6: if one message of a leased batch fails, those
// behind it come back after it, whatever was acked for them.
func testBatchFailureRule(t *testing.T, harness Harness) {
	t.Parallel()
	cases := []struct {
		name  string
		acks  [][2]string // transactionId, status, in the order sent
		after time.Duration
		want  []string // what the next pop (batch 10) gets
	}{
		{"FailureInTheMiddleBringsBackTheRest", [][2]string{{"a", "completed"}, {"b", "failed"}, {"c", "completed"}}, time.Second, []string{"b", "c", "d"}},
		{"AckedBehindBeforeFailureStillComesBack", [][2]string{{"c", "completed"}, {"a", "completed"}, {"b", "failed"}}, time.Second, []string{"b", "c", "d"}},
		{"RetryInTheMiddle", [][2]string{{"a", "completed"}, {"b", "retry"}}, 0, []string{"b", "c", "d"}},
		{"OutOfOrderCompletions", [][2]string{{"c", "completed"}, {"b", "completed"}, {"a", "completed"}}, 0, []string{"d"}},
		{"DLQBehindAFailureIsNotFiled", [][2]string{{"c", "dlq"}, {"b", "failed"}, {"a", "completed"}}, time.Second, []string{"b", "c", "d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.configure("q", map[string]any{"retryDelay": 1000})
			s.push("q", "", "a", "b", "c", "d")
			_, res := s.popTxids("q", "g", 3)
			byTx := map[string]broker.Delivery{}
			for _, m := range res.Messages {
				byTx[m.TransactionID] = m
			}
			for _, a := range tc.acks {
				s.ack(byTx[a[0]], a[1], "e")
			}
			s.clock.Advance(tc.after)
			if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, tc.want) {
				t.Fatalf("next pop: got %v, want %v", ids, tc.want)
			}
			if d := s.dead("q", "g"); len(d) != 0 {
				t.Fatalf("dead letters: %+v", d)
			}
		})
	}
}

// A batch whose message fails its last try: the message becomes a dead
// letter and the rest of the batch comes back at once, as it does after a
// failure with retries left (only without the wait). A worker that stops
// at the failure, as docs/concepts.md says it may, must not leave the
// partition leased until leaseTime runs out (issue 28, point 1).
func testLastTryFailureBringsBackTheRestAtOnce(t *testing.T, harness Harness) {
	t.Parallel()
	cases := []struct {
		name    string
		opts    map[string]any
		dead    int
		dropped int64
	}{
		{"DeadLettered", map[string]any{"retryLimit": 1, "retryDelay": 1000}, 1, 0},
		{"Dropped", map[string]any{"retryLimit": 1, "retryDelay": 1000, "dlqAfterMaxRetries": false}, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.configure("q", tc.opts)
			s.push("q", "", "a1", "a2", "a3", "a4")
			_, res := s.popTxids("q", "g", 10)
			s.ack(res.Messages[0], broker.AckCompleted, "")
			s.ack(res.Messages[1], broker.AckFailed, "first try")
			s.clock.Advance(time.Second)
			ids, res := s.popTxids("q", "g", 10)
			if !slices.Equal(ids, []string{"a2", "a3", "a4"}) {
				t.Fatalf("after the retry delay: got %v, want a2 a3 a4", ids)
			}
			if r := s.ack(res.Messages[0], broker.AckFailed, "last try"); r.DLQ != (tc.dead == 1) || r.Dropped != (tc.dropped == 1) {
				t.Fatalf("last try's ack: %+v", r)
			}
			// No time passes: a3 and a4 come back now, not after leaseTime.
			if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, []string{"a3", "a4"}) {
				t.Fatalf("after the last try failed: got %v, want a3 a4 at once", ids)
			}
			if d := s.dead("q", "g"); len(d) != tc.dead {
				t.Fatalf("dead letters: %d, want %d", len(d), tc.dead)
			}
			if got := s.stats("q", "g").Dropped; got != tc.dropped {
				t.Fatalf("dropped: %d, want %d", got, tc.dropped)
			}
		})
	}
}

// In one batch of acks, those behind a last-try failure change nothing:
// their results say so (Requeued), and they come back at once.
func testAckBatchBehindALastTryFailureIsRequeued(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 0})
	s.push("q", "", "a", "b", "c")
	_, res := s.popTxids("q", "g", 10)
	acks := []broker.Ack{
		{TransactionID: "a", PartitionID: res.Messages[0].PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckFailed, Error: "boom"},
		{TransactionID: "b", PartitionID: res.Messages[1].PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted},
		{TransactionID: "c", PartitionID: res.Messages[2].PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted},
	}
	out, err := s.b.AckBatch(s.ctx, "g", acks)
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].DLQ || out[0].Requeued {
		t.Fatalf("a: %+v, want filed", out[0])
	}
	for _, r := range out[1:] {
		if !r.Requeued || r.DLQ {
			t.Fatalf("%s: %+v, want requeued", r.TransactionID, r)
		}
	}
	if ids, _ := s.popTxids("q", "g", 10); !slices.Equal(ids, []string{"b", "c"}) {
		t.Fatalf("next pop: got %v, want b c", ids)
	}
}

func testGroupsAreIndependent(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a")
	_, res := s.popTxids("q", "billing", 1)
	s.ack(res.Messages[0], broker.AckDLQ, "billing cannot")
	ids, _ := s.popTxids("q", "analytics", 1)
	if !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("analytics: %v", ids)
	}
	if d := s.dead("q", "analytics"); len(d) != 0 {
		t.Fatalf("analytics dead letters: %+v", d)
	}
}

func testOneLiveLeasePerPartitionAndGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p1", "a1", "a2")
	s.push("q", "p2", "b1")
	first, _ := s.popTxids("q", "g", 1)
	second, _ := s.popTxids("q", "g", 1)
	third, _ := s.popTxids("q", "g", 1)
	got := append(append(first, second...), third...)
	slices.Sort(got)
	if !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("three pops while leased: got %v, want a1 and b1 only", got)
	}
	// The queue-mode group is a group of its own.
	if ids, _ := s.popTxids("q", "", 1); len(ids) != 1 {
		t.Fatalf("queue mode: %v", ids)
	}
}

func testNewGroupsStart(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "old")
	s.clock.Advance(time.Minute)
	mark := s.clock.Now()
	s.push("q", "", "mid")
	s.clock.Advance(time.Minute)
	cases := []struct {
		group string
		start broker.Start
		want  string
	}{
		{"fromStart", broker.Start{}, "old"},
		{"fromNow", broker.Start{Now: true}, "late"},
		{"fromTime", broker.Start{From: mark}, "mid"},
	}
	for _, tc := range cases {
		// Subscribe the group with an empty pop of a partition that has nothing.
		if _, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "none", Group: tc.group, Start: tc.start}); err != nil {
			t.Fatal(err)
		}
	}
	s.push("q", "", "late")
	for _, tc := range cases {
		ids, _ := s.popTxids("q", tc.group, 1)
		if !slices.Equal(ids, []string{tc.want}) {
			t.Errorf("%s: got %v, want [%s]", tc.group, ids, tc.want)
		}
	}
}

func testPushDedupPerPartition(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	first := s.push("q", "p1", "x")
	again := s.push("q", "p1", "x")
	other := s.push("q", "p2", "x")
	if first[0].Status != broker.StatusQueued || again[0].Status != broker.StatusDuplicate || other[0].Status != broker.StatusQueued {
		t.Fatalf("statuses: %s %s %s", first[0].Status, again[0].Status, other[0].Status)
	}
	if again[0].MessageID != first[0].MessageID {
		t.Fatalf("duplicate names another message: %s vs %s", again[0].MessageID, first[0].MessageID)
	}
	ids, _ := s.popTxids("q", "g", 10)
	if len(ids) != 1 {
		t.Fatalf("p1 holds %v", ids)
	}
}

func testPushRejectsBadItemsAndStoresNothing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	cases := []struct {
		name string
		item broker.PushItem
	}{
		{"BadQueueName", broker.PushItem{Queue: "no spaces", Payload: []byte(`1`)}},
		{"EmptyQueueName", broker.PushItem{Queue: "", Payload: []byte(`1`)}},
		{"BadPartitionName", broker.PushItem{Queue: "q", Partition: "a/b", Payload: []byte(`1`)}},
		{"InvalidJSON", broker.PushItem{Queue: "q", Payload: []byte(`{nope`)}},
		{"NoPayload", broker.PushItem{Queue: "q"}},
		// A caller's word that payloads were checked skips the JSON check
		// only: a missing payload is still refused.
		{"NoPayloadThoughChecked", broker.PushItem{Queue: "q", PayloadChecked: true}},
	}
	for _, tc := range cases {
		good := broker.PushItem{Queue: "q", Payload: []byte(`null`), TransactionID: "good-" + tc.name}
		_, err := s.b.Push(s.ctx, []broker.PushItem{good, tc.item})
		if !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", tc.name, err)
		}
	}
	if ids, _ := s.popTxids("q", "g", 100); len(ids) != 0 {
		t.Fatalf("a refused push stored %v", ids)
	}
}

func testAckRefusalsChangeNothing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"leaseTime": 10})
	s.push("q", "", "a", "b")
	_, res := s.popTxids("q", "g", 1)
	m := res.Messages[0]
	cases := []struct {
		name string
		ack  broker.Ack
		kind error
	}{
		{"UnknownStatus", broker.Ack{TransactionID: "a", PartitionID: m.PartitionUUID, Status: "done", Group: "g"}, broker.ErrInvalid},
		{"NotYourLease", broker.Ack{TransactionID: "a", PartitionID: m.PartitionUUID, LeaseID: broker.NewUUID(s.clock.Now()), Status: "completed", Group: "g"}, broker.ErrConflict},
		{"NotLeasedMessage", broker.Ack{TransactionID: "b", PartitionID: m.PartitionUUID, Status: "completed", Group: "g"}, broker.ErrConflict},
		{"OtherGroup", broker.Ack{TransactionID: "a", PartitionID: m.PartitionUUID, Status: "completed", Group: "other"}, broker.ErrConflict},
		{"UnknownMessage", broker.Ack{TransactionID: "zzz", PartitionID: m.PartitionUUID, Status: "completed", Group: "g"}, broker.ErrNotFound},
		{"UnknownPartition", broker.Ack{TransactionID: "a", PartitionID: "nope", Status: "completed", Group: "g"}, broker.ErrNotFound},
		{"NoPartitionNorLease", broker.Ack{TransactionID: "a", Status: "completed", Group: "g"}, broker.ErrInvalid},
	}
	for _, tc := range cases {
		if _, err := s.b.Ack(s.ctx, tc.ack); !errors.Is(err, tc.kind) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.kind)
		}
	}
	// Still leased and ackable by its owner.
	if r := s.ack(m, broker.AckCompleted, ""); !r.Success {
		t.Fatalf("owner's ack: %+v", r)
	}
	if _, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: "a", PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: "completed", Group: "g"}); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("second ack: %v, want conflict", err)
	}
	// An expired lease cannot be acked.
	_, res = s.popTxids("q", "g", 1)
	s.clock.Advance(10 * time.Second)
	if _, err := s.b.Ack(s.ctx, broker.Ack{TransactionID: "b", PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: "completed", Group: "g"}); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("ack after expiry: %v, want conflict", err)
	}
}

func testExtendLease(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"leaseTime": 10})
	s.push("q", "", "a")
	_, res := s.popTxids("q", "g", 1)
	s.clock.Advance(9 * time.Second)
	if _, err := s.b.ExtendLease(s.ctx, res.LeaseID, 30); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(20 * time.Second)
	if ids, _ := s.popTxids("q", "g", 1); ids != nil {
		t.Fatalf("extended lease was taken: %v", ids)
	}
	if r := s.ack(res.Messages[0], broker.AckCompleted, ""); !r.Success {
		t.Fatalf("ack: %+v", r)
	}
	if _, err := s.b.ExtendLease(s.ctx, res.LeaseID, 30); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("extend of an ended lease: %v", err)
	}
}

func testTransactionIsAllOrNothing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a")
	_, res := s.popTxids("q", "g", 1)
	m := res.Messages[0]
	ops := []broker.Operation{
		{Type: "push", Items: []broker.PushItem{{Queue: "out", Payload: []byte(`1`), TransactionID: "o1"}}},
		{Type: "ack", Ack: broker.Ack{TransactionID: "a", PartitionID: m.PartitionUUID, Status: "completed", Group: "g", LeaseID: "not-the-lease"}},
	}
	if _, err := s.b.Transaction(s.ctx, ops); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("err %v, want conflict", err)
	}
	if ids, _ := s.popTxids("out", "g", 1); ids != nil {
		t.Fatalf("rolled-back push is visible: %v", ids)
	}
	ops[1].Ack.LeaseID = m.LeaseID
	ops[1].Ack.Status = broker.AckDLQ
	ops[1].Ack.Error = "kept in a transaction"
	out, err := s.b.Transaction(s.ctx, ops)
	if err != nil || !out[1].Ack.DLQ {
		t.Fatalf("transaction: %+v %v", out, err)
	}
	if d := s.dead("q", "g"); len(d) != 1 || d[0].Error != "kept in a transaction" {
		t.Fatalf("dead letter error text: %+v", d)
	}
	if ids, _ := s.popTxids("out", "g", 1); !slices.Equal(ids, []string{"o1"}) {
		t.Fatalf("pushed in transaction: %v", ids)
	}
}

func testConfigureRejectsBadOptionsAndKeepsOthers(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 7})
	bad := []map[string]any{
		{"leaseTime": -1},
		{"retryLimit": "3"},
		{"retryDelay": 1.5},
		{"deadLetterQueue": "yes"},
		{"nope": 1},
	}
	for _, opts := range bad {
		if err := s.configureErr("q", opts); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%v: err %v, want ErrInvalid", opts, err)
		}
	}
	s.configure("q", map[string]any{"leaseTime": 60})
	q, err := s.b.Queue(s.ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	want := broker.DefaultOptions()
	want.RetryLimit, want.LeaseTime = 7, 60
	if q.Options != want {
		t.Fatalf("options %+v, want %+v", q.Options, want)
	}
}

// A waiting pop is woken when a retry delay ends, with no push to say so.
func testWaitingPopWakesWhenARetryDelayEnds(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryDelay": 200})
	s.push("q", "", "a")
	_, res := s.popTxids("q", "g", 1)
	s.ack(res.Messages[0], broker.AckFailed, "later")
	got := make(chan []string, 1)
	go func() {
		r, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", Wait: true, Timeout: 30 * time.Second})
		if err != nil {
			t.Error(err)
		}
		var ids []string
		for _, m := range r.Messages {
			ids = append(ids, m.TransactionID)
		}
		got <- ids
	}()
	s.clock.Advance(200 * time.Millisecond) // the delay is over; nobody pushes
	select {
	case ids := <-got:
		if !slices.Equal(ids, []string{"a"}) {
			t.Fatalf("woken pop got %v", ids)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting pop was not woken by the end of the retry delay")
	}
}
