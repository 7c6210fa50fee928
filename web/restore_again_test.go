package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// restoreAgainFixture: message a of queue q dead-lettered by billing and
// audit, both deleted (by carol); then billing reads it again (a seek to
// the beginning) and fails it again: its dead letter is back, with the
// second error. It returns the message's id.
func restoreAgainFixture(t *testing.T) (*bundle, string) {
	t.Helper()
	s := setup(t)
	s.configure("q", `{"retryLimit":0,"retryDelay":0}`)
	if _, err := s.broker.Push(s.ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "a", Payload: json.RawMessage(`{"n":1}`)}}); err != nil {
		t.Fatal(err)
	}
	id := s.failAs("billing", broker.AckFailed, "first failure").ID()
	s.failAs("audit", broker.AckFailed, "audit failure")
	if n, err := s.broker.Delete(s.ctx, id, "", "user:carol"); err != nil || n != 2 {
		t.Fatalf("delete: %d %v", n, err)
	}
	s.call("POST", "/api/v1/consumer-groups/billing/queues/q/seek", `{"timestamp":"1970-01-01T00:00:00Z"}`).want(http.StatusOK)
	s.failAs("billing", broker.AckFailed, "second failure")
	return s, id
}

// errorsByGroup is the dead letters of queue q: each group's error text.
func (s *bundle) errorsByGroup() map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for _, d := range s.deadLetters("queue=q").Messages {
		out[d.ConsumerGroup] = d.ErrorMessage
	}
	return out
}

// A restore of a message whose dead letter in one group was deleted, then
// filed again and deleted again: that group's latest is restored, the
// older deletion is skipped and said so, the other groups' restored; no
// 500 on the (message, group) that can hold one dead letter only.
func TestRestoreAfterTheDeadLetterCameBackAndWasDeletedAgain(t *testing.T) {
	t.Parallel()
	s, id := restoreAgainFixture(t)
	if n, err := s.broker.Delete(s.ctx, id, "billing", "user:carol"); err != nil || n != 1 {
		t.Fatalf("second delete: %d %v", n, err)
	}
	op, _ := s.loggedIn(broker.RoleOperator)
	r := hx(op, "/queues/q/dead-letters/"+id+"/restore", nil).want(http.StatusOK)
	flash := r.testid("flash")
	for _, want := range []string{"Restored", "(2 groups)", "1 not restored", "billing", "deleted again later"} {
		if !strings.Contains(flash, want) {
			t.Errorf("flash %q does not say %q", flash, want)
		}
	}
	if got := s.errorsByGroup(); len(got) != 2 || got["billing"] != "second failure" || got["audit"] != "audit failure" {
		t.Fatalf("dead letters after the restore: %v", got)
	}
	// Sent again: the older deletion is all that is left, and billing has
	// its dead letter: refused, saying why.
	r = hx(op, "/queues/q/dead-letters/"+id+"/restore", nil).want(http.StatusConflict)
	if flash := r.testid("flash"); !strings.Contains(flash, "billing") || !strings.Contains(flash, "a dead letter again") {
		t.Errorf("second restore: flash %q", flash)
	}
}

// A restore of a message whose dead letter in one group is there again
// (filed anew after the delete): that group's deletion is skipped, said
// so; the other groups' restored. When only that one was asked for, the
// restore is refused with 409 saying why, nothing changed.
func TestRestoreWhenTheDeadLetterIsThereAgain(t *testing.T) {
	t.Parallel()
	s, id := restoreAgainFixture(t)
	op, _ := s.loggedIn(broker.RoleOperator)
	hx(op, "/queues/q/dead-letters/"+id+"/restore?group=billing", nil).want(http.StatusConflict)
	if got := s.errorsByGroup(); len(got) != 1 || got["billing"] != "second failure" {
		t.Fatalf("dead letters after the refused restore: %v", got)
	}
	if _, err := s.broker.Restore(s.ctx, id, "billing", "user:x"); err == nil || !strings.Contains(err.Error(), "a dead letter again") {
		t.Fatalf("restore of billing's: %v, want a refusal saying why", err)
	}
	r := hx(op, "/queues/q/dead-letters/"+id+"/restore", nil).want(http.StatusOK)
	flash := r.testid("flash")
	for _, want := range []string{"Restored", "1 not restored", "billing", "a dead letter again"} {
		if !strings.Contains(flash, want) {
			t.Errorf("flash %q does not say %q", flash, want)
		}
	}
	if got := s.errorsByGroup(); len(got) != 2 || got["billing"] != "second failure" || got["audit"] != "audit failure" {
		t.Fatalf("dead letters after the restore: %v", got)
	}
}
