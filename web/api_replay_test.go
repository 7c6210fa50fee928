package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// replayAnswer is a replay's answer as Queen's clients and ours read it.
type replayAnswer struct {
	replayed
	Success    bool   `json:"success"`
	Result     string `json:"result"`
	ReplayedAs struct {
		Index         int    `json:"index"`
		Status        string `json:"status"`
		MessageID     string `json:"message_id"`
		TransactionID string `json:"transaction_id"`
		PartitionID   string `json:"partition_id"`
		QueueName     string `json:"queueName"`
		Partition     string `json:"partition"`
	} `json:"replayedAs"`
	DLQID                 string `json:"dlqId"`
	OriginalTransactionID string `json:"originalTransactionId"`
	ConsumerGroup         string `json:"consumerGroup"`
	DLQRowRemoved         *bool  `json:"dlqRowRemoved"`
	From                  *struct {
		Queue     string `json:"queue"`
		Partition string `json:"partition"`
	} `json:"from"`
}

// goneAnswer is a replay's 404.
type goneReplay struct {
	Error         string `json:"error"`
	Success       *bool  `json:"success"`
	Result        string `json:"result"`
	DLQID         string `json:"dlqId"`
	PartitionID   string `json:"partitionId"`
	TransactionID string `json:"transactionId"`
	Gone          *struct {
		How  string `json:"how"`
		By   string `json:"by"`
		At   string `json:"at"`
		Copy *struct {
			MessageID     string `json:"messageId"`
			TransactionID string `json:"transactionId"`
		} `json:"copy"`
	} `json:"gone"`
}

func TestReplayElsewhereAnswersWhatHappened(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("q", "", "billing", "a", `{"n":1}`, "boom")
	var rep replayAnswer
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", `{"queue":"q2","partition":"later"}`).want(http.StatusOK).decode(&rep)
	if !rep.Success || rep.Result != "moved" || rep.Status != "queued" || rep.Queue != "q2" || rep.Partition != "later" ||
		rep.TransactionID != "dlq:"+d.ID || rep.DLQID != d.ID || rep.OriginalTransactionID != "a" || rep.ConsumerGroup != "billing" ||
		rep.DLQRowRemoved == nil || !*rep.DLQRowRemoved || rep.From == nil || rep.From.Queue != "q" || rep.From.Partition != "Default" {
		t.Fatalf("answer %+v", rep)
	}
	as := rep.ReplayedAs
	if as.TransactionID != rep.TransactionID || as.MessageID != rep.MessageID || as.PartitionID != rep.PartitionID || as.QueueName != "q2" ||
		as.Partition != "later" || as.Status != "queued" {
		t.Fatalf("replayedAs %+v", as)
	}
	// The destination queue was made, with the default options.
	var q struct {
		Options map[string]any `json:"options"`
	}
	s.call("GET", "/api/v1/resources/queues/q2", "").want(http.StatusOK).decode(&q)
	if q.Options["retryLimit"] != float64(broker.DefaultOptions().RetryLimit) {
		t.Fatalf("q2 options %v", q.Options)
	}
	p := s.pop("q2", "consumerGroup=billing&batch=10")
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != "dlq:"+d.ID || p.Messages[0].Partition != "later" || string(p.Messages[0].Data) != `{"n":1}` {
		t.Fatalf("q2 holds %+v", p.Messages)
	}
	if r := s.call("GET", "/api/v1/pop/queue/q?consumerGroup=billing", ""); r.status != http.StatusNoContent {
		t.Fatalf("q still gives %d %s", r.status, r.body)
	}
	entries, err := s.broker.Audit(context.Background(), broker.AuditFilter{Action: broker.AuditReplay}, broker.Page{Limit: 5})
	if err != nil || len(entries) != 1 || !strings.Contains(entries[0].Detail, `to queue "q2" partition "later"`) {
		t.Fatalf("audit %+v %v", entries, err)
	}

	// Asked again (a client that timed out): 404, gone, saying how.
	var gone goneReplay
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", `{"queue":"q2","partition":"later"}`).want(http.StatusNotFound).decode(&gone)
	if gone.Result != "gone" || gone.Success == nil || *gone.Success || gone.DLQID != d.ID || gone.Gone == nil || gone.Gone.How != "replayed" ||
		gone.Gone.Copy == nil || gone.Gone.Copy.TransactionID != "dlq:"+d.ID || !strings.Contains(gone.Error, "replayed as") {
		t.Fatalf("second answer %+v", gone)
	}
	// Nothing more was made.
	if r := s.call("GET", "/api/v1/pop/queue/q2?consumerGroup=billing", ""); r.status != http.StatusNoContent {
		t.Fatalf("q2 gives %d %s", r.status, r.body)
	}
}

