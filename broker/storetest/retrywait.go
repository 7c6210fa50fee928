package storetest

import (
	"encoding/json"
	"testing"
)

// The four options of seed 2's advice are stored and checked: a bad value
// is refused and changes nothing.
func testBackoffReplayAndArchiveOptionsAreChecked(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
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
