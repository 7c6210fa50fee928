package broker_test

import (
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

// A breach says its numbers as the dashboard writes counts: with
// thousands separators (issue 30: "700001 dead letters (limit 10)").
func TestBreachSaysCountsWithSeparators(t *testing.T) {
	t.Parallel()
	l := broker.DefaultLimits()
	l.Depth = 12000
	bs := l.Check(broker.Health{Depth: 700001})
	if len(bs) != 1 || bs[0].Text != "700,001 dead letters (limit 12,000)" {
		t.Fatalf("breaches %+v, want 700,001 dead letters (limit 12,000)", bs)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", -1000: "-1,000", 12345: "12,345",
		700001: "700,001", -1234567: "-1,234,567", 9223372036854775807: "9,223,372,036,854,775,807"} {
		if got := broker.Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
