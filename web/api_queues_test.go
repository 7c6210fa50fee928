package web_test

import (
	"maps"
	"net/http"
	"testing"
	"time"
)

type queueInfo struct {
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
	Options   struct {
		LeaseTime       int  `json:"leaseTime"`
		RetryLimit      int  `json:"retryLimit"`
		RetryDelay      int  `json:"retryDelay"`
		DeadLetterQueue bool `json:"deadLetterQueue"`
	} `json:"options"`
	Partitions []struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Messages int64  `json:"messages"`
	} `json:"partitions"`
	ConsumerGroups []struct {
		Name               string  `json:"name"`
		Lag                int64   `json:"lag"`
		DeadLetters        int64   `json:"deadLetters"`
		OldestDeadLetterAt *string `json:"oldestDeadLetterAt"`
		Completed          int64   `json:"completed"`
		Failed             int64   `json:"failed"`
		DeadLettered       int64   `json:"deadLettered"`
	} `json:"consumerGroups"`
	Messages           int64   `json:"messages"`
	DeadLetters        int64   `json:"deadLetters"`
	OldestDeadLetterAt *string `json:"oldestDeadLetterAt"`
}

func TestQueueDescribe(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0,"leaseTime":60}`)
	s.push("q", "p1", "a", `1`)
	s.push("q", "p1", "b", `2`)
	s.push("q", "p2", "c", `3`)
	// billing fails a, completes b; analytics has read nothing yet.
	m := s.pop("q", "consumerGroup=billing&batch=2").Messages
	s.ack(m[0], "failed", "boom").want(http.StatusOK)
	s.clock.Advance(time.Second)
	// b came back with a's last try: it is acked in a new lease.
	m = s.pop("q", "consumerGroup=billing&batch=2").Messages
	s.ack(m[0], "completed", "").want(http.StatusOK)
	s.pop("q", "consumerGroup=analytics&batch=10")

	var q queueInfo
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&q)
	if q.Name != "q" || q.Options.RetryLimit != 0 || q.Options.LeaseTime != 60 || q.Messages != 3 || q.DeadLetters != 1 {
		t.Fatalf("queue %+v", q)
	}
	if q.OldestDeadLetterAt == nil || *q.OldestDeadLetterAt != "2026-11-01T12:00:00.000Z" {
		t.Fatalf("oldest %v", q.OldestDeadLetterAt)
	}
	if len(q.Partitions) != 2 || q.Partitions[0].Name != "p1" || q.Partitions[0].Messages != 2 || q.Partitions[1].Messages != 1 || q.Partitions[0].ID == "" {
		t.Fatalf("partitions %+v", q.Partitions)
	}
	groups := map[string]int{}
	for i, g := range q.ConsumerGroups {
		groups[g.Name] = i
	}
	b, ok := groups["billing"]
	if !ok {
		t.Fatalf("no billing group: %+v", q.ConsumerGroups)
	}
	bill := q.ConsumerGroups[b]
	// billing settled a and b in p1 and has c in p2 still to read.
	if bill.Lag != 1 || bill.DeadLetters != 1 || bill.Completed != 1 || bill.Failed != 1 || bill.DeadLettered != 1 || bill.OldestDeadLetterAt == nil {
		t.Fatalf("billing %+v", bill)
	}
	a, ok := groups["analytics"]
	if !ok {
		t.Fatalf("no analytics group: %+v", q.ConsumerGroups)
	}
	if an := q.ConsumerGroups[a]; an.Lag != 3 || an.DeadLetters != 0 || an.OldestDeadLetterAt != nil {
		t.Fatalf("analytics %+v", an)
	}

	var list struct {
		Queues []queueInfo `json:"queues"`
	}
	s.push("another", "", "", `1`)
	s.call("GET", "/api/v1/resources/queues", "").want(http.StatusOK).decode(&list)
	if len(list.Queues) != 2 || list.Queues[0].Name != "another" || list.Queues[1].Name != "q" || list.Queues[1].DeadLetters != 1 {
		t.Fatalf("list %+v", list.Queues)
	}
}

func TestQueueListEmpty(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r := s.call("GET", "/api/v1/resources/queues", "").want(http.StatusOK)
	if string(r.body) != "{\"queues\":[]}\n" {
		t.Fatalf("body %q", r.body)
	}
}

func TestQueueDelete(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("q", "", "", "a", `1`, "boom")
	s.push("keep", "", "k", `1`)
	var res map[string]any
	s.call("DELETE", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&res)
	if want := map[string]any{"deleted": true, "queue": "q", "existed": true}; !maps.Equal(res, want) {
		t.Fatalf("delete %v, want %v", res, want)
	}
	s.call("GET", "/api/v1/resources/queues/q", "").wantError(http.StatusNotFound, "q")
	// Again: gone already, as Queen answers (JS queue(q).delete() succeeds).
	res = nil
	s.call("DELETE", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&res)
	if want := map[string]any{"deleted": true, "queue": "q", "existed": false}; !maps.Equal(res, want) {
		t.Fatalf("delete again %v, want %v", res, want)
	}
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").wantError(http.StatusNotFound)
	if l := s.deadLetters(""); l.Total != 0 {
		t.Fatalf("dead letters left %+v", l)
	}
	s.call("GET", "/api/v1/resources/queues/keep", "").want(http.StatusOK)
}

func TestQueueUnknown(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("GET", "/api/v1/resources/queues/nope", "").wantError(http.StatusNotFound, `"nope"`)
	s.call("DELETE", "/api/v1/resources/queues/nope", "").want(http.StatusOK)
	s.call("DELETE", "/api/v1/resources/queues/a%2Fb", "").wantError(http.StatusBadRequest)
	s.call("GET", "/api/v1/resources/queues/nope", "").wantError(http.StatusNotFound) // the delete made nothing
}
