package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// replayAgain replays the group's only dead letter of q, and fails its
// copy again: one more replay along its chain.
func (s *bundle) replayAgain(queue, group string, o broker.ReplayOptions) broker.DeadLetter {
	s.t.Helper()
	dls := s.dead(queue, group)
	if len(dls) != 1 {
		s.t.Fatalf("%d dead letters, want 1", len(dls))
	}
	if _, err := s.b.ReplayWith(s.ctx, dls[0].MessageID(), o); err != nil {
		s.t.Fatalf("replay: %v", err)
	}
	s.fail(queue, group, 1, "again")
	return s.dead(queue, group)[0]
}

// replays is the dead letter's count against its cap, as its page reads it.
func (s *bundle) replays(d broker.DeadLetter) broker.ReplayCount {
	s.t.Helper()
	det, err := s.b.DeadLetter(s.ctx, d.MessageID(), d.Group)
	if err != nil {
		s.t.Fatalf("dead letter: %v", err)
	}
	return det.Replays
}

func (s *bundle) audits(action string) []broker.AuditEntry {
	s.t.Helper()
	es, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: action}, broker.Page{Limit: 100})
	if err != nil {
		s.t.Fatal(err)
	}
	return es
}

func testReplayCountAlongAChainOfThree(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a")
	s.fail("q", "g", 1, "first")
	d := s.dead("q", "g")[0]
	if c := s.replays(d); c != (broker.ReplayCount{Replays: 0, Max: broker.DefaultMaxReplays}) {
		t.Fatalf("original: %+v", c)
	}
	for i := 1; i <= 3; i++ {
		// Every other replay to its own group: the chain is the same.
		o := broker.ReplayOptions{Actor: "dev"}
		if i == 2 {
			o.Mode = broker.ReplayOwnGroup
		}
		d = s.replayAgain("q", "g", o)
		if c := s.replays(d); c.Replays != i || c.AtCap() {
			t.Fatalf("after %d replays: %+v", i, c)
		}
	}
}

func testReplayAtTheCapIsRefusedAndChangesNothing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"maxReplays": 2})
	s.push("q", "", "a")
	s.fail("q", "g", 1, "first")
	s.replayAgain("q", "g", broker.ReplayOptions{Actor: "dev"})
	d := s.replayAgain("q", "g", broker.ReplayOptions{Actor: "dev"})
	if c := s.replays(d); !c.AtCap() || c.Reason() != "replayed 2 times already (maxReplays 2)" {
		t.Fatalf("count %+v %q", c, c.Reason())
	}
	before, audits := s.stats("q", "g"), len(s.audits(broker.AuditReplay))
	for _, o := range []broker.ReplayOptions{{Actor: "dev"}, {Actor: "dev", Mode: broker.ReplayOwnGroup}, {Actor: "dev", Payload: []byte(`{"x":1}`)}} {
		_, err := s.b.ReplayWith(s.ctx, d.MessageID(), o)
		if !errors.Is(err, broker.ErrConflict) || !strings.Contains(err.Error(), "replayed 2 times already (maxReplays 2)") || !strings.Contains(err.Error(), "force") {
			t.Fatalf("replay at the cap: %v", err)
		}
	}
	if got := s.dead("q", "g"); len(got) != 1 || got[0].ID != d.ID {
		t.Fatalf("dead letters after a refused replay: %+v", got)
	}
	if ids, _ := s.popTxids("q", "g", 10); len(ids) != 0 {
		t.Fatalf("a refused replay pushed %v", ids)
	}
	if after := s.stats("q", "g"); after != before || len(s.audits(broker.AuditReplay)) != audits {
		t.Fatalf("stats %+v → %+v, audit %d → %d", before, after, audits, len(s.audits(broker.AuditReplay)))
	}
	// Queen's admin.retryMessage is refused the same way.
	if _, err := s.b.ReplayTransaction(s.ctx, d.PartitionKey, d.TransactionID, "dev"); !errors.Is(err, broker.ErrConflict) {
		t.Fatalf("replay by transaction at the cap: %v", err)
	}
}

func testForcedReplayPastTheCapIsAudited(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"maxReplays": 1})
	s.push("q", "", "a")
	s.fail("q", "g", 1, "first")
	d := s.replayAgain("q", "g", broker.ReplayOptions{Actor: "dev"})
	res, err := s.b.ReplayWith(s.ctx, d.MessageID(), broker.ReplayOptions{Actor: "ops", Force: true})
	if err != nil || res.Status != broker.StatusQueued {
		t.Fatalf("forced replay: %+v %v", res, err)
	}
	es := s.audits(broker.AuditReplay)
	if es[0].Actor != "ops" || !strings.Contains(es[0].Detail, "forced past the replay cap: replayed 1 time already (maxReplays 1)") {
		t.Fatalf("audit %+v", es[0])
	}
	if strings.Contains(es[1].Detail, "forced") {
		t.Fatalf("a replay below the cap audited as forced: %+v", es[1])
	}
	s.fail("q", "g", 1, "third")
	if c := s.replays(s.dead("q", "g")[0]); c.Replays != 2 || !c.AtCap() {
		t.Fatalf("after a forced replay: %+v", c)
	}
}

