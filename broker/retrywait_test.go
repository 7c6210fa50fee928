package broker_test

import (
	"encoding/json"
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

// The four options of seed 2's advice are stored and checked: a bad value
// is refused and changes nothing.
func TestBackoffReplayAndArchiveOptionsAreChecked(t *testing.T) {
	t.Parallel()
	s := setup(t)
	raw := func(js string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	q, err := s.b.Configure(s.ctx, "q", raw(`{"retryBackoff":2.5,"retryDelayMax":60000,"maxReplays":0,"deadLetterArchive":true}`), "test")
	if err != nil {
		t.Fatal(err)
	}
	o := q.Options
	if o.RetryBackoff != 2.5 || o.RetryDelayMax != 60000 || o.MaxReplays != 0 || !o.DeadLetterArchive {
		t.Fatalf("options %+v", o)
	}
	again, err := s.b.Queue(s.ctx, "q")
	if err != nil || again.Options != o {
		t.Fatalf("read back %+v, %v; want %+v", again.Options, err, o)
	}
	for _, bad := range []string{`{"retryBackoff":0.5}`, `{"retryBackoff":"2"}`, `{"retryDelayMax":-1}`, `{"maxReplays":1.5}`, `{"deadLetterArchive":1}`} {
		if _, err := s.b.Configure(s.ctx, "q", raw(bad), "test"); err == nil {
			t.Errorf("configure %s: accepted", bad)
		}
	}
	if again, _ := s.b.Queue(s.ctx, "q"); again.Options != o {
		t.Errorf("a refused configure changed the options: %+v", again.Options)
	}
}
