package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/version"
	"github.com/lazarus-dlq/lazarus/web"
)

// The newest wire shapes of Queen MQ's clients and server (issue 28),
// against the real server; storage is touched on both stores
// (LAZARUS_TEST_STORE=postgres).

// Queen's server answers an empty items list at once with an empty
// list (push.cpp: "Handle empty push immediately"): nothing is made.
func TestQueenEmptyPushAnswers201EmptyList(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r := s.call("POST", "/api/v1/push", `{"items": []}`).want(http.StatusCreated)
	if string(r.body) != `[]` {
		t.Fatalf("body %s, want []", r.body)
	}
	var l struct {
		Queues []any `json:"queues"`
	}
	s.call("GET", "/api/v1/resources/queues", "").want(http.StatusOK).decode(&l)
	if len(l.Queues) != 0 {
		t.Fatalf("an empty push made queues: %v", l.Queues)
	}
	// No items at all is still a mistake.
	s.call("POST", "/api/v1/push", `{}`).wantError(http.StatusBadRequest, "items")
}

// Queen's PHP client renews with post("/lease/:id/extend", []): PHP
// encodes the empty array as []; it extends by 60 s as an empty body
// does. The Go client reads newExpiresAt (JS, Python and PHP read it
// too), older callers leaseExpiresAt.
func TestQueenLeaseExtendWithEmptyArrayAndNewExpiresAt(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	m := s.pop("q", "").Messages[0]
	for i, body := range []string{`[]`, ` [ ] `, ``, `{}`} {
		s.clock.Advance(time.Second)
		want := s.clock.Now().Add(60 * time.Second).UTC().Format("2006-01-02T15:04:05.000Z")
		var r struct {
			LeaseID        string `json:"leaseId"`
			LeaseExpiresAt string `json:"leaseExpiresAt"`
			NewExpiresAt   string `json:"newExpiresAt"`
		}
		s.call("POST", "/api/v1/lease/"+*m.LeaseID+"/extend", body).want(http.StatusOK).decode(&r)
		if r.LeaseExpiresAt != want || r.NewExpiresAt != want || r.LeaseID != *m.LeaseID {
			t.Fatalf("extend %d %q: %+v, want both %s", i, body, r, want)
		}
	}
	// An array with something in it is not "no options".
	s.call("POST", "/api/v1/lease/"+*m.LeaseID+"/extend", `[30]`).wantError(http.StatusBadRequest)
}

