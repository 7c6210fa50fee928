package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

type replayed struct {
	Status         string   `json:"status"`
	MessageID      string   `json:"messageId"`
	TransactionID  string   `json:"transactionId"`
	PartitionID    string   `json:"partitionId"`
	Queue          string   `json:"queue"`
	Partition      string   `json:"partition"`
	ConsumerGroups []string `json:"consumerGroups"`
}

// TestLifeOfAMessage follows one message through HTTP: push, pop, a
// failure with no retries left, the dead letters, replay, and back.
func TestLifeOfAMessage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const payload = `{"b":1,"a":12345678901234567890}`
	s.configure("payments", `{"retryLimit":0}`)
	p := s.push("payments", "", "pay-1", payload)

	m := s.pop("payments", "").Messages[0]
	s.clock.Advance(1500 * time.Millisecond)
	var a acked
	s.ack(m, "failed", "card <declined> & \"expired\"").want(http.StatusOK).decode(&a)
	if !a.DLQ {
		t.Fatalf("ack %+v", a)
	}

	l := s.deadLetters("queue=payments")
	if l.Total != 1 || len(l.Messages) != 1 || l.Pagination.Limit != 100 || l.Pagination.Offset != 0 {
		t.Fatalf("list %+v", l)
	}
	d := l.Messages[0]
	if d.ID != p.MessageID || d.TransactionID != "pay-1" || d.PartitionID != p.PartitionID || d.Queue != "payments" ||
		d.Partition != "Default" || d.ConsumerGroup != "__QUEUE_MODE__" || d.RetryCount != 0 || d.IsReplay {
		t.Fatalf("dead letter %+v", d)
	}
	if d.ErrorMessage != `card <declined> & "expired"` {
		t.Fatalf("errorMessage %q", d.ErrorMessage)
	}
	if string(d.Data) != payload {
		t.Fatalf("data not byte-exact: %s", d.Data)
	}
	if d.CreatedAt != "2026-11-01T12:00:00.000Z" || d.FailedAt != "2026-11-01T12:00:01.500Z" {
		t.Fatalf("times %s %s", d.CreatedAt, d.FailedAt)
	}
	// The body is not HTML-escaped.
	if r := s.call("GET", "/api/v1/dlq?queue=payments", ""); !contains(string(r.body), `card <declined> & \"expired\"`) {
		t.Fatalf("escaped body %s", r.body)
	}

	var rep replayed
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").want(http.StatusOK).decode(&rep)
	if rep.Status != "queued" || rep.TransactionID != "dlq:"+d.ID || rep.Queue != "payments" || rep.PartitionID != p.PartitionID ||
		len(rep.ConsumerGroups) != 1 || rep.ConsumerGroups[0] != "__QUEUE_MODE__" {
		t.Fatalf("replay %+v", rep)
	}
	if l := s.deadLetters("queue=payments"); l.Total != 0 || len(l.Messages) != 0 {
		t.Fatalf("dead letters after replay %+v", l)
	}

	again := s.pop("payments", "").Messages[0]
	if again.TransactionID != "dlq:"+d.ID || again.ID != rep.MessageID || string(again.Data) != payload {
		t.Fatalf("replayed message %+v", again)
	}
	s.ack(again, "completed", "").want(http.StatusOK)
	s.call("GET", "/api/v1/pop/queue/payments", "").want(http.StatusNoContent)
}

func TestReplayTwice(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("q", "", "", "a", `1`, "boom")
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").want(http.StatusOK)
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").wantError(http.StatusNotFound, d.ID)
	// One copy only.
	p := s.pop("q", "batch=10")
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != "dlq:"+d.ID {
		t.Fatalf("copies %+v", p.Messages)
	}
}

