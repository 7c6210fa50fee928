package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// deadLetterAlso has group dead-letter the first n messages of queue, as
// fill's group g did: each is then a dead letter in both groups.
func deadLetterAlso(t *testing.T, s *bundle, queue, group string, n int) {
	t.Helper()
	for left := n; left > 0; {
		res, err := s.broker.Pop(s.ctx, broker.PopRequest{Queue: queue, Group: group, Batch: min(left, 1000)})
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("pop: %v", err)
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckDLQ, Error: "bad too"}
		}
		if _, err := s.broker.AckBatch(s.ctx, group, acks); err != nil {
			t.Fatal(err)
		}
		left -= len(res.Messages)
	}
}

// bulkCount is a dry run's answer.
type bulkCount struct {
	Matching *int64 `json:"matching"`
	Messages *int64 `json:"messages"`
	Bound    *struct {
		FailedAt string `json:"failedAt"`
		ID       int64  `json:"id"`
	} `json:"bound"`
}

// A dry run counts dead letters and messages: a message that two groups
// dead-lettered is two of the first and one of the second, and a replay's
// done counts it once, as the dry run's messages said.
func TestBulkDryRunCountsMessagesToo(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "q", 3)
	deadLetterAlso(t, s, "q", "h", 2)
	var c bulkCount
	s.call("POST", "/api/v1/dlq/replay", `{"filter":{"queue":"q"},"dryRun":true}`).want(http.StatusOK).decode(&c)
	if c.Matching == nil || *c.Matching != 5 || c.Messages == nil || *c.Messages != 3 || c.Bound == nil {
		t.Fatalf("dry run %s, want 5 matching of 3 messages", mustJSON(c))
	}
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"q","consumerGroup":"h"},"dryRun":true}`).want(http.StatusOK).decode(&c)
	if c.Matching == nil || *c.Matching != 2 || c.Messages == nil || *c.Messages != 2 {
		t.Fatalf("dry run of group h %s, want 2 of 2", mustJSON(c))
	}
	var res bulkAnswer
	s.call("POST", "/api/v1/dlq/replay", `{"wait":true,"filter":{"queue":"q"}}`).want(http.StatusOK).decode(&res)
	if res.Done != 3 || res.ArrivedSince == nil || *res.ArrivedSince != 0 {
		t.Fatalf("replay %s, want the 3 messages done", mustJSON(res))
	}
	if l := s.deadLetters("queue=q"); l.Total != 0 {
		t.Fatalf("%d dead letters left, want none", l.Total)
	}
}

// A bound's failedAt from the future is kept to now: the answer says so.
func TestBulkBoundFromTheFutureIsKeptToNow(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "q", 2)
	var res bulkAnswer
	s.call("POST", "/api/v1/dlq/delete", `{"wait":true,"filter":{"queue":"q"},"bound":{"failedAt":"2099-01-01T00:00:00Z"}}`).want(http.StatusOK).decode(&res)
	if res.Done != 2 || res.Bound == nil {
		t.Fatalf("answer %s", mustJSON(res))
	}
	if at, err := time.Parse(time.RFC3339Nano, res.Bound.FailedAt); err != nil || !at.Equal(s.clock.Now().Truncate(time.Millisecond)) {
		t.Fatalf("bound.failedAt %s (%v), want now, %s", res.Bound.FailedAt, err, s.clock.Now())
	}
}

// A job that stops part-way says what it did, and nothing of
// arrivedSince: it did not get to count them. Its chunks run here, one at
// a time: the first deletes 500, the second fails.
func TestBulkFailingPartWaySaysNothingOfArrivedSince(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 501) // a delete takes 500 a transaction, newest first
	s.execOn(`CREATE TRIGGER fail_oldest BEFORE DELETE ON dead_letters
		WHEN old.id = (SELECT MIN(id) FROM dead_letters) BEGIN SELECT RAISE(ABORT, 'the disk said no'); END`,
		`CREATE FUNCTION fail_oldest() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			IF OLD.id = (SELECT MIN(id) FROM dead_letters) THEN RAISE EXCEPTION 'the disk said no'; END IF;
			RETURN OLD; END $$;
		CREATE TRIGGER fail_oldest BEFORE DELETE ON dead_letters FOR EACH ROW EXECUTE FUNCTION fail_oldest()`)
	var started jobAnswer
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"q"}}`).want(http.StatusAccepted).decode(&started)
	if _, err := s.broker.StepJob(s.ctx, started.Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.broker.StepJob(s.ctx, started.Job.ID); err == nil {
		t.Fatal("the second chunk did not fail")
	}
	var d jobDetailAnswer
	r := s.call("GET", "/api/v1/jobs/"+fmt.Sprint(started.Job.ID), "").want(http.StatusOK)
	r.decode(&d)
	if d.Job.Done != 500 || d.Job.State != "running" || d.Job.ArrivedSince != nil || d.Job.Scope.Bound == nil {
		t.Fatalf("job %s, want 500 done, the bound and no arrivedSince", r.body)
	}
}