// Queen's configure_queue_v1 takes a null option as its default
// (COALESCE), and sets every option it is not given back to its default.
// Lazarus keeps what a configure does not name unless it is asked to
// replace ("mode":"replace"); a null puts one option back either way.
func TestQueenConfigureReplaceAndNullMeanDefaults(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var c queenConfigured
	s.call("POST", "/api/v1/configure", `{"queue":"q","namespace":"billing","task":"send","options":{"leaseTime":30,"retryLimit":9,"deadLetterQueue":false,"priority":4,"ttl":60}}`).
		want(http.StatusOK).decode(&c)
	// null: back to the default, the others kept; a kept option sent as
	// null is no longer kept (nothing to report).
	c = queenConfigured{}
	s.call("POST", "/api/v1/configure", `{"queue":"q","options":{"leaseTime":null,"deadLetterQueue":null,"priority":null}}`).want(http.StatusOK).decode(&c)
	for name, want := range map[string]string{"leaseTime": "300", "deadLetterQueue": "true", "retryLimit": "9", "ttl": "60"} {
		if got := string(c.Options[name]); got != want {
			t.Errorf("after nulls: options.%s = %s, want %s", name, got, want)
		}
	}
	if _, ok := c.Options["priority"]; ok || !slices.Equal(c.NotEnforced, []string{"ttl"}) {
		t.Errorf("after nulls: priority %s, notEnforced %v", c.Options["priority"], c.NotEnforced)
	}
	if c.Namespace == nil || *c.Namespace != "billing" {
		t.Errorf("after nulls: namespace %v", c.Namespace)
	}
	// replace: what is not named goes back to its default, the labels too.
	s.call("POST", "/api/v1/configure", `{"queue":"q","mode":"replace","options":{"retryDelay":5}}`).want(http.StatusOK).decode(&c)
	var d struct {
		Options     map[string]json.RawMessage `json:"options"`
		NotEnforced []string                   `json:"notEnforced"`
		Namespace   *string                    `json:"namespace"`
		Task        *string                    `json:"task"`
	}
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&d)
	defaults, _ := json.Marshal(broker.DefaultOptions())
	var want map[string]json.RawMessage
	if err := json.Unmarshal(defaults, &want); err != nil {
		t.Fatal(err)
	}
	want["retryDelay"] = json.RawMessage("5")
	if len(d.Options) != len(want) || len(d.NotEnforced) != 0 || d.Namespace != nil || d.Task != nil {
		t.Fatalf("after replace: %+v", d)
	}
	for name, v := range want {
		if string(d.Options[name]) != string(v) {
			t.Errorf("after replace: options.%s = %s, want %s", name, d.Options[name], v)
		}
	}
	// replace with labels keeps the ones given; merge (named, or null) is
	// the default.
	c = queenConfigured{}
	s.call("POST", "/api/v1/configure", `{"queue":"q","mode":"replace","namespace":"n2","options":{"maxSize":10}}`).want(http.StatusOK).decode(&c)
	if c.Namespace == nil || *c.Namespace != "n2" || string(c.Options["retryDelay"]) != "1000" || !slices.Equal(c.NotEnforced, []string{"maxSize"}) {
		t.Fatalf("replace with a namespace: %+v", c)
	}
	for _, mode := range []string{`"merge"`, `null`} {
		c = queenConfigured{}
		s.call("POST", "/api/v1/configure", `{"queue":"q","mode":`+mode+`,"options":{"retryLimit":2}}`).want(http.StatusOK).decode(&c)
		if string(c.Options["maxSize"]) != "10" || string(c.Options["retryLimit"]) != "2" || c.Namespace == nil {
			t.Fatalf("mode %s: %+v", mode, c)
		}
	}
	// A bad value among nulls changes nothing.
	s.call("POST", "/api/v1/configure", `{"queue":"q","mode":"replace","options":{"retryLimit":null,"leaseTime":-1}}`).wantError(http.StatusBadRequest, "leaseTime")
	d.Options = nil
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&d)
	if string(d.Options["retryLimit"]) != "2" || d.Namespace == nil {
		t.Fatalf("a refused replace changed the queue: %+v", d)
	}
}

