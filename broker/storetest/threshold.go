package storetest

import (
	"errors"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func testThresholdsAreStoredWithOverrides(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	th, err := s.b.Thresholds(s.ctx)
	if err != nil || th.Default != broker.DefaultLimits() || th.For("orders") != broker.DefaultLimits() {
		t.Fatalf("defaults %+v %v", th, err)
	}
	strict := broker.DefaultLimits()
	strict.Depth = 0
	th.Queues = map[string]broker.Limits{"payments": strict}
	if err := s.b.SetThresholds(s.ctx, th, "admin"); err != nil {
		t.Fatal(err)
	}
	got, err := s.b.Thresholds(s.ctx)
	if err != nil || got.For("payments").Depth != 0 || got.For("orders").Depth != 10 {
		t.Fatalf("stored %+v %v", got, err)
	}
	bad := got
	bad.Default.FailurePct = 120
	if err := s.b.SetThresholds(s.ctx, bad, "admin"); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("bad limits: %v", err)
	}
	if again, _ := s.b.Thresholds(s.ctx); again.Default.FailurePct != 5 {
		t.Fatal("a refused change was stored")
	}
}
