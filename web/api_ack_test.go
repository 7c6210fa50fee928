package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

type acked struct {
	TransactionID  string `json:"transactionId"`
	Status         string `json:"status"`
	ConsumerGroup  string `json:"consumerGroup"`
	Success        bool   `json:"success"`
	DLQ            bool   `json:"dlq"`
	Dropped        bool   `json:"dropped"`
	AcknowledgedAt string `json:"acknowledgedAt"`
}

func TestAckCompleted(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	m := s.pop("q", "").Messages[0]
	var a acked
	s.ack(m, "completed", "").want(http.StatusOK).decode(&a)
	if !a.Success || a.TransactionID != "a" || a.Status != "completed" || a.DLQ || a.ConsumerGroup != "__QUEUE_MODE__" || a.AcknowledgedAt == "" {
		t.Fatalf("ack %+v", a)
	}
	if m := s.pop("q", "").Messages[0]; m.TransactionID != "b" {
		t.Fatalf("next %+v", m)
	}
}

func TestAckWithoutLeaseOrPartition(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	m := s.pop("q", "consumerGroup=g").Messages[0]
	// The partitionId alone is enough, as in Queen.
	s.call("POST", "/api/v1/ack", fmt.Sprintf(`{"transactionId":"a","partitionId":%q,"status":"completed","consumerGroup":"g"}`, m.PartitionID)).want(http.StatusOK)
	s.push("q", "", "b", `2`)
	m = s.pop("q", "consumerGroup=g").Messages[0]
	// And so is the leaseId.
	s.call("POST", "/api/v1/ack", fmt.Sprintf(`{"transactionId":"b","leaseId":%q,"status":"completed","consumerGroup":"g"}`, *m.LeaseID)).want(http.StatusOK)
}

func TestAckRetryAndFailed(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":1,"retryDelay":1000}`)
	s.push("q", "", "a", `1`)
	m := s.pop("q", "").Messages[0]
	// retry: back at once, no retry spent.
	s.ack(m, "retry", "").want(http.StatusOK)
	m = s.pop("q", "").Messages[0]
	if m.TransactionID != "a" || m.RetryCount != 0 {
		t.Fatalf("after retry %+v", m)
	}
	// failed: back after retryDelay, one retry spent.
	var a acked
	s.ack(m, "failed", "first").want(http.StatusOK).decode(&a)
	if a.DLQ {
		t.Fatalf("filed with retries left: %+v", a)
	}
	s.call("GET", "/api/v1/pop/queue/q", "").want(http.StatusNoContent)
	s.clock.Advance(1001 * time.Millisecond)
	m = s.pop("q", "").Messages[0]
	if m.RetryCount != 1 {
		t.Fatalf("retryCount %d", m.RetryCount)
	}
	s.ack(m, "failed", "second").want(http.StatusOK).decode(&a)
	if !a.DLQ {
		t.Fatalf("not filed after the last retry: %+v", a)
	}
	d := s.deadLetters("queue=q")
	if len(d.Messages) != 1 || d.Messages[0].ErrorMessage != "second" || d.Messages[0].RetryCount != 1 {
		t.Fatalf("dead letters %+v", d.Messages)
	}
}

func TestAckRefusals(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	p := s.pop("q", "batch=2")
	m := p.Messages[0]
	body := func(fields map[string]any) string {
		base := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": *m.LeaseID, "status": "completed"}
		for k, v := range fields {
			if v == nil {
				delete(base, k)
			} else {
				base[k] = v
			}
		}
		b, _ := json.Marshal(base)
		return string(b)
	}
	cases := []struct {
		name   string
		body   string
		status int
		want   string
	}{
		{"UnknownStatus", body(map[string]any{"status": "done"}), http.StatusBadRequest, "status must be"},
		{"StatusNotString", body(map[string]any{"status": 1}), http.StatusBadRequest, `"status"`},
		{"MissingTransactionID", body(map[string]any{"transactionId": nil}), http.StatusBadRequest, "transactionId"},
		{"NoPartitionNorLease", body(map[string]any{"partitionId": nil, "leaseId": nil}), http.StatusBadRequest, "partitionId or leaseId"},
		{"NotTheMessagesLease", body(map[string]any{"leaseId": "0190a0a0-0000-7000-8000-000000000000"}), http.StatusConflict, "not the lease"},
		{"OtherGroup", body(map[string]any{"consumerGroup": "stranger"}), http.StatusConflict, "stranger"},
		{"UnknownPartition", body(map[string]any{"partitionId": "nope", "leaseId": nil}), http.StatusNotFound, "partition"},
		{"UnknownMessage", body(map[string]any{"transactionId": "zzz"}), http.StatusNotFound, "zzz"},
		{"UnknownField", body(map[string]any{"colour": "red"}), http.StatusBadRequest, "colour"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("POST", "/api/v1/ack", tc.body).wantError(tc.status, tc.want)
		})
	}
	// The refusals changed nothing: the lease is intact and the message
	// can be acked by its holder, once.
	s.call("GET", "/api/v1/pop/queue/q", "").want(http.StatusNoContent)
	s.ack(m, "completed", "").want(http.StatusOK)
	s.ack(m, "completed", "").wantError(http.StatusConflict, "already acknowledged")
	s.ack(p.Messages[1], "completed", "").want(http.StatusOK)
	s.ack(p.Messages[1], "completed", "").wantError(http.StatusConflict, "not leased")
}

