package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// Every limit of the API answers with a status and a message that says
// which limit, and a refused call changes nothing. (The body's own cap is
// in server_test.go; the read timeouts of slow clients are tested on the
// real server, in the root package.)

// items makes a push body of n items of queue with the payload.
func items(queue string, n int, payload string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"queue":%q,"payload":%s}`, queue, payload)
	}
	return `{"items":[` + strings.Join(parts, ",") + `]}`
}

func TestPayloadSizeLimit(t *testing.T) {
	t.Parallel()
	t.Run("DefaultIsFourMiB", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		if web.DefaultMaxPayloadBytes != 4<<20 {
			t.Fatalf("default %d", web.DefaultMaxPayloadBytes)
		}
		at := `"` + strings.Repeat("x", 4<<20-2) + `"`
		s.call("POST", "/api/v1/push", items("q", 1, at)).want(http.StatusCreated)
		over := `"` + strings.Repeat("x", 4<<20-1) + `"`
		s.call("POST", "/api/v1/push", items("big", 1, over)).
			wantError(http.StatusRequestEntityTooLarge, "items[0]: payload is 4194305 bytes, over the limit of 4194304 bytes per payload")
		s.call("GET", "/api/v1/resources/queues/big", "").wantError(http.StatusNotFound)
	})
	t.Run("BodyCapLeavesRoomAboveThePayloadLimit", func(t *testing.T) {
		t.Parallel()
		// With no body cap set, it is the payload limit and the envelope's
		// room when that is over the default.
		limit := int64(web.DefaultMaxBodyBytes)
		s := setup(t, func(c *web.Config) { c.MaxPayloadBytes = limit })
		at := `"` + strings.Repeat("x", int(limit)-2) + `"`
		s.call("POST", "/api/v1/push", `{"items":[{"queue":"q","partition":"p","transactionId":"t","payload":`+at+`}]}`).want(http.StatusCreated)
	})
	t.Run("Configured", func(t *testing.T) {
		t.Parallel()
		s := setup(t, func(c *web.Config) { c.MaxPayloadBytes = 100 })
		ok := `"` + strings.Repeat("o", 98) + `"`
		big := `"` + strings.Repeat("b", 99) + `"`
		body := `{"items":[{"queue":"q","payload":` + ok + `},{"queue":"q","payload":1},{"queue":"q","payload":` + big + `}]}`
		s.call("POST", "/api/v1/push", body).wantError(http.StatusRequestEntityTooLarge, "items[2]", "101 bytes", "limit of 100 bytes")
		s.call("GET", "/api/v1/resources/queues/q", "").wantError(http.StatusNotFound)

		// The same limit holds for the pushes of a transaction.
		tx := `{"operations":[{"type":"push","items":[{"queue":"q","payload":1}]},{"type":"push","items":[{"queue":"q","payload":2},{"queue":"q","payload":` + big + `}]}]}`
		s.call("POST", "/api/v1/transaction", tx).wantError(http.StatusRequestEntityTooLarge, "operations[1].items[1]", "limit of 100 bytes")
		s.call("GET", "/api/v1/resources/queues/q", "").wantError(http.StatusNotFound)

		s.call("POST", "/api/v1/push", items("q", 2, ok)).want(http.StatusCreated)
	})
}

// JSON text is UTF-8: a payload with other bytes in its strings would be
// handed to consumers as it came, and a strict JSON parser refuses the
// whole pop over it.
func TestPayloadMustBeUTF8(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"payload\":1},{\"queue\":\"q\",\"payload\":\"bin \xff\xfe\"}]}").
		wantError(http.StatusBadRequest, "items[1]: payload is not valid UTF-8")
	s.call("POST", "/api/v1/transaction", "{\"operations\":[{\"type\":\"push\",\"items\":[{\"queue\":\"q\",\"payload\":[\"\xc3\"]}]}]}").
		wantError(http.StatusBadRequest, "operations[0].items[0]: payload is not valid UTF-8")
	s.call("GET", "/api/v1/resources/queues/q", "").wantError(http.StatusNotFound)
	// Escapes are text: a lone surrogate or a NUL written as \u escapes is
	// valid JSON and kept as sent.
	s.push("q", "", "escaped", `"\ud800 \u0000 \u202e"`)
	if d := s.pop("q", ""); string(d.Messages[0].Data) != `"\ud800 \u0000 \u202e"` {
		t.Fatalf("data %s", d.Messages[0].Data)
	}
}

func TestItemsPerPushLimit(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("POST", "/api/v1/push", items("q", broker.MaxPushItems+1, "1")).
		wantError(http.StatusBadRequest, "at most 1000 items per push, got 1001")
	s.call("GET", "/api/v1/resources/queues/q", "").wantError(http.StatusNotFound)
	var out []pushed
	s.call("POST", "/api/v1/push", items("q", broker.MaxPushItems, "1")).want(http.StatusCreated).decode(&out)
	if len(out) != broker.MaxPushItems {
		t.Fatalf("%d results", len(out))
	}
}

func TestAcksPerBatchLimit(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("POST", "/api/v1/push", items("q", 3, "1")).want(http.StatusCreated)
	p := s.pop("q", "batch=3")
	acks := make([]map[string]any, broker.MaxAcks+1)
	for i := range acks {
		m := p.Messages[i%len(p.Messages)]
		acks[i] = map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "completed"}
	}
	body, _ := json.Marshal(map[string]any{"acknowledgments": acks})
	s.call("POST", "/api/v1/ack/batch", string(body)).wantError(http.StatusBadRequest, "at most 1000 per batch, got 1001")

	ops := make([]map[string]any, broker.MaxAcks+1)
	for i := range ops {
		ops[i] = map[string]any{"type": "push", "items": []map[string]any{{"queue": "other", "payload": 1}}}
	}
	body, _ = json.Marshal(map[string]any{"operations": ops})
	s.call("POST", "/api/v1/transaction", string(body)).wantError(http.StatusBadRequest, "at most 1000 per transaction")
	s.call("GET", "/api/v1/resources/queues/other", "").wantError(http.StatusNotFound)

	// Nothing was acknowledged: the lease still holds all three.
	var res []map[string]any
	body, _ = json.Marshal(map[string]any{"acknowledgments": acks[:3]})
	s.call("POST", "/api/v1/ack/batch", string(body)).want(http.StatusOK).decode(&res)
	for _, r := range res {
		if r["success"] != true {
			t.Fatalf("ack after the refused batch: %v", res)
		}
	}
}

func TestBulkIDsLimit(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ids := make([]string, broker.MaxBulkIDs+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%d", i)
	}
	body, _ := json.Marshal(map[string]any{"ids": ids})
	for _, route := range []string{"/api/v1/dlq/replay", "/api/v1/dlq/delete"} {
		s.call("POST", route, string(body)).wantError(http.StatusBadRequest, "at most 10000 per call; use a filter")
	}
}

func TestPageSizeLimits(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "t1", "1")
	cases := []struct{ name, path, want string }{
		{"DeadLettersOver1000", "/api/v1/dlq?limit=1001", "limit must be between 1 and 1000"},
		{"DeadLettersZero", "/api/v1/dlq?limit=0", "limit must be between 1 and 1000"},
		{"PopBatchOver1000", "/api/v1/pop/queue/q?batch=1001", "batch must be between 1 and 1000"},
		{"PopBatchZero", "/api/v1/pop/queue/q?batch=0", "batch must be at least 1"},
		{"PopTimeoutOverTenMinutes", "/api/v1/pop/queue/q?wait=true&timeout=600001", "timeout must be between 0 and 600000"},
		// A huge timeout would overflow into a short wait: refused instead.
		{"PopTimeoutOverflow", "/api/v1/pop/queue/q?wait=true&timeout=18446744073710", "timeout must be between 0 and 600000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("GET", tc.path, "").wantError(http.StatusBadRequest, tc.want)
		})
	}
	s.call("GET", "/api/v1/dlq?limit=1000", "").want(http.StatusOK)
	s.call("GET", "/api/v1/pop/queue/q?batch=1000", "").want(http.StatusOK)

	// The dashboard's list offers 25, 50 and 100 rows a page, no more.
	b, _ := s.loggedIn(broker.RoleViewer)
	b.get("/queues/q/dead-letters?size=100").want(http.StatusOK)
	r := b.get("/queues/q/dead-letters?size=1000")
	if r.want(http.StatusBadRequest); !strings.Contains(string(r.body), "Size must be 25, 50 or 100") {
		t.Fatalf("page: %s", r.body)
	}
}

func TestNameRules(t *testing.T) {
	t.Parallel()
	s := setup(t)
	long := strings.Repeat("n", broker.MaxNameLength)
	bad := []struct{ name, value string }{
		{"Empty", ""}, {"Slash", "a/b"}, {"Space", "a b"}, {"Unicode", "fila-ü"}, {"RTLOverride", "abc\u202Egpj"},
		{"Markup", "<script>"}, {"NUL", "a\x00b"}, {"TooLong", long + "n"}, {"Colon", "dlq:x"},
	}
	for _, tc := range bad {
		t.Run("Queue"+tc.name, func(t *testing.T) {
			s := s.sub(t)
			body, _ := json.Marshal(map[string]any{"items": []map[string]any{{"queue": tc.value, "payload": 1}}})
			s.call("POST", "/api/v1/push", string(body)).wantError(http.StatusBadRequest, "items[0]: queue name", "must be 1-255 letters, digits, '.', '_' or '-'")
			body, _ = json.Marshal(map[string]any{"queue": tc.value, "options": map[string]any{}})
			s.call("POST", "/api/v1/configure", string(body)).wantError(http.StatusBadRequest, "queue name")
		})
		if tc.value == "" {
			continue // an empty partition is the Default one
		}
		t.Run("Partition"+tc.name, func(t *testing.T) {
			s := s.sub(t)
			body, _ := json.Marshal(map[string]any{"items": []map[string]any{{"queue": "q", "partition": tc.value, "payload": 1}}})
			s.call("POST", "/api/v1/push", string(body)).wantError(http.StatusBadRequest, "items[0]: partition name")
		})
		t.Run("Group"+tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("GET", "/api/v1/pop/queue/q?consumerGroup="+url.QueryEscape(tc.value), "").wantError(http.StatusBadRequest, "consumer group name")
		})
	}
	// The message quotes a bad name cut short: no 10 KB echo.
	msg := s.call("POST", "/api/v1/push", items(strings.Repeat("x", 10000)+"/", 1, "1")).wantError(http.StatusBadRequest, "queue name")
	if len(msg) > 200 {
		t.Fatalf("message of %d bytes: %s", len(msg), msg)
	}
	var res []pushed
	s.call("POST", "/api/v1/push", `{"items":[{"queue":"`+long+`","partition":"Az09._-","payload":1}]}`).want(http.StatusCreated).decode(&res)
	if res[0].Queue != long {
		t.Fatalf("%+v", res)
	}
	s.call("GET", "/api/v1/resources/queues", "").want(http.StatusOK)
	if n := len(s.deadLetters("").Messages); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

func TestErrorTextIsCutNotRefused(t *testing.T) {
	t.Parallel()
	s := setup(t)
	long := strings.Repeat("e", broker.MaxErrorText+500)
	d := s.fail("q", "", "", "t1", "1", long)
	if len(d.ErrorMessage) > broker.MaxErrorText+len("…") || !strings.HasPrefix(d.ErrorMessage, strings.Repeat("e", 100)) {
		t.Fatalf("kept %d bytes of the error", len(d.ErrorMessage))
	}
}
