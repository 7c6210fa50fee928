package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// The request bodies of Queen MQ's own clients (JavaScript client-v2 and
// Go client), byte for byte as they build them (SPEC.md sections 2 and
// 5), against the real server on a real SQLite file: they must work
// unchanged.

// queenCreate is what the JS client's queue(name).create() sends: every
// default of its QUEUE_DEFAULTS, and namespace and task null.
const queenCreate = `{"queue":%q,"namespace":null,"task":null,"options":{"leaseTime":300,"retryLimit":3,"priority":0,` +
	`"delayedProcessing":0,"windowBuffer":0,"maxSize":0,"retentionSeconds":0,"completedRetentionSeconds":0,"encryptionEnabled":false}}`

type queenConfigured struct {
	Configured  bool                       `json:"configured"`
	Queue       string                     `json:"queue"`
	Namespace   *string                    `json:"namespace"`
	Task        *string                    `json:"task"`
	Options     map[string]json.RawMessage `json:"options"`
	NotEnforced []string                   `json:"notEnforced"`
}

// queenNotEnforced are the options of queenCreate that Lazarus keeps
// without enforcing them (windowBuffer is kept and enforced).
var queenNotEnforced = []string{"encryptionEnabled", "maxSize", "priority"}

func TestQueenCreateIsAcceptedAndReportsWhatIsNotEnforced(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var c queenConfigured
	s.call("POST", "/api/v1/configure", fmt.Sprintf(queenCreate, "orders")).want(http.StatusOK).decode(&c)
	if !c.Configured || c.Queue != "orders" || c.Namespace != nil || c.Task != nil {
		t.Fatalf("configure: %+v", c)
	}
	if !slices.Equal(c.NotEnforced, queenNotEnforced) {
		t.Fatalf("notEnforced %v, want %v", c.NotEnforced, queenNotEnforced)
	}
	// Kept values are returned as given; enforced ones too.
	for name, want := range map[string]string{"priority": "0", "maxSize": "0", "encryptionEnabled": "false", "delayedProcessing": "0", "leaseTime": "300", "retryDelay": "1000",
		"retentionSeconds": "0", "completedRetentionSeconds": "0", "deadLetterRetentionSeconds": "0"} {
		if got := string(c.Options[name]); got != want {
			t.Errorf("options.%s = %s, want %s", name, got, want)
		}
	}
	// The describe answer says the same.
	var q struct {
		Options     map[string]json.RawMessage `json:"options"`
		NotEnforced []string                   `json:"notEnforced"`
		Namespace   *string                    `json:"namespace"`
	}
	s.call("GET", "/api/v1/resources/queues/orders", "").want(http.StatusOK).decode(&q)
	if !slices.Equal(q.NotEnforced, queenNotEnforced) || string(q.Options["windowBuffer"]) != "0" || q.Namespace != nil {
		t.Fatalf("describe: %+v", q)
	}
	// A later value of a kept option replaces the earlier one.
	s.call("POST", "/api/v1/configure", `{"queue":"orders","options":{"priority":7,"ttl":3600}}`).want(http.StatusOK).decode(&c)
	if string(c.Options["priority"]) != "7" || string(c.Options["ttl"]) != "3600" || !slices.Contains(c.NotEnforced, "ttl") {
		t.Fatalf("reconfigure: %+v", c)
	}
	// The queue page shows them.
	b, _ := s.loggedIn(broker.RoleViewer)
	page := b.get("/queues/orders").want(http.StatusOK)
	if got := page.testid("not-enforced"); !strings.Contains(got, "Kept but not enforced: encryptionEnabled, maxSize, priority") || !strings.Contains(got, "ttl") {
		t.Fatalf("queue page: not-enforced %q", got)
	}
	if opts := page.testid("options"); !strings.Contains(opts, "delayedProcessing") || !strings.Contains(opts, "(kept, not enforced)") {
		t.Fatalf("queue page options: %q", opts)
	}
}

