package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// An ack's consumerVersion that is too long, holds a control character
// or is not text is a 400 that names it, for a single ack, any ack of a
// batch, the batch's default and an ack inside a transaction; nothing
// changes: the messages are still leased, and acked with good versions
// after.
func TestConsumerVersionRefusals(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	p := s.pop("q", "batch=2")
	one := func(m message, version any) map[string]any {
		a := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": *m.LeaseID, "status": "dlq", "error": "boom"}
		if version != nil {
			a["consumerVersion"] = version
		}
		return a
	}
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, bad := range map[string]any{
		"TooLong": strings.Repeat("v", 65),
		"Newline": "v1\nv2",
		"NUL":     "v1\x00",
		"Escape":  "\x1b[31mv1",
		"Number":  1.2,
	} {
		t.Run(name, func(t *testing.T) {
			s := s.sub(t)
			s.call("POST", "/api/v1/ack", js(one(p.Messages[0], bad))).wantError(http.StatusBadRequest, "consumerVersion")
			s.call("POST", "/api/v1/ack/batch", js(map[string]any{"acknowledgments": []any{one(p.Messages[0], "ok"), one(p.Messages[1], bad)}})).
				wantError(http.StatusBadRequest, "consumerVersion")
			s.call("POST", "/api/v1/ack/batch", js(map[string]any{"consumerVersion": bad, "acknowledgments": []any{one(p.Messages[0], nil)}})).
				wantError(http.StatusBadRequest, "consumerVersion")
			ops := []any{}
			for i, v := range []any{"ok", bad} {
				op := one(p.Messages[i], v)
				op["type"] = "ack"
				ops = append(ops, op)
			}
			s.call("POST", "/api/v1/transaction", js(map[string]any{"operations": ops})).wantError(http.StatusBadRequest, "consumerVersion")
		})
	}
	if l := s.deadLetters("queue=q"); l.Total != 0 {
		t.Fatalf("the refusals filed %d dead letters", l.Total)
	}
	// The batch's version is the default of the acks that say none.
	var res []map[string]any
	s.call("POST", "/api/v1/ack/batch", js(map[string]any{"consumerVersion": "2.4.1", "acknowledgments": []any{one(p.Messages[0], nil), one(p.Messages[1], "2.5.0-rc.1")}})).
		want(http.StatusOK).decode(&res)
	if len(res) != 2 || res[0]["dlq"] != true || res[1]["dlq"] != true {
		t.Fatalf("batch: %v", res)
	}
	for txid, want := range map[string]string{"a": "2.4.1", "b": "2.5.0-rc.1"} {
		var l struct{ Messages []map[string]any }
		s.call("GET", "/api/v1/dlq?queue=q&transactionId="+txid, "").want(http.StatusOK).decode(&l)
		if len(l.Messages) != 1 || l.Messages[0]["consumerVersion"] != want {
			t.Fatalf("dead letter of %s: %v, want version %s", txid, l.Messages, want)
		}
	}
}

// GET /api/v1/dlq filters by consumerVersion (its total too), and so do
// a bulk action and an export by filter; a dead letter's JSON carries its
// version, and none when the ack said none.
func TestDeadLettersFilterByConsumerVersion(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0,"retryDelay":0}`)
	for i, v := range []string{"1.0", "1.1", "", "1.1"} {
		s.push("q", "", fmt.Sprintf("m%d", i), `{}`)
		m := s.pop("q", "consumerGroup=g").Messages[0]
		body, _ := json.Marshal(map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": *m.LeaseID,
			"status": "failed", "error": "boom", "consumerGroup": "g", "consumerVersion": v})
		s.call("POST", "/api/v1/ack", string(body)).want(http.StatusOK)
	}
	var l struct {
		Messages []map[string]any
		Total    int64
	}
	s.call("GET", "/api/v1/dlq?queue=q&consumerVersion=1.1", "").want(http.StatusOK).decode(&l)
	if l.Total != 2 || len(l.Messages) != 2 || l.Messages[0]["transactionId"] != "m3" || l.Messages[1]["transactionId"] != "m1" {
		t.Fatalf("list of 1.1: %v", l)
	}
	var one map[string]any
	s.call("GET", "/api/v1/dlq/"+l.Messages[0]["id"].(string), "").want(http.StatusOK).decode(&one)
	if one["consumerVersion"] != "1.1" {
		t.Fatalf("dead letter: %v", one)
	}
	var none struct{ Messages []map[string]any }
	s.call("GET", "/api/v1/dlq?queue=q&transactionId=m2", "").want(http.StatusOK).decode(&none)
	if _, ok := none.Messages[0]["consumerVersion"]; len(none.Messages) != 1 || ok {
		t.Fatalf("a dead letter of an ack without a version: %v", none.Messages)
	}
	s.call("GET", "/api/v1/dlq?queue=q&consumerVersion="+strings.Repeat("v", 65), "").wantError(http.StatusBadRequest, "consumerVersion")

	export := s.call("GET", "/api/v1/dlq/export?queue=q&consumerVersion=1.0&format=ndjson", "").want(http.StatusOK)
	if n := strings.Count(strings.TrimSpace(string(export.body)), "\n") + 1; n != 1 || !strings.Contains(string(export.body), `"m0"`) {
		t.Fatalf("export of 1.0: %d lines\n%s", n, export.body)
	}
	var c bulkCount
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"q","consumerVersion":"1.1"},"dryRun":true}`).want(http.StatusOK).decode(&c)
	if c.Matching == nil || *c.Matching != 2 {
		t.Fatalf("dry run of 1.1: %s", mustJSON(c))
	}
	var res bulkAnswer
	s.call("POST", "/api/v1/dlq/delete", `{"wait":true,"filter":{"queue":"q","consumerVersion":"1.1"}}`).want(http.StatusOK).decode(&res)
	if res.Done != 2 {
		t.Fatalf("delete of 1.1: %s", mustJSON(res))
	}
	if left := s.deadLetters("queue=q"); left.Total != 2 {
		t.Fatalf("%d left, want the 2 of other versions", left.Total)
	}
}