// leaseSeconds=N leases for N seconds whatever the queue's leaseTime.
func TestQueenPopLeaseSecondsOverridesLeaseTime(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"leaseTime":300}`)
	s.push("q", "", "a", `1`)
	p := s.pop("q", "leaseSeconds=10")
	if want := s.clock.Now().Add(10 * time.Second).UTC().Format("2006-01-02T15:04:05.000Z"); *p.LeaseExpiresAt != want {
		t.Fatalf("lease until %s, want %s", *p.LeaseExpiresAt, want)
	}
	s.call("GET", "/api/v1/pop/queue/q", "").want(http.StatusNoContent)
	s.clock.Advance(10 * time.Second)
	if m := s.pop("q", "").Messages[0]; m.TransactionID != "a" || m.RetryCount != 0 {
		t.Fatalf("after the short lease: %+v", m)
	}
}

// partitions=N leases up to N partitions in one answer, batch counting
// the messages of them all, under one lease id that every message carries
// (Queen's shared lease): one extend renews them all, and the acks settle
// each message in its partition, with its partitionId or without.
func TestQueenPopManyPartitions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		s.push("q", p, p+"-a", `1`)
		s.push("q", p, p+"-b", `2`)
	}
	var p popped
	s.call("GET", "/api/v1/pop/queue/q?batch=10&partitions=3&consumerGroup=g", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 6 {
		t.Fatalf("popped %d messages, want 6 (3 partitions of 2)", len(p.Messages))
	}
	parts := map[string]string{} // partition to its UUID
	for _, m := range p.Messages {
		if m.LeaseID == nil || p.LeaseID == nil || *m.LeaseID != *p.LeaseID {
			t.Fatalf("message %s of %s under lease %v, the answer's is %v", m.TransactionID, m.Partition, m.LeaseID, p.LeaseID)
		}
		parts[m.Partition] = m.PartitionID
	}
	if len(parts) != 3 {
		t.Fatalf("partitions %v, want 3", parts)
	}
	lease := *p.LeaseID
	// One renew for all of them (Queen's clients renew each distinct
	// leaseId: one here).
	var ext struct {
		LeaseID      string `json:"leaseId"`
		NewExpiresAt string `json:"newExpiresAt"`
	}
	s.call("POST", "/api/v1/lease/"+lease+"/extend", `{"seconds":600}`).want(http.StatusOK).decode(&ext)
	want := s.clock.Now().Add(600 * time.Second).UTC().Format("2006-01-02T15:04:05.000Z")
	if ext.LeaseID != lease || ext.NewExpiresAt != want {
		t.Fatalf("extend: %+v, want %s until %s", ext, lease, want)
	}
	// Past the queue's leaseTime (300 s) every partition is still leased.
	s.clock.Advance(400 * time.Second)
	p4 := s.pop("q", "consumerGroup=g&batch=10&partitions=3")
	if len(p4.Messages) != 2 || p4.Messages[0].Partition != "p4" {
		t.Fatalf("pop while the shared lease is extended: %+v", p4.Messages)
	}
	// The first message by POST /ack without partitionId: its
	// transactionId finds its partition.
	first := p.Messages[0]
	s.call("POST", "/api/v1/ack", fmt.Sprintf(`{"transactionId":%q,"leaseId":%q,"status":"completed","consumerGroup":"g"}`, first.TransactionID, lease)).want(http.StatusOK)
	// Queen.ack(messages) sends the rest in one batch, each with its
	// partition and the shared lease.
	var acks []string
	for _, m := range p.Messages[1:] {
		acks = append(acks, fmt.Sprintf(`{"transactionId":%q,"status":"completed","error":null,"partitionId":%q,"leaseId":%q}`, m.TransactionID, m.PartitionID, lease))
	}
	var results []struct {
		Success bool `json:"success"`
	}
	s.call("POST", "/api/v1/ack/batch", `{"acknowledgments":[`+strings.Join(acks, ",")+`],"consumerGroup":"g"}`).want(http.StatusOK).decode(&results)
	for i, r := range results {
		if !r.Success {
			t.Fatalf("ack %d refused: %+v", i, results)
		}
	}
	// Every partition of it settled: the lease is over.
	s.call("POST", "/api/v1/lease/"+lease+"/extend", `{}`).want(http.StatusNotFound)
	s.call("POST", "/api/v1/ack", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"leaseId":%q,"status":"completed","consumerGroup":"g"}`, first.TransactionID, first.PartitionID, lease)).want(http.StatusConflict)
	// batch caps the messages across partitions.
	s.push("q", "p1", "p1-c", `3`)
	p = popped{}
	s.call("GET", "/api/v1/pop/queue/q?batch=1&partitions=3&consumerGroup=g", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != "p1-c" {
		t.Fatalf("after the acks: %+v", p.Messages)
	}
}

// Queen's pop takes any subscriptionMode but new as all: from_beginning
// (what some of its clients send) and an unknown word read the queue from
// its start.
func TestQueenPopSubscriptionModes(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "old", `1`)
	for mode, want := range map[string]int{"from_beginning": http.StatusOK, "all": http.StatusOK, "sometimes": http.StatusOK, "new": http.StatusNoContent} {
		r := s.call("GET", "/api/v1/pop/queue/q?consumerGroup=g-"+mode+"&subscriptionMode="+mode, "").want(want)
		if want == http.StatusOK {
			var p popped
			r.decode(&p)
			if p.Messages[0].TransactionID != "old" {
				t.Fatalf("%s: popped %+v", mode, p.Messages)
			}
		}
	}
}