func testMaxReplaysZeroIsNoCap(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("q", map[string]any{"maxReplays": 0})
	s.push("q", "", "a")
	s.fail("q", "g", 1, "first")
	var d broker.DeadLetter
	for i := 0; i < broker.DefaultMaxReplays+2; i++ {
		d = s.replayAgain("q", "g", broker.ReplayOptions{Actor: "dev"})
	}
	if c := s.replays(d); c.AtCap() || c.Replays != broker.DefaultMaxReplays+2 || c.Max != 0 {
		t.Fatalf("no cap: %+v", c)
	}
}

// mixAtCap leaves q (maxReplays 1) with four dead letters in group g:
// the originals of b and d, and the copies of a and c, at the cap.
func (s *bundle) mixAtCap() (below, capped []string) {
	s.t.Helper()
	s.configure("q", map[string]any{"maxReplays": 1})
	s.push("q", "", "a", "b", "c", "d")
	s.fail("q", "g", 4, "first")
	for _, d := range s.dead("q", "g") {
		if d.TransactionID == "a" || d.TransactionID == "c" {
			if _, err := s.b.Replay(s.ctx, d.MessageID(), "dev"); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	s.fail("q", "g", 2, "again")
	for _, d := range s.dead("q", "g") {
		if d.IsReplay() {
			capped = append(capped, d.MessageID())
		} else {
			below = append(below, d.MessageID())
		}
	}
	if len(below) != 2 || len(capped) != 2 {
		s.t.Fatalf("mix %v %v", below, capped)
	}
	return below, capped
}

func (s *bundle) deadIDs(queue, group string) map[string]bool {
	out := map[string]bool{}
	for _, d := range s.dead(queue, group) {
		out[d.MessageID()] = true
	}
	return out
}

func testBulkReplayByIDsSkipsThoseAtTheCap(t *testing.T, harness Harness) {
	t.Parallel()
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprint("force=", force), func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			below, capped := s.mixAtCap()
			// Small chunks (a rate), the capped ones first and last.
			ids := []string{capped[0], below[0], below[1], capped[1]}
			j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Actor: "ops", Rate: 10, Force: force})
			if err != nil {
				t.Fatal(err)
			}
			if j, err = s.b.RunJob(s.ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			res := broker.BulkResultOf(j)
			left := s.deadIDs("q", "g")
			if !force {
				if res.Done != 2 || res.Skipped != 2 || res.Capped != 2 || len(left) != 2 || !left[capped[0]] || !left[capped[1]] {
					t.Fatalf("result %+v, left %v", res, left)
				}
				for _, e := range s.audits(broker.AuditReplay) {
					if strings.Contains(e.Detail, "forced") {
						t.Fatalf("audited as forced: %+v", e)
					}
				}
				return
			}
			if res.Done != 4 || res.Skipped != 0 || res.Capped != 2 || len(left) != 0 {
				t.Fatalf("forced: result %+v, left %v", res, left)
			}
			es := s.audits(broker.AuditReplay)
			if !strings.Contains(es[0].Detail, fmt.Sprintf("job #%d: forced past the replay cap: 2 messages replayed", j.ID)) || es[0].Count != 2 || es[0].Actor != "ops" {
				t.Fatalf("audit of the forced job %+v", es[0])
			}
			if !strings.Contains(es[1].Detail, "forced past the replay cap (maxReplays)") {
				t.Fatalf("the job's entry does not say it is forced: %+v", es[1])
			}
		})
	}
}

func testReplayJobByFilterSkipsThoseAtTheCap(t *testing.T, harness Harness) {
	t.Parallel()
	for _, tc := range []struct {
		force bool
		mode  string
	}{{false, ""}, {true, ""}, {false, broker.ReplayOwnGroup}} {
		t.Run(fmt.Sprintf("force=%v mode=%q", tc.force, tc.mode), func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			_, capped := s.mixAtCap()
			// A rate of 10 a second takes one dead letter a chunk: the
			// capped one at the top of the list must not hold the job.
			q := broker.DLQQuery{Queue: "q"}
			j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &q, Actor: "ops", Rate: 10, Force: tc.force, Mode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20 && j.State == broker.JobRunning; i++ {
				if j, err = s.b.StepJob(s.ctx, j.ID); err != nil {
					t.Fatal(err)
				}
			}
			if j.State != broker.JobDone {
				t.Fatalf("job %+v did not end", j)
			}
			res, left := broker.BulkResultOf(j), s.deadIDs("q", "g")
			if tc.force {
				if res.Done != 4 || res.Capped != 2 || len(left) != 0 {
					t.Fatalf("forced: %+v left %v", res, left)
				}
				if es := s.audits(broker.AuditReplay); !strings.Contains(es[0].Detail, "forced past the replay cap: 2 messages replayed") {
					t.Fatalf("audit %+v", es[0])
				}
				return
			}
			if res.Done != 2 || res.Skipped != 2 || res.Capped != 2 || len(left) != 2 || !left[capped[0]] || !left[capped[1]] {
				t.Fatalf("result %+v, left %v", res, left)
			}
		})
	}
}
