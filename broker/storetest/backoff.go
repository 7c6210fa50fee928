package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// popPart pops up to batch messages of one partition for group and
// returns their transactionIds.
func (s *bundle) popPart(queue, partition, group string, batch int) ([]string, broker.PopResult) {
	s.t.Helper()
	res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: queue, Partition: partition, Group: group, Batch: batch})
	if err != nil {
		s.t.Fatalf("pop %s/%s: %v", queue, partition, err)
	}
	var ids []string
	for _, m := range res.Messages {
		ids = append(ids, m.TransactionID)
	}
	return ids, res
}

// waitsOf are the recorded waits of a history's attempts.
func waitsOf(t *testing.T, as []broker.Attempt) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, a := range as {
		if !a.WaitKnown {
			t.Errorf("attempt %d: wait not recorded", a.Attempt)
		}
		out = append(out, a.Wait)
	}
	return out
}

// failThroughSchedule fails the head of queue/partition for group once
// per wait, checking that each retry comes back no earlier than its wait
// (a millisecond before, the partition gives the group nothing, not even
// what is behind it) and at once when the wait is over; then it fails it
// a last time. waits[0] is the wait before retry from. It returns the
// last ack's result.
func (s *bundle) failThroughSchedule(queue, partition, group, txid string, from int, waits []time.Duration) broker.AckResult {
	s.t.Helper()
	ids, res := s.popPart(queue, partition, group, 1)
	if len(ids) == 0 || ids[0] != txid {
		s.t.Fatalf("first delivery: got %v, want %s first", ids, txid)
	}
	for k, w := range waits {
		s.ack(res.Messages[0], broker.AckFailed, "transient")
		s.clock.Advance(w - time.Millisecond)
		if ids, _ := s.popPart(queue, partition, group, 10); len(ids) != 0 {
			s.t.Fatalf("retry %d: %v before its wait of %v was over (got %v)", from+k, w-time.Millisecond, w, ids)
		}
		s.clock.Advance(time.Millisecond)
		ids, res = s.popPart(queue, partition, group, 1)
		if len(ids) == 0 || ids[0] != txid {
			s.t.Fatalf("retry %d after its wait of %v: got %v, want %s first", from+k, w, ids, txid)
		}
		if res.Messages[0].RetryCount != from+k {
			s.t.Fatalf("retry %d: delivered with retryCount %d", from+k, res.Messages[0].RetryCount)
		}
	}
	return s.ack(res.Messages[0], broker.AckFailed, "for good")
}

// The wait before retry k is retryDelay × retryBackoff^(k-1), at most
// retryDelayMax: each retry comes back no earlier than its wait, and
// before what is behind it in its partition; the cap holds; another
// partition of the group, and another group of the partition, are
// untouched; the dead letter's history keeps each wait.
func testBackoffWaitsGrowUpToTheCap(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 5, "retryDelay": 1000, "retryBackoff": 2, "retryDelayMax": 5000})
	s.push("q", "p1", "a", "b")
	s.push("q", "p2", "c")
	waits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}

	// Fail a once, then look at the others during its wait.
	ids, res := s.popPart("q", "p1", "g", 1)
	if !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("first pop: %v", ids)
	}
	s.ack(res.Messages[0], broker.AckFailed, "transient")
	if ids, _ := s.popPart("q", "p2", "g", 10); !slices.Equal(ids, []string{"c"}) {
		t.Fatalf("another partition of g during a's wait: got %v, want [c]", ids)
	}
	if ids, _ := s.popPart("q", "p1", "other", 10); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("another group during g's wait: got %v, want [a b]", ids)
	}
	s.clock.Advance(waits[0])
	// The rest of the schedule from retry 1 on.
	ids, res = s.popPart("q", "p1", "g", 1)
	if !slices.Equal(ids, []string{"a"}) || res.Messages[0].RetryCount != 1 {
		t.Fatalf("retry 1: %v", ids)
	}
	s.ack(res.Messages[0], broker.AckRetry, "") // back at once, no retry spent
	if r := s.failThroughSchedule("q", "p1", "g", "a", 2, waits[1:]); !r.DLQ {
		t.Fatalf("after %d retries: %+v, want a dead letter", len(waits), r)
	}
	if ids, _ := s.popPart("q", "p1", "g", 10); !slices.Equal(ids, []string{"b"}) {
		t.Fatalf("after a's dead letter: got %v, want [b]", ids)
	}
	d := s.dead("q", "g")
	if len(d) != 1 || d[0].RetryCount != 5 {
		t.Fatalf("dead letters %+v", d)
	}
	h := s.history(d[0].MessageID(), "g")
	if got := waitsOf(t, h.Attempts); !slices.Equal(got, waits) {
		t.Errorf("history's waits %v, want %v", got, waits)
	}
}

