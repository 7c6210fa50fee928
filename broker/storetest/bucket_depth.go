package storetest

import (
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Counts that waited in memory (StatsDelay) and reach their bucket after
// writes that moved the depth since their time leave that bucket's
// depth and oldest dead letter as their time had them: a write beside
// other processes on PostgreSQL takes no waiting counts, so Run's flush
// brings them later, with the depth of now. A change of dead letters
// sets the depth of its bucket; a bucket that counts alone make takes
// the depth of now.
func testLateCountsKeepTheirBucketsDepth(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("orders", map[string]any{})
	then := s.clock.Now().Truncate(time.Hour).Add(-3 * time.Hour)
	later := then.Add(90 * time.Minute)
	add := func(d broker.Stats, at time.Time) {
		t.Helper()
		if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			q, err := tx.QueueByName(s.ctx, "orders")
			if err != nil {
				return err
			}
			g, err := tx.GroupID(s.ctx, "billing", true)
			if err != nil {
				return err
			}
			return tx.AddStats(s.ctx, q.ID, g, d, at)
		}); err != nil {
			t.Fatal(err)
		}
	}
	add(broker.Stats{Depth: 8, DeadLettered: 8}, then)
	add(broker.Stats{Depth: 6, DeadLettered: 6}, later)
	add(broker.Stats{Completed: 4}, then)                      // waited in memory since then
	add(broker.Stats{Completed: 2}, later.Add(15*time.Minute)) // a bucket of its own: the depth of now
	series, err := s.b.History(s.ctx, broker.HistoryQuery{Queue: "orders", From: then, To: then.Add(2 * time.Hour), Step: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 {
		t.Fatalf("%d series, want orders/billing's", len(series))
	}
	at := func(when time.Time) broker.Bucket {
		t.Helper()
		for _, p := range series[0].Points {
			if p.At.Equal(when) {
				return p
			}
		}
		t.Fatalf("no point at %s in %+v", when, series[0].Points)
		return broker.Bucket{}
	}
	if p := at(then); p.Depth != 8 || p.Completed != 4 || p.DeadLettered != 8 {
		t.Errorf("then: depth %d, completed %d, dead-lettered %d; want 8, 4 and 8 (the late counts must not bring the depth of now)", p.Depth, p.Completed, p.DeadLettered)
	}
	if p := at(later); p.Depth != 14 {
		t.Errorf("later: depth %d, want 14", p.Depth)
	}
	if p := at(later.Add(15 * time.Minute)); p.Depth != 14 || p.Completed != 2 {
		t.Errorf("the bucket counts alone made: depth %d, completed %d; want 14 and 2", p.Depth, p.Completed)
	}
}
