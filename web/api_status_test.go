package web_test

import (
	"net/http"
	"testing"
	"time"
)

// TestQueenGroupAndStatusReads: what queenctl's cg list, cg describe,
// lag, cg refresh-stats and queue stats read (Queen's GET
// /consumer-groups, /consumer-groups/:group, POST /stats/refresh, GET
// /status/queues, /status/queues/:queue), in Queen's shapes, from the
// counts kept.
func TestQueenGroupAndStatusReads(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "p1", "a", `1`)
	s.push("q", "p1", "b", `2`)
	s.push("q", "p2", "c", `3`)
	s.push("other", "", "d", `4`)
	m := s.pop("q", "consumerGroup=g").Messages[0]
	s.ack(m, "completed", "").want(http.StatusOK)

	var groups []map[string]any
	s.call("GET", "/api/v1/consumer-groups", "").want(http.StatusOK).decode(&groups)
	if len(groups) != 1 {
		t.Fatalf("groups %v", groups)
	}
	g := groups[0]
	if g["name"] != "g" || g["queueName"] != "q" || g["totalLag"] != float64(2) || g["lagMessages"] != float64(2) || g["members"] != float64(2) ||
		g["state"] != "Lagging" || g["subscriptionTimestamp"] == nil || len(g["topics"].([]any)) != 1 {
		t.Fatalf("group %v", g)
	}
	var one map[string]map[string]any
	s.call("GET", "/api/v1/consumer-groups/g", "").want(http.StatusOK).decode(&one)
	if len(one) != 1 || one["q"]["totalLag"] != float64(2) {
		t.Fatalf("describe %v", one)
	}
	one = nil
	s.call("GET", "/api/v1/consumer-groups/nobody", "").want(http.StatusOK).decode(&one)
	if len(one) != 0 {
		t.Fatalf("nobody %v", one)
	}
	var ok map[string]any
	s.call("POST", "/api/v1/stats/refresh", "").want(http.StatusOK).decode(&ok)
	if ok["success"] != true {
		t.Fatalf("refresh %v", ok)
	}

	var list struct {
		Queues []struct {
			Name       string `json:"name"`
			Partitions int    `json:"partitions"`
			Messages   struct {
				Total   int `json:"total"`
				Pending int `json:"pending"`
			} `json:"messages"`
		} `json:"queues"`
	}
	s.call("GET", "/api/v1/status/queues", "").want(http.StatusOK).decode(&list)
	if len(list.Queues) != 2 || list.Queues[1].Name != "q" || list.Queues[1].Partitions != 2 || list.Queues[1].Messages.Total != 3 || list.Queues[1].Messages.Pending != 2 {
		t.Fatalf("status queues %+v", list)
	}
	var detail struct {
		Queue struct {
			Name   string         `json:"name"`
			Config map[string]any `json:"config"`
		} `json:"queue"`
		Partitions []struct {
			Name     string `json:"name"`
			Messages struct {
				Total int `json:"total"`
			} `json:"messages"`
		} `json:"partitions"`
		Totals struct {
			Total int `json:"total"`
		} `json:"totals"`
		ConsumerGroups []map[string]any `json:"consumerGroups"`
	}
	s.call("GET", "/api/v1/status/queues/q", "").want(http.StatusOK).decode(&detail)
	if detail.Queue.Name != "q" || detail.Queue.Config["leaseTime"] == nil || len(detail.Partitions) != 2 || detail.Partitions[0].Messages.Total != 2 ||
		detail.Totals.Total != 3 || len(detail.ConsumerGroups) != 1 {
		t.Fatalf("status queue %+v", detail)
	}
	s.call("GET", "/api/v1/status/queues/nope", "").wantError(http.StatusNotFound, "nope")
}

// TestQueenLaggingPartitions: Queen's GET /consumer-groups/lagging
// (queenctl's lag --min-seconds): the partitions whose oldest message a
// group has not settled is older than minLagSeconds, most behind first.
func TestQueenLaggingPartitions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "p1", "a", `1`)
	s.push("q", "p2", "b", `2`)
	s.ack(s.pop("q", "consumerGroup=g&batch=1").Messages[0], "completed", "").want(http.StatusOK) // a or b
	s.clock.Advance(2 * time.Hour)
	s.push("q", "p1", "c", `3`)
	s.push("q", "p2", "d", `4`)
	var rows []map[string]any
	s.call("GET", "/api/v1/consumer-groups/lagging", "").want(http.StatusOK).decode(&rows)
	if len(rows) != 1 || rows[0]["consumer_group"] != "g" || rows[0]["queue_name"] != "q" || rows[0]["time_lag_seconds"] != float64(7200) || rows[0]["lag_hours"] != float64(2) ||
		rows[0]["oldest_unconsumed_at"] == nil || rows[0]["partition_id"] == "" {
		t.Fatalf("lagging %v", rows)
	}
	s.clock.Advance(time.Minute)
	rows = nil
	s.call("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=30", "").want(http.StatusOK).decode(&rows)
	if len(rows) != 2 || rows[0]["time_lag_seconds"] != float64(7260) || rows[1]["time_lag_seconds"] != float64(60) {
		t.Fatalf("lagging over 30 s %v", rows)
	}
	s.call("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=-1", "").wantError(http.StatusBadRequest, "minLagSeconds")
}
