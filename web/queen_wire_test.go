package web_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
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

// Queen's configure_queue_v1 takes a null option as its default
// (COALESCE), and sets every option it is not given back to its default.
// Lazarus keeps what a configure does not name unless it is asked to
// replace ("mode":"replace"); a null puts one option back either way.
func TestQueenConfigureReplaceAndNullMeanDefaults(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var c queenConfigured
	s.call("POST", "/api/v1/configure", `{"queue":"q","namespace":"billing","task":"send","options":{"leaseTime":30,"retryLimit":9,"deadLetterQueue":false,"priority":4,"ttl":60}}`).
		want(http.StatusOK).decode(&c)
	// null: back to the default, the others kept; a kept option sent as
	// null is no longer kept (nothing to report).
	c = queenConfigured{}
	s.call("POST", "/api/v1/configure", `{"queue":"q","options":{"leaseTime":null,"deadLetterQueue":null,"priority":null}}`).want(http.StatusOK).decode(&c)
	for name, want := range map[string]string{"leaseTime": "300", "deadLetterQueue": "true", "retryLimit": "9", "ttl": "60"} {
		if got := string(c.Options[name]); got != want {
			t.Errorf("after nulls: options.%s = %s, want %s", name, got, want)
		}
	}
	if _, ok := c.Options["priority"]; ok || !slices.Equal(c.NotEnforced, []string{"ttl"}) {
		t.Errorf("after nulls: priority %s, notEnforced %v", c.Options["priority"], c.NotEnforced)
	}
	if c.Namespace == nil || *c.Namespace != "billing" {
		t.Errorf("after nulls: namespace %v", c.Namespace)
	}
	// replace: what is not named goes back to its default, the labels too.
	s.call("POST", "/api/v1/configure", `{"queue":"q","mode":"replace","options":{"retryDelay":5}}`).want(http.StatusOK).decode(&c)
	var d struct {
		Options     map[string]json.RawMessage `json:"options"`
		NotEnforced []string                   `json:"notEnforced"`
		Namespace   *string                    `json:"namespace"`
		Task        *string                    `json:"task"`
	}
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&d)
	defaults, _ := json.Marshal(broker.DefaultOptions())
	var want map[string]json.RawMessage
	if err := json.Unmarshal(defaults, &want); err != nil {
		t.Fatal(err)
	}
	want["retryDelay"] = json.RawMessage("5")
	if len(d.Options) != len(want) || len(d.NotEnforced) != 0 || d.Namespace != nil || d.Task != nil {
		t.Fatalf("after replace: %+v", d)
	}
	for name, v := range want {
		if string(d.Options[name]) != string(v) {
			t.Errorf("after replace: options.%s = %s, want %s", name, d.Options[name], v)
		}
	}
	// replace with labels keeps the ones given; merge (named, or null) is
	// the default.
	c = queenConfigured{}
	s.call("POST", "/api/v1/configure", `{"queue":"q","mode":"replace","namespace":"n2","options":{"maxSize":10}}`).want(http.StatusOK).decode(&c)
	if c.Namespace == nil || *c.Namespace != "n2" || string(c.Options["retryDelay"]) != "1000" || !slices.Equal(c.NotEnforced, []string{"maxSize"}) {
		t.Fatalf("replace with a namespace: %+v", c)
	}
	for _, mode := range []string{`"merge"`, `null`} {
		c = queenConfigured{}
		s.call("POST", "/api/v1/configure", `{"queue":"q","mode":`+mode+`,"options":{"retryLimit":2}}`).want(http.StatusOK).decode(&c)
		if string(c.Options["maxSize"]) != "10" || string(c.Options["retryLimit"]) != "2" || c.Namespace == nil {
			t.Fatalf("mode %s: %+v", mode, c)
		}
	}
	// A bad value among nulls changes nothing.
	s.call("POST", "/api/v1/configure", `{"queue":"q","mode":"replace","options":{"retryLimit":null,"leaseTime":-1}}`).wantError(http.StatusBadRequest, "leaseTime")
	d.Options = nil
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&d)
	if string(d.Options["retryLimit"]) != "2" || d.Namespace == nil {
		t.Fatalf("a refused replace changed the queue: %+v", d)
	}
}
