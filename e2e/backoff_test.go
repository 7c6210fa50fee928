package e2e

import (
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An operator looks at a queue with exponential backoff (retryBackoff 2,
// retryDelayMax 5 s): its page says the retry schedule in words, and the
// dead letter of a message that went through it says, per failed
// attempt, how long it waited before it came back.
func TestOperatorSeesTheRetrySchedule(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	const queue = "payments"
	a.configure(queue, map[string]any{"retryLimit": 4, "retryDelay": 1000, "retryBackoff": 2, "retryDelayMax": 5000})
	a.configure("webhooks", map[string]any{"retryLimit": 3, "retryDelay": 500, "retryBackoff": 3, "dlqAfterMaxRetries": false})

	// One payment fails every try; the clock is set back an hour and moved
	// on by each wait (1, 2, 4, 5 s), so that each retry is due.
	start := -time.Hour
	a.clock.set(start)
	a.push(queue, msg{Tx: "pay-7731", Partition: "acme", Payload: `{"payment":"pay-7731","amount":"42.00"}`})
	var id string
	for _, wait := range []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second} {
		start += wait
		a.clock.set(start)
		res, err := a.broker.Pop(a.ctx, broker.PopRequest{Queue: queue, Group: "ledger", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop after a wait of %v: %+v %v", wait, res, err)
		}
		m := res.Messages[0]
		id = m.ID()
		if _, err := a.broker.Ack(a.ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID,
			Status: broker.AckFailed, Error: "gateway timeout after 30s", Group: "ledger"}); err != nil {
			t.Fatal(err)
		}
	}
	a.clock.set(0)

	pw := a.user("olga", broker.RoleViewer)
	v := a.browse()
	v.login("olga", pw)
	v.open("/queues/" + queue)
	v.contains(v.id("options"), "retries wait 1 s, 2 s, 4 s, 5 s, then the dead letters", "the schedule in words")
	v.contains(v.id("options"), "the longest a wait grows to: 5 s", "the cap")
	v.count(v.id("not-enforced"), 0, "options called not enforced")
	v.id("options").ScrollIntoViewIfNeeded()
	v.screenshot("queue-retry-schedule")

	v.open("/queues/webhooks")
	v.contains(v.id("options"), "retries wait 500 ms, 1.5 s, 4.5 s, then dropped", "a schedule that ends dropped")

	v.open("/queues/" + queue + "/dead-letters/" + id + "?group=ledger")
	v.count(v.id("attempt"), 4, "the failed attempts before the last")
	v.contains(v.id("attempt-wait").First(), "came back after 1 s", "the first wait")
	v.contains(v.id("attempt-wait").Nth(2), "came back after 4 s", "the third wait")
	v.contains(v.id("attempt-wait").Last(), "came back after 5 s", "the capped wait")
	v.id("attempts").ScrollIntoViewIfNeeded()
	v.screenshot("deadletter-waits")
}
