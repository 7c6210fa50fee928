package web_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestPush(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var out []pushed
	s.call("POST", "/api/v1/push", `{"items":[
		{"queue":"q","payload":{"n":1},"transactionId":"a"},
		{"queue":"q","partition":"p2","payload":null},
		{"queue":"other","payload":[1,2],"traceId":"trace-1"}]}`).want(http.StatusCreated).decode(&out)
	if len(out) != 3 {
		t.Fatalf("results %+v", out)
	}
	if out[0].Status != "queued" || out[0].TransactionID != "a" || out[0].Queue != "q" || out[0].Partition != "Default" || out[0].MessageID == "" || out[0].PartitionID == "" {
		t.Fatalf("item 0 %+v", out[0])
	}
	if out[1].Partition != "p2" || out[1].TransactionID == "" || out[1].PartitionID == out[0].PartitionID {
		t.Fatalf("item 1 %+v", out[1])
	}
	if out[2].Queue != "other" {
		t.Fatalf("item 2 %+v", out[2])
	}
	// The null payload is a payload, delivered as null.
	p := s.pop("q", "")
	if string(p.Messages[0].Data) != `{"n":1}` {
		t.Fatalf("data %s", p.Messages[0].Data)
	}
	p2 := s.call("GET", "/api/v1/pop/queue/q/partition/p2", "")
	if !strings.Contains(string(p2.want(http.StatusOK).body), `"data":null`) {
		t.Fatalf("null payload: %s", p2.body)
	}
	var o popped
	s.call("GET", "/api/v1/pop/queue/other", "").want(http.StatusOK).decode(&o)
	if o.Messages[0].TraceID == nil || *o.Messages[0].TraceID != "trace-1" {
		t.Fatalf("trace %+v", o.Messages[0])
	}
}

func TestPushDuplicateTransactionID(t *testing.T) {
	t.Parallel()
	s := setup(t)
	first := s.push("q", "", "order-1", `{"v":1}`)
	second := s.push("q", "", "order-1", `{"v":2}`)
	if first.Status != "queued" || second.Status != "duplicate" || second.MessageID != first.MessageID {
		t.Fatalf("first %+v second %+v", first, second)
	}
	// The same transactionId in another partition is another message.
	other := s.push("q", "p2", "order-1", `{"v":3}`)
	if other.Status != "queued" || other.MessageID == first.MessageID {
		t.Fatalf("other partition %+v", other)
	}
	p := s.pop("q", "batch=10")
	if len(p.Messages) != 1 || string(p.Messages[0].Data) != `{"v":1}` {
		t.Fatalf("popped %+v", p.Messages)
	}
}

func TestPushRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := setup(t)
	cases := []struct {
		name, body string
		want       []string
	}{
		{"NoItems", `{}`, []string{"at least one"}},
		{"NullItems", `{"items":null}`, []string{"at least one"}},
		{"ItemsNotArray", `{"items":{"queue":"q"}}`, []string{`"items"`, "array"}},
		{"QueueNotString", `{"items":[{"queue":5,"payload":1}]}`, []string{"queue", "string"}},
		{"MissingPayload", `{"items":[{"queue":"q"}]}`, []string{"payload is required"}},
		{"BadQueueName", `{"items":[{"queue":"a/b","payload":1}]}`, []string{"items[0]", "queue name"}},
		{"UnknownItemField", `{"items":[{"queue":"q","payload":1,"data":2}]}`, []string{`unknown field "data"`}},
		{"LongTransactionID", `{"items":[{"queue":"q","payload":1,"transactionId":"` + strings.Repeat("t", 300) + `"}]}`, []string{"transactionId"}},
		// A payload that is not JSON fails the body's decoding: the broker,
		// told the payloads were checked, never sees it.
		{"PayloadNotJSON", `{"items":[{"queue":"q","payload":{bad}}]}`, []string{"invalid character"}},
		{"PayloadCut", `{"items":[{"queue":"q","payload":[1,2}]}`, []string{"invalid character"}},
		// One bad item fails the whole push.
		{"SecondItemBad", `{"items":[{"queue":"q","payload":1},{"queue":"","payload":2}]}`, []string{"items[1]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("POST", "/api/v1/push", tc.body).wantError(http.StatusBadRequest, tc.want...)
		})
	}
	s.call("GET", "/api/v1/resources/queues/q", "").wantError(http.StatusNotFound)
}
