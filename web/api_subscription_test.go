package web_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

type subscriptionMoved struct {
	Success           bool     `json:"success"`
	ConsumerGroup     string   `json:"consumerGroup"`
	NewTimestamp      string   `json:"newTimestamp"`
	RowsUpdated       int      `json:"rowsUpdated"`
	Queues            []string `json:"queues"`
	PartitionsUpdated int      `json:"partitionsUpdated"`
}

// TestMoveSubscription: Queen's updateConsumerGroupTimestamp (POST
// /consumer-groups/:group/subscription) moves where the group starts, in
// every queue it reads: the partitions it has been handed nothing of
// start again at the first message pushed at or after the time (back: it
// reads what was there before it subscribed; forward: it skips it); the
// partitions it has read keep their cursors. Audited a queue each.
func TestMoveSubscription(t *testing.T) {
	t.Parallel()
	s := setup(t)
	t0 := s.clock.Now()
	s.push("q", "read", "a", `1`)
	s.push("q", "unread", "b", `2`)
	s.push("q2", "", "x", `3`)
	s.push("other", "", "o", `4`)
	s.clock.Advance(time.Minute)
	// g subscribes to q and q2 after everything pushed so far.
	for _, q := range []string{"q", "q2"} {
		s.call("GET", "/api/v1/pop/queue/"+q+"?consumerGroup=g&subscriptionMode=new", "").want(http.StatusNoContent)
	}
	s.clock.Advance(time.Minute)
	s.push("q", "read", "c", `5`)
	s.ack(s.pop("q", "consumerGroup=g").Messages[0], "completed", "").want(http.StatusOK) // g has read c of "read"

	var res subscriptionMoved
	at := t0.Format(time.RFC3339)
	s.call("POST", "/api/v1/consumer-groups/g/subscription", `{"subscriptionTimestamp":"`+at+`"}`).want(http.StatusOK).decode(&res)
	if !res.Success || res.ConsumerGroup != "g" || res.NewTimestamp != at || res.RowsUpdated != 2 ||
		!slices.Equal(res.Queues, []string{"q", "q2"}) || res.PartitionsUpdated != 2 {
		t.Fatalf("moved %+v", res)
	}
	// Back to t0: b (of the partition g had read nothing of) and x come;
	// a, behind c in the partition g has read, does not.
	if got := txids(s.pop("q", "consumerGroup=g&batch=10").Messages); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("q after the move: %v", got)
	}
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=g&batch=10", "").want(http.StatusNoContent)
	if got := txids(s.pop("q2", "consumerGroup=g&batch=10").Messages); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("q2 after the move: %v", got)
	}

	// Forward: h, from the beginning, has read nothing of q2 yet; moved
	// past x, it skips it and reads what comes after.
	s.call("GET", "/api/v1/pop/queue/q2/partition/nothing-here?consumerGroup=h&wait=false", "").want(http.StatusNoContent)
	s.clock.Advance(time.Minute)
	later := s.clock.Now()
	s.push("q2", "", "y", `6`)
	s.call("POST", "/api/v1/consumer-groups/h/subscription", `{"subscriptionTimestamp":"`+later.Format(time.RFC3339Nano)+`"}`).want(http.StatusOK).decode(&res)
	if res.RowsUpdated != 1 || res.PartitionsUpdated != 1 {
		t.Fatalf("moved h %+v", res)
	}
	if got := txids(s.pop("q2", "consumerGroup=h&batch=10").Messages); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("h after the move forward: %v", got)
	}

	entries, err := s.broker.Audit(context.Background(), broker.AuditFilter{Action: broker.AuditGroupSubscription}, broker.Page{Limit: 10})
	if err != nil || len(entries) != 3 || entries[0].Group != "h" || entries[0].Queue != "q2" || entries[2].Group != "g" || entries[2].Queue != "q" ||
		!strings.Contains(entries[2].Detail, t0.UTC().Format(time.RFC3339)) {
		t.Fatalf("audit %+v %v", entries, err)
	}

	// A group that does not exist, or the queue-mode group: 200, nothing
	// moved (Queen: rowsUpdated 0), nothing audited.
	for _, g := range []string{"nobody", broker.QueueModeGroup} {
		s.call("POST", "/api/v1/consumer-groups/"+g+"/subscription", `{"subscriptionTimestamp":"`+at+`"}`).want(http.StatusOK).decode(&res)
		if !res.Success || res.RowsUpdated != 0 || res.Queues == nil || len(res.Queues) != 0 || res.PartitionsUpdated != 0 {
			t.Fatalf("%s: %+v", g, res)
		}
	}
	if again, _ := s.broker.Audit(context.Background(), broker.AuditFilter{Action: broker.AuditGroupSubscription}, broker.Page{Limit: 10}); len(again) != 3 {
		t.Fatalf("audit after the no-ops: %d entries", len(again))
	}
}

// A bad body or group is a 400 that changes nothing: the group's
// cursors stay, and nothing is audited.
func TestMoveSubscriptionRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	s.clock.Advance(time.Minute)
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=new", "").want(http.StatusNoContent)
	for _, tc := range []struct{ group, body, want string }{
		{"g", `{}`, "Missing subscriptionTimestamp in request body"},
		{"g", `{"subscriptionTimestamp":null}`, "Missing subscriptionTimestamp"},
		{"g", `{"subscriptionTimestamp":""}`, "subscriptionTimestamp must be an RFC 3339 timestamp"},
		{"g", `{"subscriptionTimestamp":"yesterday"}`, "subscriptionTimestamp must be an RFC 3339 timestamp"},
		{"g", `{"subscriptionTimestamp":"0001-01-01T00:00:00Z"}`, "subscriptionTimestamp must be an RFC 3339 timestamp"},
		{"g", `{"subscriptionTimestamp":1700000000}`, "subscriptionTimestamp"},
		{"g", `{"subscriptionTimestamp":"1970-01-01T00:00:00Z","queue":"q"}`, "unknown field"},
		{"g", `{"subscriptionTimestamp":"1970-01-01T00:00:00Z"} {}`, "single JSON value"},
		{"g", `[]`, ""},
		{"g", ``, ""},
		{"bad%20name", `{"subscriptionTimestamp":"1970-01-01T00:00:00Z"}`, "consumer group name"},
	} {
		s.call("POST", "/api/v1/consumer-groups/"+tc.group+"/subscription", tc.body).wantError(http.StatusBadRequest, tc.want)
	}
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=g", "").want(http.StatusNoContent) // a stays behind g's start
	if entries, _ := s.broker.Audit(context.Background(), broker.AuditFilter{Action: broker.AuditGroupSubscription}, broker.Page{Limit: 10}); len(entries) != 0 {
		t.Fatalf("audited %+v", entries)
	}
	// The same group, moved back for real, reads a.
	s.call("POST", "/api/v1/consumer-groups/g/subscription", `{"subscriptionTimestamp":"1970-01-01T00:00:00Z"}`).want(http.StatusOK)
	if got := txids(s.pop("q", "consumerGroup=g").Messages); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after the move: %v", got)
	}
}