func TestAckAfterLeaseRanOut(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"leaseTime":10}`)
	s.push("q", "", "a", `1`)
	m := s.pop("q", "").Messages[0]
	s.clock.Advance(11 * time.Second)
	s.ack(m, "completed", "").wantError(http.StatusConflict, "lease ran out")
	// It comes back, no retry spent, under a new lease.
	m2 := s.pop("q", "").Messages[0]
	if m2.TransactionID != "a" || m2.RetryCount != 0 || *m2.LeaseID == *m.LeaseID {
		t.Fatalf("redelivered %+v", m2)
	}
	// The old lease is no use any more; the new one is.
	s.ack(m, "completed", "").wantError(http.StatusConflict)
	s.ack(m2, "completed", "").want(http.StatusOK)
}

func TestAckBatch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0}`)
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	s.push("q", "", "c", `3`)
	p := s.pop("q", "batch=3&consumerGroup=g")
	a, b := p.Messages[0], p.Messages[1]
	body := fmt.Sprintf(`{"consumerGroup":"g","acknowledgments":[
		{"transactionId":"a","partitionId":%q,"leaseId":%q,"status":"completed"},
		{"transactionId":"b","partitionId":%q,"leaseId":%q,"status":"dlq","error":"bad input"},
		{"transactionId":"c","partitionId":%q,"status":"finished"},
		{"transactionId":"nope","partitionId":%q,"status":"completed"}]}`,
		a.PartitionID, *a.LeaseID, b.PartitionID, *b.LeaseID, a.PartitionID, a.PartitionID)
	var res []struct {
		TransactionID string  `json:"transactionId"`
		Success       bool    `json:"success"`
		Error         *string `json:"error"`
		DLQ           bool    `json:"dlq"`
	}
	s.call("POST", "/api/v1/ack/batch", body).want(http.StatusOK).decode(&res)
	if len(res) != 4 {
		t.Fatalf("results %+v", res)
	}
	if !res[0].Success || res[0].Error != nil || res[0].DLQ {
		t.Fatalf("a %+v", res[0])
	}
	if !res[1].Success || !res[1].DLQ {
		t.Fatalf("b %+v", res[1])
	}
	if res[2].Success || res[2].Error == nil || !contains(*res[2].Error, "status must be") {
		t.Fatalf("c %+v", res[2])
	}
	if res[3].Success || res[3].Error == nil || res[3].TransactionID != "nope" {
		t.Fatalf("nope %+v", res[3])
	}
	// b is dead-lettered with its error; c, refused, is still leased and
	// can be acked.
	d := s.deadLetters("queue=q&consumerGroup=g")
	if len(d.Messages) != 1 || d.Messages[0].TransactionID != "b" || d.Messages[0].ErrorMessage != "bad input" {
		t.Fatalf("dead letters %+v", d.Messages)
	}
	s.ack(p.Messages[2], "completed", "").want(http.StatusOK)

	s.call("POST", "/api/v1/ack/batch", `{"acknowledgments":[]}`).wantError(http.StatusBadRequest, "at least one")
	s.call("POST", "/api/v1/ack/batch", `{"acknowledgments":{}}`).wantError(http.StatusBadRequest, "acknowledgments", "array")
}

