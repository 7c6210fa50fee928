package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func TestTransactionAckAndPush(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("in", "", "a", `{"step":1}`)
	m := s.pop("in", "").Messages[0]
	body := fmt.Sprintf(`{"operations":[
		{"type":"ack","transactionId":"a","partitionId":%q,"leaseId":%q,"status":"completed"},
		{"type":"push","items":[{"queue":"out","payload":{"step":2},"transactionId":"a-next"}]}]}`, m.PartitionID, *m.LeaseID)
	var res struct {
		Success bool `json:"success"`
		Results []struct {
			Type          string   `json:"type"`
			TransactionID string   `json:"transactionId"`
			Success       bool     `json:"success"`
			Messages      []pushed `json:"messages"`
		} `json:"results"`
	}
	s.call("POST", "/api/v1/transaction", body).want(http.StatusOK).decode(&res)
	if !res.Success || len(res.Results) != 2 {
		t.Fatalf("transaction %+v", res)
	}
	if r := res.Results[0]; r.Type != "ack" || !r.Success || r.TransactionID != "a" {
		t.Fatalf("ack result %+v", r)
	}
	if r := res.Results[1]; r.Type != "push" || len(r.Messages) != 1 || r.Messages[0].Status != "queued" || r.Messages[0].TransactionID != "a-next" {
		t.Fatalf("push result %+v", r)
	}
	if out := s.pop("out", "").Messages[0]; string(out.Data) != `{"step":2}` {
		t.Fatalf("pushed %s", out.Data)
	}
	s.call("GET", "/api/v1/pop/queue/in", "").want(http.StatusNoContent)
}

func TestTransactionIsAllOrNothing(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("in", "", "a", `1`)
	m := s.pop("in", "").Messages[0]
	// The push comes first, then an ack that is refused: nothing happens.
	body := fmt.Sprintf(`{"operations":[
		{"type":"push","items":[{"queue":"out","payload":1}]},
		{"type":"ack","transactionId":"a","partitionId":%q,"leaseId":"0190a0a0-0000-7000-8000-000000000000","status":"completed"}]}`, m.PartitionID)
	s.call("POST", "/api/v1/transaction", body).wantError(http.StatusConflict, "operations[1]", "not the lease")
	s.call("GET", "/api/v1/resources/queues/out", "").wantError(http.StatusNotFound)
	// The message is still leased to its holder.
	s.ack(m, "completed", "").want(http.StatusOK)
}

func TestTransactionAckKeepsErrorText(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("in", "", "a", `1`)
	m := s.pop("in", "consumerGroup=g").Messages[0]
	body := fmt.Sprintf(`{"operations":[{"type":"ack","transactionId":"a","partitionId":%q,"leaseId":%q,"status":"dlq","error":"card declined","consumerGroup":"g"}]}`,
		m.PartitionID, *m.LeaseID)
	s.call("POST", "/api/v1/transaction", body).want(http.StatusOK)
	d := s.deadLetters("queue=in")
	if len(d.Messages) != 1 || d.Messages[0].ErrorMessage != "card declined" {
		t.Fatalf("dead letters %+v", d.Messages)
	}
}

func TestTransactionRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := setup(t)
	// Queue mode has read a queue, so that acks get as far as the partition.
	s.push("q", "", "a", `1`)
	s.pop("q", "")
	cases := []struct {
		name, body string
		status     int
		want       []string
	}{
		{"NoOperations", `{"operations":[]}`, http.StatusBadRequest, []string{"at least one"}},
		{"UnknownType", `{"operations":[{"type":"nack"}]}`, http.StatusBadRequest, []string{"type must be"}},
		{"BadPush", `{"operations":[{"type":"push","items":[{"queue":"q"}]}]}`, http.StatusBadRequest, []string{"operations[0]", "payload"}},
		{"ItemsNotArray", `{"operations":[{"type":"push","items":"x"}]}`, http.StatusBadRequest, []string{"items", "array"}},
		{"UnknownAckStatus", `{"operations":[{"type":"ack","transactionId":"a","partitionId":"p","status":"maybe"}]}`, http.StatusBadRequest, []string{"status must be"}},
		{"UnknownPartition", `{"operations":[{"type":"ack","transactionId":"a","partitionId":"p","status":"completed"}]}`, http.StatusNotFound, []string{"partition"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("POST", "/api/v1/transaction", tc.body).wantError(tc.status, tc.want...)
		})
	}
}

// requiredLeases has the cap of operations: a 400 naming it, nothing done.
func TestTransactionRequiredLeasesLimit(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ids := make([]string, broker.MaxAcks+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", i)
	}
	body, _ := json.Marshal(map[string]any{"operations": []map[string]any{{"type": "push", "items": []map[string]any{{"queue": "out", "payload": 1}}}}, "requiredLeases": ids})
	s.call("POST", "/api/v1/transaction", string(body)).wantError(http.StatusBadRequest, "requiredLeases", "at most 1000", "got 1001")
	s.call("GET", "/api/v1/resources/queues/out", "").wantError(http.StatusNotFound)
}

// An ack that lands behind a failure in its lease settles nothing (it is
// "requeued": its message comes back after the failed one). A transaction
// holding one is not all done, so none of it is: 409 naming the
// operation, the push not stored, the lease as it was. (With the lease in
// requiredLeases it is refused before, as a lease no longer live.)
func TestTransactionWithARequeuedAckDoesNothing(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("in", `{"retryLimit":1,"retryDelay":0}`)
	s.push("in", "", "a1", `1`)
	s.push("in", "", "a2", `2`)
	ms := s.pop("in", "batch=10").Messages
	if len(ms) != 2 {
		t.Fatalf("popped %+v", ms)
	}
	s.ack(ms[0], "failed", "down").want(http.StatusOK)
	body := fmt.Sprintf(`{"operations":[
		{"type":"push","items":[{"queue":"out","payload":2,"transactionId":"a2-next"}]},
		{"type":"ack","transactionId":"a2","partitionId":%q,"leaseId":%q,"status":"completed"}]}`,
		ms[1].PartitionID, *ms[1].LeaseID)
	s.call("POST", "/api/v1/transaction", body).wantError(http.StatusConflict, "operations[1]", `"a2"`, "not settled", "nothing was done")
	s.call("GET", "/api/v1/resources/queues/out", "").wantError(http.StatusNotFound)
	// The lease is as it was: a2's ack still lands behind the failure.
	var a struct {
		Success  bool `json:"success"`
		Requeued bool `json:"requeued"`
	}
	s.ack(ms[1], "completed", "").want(http.StatusOK).decode(&a)
	if a.Success || !a.Requeued {
		t.Fatalf("a2's ack after the refused transaction: %+v, want requeued", a)
	}
	// Both come back, a1 first.
	ms = s.pop("in", "batch=10").Messages
	if len(ms) != 2 || ms[0].TransactionID != "a1" || ms[1].TransactionID != "a2" {
		t.Fatalf("next pop: %+v", ms)
	}
}
