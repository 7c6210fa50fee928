package sqlcore

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// seqRange is the messages of a partition with seqs in (after, last].
func seqRange(after, last int64) []broker.Message {
	var out []broker.Message
	for s := after + 1; s <= last; s++ {
		out = append(out, broker.Message{Seq: s})
	}
	return out
}

// A Memo keeps memoRanges ranges of a partition, the newest, each found
// by any range within it; a range read again from the same cursor
// replaces what it covers; and all its ranges hold memoKept messages at
// most.
func TestMemoKeepsItsRangesWithinBounds(t *testing.T) {
	m := NewMemo()
	for i := range int64(memoRanges + 4) {
		m.read(1, 10*i, seqRange(10*i, 10*i+10))
	}
	if n := len(m.ranges[1]); n != memoRanges {
		t.Fatalf("%d ranges kept of partition 1, want %d", n, memoRanges)
	}
	if m.kept != 10*memoRanges {
		t.Fatalf("kept %d messages, want %d", m.kept, 10*memoRanges)
	}
	for i := range int64(memoRanges + 4) {
		got, ok := m.messageRange(1, 10*i+2, 10*i+7)
		if want := i >= 4; ok != want || (ok && (len(got) != 5 || got[0].Seq != 10*i+3)) {
			t.Fatalf("range %d: %v %v, want found %v", i, got, ok, want)
		}
	}
	if _, ok := m.messageRange(1, 195, 205); ok {
		t.Fatal("a range across two kept ones was found in one")
	}
	// Read again from a cursor with more messages: it replaces the one
	// it covers.
	m.read(1, 190, seqRange(190, 230))
	if n := len(m.ranges[1]); n != memoRanges {
		t.Fatalf("%d ranges kept after a covering read, want %d", n, memoRanges)
	}
	if got, ok := m.messageRange(1, 195, 225); !ok || len(got) != 30 {
		t.Fatalf("the covering read: %d messages, %v", len(got), ok)
	}
	for p := int64(2); p < 100; p++ {
		m.read(p, 0, seqRange(0, memoMessages))
		if m.kept > memoKept {
			t.Fatalf("after partition %d: %d messages kept, more than %d", p, m.kept, memoKept)
		}
	}
	if _, ok := m.messageRange(99, 0, memoMessages); !ok {
		t.Fatal("the newest range is not kept")
	}
	m.Clear()
	if m.kept != 0 || len(m.ranges) != 0 {
		t.Fatalf("after Clear: %d messages in %d partitions", m.kept, len(m.ranges))
	}
}