func TestReplayRemovesEveryGroupsDeadLetter(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0}`)
	s.push("q", "", "a", `1`)
	for _, g := range []string{"billing", "analytics"} {
		s.ack(s.pop("q", "consumerGroup="+g).Messages[0], "failed", g+" broke").want(http.StatusOK)
	}
	l := s.deadLetters("queue=q")
	if l.Total != 2 {
		t.Fatalf("dead letters %+v", l)
	}
	var rep replayed
	s.call("POST", "/api/v1/dlq/"+l.Messages[0].ID+"/replay", "").want(http.StatusOK).decode(&rep)
	if len(rep.ConsumerGroups) != 2 {
		t.Fatalf("replay %+v", rep)
	}
	if l := s.deadLetters("queue=q"); l.Total != 0 {
		t.Fatalf("left %+v", l)
	}
	for _, g := range []string{"billing", "analytics"} {
		if m := s.pop("q", "consumerGroup="+g).Messages[0]; m.TransactionID != rep.TransactionID {
			t.Fatalf("%s got %+v", g, m)
		}
	}
}

func TestReplayUnknown(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("POST", "/api/v1/dlq/not-an-id/replay", "").wantError(http.StatusNotFound)
	s.call("POST", "/api/v1/dlq/0190a0a0-0000-7000-8000-000000000001/replay", "").wantError(http.StatusNotFound)
}

func TestShowDeadLetter(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0}`)
	s.push("q", "", "a", `{"x":1}`)
	s.ack(s.pop("q", "consumerGroup=billing").Messages[0], "failed", "billing broke").want(http.StatusOK)
	s.ack(s.pop("q", "consumerGroup=analytics").Messages[0], "dlq", "analytics broke").want(http.StatusOK)
	id := s.deadLetters("queue=q").Messages[0].ID

	var d struct {
		deadLetter
		Others []deadLetter `json:"others"`
	}
	s.call("GET", "/api/v1/dlq/"+id+"?consumerGroup=analytics", "").want(http.StatusOK).decode(&d)
	if d.ConsumerGroup != "analytics" || d.ErrorMessage != "analytics broke" || string(d.Data) != `{"x":1}` ||
		len(d.Others) != 1 || d.Others[0].ConsumerGroup != "billing" {
		t.Fatalf("dead letter %+v", d)
	}
	s.call("GET", "/api/v1/dlq/"+id+"?consumerGroup=nobody", "").wantError(http.StatusNotFound)
	s.call("GET", "/api/v1/dlq/nope", "").wantError(http.StatusNotFound)
}

