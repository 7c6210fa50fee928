package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A partition the maintenance sweep removed (empty, older than an hour)
// leaves the API's description of its queue, the list of queues, the
// queue page and the overview whole: they show the partitions left.
func TestSweptPartitionLeavesThePagesWhole(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retentionSeconds":60}`)
	s.push("q", "gone-partition", "m1", `{"n":1}`)
	s.clock.Advance(broker.PartitionMinAge + time.Minute)
	s.push("q", "kept-partition", "m2", `{"n":2}`)
	rep, err := s.broker.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskPartitions); r.Removed != 1 {
		t.Fatalf("partitions task %+v, want 1 removed", r)
	}
	var q queueInfo
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&q)
	if len(q.Partitions) != 1 || q.Partitions[0].Name != "kept-partition" || q.Partitions[0].Messages != 1 || q.Messages != 1 {
		t.Fatalf("queue %+v, partitions %+v: want kept-partition with 1 message", q, q.Partitions)
	}
	s.call("GET", "/api/v1/resources/queues", "").want(http.StatusOK)
	b, _ := s.loggedIn(broker.RoleViewer)
	page := string(b.get("/queues/q").want(http.StatusOK).body)
	if !strings.Contains(page, "kept-partition") || strings.Contains(page, "gone-partition") {
		t.Errorf("queue page: kept-partition shown %v, gone-partition shown %v", strings.Contains(page, "kept-partition"), strings.Contains(page, "gone-partition"))
	}
	b.get("/").want(http.StatusOK)
}
