package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// queenTrace is what the JS client's message.trace({traceName, eventType,
// data}) posts; the Go client sends the same fields, traceNames left out
// when it has none.
const queenTrace = `{"transactionId":%q,"partitionId":%q,"consumerGroup":%q,"traceNames":%s,"eventType":%q,"data":%s}`

type traceAnswer struct {
	Success bool    `json:"success"`
	TraceID *string `json:"traceId"`
	Kept    bool    `json:"kept"`
	Dropped bool    `json:"dropped"`
	DataCut *struct {
		KeptBytes int `json:"keptBytes"`
		SentBytes int `json:"sentBytes"`
	} `json:"dataCut"`
}

type traceSeen struct {
	ID            int64           `json:"id"`
	ConsumerGroup string          `json:"consumerGroup"`
	EventType     string          `json:"eventType"`
	TraceNames    []string        `json:"traceNames"`
	Data          json.RawMessage `json:"data"`
	DataText      *string         `json:"dataText"`
	DroppedAfter  int64           `json:"droppedAfter"`
}

func (s *bundle) trace(m message, group, names, event, data string) traceAnswer {
	s.t.Helper()
	var a traceAnswer
	s.call("POST", "/api/v1/traces", fmt.Sprintf(queenTrace, m.TransactionID, m.PartitionID, group, names, event, data)).want(http.StatusCreated).decode(&a)
	return a
}

// A worker's traces of a message (Queen's message.trace()) are kept with
// it and shown in the history of its dead letter, API and page; data over
// the limit is cut and says so.
func TestQueenTracesAreShownInTheDeadLetterHistory(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("orders", `{"retryLimit":0}`)
	s.push("orders", "", "o1", `{"n":1}`)
	m := s.pop("orders", "consumerGroup=workers").Messages[0]
	if a := s.trace(m, "workers", `["order-flow","tenant-7"]`, "processing", `{"step":"charge","note":"<script>x</script>"}`); !a.Success || !a.Kept || a.TraceID == nil || a.DataCut != nil {
		t.Fatalf("trace: %+v", a)
	}
	// The Go client's form: no traceNames; a single name as a string too.
	s.call("POST", "/api/v1/traces", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"consumerGroup":"workers","eventType":"info","data":{"a":1}}`, m.TransactionID, m.PartitionID)).want(http.StatusCreated)
	big := `{"blob":"` + strings.Repeat("b", broker.MaxTraceData) + `"}`
	if a := s.trace(m, "workers", `"big-one"`, "error", big); !a.Kept || a.DataCut == nil || a.DataCut.SentBytes != len(big) || a.DataCut.KeptBytes != broker.MaxTraceData {
		t.Fatalf("big trace: %+v", a)
	}
	s.ack(m, "failed", "card declined").want(http.StatusOK)
	d := s.deadLetters("queue=orders&transactionId=o1").Messages[0]

	var got struct {
		History struct {
			Traces []traceSeen `json:"traces"`
		} `json:"history"`
	}
	s.call("GET", "/api/v1/dlq/"+d.ID, "").want(http.StatusOK).decode(&got)
	ts := got.History.Traces
	if len(ts) != 3 {
		t.Fatalf("traces %+v", ts)
	}
	if ts[0].EventType != "processing" || ts[0].ConsumerGroup != "workers" || strings.Join(ts[0].TraceNames, ",") != "order-flow,tenant-7" || string(ts[0].Data) != `{"step":"charge","note":"<script>x</script>"}` {
		t.Errorf("first trace %+v", ts[0])
	}
	if ts[1].EventType != "info" || len(ts[1].TraceNames) != 0 || strings.Join(ts[2].TraceNames, ",") != "big-one" {
		t.Errorf("traces' names and types: %+v", ts)
	}
	if string(ts[2].Data) != "null" || ts[2].DataText == nil || len(*ts[2].DataText) != broker.MaxTraceData {
		t.Errorf("cut trace %+v", ts[2])
	}

	b, _ := s.loggedIn(broker.RoleViewer)
	page := b.get("/queues/orders/dead-letters/" + d.ID).want(http.StatusOK)
	if got := page.testid("traces"); !strings.Contains(got, "processing") || !strings.Contains(got, "order-flow, tenant-7") || !strings.Contains(got, `"note":"<script>x</script>"`) {
		t.Fatalf("page traces %q", got)
	}
	if strings.Contains(string(page.body), "<script>x</script>") {
		t.Fatal("trace data not escaped on the page")
	}
	if got := page.testid("trace-cut"); !strings.Contains(got, "the worker sent more") {
		t.Fatalf("page trace cut %q", got)
	}
}

// A message keeps MaxTracesPerMessage traces; the later ones are counted
// on the last and said, not kept silently. Bad traces are refused.
func TestQueenTracesAreBoundedAndChecked(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0}`)
	s.push("q", "", "m", `1`)
	m := s.pop("q", "").Messages[0]
	for i := range broker.MaxTracesPerMessage {
		s.trace(m, "", `null`, "info", fmt.Sprintf(`{"i":%d}`, i))
	}
	for range 2 {
		if a := s.trace(m, "", `null`, "info", `{"i":"over"}`); !a.Success || a.Kept || !a.Dropped || a.TraceID != nil {
			t.Fatalf("trace over the bound: %+v", a)
		}
	}
	for _, tc := range []struct{ name, body, want string }{
		{"NoMessage", fmt.Sprintf(`{"transactionId":"nope","partitionId":%q,"data":{}}`, m.PartitionID), "not found"},
		{"NoPartition", `{"transactionId":"m","partitionId":"019a0000-0000-7000-8000-000000000000","data":{}}`, "not found"},
	} {
		s.call("POST", "/api/v1/traces", tc.body).wantError(http.StatusNotFound, tc.want)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"NoData", fmt.Sprintf(`{"transactionId":"m","partitionId":%q}`, m.PartitionID), "data"},
		{"NoIDs", `{"data":{}}`, "transactionId"},
		{"NamesNotText", fmt.Sprintf(`{"transactionId":"m","partitionId":%q,"traceNames":[1],"data":{}}`, m.PartitionID), "traceNames"},
		{"Unknown", fmt.Sprintf(`{"transactionId":"m","partitionId":%q,"data":{},"colour":1}`, m.PartitionID), "colour"},
		{"LongEvent", fmt.Sprintf(`{"transactionId":"m","partitionId":%q,"eventType":%q,"data":{}}`, m.PartitionID, strings.Repeat("e", 65)), "eventType"},
		{"BadGroup", fmt.Sprintf(`{"transactionId":"m","partitionId":%q,"consumerGroup":"a\u0000b","data":{}}`, m.PartitionID), "consumerGroup"},
		{"LongGroup", fmt.Sprintf(`{"transactionId":"m","partitionId":%q,"consumerGroup":%q,"data":{}}`, m.PartitionID, strings.Repeat("g", 256)), "consumerGroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.sub(t).call("POST", "/api/v1/traces", tc.body).wantError(http.StatusBadRequest, tc.want)
		})
	}
	s.ack(m, "dlq", "bad").want(http.StatusOK)
	d := s.deadLetters("queue=q").Messages[0]
	var got struct {
		History struct {
			Traces []traceSeen `json:"traces"`
		} `json:"history"`
	}
	s.call("GET", "/api/v1/dlq/"+d.ID, "").want(http.StatusOK).decode(&got)
	ts := got.History.Traces
	if len(ts) != broker.MaxTracesPerMessage || ts[len(ts)-1].DroppedAfter != 2 || ts[0].DroppedAfter != 0 {
		t.Fatalf("%d traces, the last dropped after %d", len(ts), ts[len(ts)-1].DroppedAfter)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	if got := b.get("/queues/q/dead-letters/" + d.ID).want(http.StatusOK).testid("trace-dropped"); !strings.Contains(got, "2 later traces were not kept") {
		t.Fatalf("page: %q", got)
	}
}