func TestDeleteDeadLetter(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0}`)
	s.push("q", "", "a", `1`)
	for _, g := range []string{"billing", "analytics"} {
		s.ack(s.pop("q", "consumerGroup="+g).Messages[0], "failed", "x").want(http.StatusOK)
	}
	id := s.deadLetters("queue=q").Messages[0].ID
	var res struct {
		Deleted int `json:"deleted"`
	}
	// Only billing's.
	s.call("DELETE", "/api/v1/dlq/"+id+"?consumerGroup=billing", "").want(http.StatusOK).decode(&res)
	if res.Deleted != 1 {
		t.Fatalf("deleted %+v", res)
	}
	l := s.deadLetters("queue=q")
	if l.Total != 1 || l.Messages[0].ConsumerGroup != "analytics" {
		t.Fatalf("left %+v", l)
	}
	s.call("DELETE", "/api/v1/dlq/"+id+"?consumerGroup=billing", "").wantError(http.StatusNotFound)
	// Then the rest; nothing is pushed by a delete.
	s.call("DELETE", "/api/v1/dlq/"+id, "").want(http.StatusOK).decode(&res)
	if res.Deleted != 1 {
		t.Fatalf("deleted %+v", res)
	}
	s.call("DELETE", "/api/v1/dlq/"+id, "").wantError(http.StatusNotFound)
	s.call("POST", "/api/v1/dlq/"+id+"/replay", "").wantError(http.StatusNotFound)
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=billing", "").want(http.StatusNoContent)
}

func TestRetryMessage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	// A transactionId with characters that must be escaped in a path.
	const txid = "order 7/b:%x"
	d := s.fail("q", "", "g", txid, `"pay"`, "boom")
	path := "/api/v1/messages/" + d.PartitionID + "/" + url.PathEscape(txid) + "/retry"
	var rep replayed
	s.call("POST", path, "").want(http.StatusOK).decode(&rep)
	if rep.TransactionID != "dlq:"+d.ID || rep.Status != "queued" {
		t.Fatalf("retry %+v", rep)
	}
	if m := s.pop("q", "consumerGroup=g").Messages[0]; m.TransactionID != "dlq:"+d.ID || string(m.Data) != `"pay"` {
		t.Fatalf("popped %+v", m)
	}
	s.call("POST", path, "").wantError(http.StatusNotFound)
	s.call("POST", "/api/v1/messages/"+d.PartitionID+"/unknown/retry", "").wantError(http.StatusNotFound, "unknown")
	s.call("POST", "/api/v1/messages/no-partition/"+url.PathEscape(txid)+"/retry", "").wantError(http.StatusNotFound, "partition")
}

func TestListDeadLettersFilters(t *testing.T) {
	t.Parallel()
	s := setup(t)
	// Five dead letters, a minute apart: newest failure first.
	s.fail("orders", "", "billing", "o-1", `1`, "timeout talking to bank")
	s.clock.Advance(time.Minute)
	s.fail("orders", "", "billing", "o-2", `2`, "card declined")
	s.clock.Advance(time.Minute)
	s.fail("orders", "ship", "shipping", "o-3", `3`, "no address")
	s.clock.Advance(time.Minute)
	s.fail("refunds", "", "billing", "r-1", `4`, "timeout again")
	s.clock.Advance(time.Minute)
	s.fail("orders", "eu", "billing", "o-eu", `5`, "eu rules")

	cases := []struct {
		name  string
		query string
		want  []string // transactionIds, in order
		total int64
	}{
		{"All", "", []string{"o-eu", "r-1", "o-3", "o-2", "o-1"}, 5},
		{"Queue", "queue=orders", []string{"o-eu", "o-3", "o-2", "o-1"}, 4},
		{"Group", "consumerGroup=billing", []string{"o-eu", "r-1", "o-2", "o-1"}, 4},
		{"QueueAndGroup", "queue=orders&consumerGroup=shipping", []string{"o-3"}, 1},
		{"Partition", "queue=orders&partition=eu", []string{"o-eu"}, 1},
		{"ErrorText", "error=timeout", []string{"r-1", "o-1"}, 2},
		{"TransactionID", "transactionId=o-2", []string{"o-2"}, 1},
		{"From", "from=2026-11-01T12:02:00Z", []string{"o-eu", "r-1", "o-3"}, 3},
		{"To", "to=2026-11-01T12:02:00Z", []string{"o-2", "o-1"}, 2},
		{"FromTo", "from=2026-11-01T12:01:00.000Z&to=2026-11-01T12:03:00Z", []string{"o-3", "o-2"}, 2},
		{"Limit", "limit=2", []string{"o-eu", "r-1"}, 5},
		{"Offset", "limit=2&offset=2", []string{"o-3", "o-2"}, 5},
		{"OffsetPastEnd", "offset=10", nil, 5},
		{"UnknownQueue", "queue=nope", nil, 0},
		{"UnknownGroup", "consumerGroup=nobody", nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			l := s.deadLetters(tc.query)
			var got []string
			for _, m := range l.Messages {
				got = append(got, m.TransactionID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || l.Total != tc.total {
				t.Fatalf("got %v total %d, want %v total %d", got, l.Total, tc.want, tc.total)
			}
			if l.Messages == nil {
				t.Fatal("messages is null, want []")
			}
		})
	}
	var l dlqList
	s.call("GET", "/api/v1/dlq?limit=2&offset=2", "").want(http.StatusOK).decode(&l)
	if l.Pagination.Limit != 2 || l.Pagination.Offset != 2 {
		t.Fatalf("pagination %+v", l.Pagination)
	}
}

func TestListDeadLettersRefusesBadQuery(t *testing.T) {
	t.Parallel()
	s := setup(t)
	cases := []struct{ name, query, want string }{
		{"LimitTooBig", "limit=1001", "limit"},
		{"LimitZero", "limit=0", "limit"},
		{"LimitNotNumber", "limit=ten", "limit"},
		{"OffsetNegative", "offset=-1", "offset"},
		{"OffsetNotNumber", "offset=x", "offset"},
		{"BadFrom", "from=yesterday", "from"},
		{"BadTo", "to=2026-13-01", "to"},
		{"ToBeforeFrom", "from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", "after"},
		{"PartitionWithoutQueue", "partition=p", "queue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("GET", "/api/v1/dlq?"+tc.query, "").wantError(http.StatusBadRequest, tc.want)
		})
	}
}

func TestBulkReplayByIDs(t *testing.T) {
	t.Parallel()
	s := setup(t)
	a := s.fail("q", "", "", "a", `1`, "x")
	b := s.fail("q", "", "", "b", `2`, "x")
	c := s.fail("q", "", "", "c", `3`, "x")
	var res bulkResult
	body := fmt.Sprintf(`{"wait":true,"ids":[%q,%q,"0190a0a0-0000-7000-8000-000000000001","junk"]}`, a.ID, b.ID)
	s.call("POST", "/api/v1/dlq/replay", body).want(http.StatusOK).decode(&res)
	if res != (bulkResult{Done: 2, Skipped: 2}) {
		t.Fatalf("result %+v", res)
	}
	l := s.deadLetters("queue=q")
	if l.Total != 1 || l.Messages[0].ID != c.ID {
		t.Fatalf("left %+v", l)
	}
	// Again: nothing left to replay, nothing copied twice.
	s.call("POST", "/api/v1/dlq/replay", body).want(http.StatusOK).decode(&res)
	if res != (bulkResult{Skipped: 4}) {
		t.Fatalf("second result %+v", res)
	}
	p := s.pop("q", "batch=10")
	if len(p.Messages) != 2 || p.Messages[0].TransactionID != "dlq:"+a.ID || p.Messages[1].TransactionID != "dlq:"+b.ID {
		t.Fatalf("copies %+v", p.Messages)
	}
}

func TestBulkReplayByFilter(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.fail("q", "", "", "a", `1`, "timeout")
	s.fail("q", "", "", "b", `2`, "bad input")
	s.fail("q", "", "", "c", `3`, "timeout")
	s.fail("other", "", "", "d", `4`, "timeout")
	var res bulkResult
	s.call("POST", "/api/v1/dlq/replay", `{"wait":true,"filter":{"queue":"q","error":"timeout"}}`).want(http.StatusOK).decode(&res)
	if res != (bulkResult{Done: 2}) {
		t.Fatalf("result %+v", res)
	}
	l := s.deadLetters("")
	if l.Total != 2 {
		t.Fatalf("left %+v", l)
	}
	for _, m := range l.Messages {
		if m.TransactionID != "b" && m.TransactionID != "d" {
			t.Fatalf("left %+v", l.Messages)
		}
	}
}

func TestBulkDelete(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0}`)
	s.push("q", "", "a", `1`)
	for _, g := range []string{"billing", "analytics"} {
		s.ack(s.pop("q", "consumerGroup="+g).Messages[0], "failed", "x").want(http.StatusOK)
	}
	id := s.deadLetters("queue=q").Messages[0].ID
	s.fail("other", "", "", "b", `2`, "y")

	var res bulkResult
	s.call("POST", "/api/v1/dlq/delete", fmt.Sprintf(`{"wait":true,"ids":[%q],"consumerGroup":"billing"}`, id)).want(http.StatusOK).decode(&res)
	if res != (bulkResult{Done: 1}) {
		t.Fatalf("by ids %+v", res)
	}
	if l := s.deadLetters("queue=q"); l.Total != 1 || l.Messages[0].ConsumerGroup != "analytics" {
		t.Fatalf("left %+v", l)
	}
	s.call("POST", "/api/v1/dlq/delete", `{"wait":true,"filter":{"queue":"q"}}`).want(http.StatusOK).decode(&res)
	if res != (bulkResult{Done: 1}) {
		t.Fatalf("by filter %+v", res)
	}
	if l := s.deadLetters(""); l.Total != 1 || l.Messages[0].Queue != "other" {
		t.Fatalf("left %+v", l)
	}
	// Nothing was pushed by the deletes.
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=billing", "").want(http.StatusNoContent)
}

func TestBulkRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("q", "", "", "a", `1`, "x")
	cases := []struct{ name, path, body, want string }{
		{"Neither", "replay", `{}`, "either ids or filter"},
		{"Both", "delete", `{"ids":["x"],"filter":{}}`, "either ids or filter"},
		{"EmptyIDs", "replay", `{"ids":[]}`, "at least one"},
		{"IDsNotArray", "delete", `{"ids":"x"}`, "ids"},
		{"IDNotString", "delete", `{"ids":[1]}`, "ids"},
		{"BadFrom", "replay", `{"filter":{"from":"soon"}}`, "filter.from"},
		{"ToBeforeFrom", "delete", `{"filter":{"from":"2026-11-02T00:00:00Z","to":"2026-11-01T00:00:00Z"}}`, "after"},
		{"UnknownFilterField", "delete", `{"filter":{"queues":"q"}}`, "queues"},
		{"GroupOutsideFilter", "delete", `{"filter":{},"consumerGroup":"g"}`, "inside filter"},
		{"GroupOnReplay", "replay", fmt.Sprintf(`{"ids":[%q],"consumerGroup":"g"}`, d.ID), `consumerGroup goes with "mode": "own"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("POST", "/api/v1/dlq/"+tc.path, tc.body).wantError(http.StatusBadRequest, tc.want)
		})
	}
	if l := s.deadLetters(""); l.Total != 1 {
		t.Fatalf("refused calls changed the dead letters: %+v", l)
	}
}

// bulkAnswer is a bulk answer by filter, as a client reads it.
type bulkAnswer struct {
	Done     int    `json:"done"`
	Skipped  int    `json:"skipped"`
	Failed   int    `json:"failed"`
	Matching *int64 `json:"matching"`
	Bound    *struct {
		FailedAt string `json:"failedAt"`
		ID       int64  `json:"id"`
	} `json:"bound"`
	ArrivedSince *int64 `json:"arrivedSince"`
}

// A client counts (a dry run), more dead letters arrive, then it acts with
// the count's bound: exactly the counted ones are touched, and the answer
// says how many arrived since.
func TestBulkByFilterActsUpToTheBound(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"replay", "delete"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			fill(t, s, "q", 30)
			fill(t, s, "other", 2)
			var count bulkAnswer
			s.call("POST", "/api/v1/dlq/"+action, `{"filter":{"queue":"q"},"dryRun":true}`).want(http.StatusOK).decode(&count)
			if count.Matching == nil || *count.Matching != 30 || count.Bound == nil || count.Bound.FailedAt == "" || count.Bound.ID == 0 || count.Done != 0 {
				t.Fatalf("dry run %s", mustJSON(count))
			}
			if l := s.deadLetters("queue=q"); l.Total != 30 {
				t.Fatalf("the dry run changed the dead letters: %d left", l.Total)
			}
			s.clock.Advance(time.Second)
			fill(t, s, "q", 11)
			body := fmt.Sprintf(`{"wait":true,"filter":{"queue":"q"},"bound":{"failedAt":%q,"id":%d}}`, count.Bound.FailedAt, count.Bound.ID)
			var res bulkAnswer
			s.call("POST", "/api/v1/dlq/"+action, body).want(http.StatusOK).decode(&res)
			if res.Done != 30 || res.ArrivedSince == nil || *res.ArrivedSince != 11 || res.Bound == nil || *res.Bound != *count.Bound {
				t.Fatalf("answer %s, want 30 done, 11 arrived since and the bound %+v", mustJSON(res), *count.Bound)
			}
			if l := s.deadLetters("queue=q"); l.Total != 11 {
				t.Fatalf("%d left in q, want the 11 that arrived since", l.Total)
			}
			if l := s.deadLetters("queue=other"); l.Total != 2 {
				t.Fatalf("%d left in other, want 2", l.Total)
			}
			// Without a bound the action takes its own, and says which.
			s.call("POST", "/api/v1/dlq/"+action, `{"wait":true,"filter":{"queue":"q"}}`).want(http.StatusOK).decode(&res)
			if res.Done != 11 || res.ArrivedSince == nil || *res.ArrivedSince != 0 || res.Bound == nil || res.Bound.ID <= count.Bound.ID {
				t.Fatalf("answer without a bound %s", mustJSON(res))
			}
		})
	}
}

// An empty or missing queue in a filter would act on every queue: that
// takes "all": true, else 400 and nothing changes.
func TestBulkEveryQueueNeedsAll(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "a", 2)
	fill(t, s, "b", 3)
	for _, path := range []string{"replay", "delete"} {
		for _, body := range []string{
			`{"filter":{}}`,
			`{"filter":{"queue":""}}`,
			`{"filter":{"consumerGroup":"g"}}`,
			`{"filter":{"error":"bad"},"dryRun":true}`,
			`{"filter":{"queue":"a"},"all":true}`,
			`{"filter":{"queue":"a","all":true}}`,
			`{"ids":["x"],"all":true}`,
			`{"filter":{"queue":"a"},"bound":{"id":3}}`,
			`{"filter":{"queue":"a"},"bound":{"failedAt":"soon"}}`,
		} {
			msg := s.call("POST", "/api/v1/dlq/"+path, body).wantError(http.StatusBadRequest)
			if body == `{"filter":{}}` && !contains(msg, `"all": true`) {
				t.Errorf("%s %s: %q does not say how to act on every queue", path, body, msg)
			}
		}
	}
	if l := s.deadLetters(""); l.Total != 5 {
		t.Fatalf("refused calls changed the dead letters: %d left of 5", l.Total)
	}
	var res bulkAnswer
	s.call("POST", "/api/v1/dlq/delete", `{"wait":true,"filter":{"queue":"a"}}`).want(http.StatusOK).decode(&res)
	if res.Done != 2 {
		t.Fatalf("one queue: %s", mustJSON(res))
	}
	s.call("POST", "/api/v1/dlq/replay", `{"wait":true,"filter":{"consumerGroup":"g"},"all":true}`).want(http.StatusOK).decode(&res)
	if res.Done != 3 {
		t.Fatalf("every queue: %s", mustJSON(res))
	}
	fill(t, s, "c", 1)
	s.call("POST", "/api/v1/dlq/delete", `{"wait":true,"filter":{"all":true}}`).want(http.StatusOK).decode(&res)
	if res.Done != 1 {
		t.Fatalf("every queue (all in the filter): %s", mustJSON(res))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
