package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A group completed a message when its cursor is past it and it keeps no
// dead letter of it; one still on it, or that gave up on it, did not.
func TestCompletedByNamesTheGroupsPastTheMessageWithoutADeadLetter(t *testing.T) {
	s := broker.MessageState{Groups: []broker.GroupState{
		{Name: "billing", Consumed: true},
		{Name: "audit", Consumed: true, DeadLetter: true},
		{Name: "shipping", LeaseUntil: time.Unix(100, 0)},
		{Name: "search"},
		{Name: "stats", Consumed: true},
	}}
	if got, want := s.CompletedBy(), []string{"billing", "stats"}; !slices.Equal(got, want) {
		t.Fatalf("CompletedBy = %q, want %q", got, want)
	}
	if got := (broker.MessageState{}).CompletedBy(); got != nil {
		t.Fatalf("CompletedBy of no groups = %q, want none", got)
	}
}