// A dead letter whose copy is there already (another group replayed the
// message first) answers duplicate: no second copy, the dead letter gone.
func TestReplayOfACopyThereAlreadyIsADuplicate(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":0}`)
	s.push("q", "", "a", `1`)
	s.ack(s.pop("q", "consumerGroup=fast").Messages[0], "failed", "x").want(http.StatusOK)
	id := s.deadLetters("queue=q").Messages[0].ID
	s.call("POST", "/api/v1/dlq/"+id+"/replay", "").want(http.StatusOK)
	s.ack(s.pop("q", "consumerGroup=slow").Messages[0], "failed", "y").want(http.StatusOK)
	var rep replayAnswer
	s.call("POST", "/api/v1/dlq/"+id+"/replay", "").want(http.StatusOK).decode(&rep)
	if rep.Result != "duplicate" || rep.Status != "duplicate" || rep.ReplayedAs.Status != "duplicate" || rep.ConsumerGroup != "slow" ||
		rep.DLQRowRemoved == nil || !*rep.DLQRowRemoved || rep.From != nil {
		t.Fatalf("answer %+v", rep)
	}
	if l := s.deadLetters("queue=q"); l.Total != 0 {
		t.Fatalf("left %+v", l)
	}
}

// The replay's body: none, and every older shape, still replays in
// place; a bad destination is a 400 that changes nothing.
func TestReplayBodies(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for i, body := range []string{"", "{}", "[]", "null", " \n", `{"mode":"every"}`, `{"force":false}`, `{"payload":{"edited":true}}`,
		`{"mode":"own","consumerGroup":"g"}`, `{"queue":null}`} {
		t.Run(fmt.Sprintf("Body%d", i), func(t *testing.T) {
			s := s.sub(t)
			q := fmt.Sprintf("ok%d", i)
			d := s.fail(q, "", "g", "a", `1`, "boom")
			var rep replayAnswer
			s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", body).want(http.StatusOK).decode(&rep)
			if rep.Result != "moved" || rep.Queue != q || rep.Partition != "Default" || rep.From != nil {
				t.Fatalf("%q: %+v", body, rep)
			}
		})
	}
	d := s.fail("bad", "", "g", "a", `1`, "boom")
	for _, c := range []struct{ body, says string }{
		{`{"queue":""}`, "queue must be a non-empty name"},
		{`{"partition":""}`, "partition must be a non-empty name"},
		{`{"queue":"no spaces"}`, "destination queue name"},
		{`{"queue":"q2","destination":{"queue":"q3"}}`, "not both"},
		{`{"destination":{"partition":"bad/name"}}`, "destination partition name"},
		{`{"queue":7}`, ""},
		{`{"bogus":1}`, ""},
	} {
		s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", c.body).wantError(http.StatusBadRequest, c.says)
	}
	if l := s.deadLetters("queue=bad"); l.Total != 1 {
		t.Fatalf("a refused replay changed the dead letters: %+v", l)
	}
	var qs struct {
		Queues []struct {
			Name string `json:"name"`
		} `json:"queues"`
	}
	s.call("GET", "/api/v1/resources/queues", "").want(http.StatusOK).decode(&qs)
	for _, q := range qs.Queues {
		if q.Name == "q2" || q.Name == "q3" {
			t.Fatalf("a refused replay made queue %s", q.Name)
		}
	}
}

func TestRetryMessageElsewhereAndGone(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const txid = "order 7/b"
	d := s.fail("q", "", "g", txid, `"pay"`, "boom")
	path := "/api/v1/messages/" + d.PartitionID + "/" + url.PathEscape(txid) + "/retry"
	var rep replayAnswer
	s.call("POST", path, `{"partition":"slow"}`).want(http.StatusOK).decode(&rep)
	if rep.Result != "moved" || rep.Queue != "q" || rep.Partition != "slow" || rep.DLQID != d.ID || rep.OriginalTransactionID != txid ||
		rep.From == nil || rep.From.Partition != "Default" {
		t.Fatalf("retry %+v", rep)
	}
	if m := s.pop("q", "consumerGroup=g").Messages[0]; m.TransactionID != "dlq:"+d.ID || m.Partition != "slow" {
		t.Fatalf("popped %+v", m)
	}
	var gone goneReplay
	s.call("POST", path, "{}").want(http.StatusNotFound).decode(&gone)
	if gone.Result != "gone" || gone.DLQID != d.ID || gone.PartitionID != d.PartitionID || gone.TransactionID != txid ||
		gone.Gone == nil || gone.Gone.How != "replayed" {
		t.Fatalf("again %+v", gone)
	}
	// Never known: gone too, with nothing more to say.
	var unknown goneReplay
	s.call("POST", "/api/v1/messages/"+d.PartitionID+"/unknown/retry", "").want(http.StatusNotFound).decode(&unknown)
	if unknown.Result != "gone" || unknown.Gone != nil || unknown.DLQID != "" || !strings.Contains(unknown.Error, "unknown") {
		t.Fatalf("unknown %+v", unknown)
	}
}