// A job waited for that fails answers 500 with what it did: the counts
// of before jobs, and the job.
func TestBulkWaitForAFailedJob(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 3)
	// The job fails as it is stored: the wait finds it failed.
	s.execOn(`CREATE TRIGGER fail_job AFTER INSERT ON jobs BEGIN
		UPDATE jobs SET state = 'failed', done = 1, failed = 2, reason = 'it stopped on a storage error' WHERE id = new.id; END`,
		`CREATE FUNCTION fail_job() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			UPDATE jobs SET state = 'failed', done = 1, failed = 2, reason = 'it stopped on a storage error' WHERE id = NEW.id;
			RETURN NULL; END $$;
		CREATE TRIGGER fail_job AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION fail_job()`)
	r := s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"q"},"wait":true}`).want(http.StatusInternalServerError)
	var res struct {
		Error string `json:"error"`
		bulkAnswer
		Job jobJSON `json:"job"`
	}
	r.decode(&res)
	if res.Error != "internal error" || res.Done != 1 || res.Failed != 2 || res.ArrivedSince != nil || res.Job.State != "failed" || res.Bound == nil {
		t.Fatalf("answer %s", r.body)
	}
}

// The dashboard's replay counts messages, from its question to its answer,
// and so does its typed confirmation to every group (to each dead
// letter's own group, a copy a dead letter); a delete counts dead letters.
func TestBulkConfirmReplayCountsMessages(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	fill(t, f.s, "bulk", 600)
	deadLetterAlso(t, f.s, "bulk", "h", 600)
	c := f.op.get("/queues/bulk/dead-letters/confirm?action=delete&all=1").want(http.StatusOK)
	if got := c.testid("confirm-summary"); !strings.Contains(got, "1,200 dead letters") || c.doc().Find(`[data-testid="confirm-queue"]`).Length() != 1 {
		t.Fatalf("delete's confirmation %q, want 1,200 dead letters and the queue name to type", got)
	}
	c = f.op.get("/queues/bulk/dead-letters/confirm?action=replay&all=1").want(http.StatusOK)
	summary := c.testid("confirm-summary")
	if !strings.Contains(summary, "600 messages") || !strings.Contains(summary, "1,200 dead letters") || !strings.Contains(summary, "every group") {
		t.Fatalf("replay's confirmation %q, want 600 messages of 1,200 dead letters", summary)
	}
	if h := c.doc().Find(`[data-testid="confirm-dialog"] h2`).Text(); h != "Replay 600 messages?" {
		t.Fatalf("replay's question %q", h)
	}
	// Replayed to each dead letter's own group they would be 1,200
	// copies: the dialog asks for the queue name, which only that mode
	// needs.
	if c.doc().Find(`[data-testid="confirm-queue"]`).Length() != 1 {
		t.Fatal("1,200 dead letters to replay do not ask for the queue name")
	}
	if c.doc().Find(`[data-testid="confirm-canary-on"][checked]`).Length() != 1 {
		t.Fatal("1,200 dead letters to replay: the canary is not offered ticked")
	}
	own := confirmForm(t, c)
	own.Del("canary") // turned off: this replay goes at once
	own.Set("mode", "own")
	hx(f.op, "/queues/bulk/dead-letters/replay", own).want(http.StatusBadRequest)
	all := confirmForm(t, c)
	all.Del("canary")
	r := hx(f.op, "/queues/bulk/dead-letters/replay", all).want(http.StatusOK)
	if got := r.testid("flash"); !strings.Contains(got, "Replaying 600 messages") {
		t.Fatalf("result %q", got)
	}
	if j := followJob(t, f.s, f.op, r); j.testid("job-done") != "600" || j.testid("job-planned") != "600" {
		t.Fatalf("job %q", j.testid("job-counts"))
	}
	if l := f.s.deadLetters("queue=bulk"); l.Total != 0 {
		t.Fatalf("%d left", l.Total)
	}
}

// A page action that stops part-way: its job's page says what was done
// and nothing of what arrived since.
func TestBulkPageFailingPartWaySaysNothingOfArrivedSince(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	seed(t, s)
	op, _ := s.loggedIn(broker.RoleOperator)
	fill(t, s, "bulk", 501)
	c := op.get("/queues/bulk/dead-letters/confirm?action=delete&all=1").want(http.StatusOK)
	s.execOn(`CREATE TRIGGER fail_oldest BEFORE DELETE ON dead_letters
		WHEN old.id = (SELECT MIN(id) FROM dead_letters WHERE queue_id = old.queue_id) BEGIN SELECT RAISE(ABORT, 'the disk said no'); END`,
		`CREATE FUNCTION fail_oldest() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			IF OLD.id = (SELECT MIN(id) FROM dead_letters WHERE queue_id = OLD.queue_id) THEN RAISE EXCEPTION 'the disk said no'; END IF;
			RETURN OLD; END $$;
		CREATE TRIGGER fail_oldest BEFORE DELETE ON dead_letters FOR EACH ROW EXECUTE FUNCTION fail_oldest()`)
	form := confirmForm(t, c)
	form.Set("confirm", "bulk")
	r := hx(op, "/queues/bulk/dead-letters/delete", form).want(http.StatusOK)
	id := flashJobID(t, r)
	if _, err := s.broker.StepJob(s.ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.broker.StepJob(s.ctx, id); err == nil {
		t.Fatal("the second chunk did not fail")
	}
	j := op.get(jobPath(id)).want(http.StatusOK)
	if j.testid("job-done") != "500" || j.testid("job-arrived-since") != "" || strings.Contains(j.testid("job-facts"), "arrived since") {
		t.Fatalf("job %q", j.testid("job-facts"))
	}
}