// The C++ client pops by namespace or task: GET /api/v1/pop?namespace=…
// &task=…, over the queues labeled so (exactly), in name order.
func TestQueenPopByNamespaceAndTask(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("POST", "/api/v1/configure", `{"queue":"b-send","namespace":"billing","task":"send"}`).want(http.StatusOK)
	s.call("POST", "/api/v1/configure", `{"queue":"a-refund","namespace":"billing","task":"refund"}`).want(http.StatusOK)
	s.call("POST", "/api/v1/configure", `{"queue":"c-other","namespace":"shipping","task":"send"}`).want(http.StatusOK)
	s.push("c-other", "", "c1", `1`)
	s.push("b-send", "", "b1", `1`)
	s.push("a-refund", "", "a1", `1`)
	popLabel := func(query string) []message {
		t.Helper()
		var p popped
		r := s.call("GET", "/api/v1/pop?batch=10&wait=false&timeout=30000&"+query, "")
		if r.status == http.StatusNoContent {
			return nil
		}
		r.want(http.StatusOK).decode(&p)
		return p.Messages
	}
	if m := popLabel("namespace=billing&task=send&consumerGroup=g"); len(m) != 1 || m[0].Queue != "b-send" || m[0].TransactionID != "b1" {
		t.Fatalf("namespace and task: %+v", m)
	}
	if m := popLabel("namespace=billing&consumerGroup=g"); len(m) != 1 || m[0].Queue != "a-refund" {
		t.Fatalf("namespace: %+v", m)
	}
	if m := popLabel("namespace=billing&consumerGroup=g"); m != nil {
		t.Fatalf("namespace again, everything leased: %+v", m)
	}
	if m := popLabel("task=send&consumerGroup=g"); len(m) != 1 || m[0].Queue != "c-other" {
		t.Fatalf("task: %+v", m)
	}
	// The ack of a message popped so is an ordinary one.
	s.ack(popLabel("task=send&consumerGroup=h")[0], "completed", "").want(http.StatusOK)
	if m := popLabel("namespace=nobody"); m != nil {
		t.Fatalf("no such namespace: %+v", m)
	}
	s.call("GET", "/api/v1/pop?consumerGroup=g", "").wantError(http.StatusBadRequest, "namespace", "task")
	// A waiting pop gets what is pushed to a queue of its namespace.
	s.call("POST", "/api/v1/configure", `{"queue":"d-empty","namespace":"quiet"}`).want(http.StatusOK)
	done := make(chan response)
	go func() {
		done <- s.call("GET", "/api/v1/pop?namespace=quiet&consumerGroup=w&wait=true&timeout=60000", "")
	}()
	s.push("d-empty", "", "d1", `2`)
	var waited popped
	(<-done).want(http.StatusOK).decode(&waited)
	if m := waited.Messages; len(m) != 1 || m[0].TransactionID != "d1" {
		t.Fatalf("waiting pop: %+v", m)
	}
}

// queenctl ping reads /health as Queen's server answers it: healthy only
// with status "healthy" and database "connected"; Lazarus's version and
// commit stay beside them, and a failure says why in "error" too.
func TestQueenHealthShape(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	s := setup(t, func(c *web.Config) {
		c.HealthFunc = func(context.Context) error {
			if down.Load() {
				return errors.New("unable to open database file")
			}
			return nil
		}
	})
	var h map[string]any
	s.request(s.ctx, "GET", "/health", "", nil).want(http.StatusOK).decode(&h)
	want := version.Get()
	if h["status"] != "healthy" || h["database"] != "connected" || h["version"] != want.Version || h["server"] == nil {
		t.Fatalf("health %v", h)
	}
	if _, ok := h["error"]; ok {
		t.Fatalf("a healthy answer with an error: %v", h)
	}
	down.Store(true)
	h = nil
	r := s.request(s.ctx, "GET", "/health", "", nil)
	r.wantError(http.StatusServiceUnavailable, "database unavailable")
	r.decode(&h)
	if h["status"] != "unhealthy" || h["database"] != "disconnected" || h["version"] != want.Version {
		t.Fatalf("unhealthy %v", h)
	}
}

// queenLargePayload is the payload of the "large payload" push test of
// Queen's JS (test-v2/push.js) and Python (tests/test_push.py) suites:
// 10,000 objects with a 32-digit hex id and 100 x's, and metadata, as
// the JS client encodes it (compact), or the Python one through httpx
// 0.27 (json.dumps: a space after every , and :).
func queenLargePayload(spaced bool) string {
	comma, colon := ",", ":"
	if spaced {
		comma, colon = ", ", ": "
	}
	kv := func(k, v string) string { return `"` + k + `"` + colon + v }
	var b strings.Builder
	b.WriteString("{" + kv("array", "["))
	for i := range 10000 {
		if i > 0 {
			b.WriteString(comma)
		}
		b.WriteString("{" + kv("id", fmt.Sprintf(`"%032x"`, i)) + comma + kv("data", `"`+strings.Repeat("x", 100)+`"`) + comma +
			kv("nested", "{"+kv("field1", `"value1"`)+comma+kv("field2", `"value2"`)+comma+kv("field3", `"value3"`)+"}") + "}")
	}
	b.WriteString("]" + comma + kv("metadata", "{"+kv("size", "2190000")+comma+kv("timestamp", "1764640000000.123")+"}") + "}")
	return b.String()
}