func TestConfigureRefusesWhatNeitherKnows(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("POST", "/api/v1/configure", fmt.Sprintf(queenCreate, "q")).want(http.StatusOK)
	for _, tc := range []struct{ name, body, want string }{
		{"Unknown", `{"queue":"q","options":{"priority":1,"colour":"red"}}`, "colour"},
		{"KeptWrongType", `{"queue":"q","options":{"priority":"high"}}`, "priority"},
		{"KeptNegative", `{"queue":"q","options":{"maxSize":-1}}`, "maxSize"},
		{"KeptBoolString", `{"queue":"q","options":{"encryptionEnabled":"yes"}}`, "encryptionEnabled"},
		{"UnknownNull", `{"queue":"q","options":{"colour":null}}`, "colour"},
		{"BadMode", `{"queue":"q","mode":"overwrite"}`, "mode"},
		{"DelayNegative", `{"queue":"q","options":{"delayedProcessing":-5}}`, "delayedProcessing"},
		{"NamespaceNumber", `{"queue":"q","namespace":7}`, "namespace"},
		{"NamespaceTooLong", `{"queue":"q","namespace":"` + strings.Repeat("n", 256) + `"}`, "namespace"},
		{"UnknownTopLevel", `{"queue":"q","tenant":"x"}`, "tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.sub(t).call("POST", "/api/v1/configure", tc.body).wantError(http.StatusBadRequest, tc.want)
		})
	}
	var c queenConfigured
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&c)
	if string(c.Options["priority"]) != "0" || string(c.Options["maxSize"]) != "0" || c.Namespace != nil {
		t.Fatalf("refused calls changed the queue: %+v", c)
	}
}

