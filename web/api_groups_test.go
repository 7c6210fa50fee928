package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

type groupDeleted struct {
	Success           bool     `json:"success"`
	ConsumerGroup     string   `json:"consumerGroup"`
	QueueName         string   `json:"queueName"`
	DeletedPartitions int      `json:"deletedPartitions"`
	MetadataDeleted   bool     `json:"metadataDeleted"`
	Queues            []string `json:"queues"`
	LeasesEnded       int      `json:"leasesEnded"`
	DeadLetters       string   `json:"deadLetters"`
	DeadLetterJob     *int64   `json:"deadLetterJob"`
}

func TestDeleteConsumerGroup(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.fail("q", "", "g", "a", `1`, "x")
	s.push("q", "", "b", `2`)
	s.push("r", "", "c", `3`)
	held := s.pop("q", "consumerGroup=g") // b, leased
	s.pop("r", "consumerGroup=g")
	var res groupDeleted
	s.call("DELETE", "/api/v1/consumer-groups/g?deleteMetadata=false", "").want(http.StatusOK).decode(&res)
	if !res.Success || res.ConsumerGroup != "g" || res.DeletedPartitions != 2 || res.MetadataDeleted || len(res.Queues) != 2 || res.LeasesEnded != 2 ||
		res.DeadLetters != "kept" || res.DeadLetterJob != nil {
		t.Fatalf("delete %+v", res)
	}
	if l := s.deadLetters("queue=q"); l.Total != 1 {
		t.Fatalf("its dead letter went: %+v", l)
	}
	s.ack(held.Messages[0], "completed", "").wantError(http.StatusConflict, "not leased")
	// It starts over.
	if p := s.pop("q", "consumerGroup=g&batch=10"); len(p.Messages) != 2 {
		t.Fatalf("g reads %+v", p.Messages)
	}
	entries, err := s.broker.Audit(context.Background(), broker.AuditFilter{Action: broker.AuditGroupDelete}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 2 {
		t.Fatalf("audit %+v %v", entries, err)
	}
	// A group that reads nothing: 200, nothing removed (Queen's clients
	// delete groups before their tests).
	s.call("DELETE", "/api/v1/consumer-groups/nobody", "").want(http.StatusOK).decode(&res)
	if !res.Success || res.DeletedPartitions != 0 || len(res.Queues) != 0 || !res.MetadataDeleted {
		t.Fatalf("nobody %+v", res)
	}
	s.call("DELETE", "/api/v1/consumer-groups/g?deleteMetadata=maybe", "").wantError(http.StatusBadRequest, "deleteMetadata")
	s.call("DELETE", "/api/v1/consumer-groups/bad%20name", "").wantError(http.StatusBadRequest, "consumer group")
}

func TestDeleteConsumerGroupOfOneQueueWithItsDeadLetters(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.fail("q", "", "g", "a", `1`, "x")
	s.fail("r", "", "g", "b", `1`, "x")
	var res groupDeleted
	s.call("DELETE", "/api/v1/consumer-groups/g/queues/q?deleteDeadLetters=true", "").want(http.StatusOK).decode(&res)
	if res.QueueName != "q" || len(res.Queues) != 1 || res.Queues[0] != "q" || res.DeadLetters != "deleted" || res.DeadLetterJob == nil {
		t.Fatalf("delete %+v", res)
	}
	if _, err := s.broker.WaitJob(context.Background(), *res.DeadLetterJob); err != nil {
		t.Fatal(err)
	}
	if l := s.deadLetters("queue=q"); l.Total != 0 {
		t.Fatalf("q keeps %+v", l)
	}
	if l := s.deadLetters("queue=r"); l.Total != 1 {
		t.Fatalf("r lost its dead letter: %+v", l)
	}
	// r is untouched: g has read it all.
	if r := s.call("GET", "/api/v1/pop/queue/r?consumerGroup=g", ""); r.status != http.StatusNoContent {
		t.Fatalf("g on r: %d %s", r.status, r.body)
	}
}

// deleteMetadata=false (Queen's: the group's subscription metadata stays)
// keeps the group's subscription and where it starts: its cursors and
// leases go and it reads again from that start, whatever its next pop
// asks. With deleteMetadata=true it starts over as that pop says.
func TestDeleteConsumerGroupKeepingItsSubscription(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "old", `0`)
	s.clock.Advance(time.Minute)
	// g subscribes after everything pushed so far (Queen: its metadata
	// records the time).
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=new", "").want(http.StatusNoContent)
	s.clock.Advance(time.Minute)
	s.push("q", "", "n1", `1`)
	s.ack(s.pop("q", "consumerGroup=g").Messages[0], "completed", "").want(http.StatusOK)
	s.push("q", "", "n2", `2`)
	held := s.pop("q", "consumerGroup=g")
	var res groupDeleted
	s.call("DELETE", "/api/v1/consumer-groups/g?deleteMetadata=false", "").want(http.StatusOK).decode(&res)
	if !res.Success || res.MetadataDeleted || res.DeletedPartitions != 1 || res.LeasesEnded != 1 || len(res.Queues) != 1 {
		t.Fatalf("delete %+v", res)
	}
	s.ack(held.Messages[0], "completed", "").wantError(http.StatusConflict, "not leased")
	// It reads again from where it subscribed, not from the beginning, and
	// the mode its pop asks does not move it: n1 and n2, not old.
	p := s.pop("q", "consumerGroup=g&batch=10&subscriptionMode=all")
	if len(p.Messages) != 2 || p.Messages[0].TransactionID != "n1" || p.Messages[1].TransactionID != "n2" {
		t.Fatalf("g reads again %+v", p.Messages)
	}
	entries, err := s.broker.Audit(context.Background(), broker.AuditFilter{Action: broker.AuditGroupDelete}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 1 || !strings.Contains(entries[0].Detail, "subscription kept") {
		t.Fatalf("audit %+v %v", entries, err)
	}
	// deleteMetadata=true: its subscription goes; a pop asking mode new
	// starts it after everything pushed.
	s.call("DELETE", "/api/v1/consumer-groups/g?deleteMetadata=true", "").want(http.StatusOK).decode(&res)
	if !res.MetadataDeleted || res.DeletedPartitions != 1 || res.LeasesEnded != 1 {
		t.Fatalf("delete with its metadata %+v", res)
	}
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=new", "").want(http.StatusNoContent)
}

// A group whose subscription's start Lazarus did not record (one made
// before it did) cannot keep it: deleteMetadata=false is a 400 saying so,
// and nothing changes. Once its start is set (POST …/subscription, which
// Queen keeps as its metadata), it can.
func TestDeleteConsumerGroupKeepingAStartNotRecorded(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	held := s.pop("q", "consumerGroup=g")
	s.execOn(`UPDATE subscriptions SET starts_at = NULL`, `UPDATE subscriptions SET starts_at = NULL`)
	s.call("DELETE", "/api/v1/consumer-groups/g/queues/q?deleteMetadata=false", "").wantError(http.StatusBadRequest, "deleteMetadata=false", `"q"`, "deleteMetadata=true", "nothing was changed")
	s.ack(held.Messages[0], "completed", "").want(http.StatusOK) // its lease was not ended
	s.clock.Advance(time.Minute)
	s.push("q", "", "b", `2`)
	s.call("POST", "/api/v1/consumer-groups/g/subscription", `{"subscriptionTimestamp":"1970-01-01T00:00:00Z"}`).want(http.StatusOK)
	var res groupDeleted
	s.call("DELETE", "/api/v1/consumer-groups/g/queues/q?deleteMetadata=false", "").want(http.StatusOK).decode(&res)
	if res.MetadataDeleted || res.DeletedPartitions != 1 {
		t.Fatalf("delete %+v", res)
	}
	if p := s.pop("q", "consumerGroup=g&batch=10&subscriptionMode=new"); len(p.Messages) != 2 || p.Messages[0].TransactionID != "a" {
		t.Fatalf("g reads again %+v", p.Messages)
	}
}
