package web_test

import (
	"context"
	"net/http"
	"testing"

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