func TestBulkReplayElsewhere(t *testing.T) {
	t.Parallel()
	s := setup(t)
	a := s.fail("q", "", "g", "a", `1`, "x")
	b := s.fail("q", "", "g", "b", `2`, "x")
	var res struct {
		Done int `json:"done"`
		Job  struct {
			ID    int64 `json:"id"`
			Scope struct {
				Destination *struct {
					Queue     string `json:"queue"`
					Partition string `json:"partition"`
				} `json:"destination"`
			} `json:"scope"`
		} `json:"job"`
	}
	body := fmt.Sprintf(`{"wait":true,"ids":[%q,%q],"destination":{"queue":"retry"}}`, a.ID, b.ID)
	s.call("POST", "/api/v1/dlq/replay", body).want(http.StatusOK).decode(&res)
	if res.Done != 2 || res.Job.Scope.Destination == nil || res.Job.Scope.Destination.Queue != "retry" || res.Job.Scope.Destination.Partition != "" {
		t.Fatalf("result %+v", res)
	}
	p := s.pop("retry", "consumerGroup=g&batch=10")
	if len(p.Messages) != 2 || p.Messages[0].TransactionID != "dlq:"+a.ID || p.Messages[1].TransactionID != "dlq:"+b.ID || p.Messages[0].Partition != "Default" {
		t.Fatalf("retry holds %+v", p.Messages)
	}
	// The job's audit entry names the destination.
	entries, err := s.broker.Audit(s.ctx, broker.AuditFilter{JobID: res.Job.ID}, broker.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var started string
	for _, e := range entries {
		if e.Action == broker.JobReplay {
			started = e.Detail
		}
	}
	if want := fmt.Sprintf(`job #%d: 2 ids by list, to queue "retry" (each message's partition name)`, res.Job.ID); started != want {
		t.Fatalf("the job's audit entry says %q, want %q (all: %+v)", started, want, entries)
	}
	s.call("POST", "/api/v1/dlq/delete", fmt.Sprintf(`{"ids":[%q],"destination":{"queue":"x"}}`, a.ID)).wantError(http.StatusBadRequest, "destination goes with a replay")
	s.call("POST", "/api/v1/dlq/replay", fmt.Sprintf(`{"ids":[%q],"destination":{"queue":"bad name"}}`, a.ID)).wantError(http.StatusBadRequest, "destination queue")
}

// An edited copy goes elsewhere too, with its edited payload.
func TestEditedReplayElsewhere(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := s.fail("q", "", "g", "a", `{"n":1}`, "boom")
	var rep replayAnswer
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", `{"payload":{"n":2},"destination":{"queue":"fixed","partition":"p"}}`).want(http.StatusOK).decode(&rep)
	if rep.Result != "moved" || rep.Queue != "fixed" || rep.Partition != "p" || rep.From == nil {
		t.Fatalf("answer %+v", rep)
	}
	p := s.pop("fixed", "consumerGroup=g")
	if m := p.Messages[0]; m.TransactionID != "dlq:"+d.ID || string(m.Data) != `{"n":2}` || m.Partition != "p" {
		t.Fatalf("popped %+v", m)
	}
}

// A replay elsewhere into a held queue, single, by transactionId and in
// bulk: each copy is stored and the answer says moved, the held group's
// pops get nothing, and the release delivers the copies in order.
func TestReplayElsewhereIntoAHeldQueue(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q2", `{}`)
	if r := s.call("GET", "/api/v1/pop/queue/q2?consumerGroup=billing", ""); r.status != http.StatusNoContent { // billing reads q2
		t.Fatalf("q2 before: %d %s", r.status, r.body)
	}
	s.call("POST", "/api/v1/holds", `{"queue":"q2","consumerGroup":"billing","reason":"card processor down"}`).want(http.StatusCreated)
	a := s.fail("q", "", "billing", "a", `{"n":1}`, "boom")
	b := s.fail("q", "", "billing", "b", `{"n":2}`, "boom")
	c := s.fail("q", "", "billing", "c", `{"n":3}`, "boom")

	heldPop := func(after string) {
		t.Helper()
		if r := s.call("GET", "/api/v1/pop/queue/q2?consumerGroup=billing&batch=10", ""); r.status != http.StatusNoContent {
			t.Fatalf("a held pop after %s: %d %s", after, r.status, r.body)
		}
	}
	var rep replayAnswer
	s.call("POST", "/api/v1/dlq/"+a.ID+"/replay", `{"queue":"q2"}`).want(http.StatusOK).decode(&rep)
	if rep.Result != "moved" || rep.Status != "queued" || rep.Queue != "q2" || rep.Partition != "Default" || rep.From == nil {
		t.Fatalf("single: %+v", rep)
	}
	heldPop("the single replay")
	rep = replayAnswer{}
	s.call("POST", "/api/v1/messages/"+b.PartitionID+"/b/retry", `{"queue":"q2"}`).want(http.StatusOK).decode(&rep)
	if rep.Result != "moved" || rep.Status != "queued" || rep.Queue != "q2" || rep.DLQID != b.ID {
		t.Fatalf("by transactionId: %+v", rep)
	}
	heldPop("the replay by transactionId")
	var job struct {
		Done int `json:"done"`
	}
	s.call("POST", "/api/v1/dlq/replay", fmt.Sprintf(`{"wait":true,"ids":[%q],"destination":{"queue":"q2"}}`, c.ID)).want(http.StatusOK).decode(&job)
	if job.Done != 1 {
		t.Fatalf("bulk: %+v", job)
	}
	heldPop("the bulk replay")

	// The copies are stored: q2 counts them, and its hold says they wait.
	var q struct {
		Messages int64 `json:"messages"`
		Holds    []struct {
			Waiting int64 `json:"waiting"`
		} `json:"holds"`
	}
	s.call("GET", "/api/v1/resources/queues/q2", "").want(http.StatusOK).decode(&q)
	if q.Messages != 3 || len(q.Holds) != 1 || q.Holds[0].Waiting != 3 {
		t.Fatalf("q2 while held: %+v", q)
	}
	if l := s.deadLetters("queue=q"); l.Total != 0 {
		t.Fatalf("dead letters left in q: %+v", l)
	}

	s.call("DELETE", "/api/v1/holds/1", "").want(http.StatusOK)
	p := s.pop("q2", "consumerGroup=billing&batch=10")
	var got []string
	for _, m := range p.Messages {
		got = append(got, m.TransactionID+" "+string(m.Data))
	}
	if want := `dlq:` + a.ID + ` {"n":1},dlq:` + b.ID + ` {"n":2},dlq:` + c.ID + ` {"n":3}`; strings.Join(got, ",") != want {
		t.Fatalf("released, billing gets %v, want %s", got, want)
	}
}

// A replay of a dead letter that retention expired is a 404 that says
// so: gone, expired, when and by whom (the broker), single and by
// transactionId; with a destination, nothing is made.
func TestReplayOfAnExpiredDeadLetterIsGone(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"deadLetterRetentionSeconds":3600}`)
	d := s.fail("q", "", "billing", "a", `1`, "boom")
	e := s.fail("q", "", "billing", "b", `2`, "boom")
	s.clock.Advance(2 * time.Hour)
	if _, err := s.broker.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	const at = "2026-11-01T14:00:00.000Z" // when the sweep ran
	for _, c := range []struct{ path, id string }{
		{"/api/v1/dlq/" + d.ID + "/replay", d.ID},
		{"/api/v1/messages/" + e.PartitionID + "/b/retry", e.ID},
	} {
		var gone goneReplay
		s.call("POST", c.path, `{"queue":"elsewhere"}`).want(http.StatusNotFound).decode(&gone)
		if gone.Result != "gone" || gone.Success == nil || *gone.Success || gone.DLQID != c.id || gone.Gone == nil ||
			gone.Gone.How != "expired" || gone.Gone.By != broker.BrokerActor || gone.Gone.At != at ||
			gone.Error != "dead letter "+c.id+" expired at 2026-11-01T14:00:00Z (deadLetterRetentionSeconds: 1 hour)" {
			t.Errorf("%s: %+v %+v", c.path, gone, gone.Gone)
		}
	}
	s.call("GET", "/api/v1/resources/queues/elsewhere", "").wantError(http.StatusNotFound, "elsewhere")
}
