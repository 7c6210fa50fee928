package web_test

import (
	"net/http"
	"testing"
)

// The newest wire shapes of Queen MQ's clients and server (issue 28),
// against the real server; storage is touched on both stores
// (LAZARUS_TEST_STORE=postgres).

// Queen's server answers an empty items list at once with an empty
// list (push.cpp: "Handle empty push immediately"): nothing is made.
func TestQueenEmptyPushAnswers201EmptyList(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r := s.call("POST", "/api/v1/push", `{"items": []}`).want(http.StatusCreated)
	if string(r.body) != `[]` {
		t.Fatalf("body %s, want []", r.body)
	}
	var l struct {
		Queues []any `json:"queues"`
	}
	s.call("GET", "/api/v1/resources/queues", "").want(http.StatusOK).decode(&l)
	if len(l.Queues) != 0 {
		t.Fatalf("an empty push made queues: %v", l.Queues)
	}
	// No items at all is still a mistake.
	s.call("POST", "/api/v1/push", `{}`).wantError(http.StatusBadRequest, "items")
}