// Defaults (retryBackoff 1) keep the fixed delay: every retry waits
// retryDelay, whatever retryDelayMax says; a retryDelay above the cap is
// waited as it is, backoff or not.
func testBackoffDefaultsAndADelayAboveTheCap(t *testing.T, harness Harness) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		opts  map[string]any
		waits []time.Duration
	}{
		{"defaults", map[string]any{}, []time.Duration{time.Second, time.Second, time.Second}},
		{"fixed delay, low cap", map[string]any{"retryDelay": 3000, "retryDelayMax": 1000}, []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}},
		{"backoff, delay above the cap", map[string]any{"retryDelay": 3000, "retryBackoff": 3, "retryDelayMax": 1000}, []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}},
		{"backoff 1.5", map[string]any{"retryDelay": 200, "retryBackoff": 1.5}, []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 450 * time.Millisecond}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.configure("q", c.opts)
			s.push("q", "p", "a", "b")
			if r := s.failThroughSchedule("q", "p", "g", "a", 1, c.waits); !r.DLQ {
				t.Fatalf("after 3 retries: %+v", r)
			}
			d := s.dead("q", "g")
			if got := waitsOf(t, s.history(d[0].MessageID(), "g").Attempts); !slices.Equal(got, c.waits) {
				t.Errorf("history's waits %v, want %v", got, c.waits)
			}
		})
	}
}

// Each group has its own schedule: a group whose message is at its third
// retry waits 4 s while another, at its first, waits 1 s on the same
// partition.
func testBackoffSchedulesArePerGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryDelay": 1000, "retryBackoff": 2})
	s.push("q", "p", "a")
	_, res := s.popPart("q", "p", "g1", 1)
	s.ack(res.Messages[0], broker.AckFailed, "first") // g1 waits 1 s
	s.clock.Advance(time.Second)
	_, res = s.popPart("q", "p", "g1", 1)
	s.ack(res.Messages[0], broker.AckFailed, "again") // g1 waits 2 s now
	_, res = s.popPart("q", "p", "g2", 1)
	s.ack(res.Messages[0], broker.AckFailed, "first") // g2 waits 1 s
	s.clock.Advance(time.Second)
	if ids, _ := s.popPart("q", "p", "g1", 1); len(ids) != 0 {
		t.Fatalf("g1 after 1 s of its 2 s wait: %v", ids)
	}
	if ids, _ := s.popPart("q", "p", "g2", 1); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("g2 after its 1 s wait: %v", ids)
	}
	s.clock.Advance(time.Second)
	if ids, _ := s.popPart("q", "p", "g1", 1); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("g1 after its 2 s wait: %v", ids)
	}
}

// The wait is the one the options give at the failed ack, and the
// history keeps it: options changed between attempts do not rewrite the
// waits a message had.
func testBackoffHistoryKeepsTheWaitsAsTheyWere(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"retryLimit": 2, "retryDelay": 1000})
	s.push("q", "p", "a")
	_, res := s.popPart("q", "p", "g", 1)
	s.ack(res.Messages[0], broker.AckFailed, "one") // waits 1 s (fixed)
	s.configure("q", map[string]any{"retryDelay": 2000, "retryBackoff": 3})
	s.clock.Advance(time.Second)
	_, res = s.popPart("q", "p", "g", 1)
	if len(res.Messages) != 1 {
		t.Fatal("retry 1 not back after the wait it was given")
	}
	s.ack(res.Messages[0], broker.AckFailed, "two") // retry 2: 2 s × 3 = 6 s
	s.clock.Advance(6*time.Second - time.Millisecond)
	if ids, _ := s.popPart("q", "p", "g", 1); len(ids) != 0 {
		t.Fatalf("retry 2 before its 6 s: %v", ids)
	}
	s.clock.Advance(time.Millisecond)
	_, res = s.popPart("q", "p", "g", 1)
	s.ack(res.Messages[0], broker.AckFailed, "three")
	d := s.dead("q", "g")
	if got, want := waitsOf(t, s.history(d[0].MessageID(), "g").Attempts), []time.Duration{time.Second, 6 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("history's waits %v, want %v (as given at each ack)", got, want)
	}
}