func TestExtendLease(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"leaseTime":10}`)
	s.push("q", "", "a", `1`)
	m := s.pop("q", "").Messages[0]
	var ext struct {
		LeaseID        string `json:"leaseId"`
		LeaseExpiresAt string `json:"leaseExpiresAt"`
	}
	s.call("POST", "/api/v1/lease/"+*m.LeaseID+"/extend", `{"seconds":60}`).want(http.StatusOK).decode(&ext)
	if ext.LeaseID != *m.LeaseID || ext.LeaseExpiresAt != "2026-11-01T12:01:00.000Z" {
		t.Fatalf("extended %+v", ext)
	}
	// Past the original lease time the lease holds.
	s.clock.Advance(30 * time.Second)
	s.call("GET", "/api/v1/pop/queue/q", "").want(http.StatusNoContent)

	path := "/api/v1/lease/" + *m.LeaseID + "/extend"
	s.call("POST", path, `{"seconds":-1}`).wantError(http.StatusBadRequest, "seconds")
	s.call("POST", path, `{"seconds":0}`).wantError(http.StatusBadRequest, "seconds")
	s.call("POST", path, `{"seconds":"60"}`).wantError(http.StatusBadRequest, `"seconds"`, "whole number")
	s.call("POST", path, `{"seconds":1.5}`).wantError(http.StatusBadRequest, `"seconds"`)
	s.call("POST", "/api/v1/lease/no-such-lease/extend", `{"seconds":60}`).wantError(http.StatusNotFound, "lease")

	s.ack(m, "completed", "").want(http.StatusOK)
	s.call("POST", path, `{"seconds":60}`).wantError(http.StatusNotFound)
}

// The worker of docs/concepts.md: it stops at a batch's first failure,
// since the messages behind it come back. On the failure's last try too:
// they come back at once, and the acks of one /ack/batch behind it say
// they settled nothing (issue 28, point 1).
func TestAckBatchBehindALastTryFailureSaysItComesBack(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":1,"retryDelay":1000}`)
	for _, tx := range []string{"a1", "a2", "a3", "a4"} {
		s.push("q", "", tx, `1`)
	}
	ms := s.pop("q", "batch=10").Messages
	s.ack(ms[0], "completed", "").want(http.StatusOK)
	s.ack(ms[1], "failed", "down").want(http.StatusOK)
	s.clock.Advance(1001 * time.Millisecond)
	ms = s.pop("q", "batch=10").Messages
	if len(ms) != 3 || ms[0].TransactionID != "a2" {
		t.Fatalf("after the retry delay: %+v", ms)
	}
	body := `{"acknowledgments":[`
	for i, m := range ms {
		status := "completed"
		if i == 0 {
			status = "failed"
		}
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"leaseId":%q,"status":%q,"error":"still down"}`, m.TransactionID, m.PartitionID, *m.LeaseID, status)
	}
	var res []struct {
		TransactionID string  `json:"transactionId"`
		Success       bool    `json:"success"`
		Error         *string `json:"error"`
		DLQ           bool    `json:"dlq"`
		Requeued      bool    `json:"requeued"`
	}
	s.call("POST", "/api/v1/ack/batch", body+`]}`).want(http.StatusOK).decode(&res)
	if len(res) != 3 || !res[0].Success || !res[0].DLQ || res[0].Requeued {
		t.Fatalf("the failure's result: %+v", res)
	}
	for _, r := range res[1:] {
		if r.Success || !r.Requeued || r.Error == nil || *r.Error == "" {
			t.Fatalf("%s behind the failure: %+v, want not settled, requeued, with a reason", r.TransactionID, r)
		}
	}
	// A single ack under the ended lease says the same, and changes nothing.
	var a struct {
		Success  bool   `json:"success"`
		Error    string `json:"error"`
		Requeued bool   `json:"requeued"`
	}
	s.ack(ms[2], "completed", "").want(http.StatusOK).decode(&a)
	if a.Success || !a.Requeued || a.Error == "" {
		t.Fatalf("single ack under the ended lease: %+v", a)
	}
	// No time passes: a3 and a4 are delivered again now.
	ms = s.pop("q", "batch=10").Messages
	if len(ms) != 2 || ms[0].TransactionID != "a3" || ms[1].TransactionID != "a4" {
		t.Fatalf("next pop: %+v, want a3 a4 at once", ms)
	}
}
