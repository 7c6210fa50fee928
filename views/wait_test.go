package views_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/views"
)

func TestWait(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                                "0 ms",
		200 * time.Millisecond:           "200 ms",
		time.Second:                      "1 s",
		1500 * time.Millisecond:          "1.5 s",
		1234 * time.Millisecond:          "1.234 s",
		59 * time.Second:                 "59 s",
		time.Minute:                      "1 min",
		150 * time.Second:                "2 min 30 s",
		5 * time.Minute:                  "5 min",
		time.Hour:                        "1 h",
		65 * time.Minute:                 "1 h 5 min",
		24 * time.Hour:                   "24 h",
		time.Second + time.Microsecond/2: "1 s",
	} {
		if got := views.Wait(d); got != want {
			t.Errorf("Wait(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	s := time.Second
	grow := func(n int, first, cap time.Duration) []time.Duration {
		var out []time.Duration
		for w := first; len(out) < n; w = min(2*w, cap) {
			out = append(out, w)
		}
		return out
	}
	for _, c := range []struct {
		waits []time.Duration
		keep  bool
		want  string
	}{
		{[]time.Duration{s, 2 * s, 4 * s}, true, "1 s, 2 s, 4 s, then the dead letters"},
		{[]time.Duration{s, s, s}, true, "1 s, 1 s, 1 s, then the dead letters"},
		{[]time.Duration{s, 2 * s, 4 * s}, false, "1 s, 2 s, 4 s, then dropped"},
		{nil, true, "no retry: the first failure goes to the dead letters"},
		{nil, false, "no retry: the first failure is dropped"},
		{grow(1000, s, 5*time.Minute), true, "1 s, 2 s, 4 s, 8 s, 16 s, 32 s, …, 4 min 16 s, 5 min (991 times), then the dead letters"},
		{slices.Repeat([]time.Duration{s}, 10), true, "1 s (10 times), then the dead letters"},
	} {
		if got := views.RetrySchedule(c.waits, c.keep); got != c.want {
			t.Errorf("RetrySchedule(%v, %v) = %q, want %q", c.waits, c.keep, got, c.want)
		}
	}
}
