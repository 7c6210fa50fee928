package broker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

func TestLimitsCheck(t *testing.T) {
	t.Parallel()
	l := broker.DefaultLimits()
	cases := []struct {
		name string
		h    broker.Health
		want []string
	}{
		{"Healthy", broker.Health{Depth: 10, Oldest: 4 * time.Hour, Acks: 100, Failed: 5, ReplayEnds: 10, ReplayOK: 5}, nil},
		{"Deep", broker.Health{Depth: 11}, []string{"depth"}},
		{"Old", broker.Health{Depth: 1, Oldest: 4*time.Hour + time.Minute}, []string{"oldest"}},
		{"Failing", broker.Health{Acks: 100, Failed: 6}, []string{"failures"}},
		{"TooFewAcksToJudge", broker.Health{Acks: 10, Failed: 10}, nil},
		{"ReplaysFailing", broker.Health{ReplayEnds: 10, ReplayOK: 4}, []string{"replays"}},
		{"Everything", broker.Health{Depth: 50, Oldest: 5 * time.Hour, Acks: 100, Failed: 50, ReplayEnds: 10}, []string{"depth", "oldest", "failures", "replays"}},
	}
	for _, tc := range cases {
		var got []string
		for _, b := range l.Check(tc.h) {
			got = append(got, b.Metric)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

func TestThresholdsAreStoredWithOverrides(t *testing.T) {
	t.Parallel()
	s := setup(t)
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