// The largest payload Queen's clients push in their own tests fits the
// default limit, in either client's encoding.
func TestQueenLargestClientTestPayloadIsAccepted(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, spaced := range []bool{false, true} {
		payload := queenLargePayload(spaced)
		if n := len(payload); n < 2_100_000 || n > 2_300_000 {
			t.Fatalf("payload is %d bytes, not Queen's test's", n)
		}
		queue := fmt.Sprintf("test-queue-large-payload-%v", spaced)
		s.call("POST", "/api/v1/push", fmt.Sprintf(queenPush, queue, payload, "t1")).want(http.StatusCreated)
		// A pop answers payloads compact.
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(payload)); err != nil {
			t.Fatal(err)
		}
		if m := s.pop(queue, "batch=1&wait=true").Messages[0]; !bytes.Equal(m.Data, want.Bytes()) {
			t.Fatalf("popped %d bytes, want %d", len(m.Data), want.Len())
		}
	}
}

// Queen's eviction deletes a message left waiting longer than its queue's
// maxWaitTimeSeconds: enforced as a retentionSeconds (when that is off or
// longer), counting what a group had not settled as expired unread.
func TestQueenMaxWaitTimeSecondsIsEnforced(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var c queenConfigured
	s.call("POST", "/api/v1/configure", `{"queue":"q","options":{"maxWaitTimeSeconds":60,"retentionSeconds":3600}}`).want(http.StatusOK).decode(&c)
	if len(c.NotEnforced) != 0 || string(c.Options["maxWaitTimeSeconds"]) != "60" {
		t.Fatalf("configure: %+v", c)
	}
	s.push("q", "", "old", `1`)
	s.clock.Advance(61 * time.Second)
	s.push("q", "", "young", `2`)
	rep, err := s.broker.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskMessages); r.Removed != 1 {
		t.Fatalf("removed %d, want old", r.Removed)
	}
	if m := s.pop("q", "batch=10").Messages; len(m) != 1 || m[0].TransactionID != "young" {
		t.Fatalf("after the sweep: %+v", m)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	if opts := b.get("/queues/q").want(http.StatusOK).testid("options"); !strings.Contains(opts, "maxWaitTimeSeconds") {
		t.Fatalf("queue page options: %q", opts)
	}
}

// Queen's windowBuffer is enforced over the API as in the broker: the
// configure answer keeps it and does not list it as not enforced, a pop
// inside the window answers empty (204) and one after it the messages;
// the queue's page says what it does, and nothing says it is not
// enforced.
func TestQueenWindowBufferIsEnforced(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var c queenConfigured
	s.call("POST", "/api/v1/configure", `{"queue":"q","options":{"windowBuffer":2,"maxSize":10}}`).want(http.StatusOK).decode(&c)
	if !slices.Equal(c.NotEnforced, []string{"maxSize"}) || string(c.Options["windowBuffer"]) != "2" {
		t.Fatalf("configure: %+v", c)
	}
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	s.call("GET", "/api/v1/pop/queue/q?batch=10&wait=false", "").want(http.StatusNoContent)
	s.clock.Advance(2 * time.Second)
	if m := s.pop("q", "batch=10&wait=false").Messages; len(m) != 2 || m[0].TransactionID != "a" || m[1].TransactionID != "b" {
		t.Fatalf("after the window: %+v", m)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	page := b.get("/queues/q").want(http.StatusOK)
	if opts := page.testid("options"); !strings.Contains(opts, "windowBuffer") || !strings.Contains(opts, "each push to it starts the wait again") {
		t.Fatalf("queue page options: %q", opts)
	}
	if ne := page.testid("not-enforced"); strings.Contains(ne, "windowBuffer") || !strings.Contains(ne, "maxSize") {
		t.Fatalf("queue page not enforced: %q", ne)
	}
}
