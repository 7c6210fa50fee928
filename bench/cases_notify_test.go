package main

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// F3N's many-groups variants need a distinct error group for every
// failing message: the words letters makes must survive the fingerprint,
// which masks numbers.
func TestLettersMakeDistinctFingerprints(t *testing.T) {
	seen := map[string]int{}
	for i := range 5_000 {
		fp := broker.Fingerprint("boom kind-" + letters(i))
		if j, ok := seen[fp]; ok {
			t.Fatalf("messages %d and %d share the fingerprint %q", j, i, fp)
		}
		seen[fp] = i
	}
}
