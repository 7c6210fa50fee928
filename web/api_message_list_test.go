package web_test

import (
	"net/http"
	"testing"
	"time"
)

type listedMessage struct {
	ID            string `json:"id"`
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	QueuePath     string `json:"queuePath"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	Status        string `json:"status"`
	QueueStatus   string `json:"queueStatus"`
	BusStatus     *struct {
		ConsumedBy  int `json:"consumedBy"`
		TotalGroups int `json:"totalGroups"`
	} `json:"busStatus"`
	CreatedAt string `json:"createdAt"`
}

// listed lists messages with the query, by transactionId.
func (s *bundle) listed(query string) []listedMessage {
	s.t.Helper()
	var out struct {
		Messages []listedMessage `json:"messages"`
	}
	s.call("GET", "/api/v1/messages?"+query, "").want(http.StatusOK).decode(&out)
	return out.Messages
}

func txidsOf(ms []listedMessage) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.TransactionID)
	}
	return out
}

// TestQueenMessageList: Queen's GET /messages (queenctl's messages list
// and bench check, the JS and Go admin's listMessages): newest first,
// each with its status and busStatus, by queue, partition, status, time,
// limit and offset.
func TestQueenMessageList(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "p1", "a", `1`)
	s.push("q", "p1", "b", `2`)
	s.clock.Advance(time.Minute)
	s.push("q", "p2", "c", `3`)
	s.fail("dl", "", "", "x", `4`, "boom")
	s.ack(s.pop("q", "consumerGroup=g&batch=1").Messages[0], "completed", "").want(http.StatusOK) // a
	s.pop("q", "consumerGroup=g&batch=1")                                                         // b, or c: leased

	got := s.listed("queue=q")
	if ids := txidsOf(got); len(ids) != 3 || ids[0] != "c" || ids[1] != "b" || ids[2] != "a" {
		t.Fatalf("queue q: %v", ids)
	}
	a := got[2]
	if a.Status != "completed" || a.BusStatus == nil || a.BusStatus.ConsumedBy != 1 || a.BusStatus.TotalGroups != 1 || a.Queue != "q" || a.Partition != "p1" ||
		a.QueuePath != "q/p1" || a.PartitionID == "" || a.ID == "" || a.CreatedAt == "" {
		t.Fatalf("a %+v", a)
	}
	statuses := map[string]int{}
	for _, m := range got {
		statuses[m.Status]++
	}
	if statuses["completed"] != 1 || statuses["processing"] != 1 || statuses["pending"] != 1 {
		t.Fatalf("statuses %v", statuses)
	}
	if ids := txidsOf(s.listed("queue=q&limit=1&offset=1")); len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("page 2: %v", ids)
	}
	if ids := txidsOf(s.listed("queue=q&status=completed")); len(ids) != 1 || ids[0] != "a" {
		t.Fatalf("completed: %v", ids)
	}
	if ids := txidsOf(s.listed("queue=q&partition=p2")); len(ids) != 1 || ids[0] != "c" {
		t.Fatalf("p2: %v", ids)
	}
	at := s.clock.Now().Add(-30 * time.Second).Format(time.RFC3339Nano)
	if ids := txidsOf(s.listed("queue=q&from=" + at)); len(ids) != 1 || ids[0] != "c" {
		t.Fatalf("from: %v", ids)
	}
	if ids := txidsOf(s.listed("queue=q&to=" + at)); len(ids) != 2 || ids[0] != "b" {
		t.Fatalf("to: %v", ids)
	}
	// Every queue; a dead letter.
	all := s.listed("")
	if ids := txidsOf(all); len(ids) != 4 || ids[0] != "x" {
		t.Fatalf("all: %v", ids)
	}
	if all[0].Status != "dead_letter" || all[0].QueueStatus != "dead_letter" {
		t.Fatalf("x %+v", all[0])
	}
	if ids := txidsOf(s.listed("queue=nope")); len(ids) != 0 {
		t.Fatalf("nope: %v", ids)
	}
	if ids := txidsOf(s.listed("queue=q&limit=10000")); len(ids) != 3 { // queenctl's messages list: taken as 1000
		t.Fatalf("limit 10000: %v", ids)
	}
	// and the answer says so, not silently.
	var cutList struct {
		Pagination struct{ Limit, Offset int }   `json:"pagination"`
		LimitCut   *struct{ Asked, Applied int } `json:"limitCut"`
	}
	s.call("GET", "/api/v1/messages?queue=q&limit=10000", "").want(http.StatusOK).decode(&cutList)
	if cutList.Pagination.Limit != 1000 || cutList.LimitCut == nil || cutList.LimitCut.Asked != 10000 || cutList.LimitCut.Applied != 1000 {
		t.Fatalf("a limit over 1000: pagination %+v, limitCut %+v, want 1000 and the cut said", cutList.Pagination, cutList.LimitCut)
	}
	s.call("GET", "/api/v1/messages?queue=q&limit=5", "").want(http.StatusOK).decode(&cutList)
	if cutList.Pagination.Limit != 5 || cutList.LimitCut != nil {
		t.Fatalf("a limit within 1000: pagination %+v, limitCut %+v", cutList.Pagination, cutList.LimitCut)
	}
	for _, q := range []string{"limit=0", "offset=10001", "offset=-1", "status=lost", "from=yesterday", "queue=a%2Fb", "partition=p1", "ns=x", "task=y"} {
		s.call("GET", "/api/v1/messages?"+q, "").wantError(http.StatusBadRequest)
	}
}