// Traces are kept while their message or its dead letters are: a traced
// message retention removed goes with its traces, one with a dead letter
// keeps them; a deleted queue takes its traces.
func TestQueenTracesLiveAsLongAsTheirMessageOrDeadLetters(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0,"retentionSeconds":60}`)
	s.push("q", "a", "plain", `1`)
	s.push("q", "b", "failed", `2`)
	pa := s.pop("q/partition/a", "").Messages[0]
	pb := s.pop("q/partition/b", "").Messages[0]
	s.trace(pa, "", `null`, "info", `{"m":"plain"}`)
	s.trace(pb, "", `null`, "info", `{"m":"failed"}`)
	s.ack(pa, "completed", "").want(http.StatusOK)
	s.ack(pb, "failed", "boom").want(http.StatusOK)
	count := func() int {
		t.Helper()
		var n int
		if err := s.db.WriteDB().QueryRowContext(s.ctx, `SELECT COUNT(*) FROM message_traces`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	s.clock.Advance(61 * time.Second)
	if _, err := s.broker.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d traces after retention, want the dead letter's 1", n)
	}
	d := s.deadLetters("queue=q").Messages[0]
	b, _ := s.loggedIn(broker.RoleViewer)
	if got := b.get("/queues/q/dead-letters/" + d.ID).want(http.StatusOK).testid("traces"); !strings.Contains(got, `{"m":"failed"}`) {
		t.Fatalf("page traces %q", got)
	}
	s.call("DELETE", "/api/v1/resources/queues/q", "").want(http.StatusOK)
	if n := count(); n != 0 {
		t.Fatalf("%d traces after the queue's delete", n)
	}
}
