package web_test

import (
	"net/http"
	"testing"
	"time"
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

// Queen's PHP client renews with post("/lease/:id/extend", []): PHP
// encodes the empty array as []; it extends by 60 s as an empty body
// does. The Go client reads newExpiresAt (JS, Python and PHP read it
// too), older callers leaseExpiresAt.
func TestQueenLeaseExtendWithEmptyArrayAndNewExpiresAt(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	m := s.pop("q", "").Messages[0]
	for i, body := range []string{`[]`, ` [ ] `, ``, `{}`} {
		s.clock.Advance(time.Second)
		want := s.clock.Now().Add(60 * time.Second).UTC().Format("2006-01-02T15:04:05.000Z")
		var r struct {
			LeaseID        string `json:"leaseId"`
			LeaseExpiresAt string `json:"leaseExpiresAt"`
			NewExpiresAt   string `json:"newExpiresAt"`
		}
		s.call("POST", "/api/v1/lease/"+*m.LeaseID+"/extend", body).want(http.StatusOK).decode(&r)
		if r.LeaseExpiresAt != want || r.NewExpiresAt != want || r.LeaseID != *m.LeaseID {
			t.Fatalf("extend %d %q: %+v, want both %s", i, body, r, want)
		}
	}
	// An array with something in it is not "no options".
	s.call("POST", "/api/v1/lease/"+*m.LeaseID+"/extend", `[30]`).wantError(http.StatusBadRequest)
}
