package storetest

import (
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The history sweep keeps the lineage of a copy that is still a dead
// letter, however old: the replay cap counts along it, so a copy that
// sits in the dead letters past the history's retention is not taken for
// an original.
func testReplayCountOutlivesTheHistorySweep(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a")
	s.fail("q", "g", 1, "first")
	o := broker.ReplayOptions{Actor: "dev"}
	s.replayAgain("q", "g", o)
	d := s.replayAgain("q", "g", o)
	if c := s.replays(d); c.Replays != 2 {
		t.Fatalf("before the sweep: %+v", c)
	}
	s.clock.Advance(broker.HistoryRetention + 24*time.Hour)
	if _, err := s.b.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	if c := s.replays(d); c.Replays != 2 {
		t.Fatalf("after the history sweep: %+v, want the 2 replays still counted", c)
	}
}
