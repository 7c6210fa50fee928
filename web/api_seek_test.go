package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

type sought struct {
	Success           bool    `json:"success"`
	ConsumerGroup     string  `json:"consumerGroup"`
	QueueName         string  `json:"queueName"`
	SeekToEnd         bool    `json:"seekToEnd"`
	TargetTimestamp   *string `json:"targetTimestamp"`
	PartitionsUpdated int     `json:"partitionsUpdated"`
	LeasesEnded       int     `json:"leasesEnded"`
}

// txids are the transactionIds of messages.
func txids(ms []message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.TransactionID)
	}
	return out
}

// TestSeekConsumerGroup: Queen's seek (queenctl's cg seek and replay, the
// JS and Go admin's seekConsumerGroup) moves the group back to a time, to
// the beginning and to the end; a group behind what it settled reads it
// again, with its retries from the start, and a message it dead-lettered
// and fails again keeps its one dead letter.
func TestSeekConsumerGroup(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0,"retryDelay":0}`)
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	s.clock.Advance(time.Minute)
	at := s.clock.Now()
	s.push("q", "", "c", `3`)
	// g completes a and c, and dead-letters b.
	for _, status := range []string{"completed", "failed", "completed"} {
		s.ack(s.pop("q", "consumerGroup=g").Messages[0], status, "boom").want(http.StatusOK)
	}
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=g", "").want(http.StatusNoContent)

	// To a time: from the first message pushed at or after it.
	var res sought
	s.call("POST", "/api/v1/consumer-groups/g/queues/q/seek", `{"timestamp":"`+at.Format(time.RFC3339Nano)+`"}`).want(http.StatusOK).decode(&res)
	if !res.Success || res.ConsumerGroup != "g" || res.QueueName != "q" || res.SeekToEnd || res.TargetTimestamp == nil || res.PartitionsUpdated != 1 {
		t.Fatalf("seek %+v", res)
	}
	p := s.pop("q", "consumerGroup=g&batch=10")
	if got := txids(p.Messages); len(got) != 1 || got[0] != "c" {
		t.Fatalf("after a seek to a time: %v", got)
	}

	// To the beginning (queenctl replay --to beginning), past a held lease.
	s.call("POST", "/api/v1/consumer-groups/g/queues/q/seek", `{"timestamp":"1970-01-01T00:00:00Z"}`).want(http.StatusOK).decode(&res)
	if res.PartitionsUpdated != 1 || res.LeasesEnded != 1 {
		t.Fatalf("seek to the beginning %+v", res)
	}
	s.ack(p.Messages[0], "completed", "").wantError(http.StatusConflict)
	p = s.pop("q", "consumerGroup=g&batch=10")
	if got := txids(p.Messages); len(got) != 3 || got[1] != "b" {
		t.Fatalf("after a seek to the beginning: %v", got)
	}
	s.ack(p.Messages[0], "completed", "").want(http.StatusOK)
	var a map[string]any
	s.ack(p.Messages[1], "failed", "boom again").want(http.StatusOK).decode(&a)
	if a["success"] != true || a["dlq"] != true {
		t.Fatalf("failed again: %v", a)
	}
	if l := s.deadLetters("queue=q&consumerGroup=g"); l.Total != 1 || l.Messages[0].TransactionID != "b" {
		t.Fatalf("dead letters %+v", l)
	}
	// The rest of that batch came back (b was its last try): c, leased.
	if got := txids(s.pop("q", "consumerGroup=g").Messages); got[0] != "c" {
		t.Fatalf("the rest of the batch: %v", got)
	}
	// Another group is not moved.
	other := s.pop("q", "consumerGroup=h&batch=10")
	s.call("POST", "/api/v1/consumer-groups/g/queues/q/seek", `{"toEnd":true}`).want(http.StatusOK).decode(&res)
	if !res.SeekToEnd || res.TargetTimestamp != nil || res.PartitionsUpdated != 1 || res.LeasesEnded != 1 {
		t.Fatalf("seek to the end %+v", res)
	}
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=g", "").want(http.StatusNoContent)
	s.ack(other.Messages[0], "completed", "").want(http.StatusOK)
	s.push("q", "", "d", `4`)
	if got := txids(s.pop("q", "consumerGroup=g&batch=10").Messages); len(got) != 1 || got[0] != "d" {
		t.Fatalf("after the end: %v", got)
	}

	entries, err := s.broker.Audit(context.Background(), broker.AuditFilter{Action: broker.AuditGroupSeek}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 3 || entries[0].Group != "g" || entries[0].Queue != "q" {
		t.Fatalf("audit %+v %v", entries, err)
	}

	// A group that does not read the queue, a queue that does not exist:
	// nothing moved, as Queen answers.
	for _, path := range []string{"/api/v1/consumer-groups/nobody/queues/q/seek", "/api/v1/consumer-groups/g/queues/nope/seek"} {
		s.call("POST", path, `{"toEnd":true}`).want(http.StatusOK).decode(&res)
		if !res.Success || res.PartitionsUpdated != 0 {
			t.Fatalf("%s: %+v", path, res)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{`{}`, "Must specify either 'toEnd': true or 'timestamp'"},
		{`{"toEnd":false}`, "Must specify either"},
		{`{"timestamp":"yesterday"}`, "timestamp"},
		{`{"timestamp":"2026-01-01T00:00:00Z","extra":1}`, "extra"},
	} {
		s.call("POST", "/api/v1/consumer-groups/g/queues/q/seek", tc.body).wantError(http.StatusBadRequest, tc.want)
	}
	s.call("POST", "/api/v1/consumer-groups/bad%20name/queues/q/seek", `{"toEnd":true}`).wantError(http.StatusBadRequest, "consumer group")
}

// TestSeekPartition: Queen's seek of one partition (queenctl's partition
// seek, Go's SeekConsumerGroupPartition, which sends {}) moves it to its
// end; the other partitions stay.
func TestSeekPartition(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "p1", "a", `1`)
	s.push("q", "p2", "b", `2`)
	s.call("GET", "/api/v1/pop/queue/q/partition/p2?consumerGroup=g", "").want(http.StatusOK) // g reads q; b leased
	var res map[string]any
	s.call("POST", "/api/v1/consumer-groups/g/queues/q/partitions/p1/seek", `{}`).want(http.StatusOK).decode(&res)
	if res["success"] != true || res["partitionName"] != "p1" || res["updated"] != true || res["cursorMovedTo"] == nil || res["leasesEnded"] != json.Number("0") && res["leasesEnded"] != float64(0) {
		t.Fatalf("seek %v", res)
	}
	s.call("GET", "/api/v1/pop/queue/q/partition/p1?consumerGroup=g", "").want(http.StatusNoContent)
	s.call("POST", "/api/v1/consumer-groups/g/queues/q/partitions/nope/seek", "").wantError(http.StatusNotFound, "nope")
}
