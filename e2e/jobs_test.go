package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// followJob follows the flash's link to the job a bulk action started
// and watches its page until the job is done, with done of what it
// planned done.
func (v *visit) followJob(done string) {
	v.t.Helper()
	v.click(v.id("flash-job"), "the flash's link to the job")
	v.contains(v.id("job-state"), "done", "the job's state, followed live")
	v.contains(v.id("job-done"), done, "the job's done count")
}

// An operator replays an error group after a fix: the confirmation says
// how many per group and shows the first five, the job's page follows
// the job live, then the copies as the workers take them: 38 succeeded,
// 2 failed again, and one of the two opens as a dead letter again.
func TestOperatorReplaysAnErrorGroupAndSeesTheOutcome(t *testing.T) {
	t.Parallel()
	const queue, group, n = "payments", "billing", 40
	const errText = "gateway timeout after 30000 ms"
	a := newApp(t)
	a.configure(queue, map[string]any{"retryLimit": 0, "retryDelay": 0})
	msgs := make([]msg, n)
	errs := map[string]string{}
	for i := range msgs {
		msgs[i] = msg{Tx: fmt.Sprintf("charge-%03d", i), Payload: fmt.Sprintf(`{"charge":%d,"amount":"%d.00"}`, i, 10+i)}
		errs[msgs[i].Tx] = errText
	}
	a.push(queue, msgs...)
	a.consume(queue, group, errs, true)
	pw := a.user("dev", broker.RoleOperator)

	v := a.browse()
	v.login("dev", pw)
	v.open("/queues/" + queue + "/dead-letters?fingerprint=" + broker.Fingerprint(errText))
	v.count(v.id("dl-row"), n, "the error group's dead letters")
	v.click(v.id("all-replay"), "Replay all matching")
	v.see(v.id("confirm-dialog"), "the confirmation")
	v.contains(v.id("confirm-groups"), "billing 40 dead letters", "the confirmation's groups")
	v.count(v.id("confirm-sample-row"), 5, "the confirmation's sample")
	v.contains(v.id("confirm-mode-own-label"), "Replay to billing only", "the choice of one group")
	v.screenshotWindow("job-confirm")
	v.click(v.id("confirm-go"), "the confirmation's Replay")
	v.contains(v.id("flash"), "Replaying 40 messages", "the replay's message")
	v.followJob("40")
	v.contains(v.id("job-outcome-summary"), "0 succeeded, 0 failed again, 40 pending", "the copies before the workers take them")

	// The workers take the copies: two fail again, with a new error.
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: queue, Limit: 1})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("dead letters left after the replay: %+v %v", page.Items, err)
	}
	// The workers: the copies of charges 7 and 23 fail again.
	res, err := a.broker.Pop(a.ctx, broker.PopRequest{Queue: queue, Group: group, Batch: 100})
	if err != nil || len(res.Messages) != n {
		t.Fatalf("pop the copies: %d %v", len(res.Messages), err)
	}
	acks := make([]broker.Ack, len(res.Messages))
	failed := 0
	for i, m := range res.Messages {
		acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
		var p struct{ Charge int }
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Charge == 7 || p.Charge == 23 {
			acks[i].Status, acks[i].Error = broker.AckDLQ, "card declined: <do_not_honor>"
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("%d copies to fail", failed)
	}
	if _, err := a.broker.AckBatch(a.ctx, group, acks); err != nil {
		t.Fatal(err)
	}
	v.contains(v.id("job-outcome-summary"), "38 succeeded, 2 failed again, 0 pending", "the outcome, followed live")
	v.count(v.id("failure-row"), 2, "the copies that failed again")
	v.contains(v.id("failure-errorgroup").First(), "card declined: <do_not_honor>", "the failure's error, as text")
	v.screenshot("job-replay-outcome")
	v.click(v.id("failure-link").First(), "one of the two")
	v.contains(v.id("fact-tx"), "dlq:", "the copy's transactionId")
	v.screenshot("job-failure-deadletter")
}

// An operator deletes a whole error group by mistake, and undoes it from
// the job's page: the dead letters are back.
func TestOperatorUndoesADelete(t *testing.T) {
	t.Parallel()
	const queue, group, n = "imports", "indexer", 12
	a := newApp(t)
	msgs := make([]msg, n)
	errs := map[string]string{}
	for i := range msgs {
		msgs[i] = msg{Tx: fmt.Sprintf("row-%02d", i), Payload: fmt.Sprintf(`{"row":%d}`, i)}
		errs[msgs[i].Tx] = fmt.Sprintf("line %d: column \"price\" is empty", i+2)
	}
	a.push(queue, msgs...)
	a.consume(queue, group, errs, true)
	pw := a.user("dev", broker.RoleOperator)

	v := a.browse()
	v.login("dev", pw)
	v.open("/queues/" + queue + "/dead-letters")
	v.count(v.id("dl-row"), n, "the dead letters")
	v.click(v.id("all-delete"), "Delete all matching")
	v.see(v.id("confirm-dialog"), "the confirmation")
	v.contains(v.id("confirm-summary"), "12 dead letters", "the confirmation's summary")
	v.click(v.id("confirm-go"), "the confirmation's Delete")
	v.followJob("12")
	if got := a.count(broker.DLQQuery{Queue: queue}); got != 0 {
		t.Fatalf("broker: %d dead letters after the delete, want 0", got)
	}
	v.screenshot("job-delete-done")
	v.click(v.id("job-undo"), "Undo")
	v.contains(v.page.Locator("h1"), "Restore", "the restore job's page")
	v.contains(v.id("job-state"), "done", "the restore, followed live")
	v.contains(v.id("job-done"), "12", "the restore's done count")
	v.see(v.id("job-undo-of"), "the link to the delete it undoes")
	v.screenshot("job-restore-done")
	if got := a.count(broker.DLQQuery{Queue: queue}); got != n {
		t.Fatalf("broker: %d dead letters after the undo, want %d", got, n)
	}
	v.open("/queues/" + queue + "/dead-letters")
	v.count(v.id("dl-row"), n, "the dead letters, back")
}
