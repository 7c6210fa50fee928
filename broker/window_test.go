package broker_test

import (
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Window reads windowBuffer from the kept options whatever else they
// hold, as configure writes them and otherwise.
func TestOptionsWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kept string
		want time.Duration
	}{
		{"", 0},
		{`{"maxSize":0}`, 0},
		{`{"windowBuffer":0}`, 0},
		{`{"windowBuffer":7}`, 7 * time.Second},
		{`{"encryptionEnabled":false,"priority":-3,"windowBuffer":30}`, 30 * time.Second},
		{`{"windowBuffer":12,"zz":1}`, 12 * time.Second},
		{`{"windowBuffer": 4}`, 4 * time.Second},
		{`{"windowBuffer":-0}`, 0},
		{`{"windowBuffer":2147483647}`, 2147483647 * time.Second},
		{`{"windowBuffer":99999999999}`, 0}, // out of range: none
	} {
		o := broker.Options{Kept: broker.KeptOptions(tc.kept)}
		if got := o.Window(); got != tc.want {
			t.Errorf("%s: window %v, want %v", tc.kept, got, tc.want)
		}
	}
}