func TestConfigureKeepsNamespaceAndTaskAndListsByThem(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("POST", "/api/v1/configure", `{"queue":"invoices","namespace":"billing","task":"send","options":{}}`).want(http.StatusOK)
	s.call("POST", "/api/v1/configure", `{"queue":"refunds","namespace":"billing","task":"refund"}`).want(http.StatusOK)
	s.call("POST", "/api/v1/configure", fmt.Sprintf(queenCreate, "plain")).want(http.StatusOK)
	// null leaves them as they are (the JS client sends null when it has none).
	var c queenConfigured
	s.call("POST", "/api/v1/configure", fmt.Sprintf(queenCreate, "invoices")).want(http.StatusOK).decode(&c)
	if c.Namespace == nil || *c.Namespace != "billing" || c.Task == nil || *c.Task != "send" {
		t.Fatalf("after a create with nulls: %+v", c)
	}
	list := func(query string) []string {
		t.Helper()
		var l struct {
			Queues []struct {
				Name      string  `json:"name"`
				Namespace *string `json:"namespace"`
			} `json:"queues"`
		}
		s.call("GET", "/api/v1/resources/queues?"+query, "").want(http.StatusOK).decode(&l)
		var names []string
		for _, q := range l.Queues {
			names = append(names, q.Name)
		}
		return names
	}
	for query, want := range map[string][]string{
		"":                            {"invoices", "plain", "refunds"},
		"namespace=billing":           {"invoices", "refunds"},
		"namespace=billing&task=send": {"invoices"},
		"task=refund":                 {"refunds"},
		"namespace=nobody":            nil,
	} {
		if got := list(query); !slices.Equal(got, want) {
			t.Errorf("list ?%s = %v, want %v", query, got, want)
		}
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	page := b.get("/queues/invoices").want(http.StatusOK)
	if page.testid("queue-namespace") != "billing" || page.testid("queue-task") != "send" {
		t.Fatalf("queue page: namespace %q, task %q", page.testid("queue-namespace"), page.testid("queue-task"))
	}
	// "" clears.
	s.call("POST", "/api/v1/configure", `{"queue":"invoices","namespace":""}`).want(http.StatusOK).decode(&c)
	if c.Namespace != nil || c.Task == nil {
		t.Fatalf("after clearing the namespace: %+v", c)
	}
}

func TestQueenDelayedProcessingIsEnforced(t *testing.T) {
	t.Parallel()
	s := setup(t)
	create := strings.Replace(fmt.Sprintf(queenCreate, "later"), `"delayedProcessing":0`, `"delayedProcessing":30`, 1)
	var c queenConfigured
	s.call("POST", "/api/v1/configure", create).want(http.StatusOK).decode(&c)
	if string(c.Options["delayedProcessing"]) != "30" || slices.Contains(c.NotEnforced, "delayedProcessing") {
		t.Fatalf("configure: %+v", c)
	}
	s.push("later", "", "a", `1`)
	s.call("GET", "/api/v1/pop/queue/later", "").want(http.StatusNoContent)
	s.clock.Advance(30*time.Second - time.Millisecond)
	s.call("GET", "/api/v1/pop/queue/later", "").want(http.StatusNoContent)
	s.clock.Advance(time.Millisecond)
	if m := s.pop("later", "").Messages[0]; m.TransactionID != "a" {
		t.Fatalf("popped %+v", m)
	}
}

// queenPush is a push as the JS client's queue(q).partition(p).push(...)
// sends it: partition, payload and a client-made transactionId per item.
const queenPush = `{"items":[{"queue":%q,"partition":"Default","payload":%s,"transactionId":%q}]}`

func TestQueenPushPopAckRoundTrip(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.call("POST", "/api/v1/configure", fmt.Sprintf(queenCreate, "work")).want(http.StatusOK)
	var res []pushed
	s.call("POST", "/api/v1/push", fmt.Sprintf(queenPush, "work", `{"n":1}`, "019a0000-0000-7000-8000-000000000001")).want(http.StatusCreated).decode(&res)
	if len(res) != 1 || res[0].Status != "queued" {
		t.Fatalf("push: %+v", res)
	}
	s.call("POST", "/api/v1/push", fmt.Sprintf(queenPush, "work", `{"n":2}`, "019a0000-0000-7000-8000-000000000002")).want(http.StatusCreated)

	// pop as QueueBuilder.pop() asks: batch, wait, timeout.
	var p popped
	s.call("GET", "/api/v1/pop/queue/work?batch=1&wait=false&timeout=30000&consumerGroup=workers", "").want(http.StatusOK).decode(&p)
	m := p.Messages[0]
	// Queen.ack(message, true, {}): error and consumerGroup null.
	ack := fmt.Sprintf(`{"transactionId":%q,"status":"completed","error":null,"consumerGroup":"workers","partitionId":%q,"leaseId":%q}`, m.TransactionID, m.PartitionID, *m.LeaseID)
	var a map[string]any
	s.call("POST", "/api/v1/ack", ack).want(http.StatusOK).decode(&a)
	if a["success"] != true {
		t.Fatalf("ack: %v", a)
	}
	// Queen.ack([messages], false, {group}) goes to /ack/batch.
	s.call("GET", "/api/v1/pop/queue/work?batch=1&wait=false&timeout=30000", "").want(http.StatusOK).decode(&p)
	m = p.Messages[0]
	batch := fmt.Sprintf(`{"acknowledgments":[{"transactionId":%q,"status":"completed","error":null,"partitionId":%q,"leaseId":%q}],"consumerGroup":null}`, m.TransactionID, m.PartitionID, *m.LeaseID)
	var results []map[string]any
	s.call("POST", "/api/v1/ack/batch", batch).want(http.StatusOK).decode(&results)
	if len(results) != 1 || results[0]["success"] != true {
		t.Fatalf("ack batch: %v", results)
	}
}

// An ack with "error": null files a dead letter with no error: null in
// the API, "no error text" on its page; the same as an ack without it.
func TestQueenAckWithNullErrorFilesNoErrorText(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("dl", `{"retryLimit":0}`)
	for _, tc := range []struct{ txid, errField string }{{"with-null", `,"error":null`}, {"without", ``}} {
		s.push("dl", "", tc.txid, `1`)
		m := s.pop("dl", "").Messages[0]
		body := fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"leaseId":%q,"status":"failed","consumerGroup":null%s}`, m.TransactionID, m.PartitionID, *m.LeaseID, tc.errField)
		var a map[string]any
		s.call("POST", "/api/v1/ack", body).want(http.StatusOK).decode(&a)
		if a["dlq"] != true {
			t.Fatalf("%s: ack %v", tc.txid, a)
		}
		var l struct {
			Messages []map[string]any `json:"messages"`
		}
		s.call("GET", "/api/v1/dlq?queue=dl&transactionId="+tc.txid, "").want(http.StatusOK).decode(&l)
		if len(l.Messages) != 1 {
			t.Fatalf("%s: %d dead letters", tc.txid, len(l.Messages))
		}
		if v, ok := l.Messages[0]["errorMessage"]; !ok || v != nil {
			t.Fatalf("%s: errorMessage %#v, want null", tc.txid, v)
		}
		b, _ := s.loggedIn(broker.RoleViewer)
		page := b.get("/queues/dl/dead-letters/" + l.Messages[0]["id"].(string)).want(http.StatusOK)
		if got := page.testid("dl-error-full"); !strings.Contains(got, "no error text") {
			t.Fatalf("%s: page error %q", tc.txid, got)
		}
	}
}

// queenTransaction is what TransactionBuilder.ack(msg).queue(q).push(...)
// .commit() sends: the ack names transactionId and partitionId only (no
// lease, no group); the lease goes in requiredLeases.
const queenTransaction = `{"operations":[{"type":"ack","transactionId":%q,"partitionId":%q,"status":"completed"},` +
	`{"type":"push","items":[{"queue":"next","payload":{"step":2}}]}],"requiredLeases":[%q]}`

func TestQueenTransactionThroughTheLeaseOfAPop(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", "workers"} {
		t.Run("Group"+group, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			s.push("in", "", "a", `{"step":1}`)
			s.push("in", "", "b", `{"step":1}`)
			m := s.pop("in", "consumerGroup="+url.QueryEscape(group)).Messages[0]
			var res struct {
				Success bool `json:"success"`
			}
			s.call("POST", "/api/v1/transaction", fmt.Sprintf(queenTransaction, m.TransactionID, m.PartitionID, *m.LeaseID)).want(http.StatusOK).decode(&res)
			if !res.Success {
				t.Fatalf("transaction: %+v", res)
			}
			if out := s.pop("next", "").Messages[0]; string(out.Data) != `{"step":2}` {
				t.Fatalf("pushed %s", out.Data)
			}
			// a is settled: the group gets b next.
			if n := s.pop("in", "consumerGroup="+url.QueryEscape(group)).Messages[0]; n.TransactionID != "b" {
				t.Fatalf("after the transaction the group got %s", n.TransactionID)
			}
		})
	}
}

func TestQueenTransactionRefusesALeaseThatIsNotLive(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("in", `{"leaseTime":10}`)
	s.push("in", "", "a", `1`)
	m := s.pop("in", "").Messages[0]
	s.clock.Advance(11 * time.Second) // the lease runs out
	for _, lease := range []string{*m.LeaseID, "no-such-lease"} {
		msg := s.call("POST", "/api/v1/transaction", fmt.Sprintf(queenTransaction, m.TransactionID, m.PartitionID, lease)).wantError(http.StatusConflict, "requiredLeases[0]", lease)
		if !strings.Contains(msg, "not live") {
			t.Fatalf("error %q", msg)
		}
	}
	// Nothing was done: no push, and a is still there to pop.
	s.call("GET", "/api/v1/resources/queues/next", "").wantError(http.StatusNotFound)
	if n := s.pop("in", "").Messages[0]; n.TransactionID != "a" {
		t.Fatalf("popped %s", n.TransactionID)
	}
	// null, [] and empty ids are no requirement (the Go client sends null
	// when it has none).
	for _, req := range []string{`null`, `[]`, `[""]`} {
		body := `{"operations":[{"type":"push","items":[{"queue":"free","payload":1}]}],"requiredLeases":` + req + `}`
		s.call("POST", "/api/v1/transaction", body).want(http.StatusOK)
	}
}

// popTwoPartitions pushes txids to partitions p1 and p2 of queue in
// (one of each, in order) and pops each partition once for group ("" is
// queue mode): two leases of two partitions.
func popTwoPartitions(s *bundle, group string, txids ...string) (m1, m2 message) {
	s.t.Helper()
	for i, txid := range txids {
		s.push("in", fmt.Sprintf("p%d", i%2+1), txid, `{"step":1}`)
	}
	q := "batch=1&consumerGroup=" + url.QueryEscape(group)
	m1 = s.pop("in/partition/p1", q).Messages[0]
	m2 = s.pop("in/partition/p2", q).Messages[0]
	if *m1.LeaseID == *m2.LeaseID {
		s.t.Fatalf("one lease for two partitions: %s", *m1.LeaseID)
	}
	return m1, m2
}

// An older JS TransactionBuilder (smartpricing/queen at 02d6cb7) sends
// each ack as {type, transactionId, status}: no partitionId, no lease, no
// group; the leases go in requiredLeases. With two leases of two
// partitions, each ack goes through the lease that holds a message with
// its transactionId.
func TestQueenOldTransactionAcksByTransactionIDAcrossTwoLeases(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", "workers"} {
		t.Run("Group"+group, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			m1, m2 := popTwoPartitions(s, group, "a1", "a2", "b1", "b2")
			body := fmt.Sprintf(`{"operations":[{"type":"ack","transactionId":%q,"status":"completed"},{"type":"ack","transactionId":%q,"status":"completed"},`+
				`{"type":"push","items":[{"queue":"next","payload":{"step":2}}]}],"requiredLeases":[%q,%q]}`,
				m1.TransactionID, m2.TransactionID, *m1.LeaseID, *m2.LeaseID)
			var res struct {
				Success bool `json:"success"`
				Results []struct {
					Success       bool   `json:"success"`
					TransactionID string `json:"transactionId"`
				} `json:"results"`
			}
			s.call("POST", "/api/v1/transaction", body).want(http.StatusOK).decode(&res)
			if !res.Success || len(res.Results) != 3 || !res.Results[0].Success || !res.Results[1].Success {
				t.Fatalf("transaction: %+v", res)
			}
			// Both are settled: each partition gives its next message.
			q := "batch=1&consumerGroup=" + url.QueryEscape(group)
			if n := s.pop("in/partition/p1", q).Messages[0]; n.TransactionID != "b1" {
				t.Fatalf("p1 after the transaction: %s", n.TransactionID)
			}
			if n := s.pop("in/partition/p2", q).Messages[0]; n.TransactionID != "b2" {
				t.Fatalf("p2 after the transaction: %s", n.TransactionID)
			}
		})
	}
}

// Two required leases that both hold a message with the transactionId of
// an ack without partitionId or lease: a 409 naming it, and nothing done.
func TestQueenOldTransactionRefusesAnAmbiguousTransactionID(t *testing.T) {
	t.Parallel()
	s := setup(t)
	m1, m2 := popTwoPartitions(s, "", "same", "same")
	body := fmt.Sprintf(`{"operations":[{"type":"push","items":[{"queue":"next","payload":1}]},{"type":"ack","transactionId":"same","status":"completed"}],"requiredLeases":[%q,%q]}`,
		*m1.LeaseID, *m2.LeaseID)
	msg := s.call("POST", "/api/v1/transaction", body).wantError(http.StatusConflict, "operations[1]", `"same"`, *m1.LeaseID, *m2.LeaseID)
	if !strings.Contains(msg, "partitionId") {
		t.Fatalf("error %q does not say how to choose", msg)
	}
	// An ack whose transactionId no required lease holds says so.
	body = fmt.Sprintf(`{"operations":[{"type":"ack","transactionId":"other","status":"completed"}],"requiredLeases":[%q,%q]}`, *m1.LeaseID, *m2.LeaseID)
	s.call("POST", "/api/v1/transaction", body).wantError(http.StatusConflict, "operations[0]", `"other"`, "requiredLeases")
	// Nothing was done: no push, and both leases still hold their message.
	s.call("GET", "/api/v1/resources/queues/next", "").wantError(http.StatusNotFound)
	s.ack(m1, "completed", "").want(http.StatusOK)
	s.ack(m2, "completed", "").want(http.StatusOK)
}

// A transactionId in the partitions of both required leases, but leased
// under one of them only (the other's copy lies past its lease): the ack
// goes through the lease that holds it, not refused as ambiguous.
func TestQueenOldTransactionAcksThroughTheLeaseThatHoldsIt(t *testing.T) {
	t.Parallel()
	s := setup(t)
	m1, m2 := popTwoPartitions(s, "", "x", "y")
	s.push("in", "p2", "x", `{"step":1}`) // p2's x: after m2's lease
	body := fmt.Sprintf(`{"operations":[{"type":"ack","transactionId":"x","status":"completed"}],"requiredLeases":[%q,%q]}`, *m1.LeaseID, *m2.LeaseID)
	s.call("POST", "/api/v1/transaction", body).want(http.StatusOK)
	// p1's x was settled by it (acking it again is refused); p2's lease
	// still holds y, and p2's x waits behind it.
	s.ack(m1, "completed", "").want(http.StatusConflict)
	s.ack(m2, "completed", "").want(http.StatusOK)
	if n := s.pop("in/partition/p2", "batch=1").Messages[0]; n.TransactionID != "x" {
		t.Fatalf("p2 after y: %s, want x", n.TransactionID)
	}
}

// The newer clients name the partition: the Go client sends
// {type, transactionId, partitionId, status, consumerGroup}, the newer JS
// TransactionBuilder adds the message's own leaseId. Both work with two
// leases, whatever their transactionIds.
func TestQueenNewerTransactionsAcrossTwoLeases(t *testing.T) {
	t.Parallel()
	forms := map[string]string{
		"Go": `{"type":"ack","transactionId":%q,"partitionId":%q,"status":"completed","consumerGroup":"workers"}`,
		"JS": `{"type":"ack","transactionId":%q,"partitionId":%q,"status":"completed","consumerGroup":"workers","leaseId":%q}`,
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			m1, m2 := popTwoPartitions(s, "workers", "same", "same")
			op := func(m message) string {
				if name == "JS" {
					return fmt.Sprintf(form, m.TransactionID, m.PartitionID, *m.LeaseID)
				}
				return fmt.Sprintf(form, m.TransactionID, m.PartitionID)
			}
			body := fmt.Sprintf(`{"operations":[%s,%s],"requiredLeases":[%q,%q]}`, op(m1), op(m2), *m1.LeaseID, *m2.LeaseID)
			s.call("POST", "/api/v1/transaction", body).want(http.StatusOK)
			s.call("GET", "/api/v1/pop/queue/in?consumerGroup=workers", "").want(http.StatusNoContent)
		})
	}
}

func TestQueenLeaseExtendWithoutSeconds(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	m := s.pop("q", "").Messages[0]
	want := s.clock.Now().Add(60 * time.Second).UTC().Format("2006-01-02T15:04:05.000Z")
	for _, body := range []string{`{}`, ``, `{"seconds":null}`} {
		var r struct {
			LeaseExpiresAt string `json:"leaseExpiresAt"`
		}
		s.call("POST", "/api/v1/lease/"+*m.LeaseID+"/extend", body).want(http.StatusOK).decode(&r)
		if r.LeaseExpiresAt != want {
			t.Fatalf("extend %q: until %s, want %s", body, r.LeaseExpiresAt, want)
		}
	}
	s.call("POST", "/api/v1/lease/"+*m.LeaseID+"/extend", `{"seconds":"soon"}`).wantError(http.StatusBadRequest, "seconds")
	s.call("POST", "/api/v1/lease/"+*m.LeaseID+"/extend", `{"seconds":0}`).wantError(http.StatusBadRequest, "seconds")
}

// Queen's clients push a JSON string of 1 MiB in their own tests:
// {"data":"<1 MiB>"}, 1,048,587 bytes.
func TestQueenOneMiBPayloadIsAccepted(t *testing.T) {
	t.Parallel()
	s := setup(t)
	payload := `{"data":"` + strings.Repeat("x", 1<<20) + `"}`
	if len(payload) != 1048587 {
		t.Fatalf("payload is %d bytes", len(payload))
	}
	s.call("POST", "/api/v1/push", fmt.Sprintf(queenPush, "big", payload, "t1")).want(http.StatusCreated)
	if m := s.pop("big", "").Messages[0]; string(m.Data) != payload {
		t.Fatalf("popped %d bytes", len(m.Data))
	}
}

// A route that does not exist answers a JSON 404, on /api/ and elsewhere:
// not the CSRF check's 403 page, nor a 401.
func TestUnknownRoutesAnswerJSON404(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.OpenAPI, c.AdminToken = false, "s3cret-admin-token" })
	token := http.Header{"Authorization": {"Bearer s3cret-admin-token"}}
	for _, r := range []struct{ method, path string }{
		{"POST", "/streams/v1/consume"},
		{"GET", "/streams/v1/consume"},
		{"POST", "/api/v1/nowhere"},
		{"GET", "/api/v2/push"},
		{"DELETE", "/nothing/here"},
	} {
		s.request(s.ctx, r.method, r.path, `{}`, token).wantError(http.StatusNotFound)
	}
	// Under the API a caller without a token learns nothing of its routes.
	s.request(s.ctx, "POST", "/api/v1/nowhere", `{}`, nil).wantError(http.StatusUnauthorized)
	// A browser asking for a page gets the 404 page, still no CSRF 403.
	res := s.request(s.ctx, "POST", "/streams/v1/consume", `{}`, http.Header{"Accept": {"text/html"}}).want(http.StatusNotFound)
	if !strings.Contains(res.header.Get("Content-Type"), "text/html") || strings.Contains(string(res.body), "This form has expired") {
		t.Fatalf("page 404: %s %s", res.header.Get("Content-Type"), res.body)
	}
	// A route that exists with another method is a 405 with Allow.
	r := s.request(s.ctx, "PUT", "/api/v1/push", `{}`, token)
	r.wantError(http.StatusMethodNotAllowed)
	if r.header.Get("Allow") == "" {
		t.Fatal("405 without Allow")
	}
}

// queenPushWithProducerSub is what Queen's auth tests send without a
// token (client-cpp test_client.cpp, client-go auth_test.go, client-js
// auth.js extraItemFields): a producerSub in the item, which Queen reads
// and drops (push.cpp).
const queenPushWithProducerSub = `{"items":[{"queue":%q,"partition":"Default","transactionId":%q,"payload":{"x":1},"producerSub":"attacker-cpp"}]}`

func TestQueenPushDropsProducerSub(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var res []pushed
	s.call("POST", "/api/v1/push", fmt.Sprintf(queenPushWithProducerSub, "noauth", "tx-1")).want(http.StatusCreated).decode(&res)
	if len(res) != 1 || res[0].Status != "queued" {
		t.Fatalf("push: %+v", res)
	}
	// Any value is dropped, by the reflective decoder too (a key in
	// another case sends the body its way: json_fast.go).
	s.call("POST", "/api/v1/push", `{"items":[{"producerSub":null,"queue":"noauth","Payload":2,"transactionId":"tx-2"}]}`).want(http.StatusCreated)
	var p struct {
		Messages []map[string]any `json:"messages"`
	}
	s.call("GET", "/api/v1/pop/queue/noauth?batch=10", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 2 || p.Messages[0]["transactionId"] != "tx-1" || p.Messages[1]["transactionId"] != "tx-2" {
		t.Fatalf("popped %v", p.Messages)
	}
	for _, m := range p.Messages {
		if v := m["producerSub"]; v != nil {
			t.Fatalf("producerSub %v", v)
		}
	}
	// And in a transaction's push.
	var tr map[string]any
	s.call("POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"noauth","payload":3,"producerSub":"x"}]}],"requiredLeases":[]}`).want(http.StatusOK).decode(&tr)
	if tr["success"] != true {
		t.Fatalf("transaction %v", tr)
	}
}
