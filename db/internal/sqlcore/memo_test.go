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

// checkKept fails unless m.kept counts the messages of m's ranges.
func checkKept(t *testing.T, m *Memo) {
	t.Helper()
	n := 0
	for _, rs := range m.ranges {
		for _, r := range rs {
			n += len(r.msgs)
		}
	}
	if n != m.kept {
		t.Fatalf("kept says %d messages, the ranges hold %d", m.kept, n)
	}
}

// A Memo keeps memoRanges ranges of a partition, the newest, each found
// by any range within it; a range read again from the same cursor
// replaces what it covers; and all its ranges hold memoKept messages at
// most.
func TestMemoKeepsItsRangesWithinBounds(t *testing.T) {
	t.Parallel()
	m := NewMemo()
	for i := range int64(memoRanges + 4) {
		m.read(1, 10*i, seqRange(10*i, 10*i+10))
		checkKept(t, m)
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
	checkKept(t, m)
	if n := len(m.ranges[1]); n != memoRanges {
		t.Fatalf("%d ranges kept after a covering read, want %d", n, memoRanges)
	}
	if got, ok := m.messageRange(1, 195, 225); !ok || len(got) != 30 {
		t.Fatalf("the covering read: %d messages, %v", len(got), ok)
	}
	for p := int64(2); p < 100; p++ {
		m.read(p, 0, seqRange(0, memoMessages))
		checkKept(t, m)
		if m.kept > memoKept {
			t.Fatalf("after partition %d: %d messages kept, more than %d", p, m.kept, memoKept)
		}
	}
	if _, ok := m.messageRange(99, 0, memoMessages); !ok {
		t.Fatal("the newest range is not kept")
	}
	// A read of more than memoMessages is not kept, and the partition's
	// ranges go with it.
	m.read(99, memoMessages, seqRange(memoMessages, 3*memoMessages))
	checkKept(t, m)
	if _, ok := m.messageRange(99, 0, memoMessages); ok || len(m.ranges[99]) != 0 {
		t.Fatal("partition 99's ranges are kept after a read too long to keep")
	}
	// Past memoLimit partitions, the ranges start over.
	m.Clear()
	for p := int64(1); p <= memoLimit+1; p++ {
		m.read(p, 0, seqRange(0, 1))
		checkKept(t, m)
	}
	if len(m.ranges) != 1 {
		t.Fatalf("%d partitions kept after %d, want 1 (started over)", len(m.ranges), memoLimit+1)
	}
	m.Clear()
	if m.kept != 0 || len(m.ranges) != 0 {
		t.Fatalf("after Clear: %d messages in %d partitions", m.kept, len(m.ranges))
	}
}
