package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// messageDetail is GET /api/v1/messages/:partitionId/:transactionId as
// Queen's clients read it.
type messageDetail struct {
	ID             string  `json:"id"`
	TransactionID  string  `json:"transactionId"`
	PartitionID    string  `json:"partitionId"`
	QueuePath      string  `json:"queuePath"`
	Queue          string  `json:"queue"`
	Partition      string  `json:"partition"`
	Status         string  `json:"status"`
	Payload        any     `json:"payload"`
	CreatedAt      string  `json:"createdAt"`
	ErrorMessage   *string `json:"errorMessage"`
	RetryCount     *int    `json:"retryCount"`
	LeaseExpiresAt *string `json:"leaseExpiresAt"`
	QueueConfig    struct {
		RetryLimit *int `json:"retryLimit"`
	} `json:"queueConfig"`
	Mode struct {
		HasQueueMode     bool   `json:"hasQueueMode"`
		BusGroupsCount   int    `json:"busGroupsCount"`
		ConsumedByGroups int    `json:"consumedByGroups"`
		Type             string `json:"type"`
	} `json:"mode"`
	ConsumerGroups []struct {
		Name           string  `json:"name"`
		Consumed       bool    `json:"consumed"`
		LeaseExpiresAt *string `json:"leaseExpiresAt"`
		DeadLetter     bool    `json:"deadLetter"`
	} `json:"consumerGroups"`
	Kept        bool         `json:"kept"`
	DeadLetters []deadLetter `json:"deadLetters"`
}

func TestGetMessageAsQueenShowsIt(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const txid = "order 7/b"
	d := s.fail("q", "p", "billing", txid, `{"n":1}`, "declined")
	path := "/api/v1/messages/" + d.PartitionID + "/" + url.PathEscape(txid)
	var m messageDetail
	s.call("GET", path, "").want(http.StatusOK).decode(&m)
	if m.ID != d.ID || m.TransactionID != txid || m.PartitionID != d.PartitionID || m.QueuePath != "q/p" || m.Status != "dead_letter" ||
		m.Payload.(map[string]any)["n"] != float64(1) || m.ErrorMessage == nil || *m.ErrorMessage != "declined" || m.RetryCount == nil || !m.Kept ||
		len(m.DeadLetters) != 1 || m.DeadLetters[0].ConsumerGroup != "billing" || m.QueueConfig.RetryLimit == nil || *m.QueueConfig.RetryLimit != 0 {
		t.Fatalf("message %+v", m)
	}
	if m.Mode.Type != "bus" || m.Mode.BusGroupsCount != 1 || m.Mode.ConsumedByGroups != 1 || len(m.ConsumerGroups) != 1 ||
		m.ConsumerGroups[0].Name != "billing" || !m.ConsumerGroups[0].DeadLetter || !m.ConsumerGroups[0].Consumed {
		t.Fatalf("groups %+v %+v", m.Mode, m.ConsumerGroups)
	}
	// A message the queue-mode group holds: processing, with its lease.
	pushed := s.push("q", "p", "live", `2`)
	s.pop("q", "batch=10") // the queue-mode group's first read: from the start
	var live messageDetail
	s.call("GET", "/api/v1/messages/"+pushed.PartitionID+"/live", "").want(http.StatusOK).decode(&live)
	if live.Status != "processing" || live.LeaseExpiresAt == nil || live.Mode.Type != "hybrid" || !live.Mode.HasQueueMode || live.ErrorMessage != nil ||
		len(live.DeadLetters) != 0 {
		t.Fatalf("live %+v", live)
	}
	s.call("GET", "/api/v1/messages/"+d.PartitionID+"/nope", "").wantError(http.StatusNotFound, "nope")
	s.call("GET", "/api/v1/messages/no-partition/live", "").wantError(http.StatusNotFound, "partition")
}

func TestDeleteMessageDeletesItsDeadLettersOnly(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("q", "", "billing", "a", `1`, "x")
	path := "/api/v1/messages/" + d.PartitionID + "/a"
	var res struct {
		Success         bool   `json:"success"`
		Deleted         int    `json:"deleted"`
		DLQID           string `json:"dlqId"`
		RestorableUntil string `json:"restorableUntil"`
	}
	s.call("DELETE", path, "").want(http.StatusOK).decode(&res)
	if !res.Success || res.Deleted != 1 || res.DLQID != d.ID || res.RestorableUntil == "" {
		t.Fatalf("delete %+v", res)
	}
	if l := s.deadLetters("queue=q"); l.Total != 0 {
		t.Fatalf("left %+v", l)
	}
	entries, err := s.broker.Audit(context.Background(), broker.AuditFilter{Action: broker.AuditDelete}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 1 {
		t.Fatalf("audit %+v %v", entries, err)
	}
	// The message stays, and a live one is never deleted.
	var m messageDetail
	s.call("GET", path, "").want(http.StatusOK).decode(&m)
	if m.Status != "completed" || len(m.DeadLetters) != 0 {
		t.Fatalf("after the delete %+v", m)
	}
	// Sent again (a retry after a timeout, say), the delete finds nothing
	// to delete: 404, as for a message not known, and nothing changes.
	s.call("DELETE", path, "").wantError(http.StatusNotFound, `"a"`, "no dead letter any more", "deleted by")
	if _, err := s.broker.Restore(context.Background(), d.ID, "", "user:x"); err != nil {
		t.Fatalf("restore after the retried delete: %v", err)
	}
	p := s.push("q", "", "b", `2`)
	s.call("DELETE", "/api/v1/messages/"+p.PartitionID+"/b", "").wantError(http.StatusConflict, "not a dead letter")
	m2 := s.pop("q", "consumerGroup=billing")
	if m2.Messages[0].TransactionID != "b" {
		t.Fatalf("b: %+v", m2)
	}
	s.call("DELETE", "/api/v1/messages/"+p.PartitionID+"/nope", "").wantError(http.StatusNotFound)
	s.ack(m2.Messages[0], "completed", "").want(http.StatusOK)
	// A delete of a message whose dead letters were replayed: 404 too.
	c := s.fail("q", "", "billing", "c", `3`, "x")
	s.call("POST", "/api/v1/dlq/"+c.ID+"/replay", "").want(http.StatusOK)
	s.call("DELETE", "/api/v1/messages/"+c.PartitionID+"/c", "").wantError(http.StatusNotFound, `"c"`, "replayed")
}
