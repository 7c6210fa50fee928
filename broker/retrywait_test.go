package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The wait before retry k is retryDelay × retryBackoff^(k-1), at most
// retryDelayMax; the cap bounds the growth, never a fixed delay.
func TestRetryWait(t *testing.T) {
	t.Parallel()
	o := broker.DefaultOptions()
	for k := 1; k <= 5; k++ {
		if w := o.RetryWait(k); w != time.Second {
			t.Errorf("defaults: wait before retry %d = %v, want the fixed 1s", k, w)
		}
	}
	o.RetryBackoff, o.RetryDelayMax = 2, 5000
	var got []time.Duration
	for k := 1; k <= 5; k++ {
		got = append(got, o.RetryWait(k))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("backoff 2 capped at 5 s: waits %v, want %v", got, want)
	}
	o.RetryBackoff, o.RetryDelay, o.RetryDelayMax = 1, 600000, 300000
	if w := o.RetryWait(3); w != 10*time.Minute {
		t.Errorf("a fixed delay above the cap: %v, want it as it is (10m)", w)
	}
	o.RetryBackoff, o.RetryDelay = 1000, 0
	if w := o.RetryWait(200); w != 0 {
		t.Errorf("no delay, a huge power: %v, want 0", w)
	}
	o.RetryBackoff, o.RetryDelay, o.RetryDelayMax = 1000, 1000, 86400000
	if w := o.RetryWait(1000); w != 24*time.Hour {
		t.Errorf("a huge power: %v, want the cap", w)
	}
}
