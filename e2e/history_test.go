package e2e

import (
	"net/url"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A support person opens the link to a dead letter someone pasted in a
// ticket yesterday. It was replayed since: instead of "not found" the page
// says who replayed it, when, as which message, and that the copy failed
// again in billing, with a link to that copy's dead letter, whose page
// shows every failed attempt and links back to the original.
func TestSupportReadsWhatBecameOfAReplayedDeadLetter(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	const queue = "orders"
	a.configure(queue, map[string]any{"retryLimit": 2, "retryDelay": 0})
	a.clock.set(-3 * time.Hour)
	a.push(queue, msg{Tx: "ord-7001", Partition: "acme", Payload: `{"order":7001,"total":"49.90"}`})
	a.consume(queue, "billing", map[string]string{"ord-7001": "card declined: do_not_honor\n  at charge (billing/pay.go:88)"}, false)
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: queue, Group: "billing"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("dead letters %+v, %v", page.Items, err)
	}
	orig := page.Items[0].MessageID()

	a.clock.set(-20 * time.Minute)
	res, err := a.broker.Replay(a.ctx, orig, "user:alice")
	if err != nil {
		t.Fatal(err)
	}
	a.clock.set(-10 * time.Minute)
	a.configure(queue, map[string]any{"retryLimit": 1})
	a.consume(queue, "billing", map[string]string{res.TransactionID: "card declined: do_not_honor (again)"}, false)
	a.clock.set(0)

	pw := a.user("sam", broker.RoleViewer)
	v := a.browse()
	v.login("sam", pw)
	v.open("/queues/" + queue + "/dead-letters/" + orig + "?group=billing")
	fate := v.id("fate")
	v.count(fate, 1, "what became of the dead letter")
	v.contains(fate, "Replayed by user:alice 20 min ago as "+res.MessageID, "who replayed it, when, as which message")
	v.contains(v.id("fate-outcome"), "failed again in billing", "how the copy did")
	v.count(v.id("restore"), 0, "a Restore button for a viewer")
	v.count(v.id("attempt"), 2, "the original's failed attempts before the last")
	v.screenshot("deadletter-gone-replayed")

	v.click(v.id("fate-outcome"), "the copy's dead letter")
	v.atPath("/queues/" + queue + "/dead-letters/" + res.MessageID)
	v.contains(v.id("is-replay"), "a replay", "the copy's badge")
	v.contains(v.id("replay-of"), "This message is a replay of "+orig, "the copy's lineage")
	v.contains(v.id("replay-of"), "user:alice", "who replayed it")
	v.count(v.id("attempt"), 1, "the copy's failed attempt before the last")
	v.contains(v.id("dl-error-full"), "(again)", "the copy's own error")
	v.screenshot("deadletter-history")

	v.click(v.id("replay-of").Locator("a").First(), "the original, linked back")
	v.atPath("/queues/" + queue + "/dead-letters/" + orig)
	v.contains(v.id("fate"), "failed again in billing", "the original's page again")
	if got := v.page.URL(); got != a.url+"/queues/"+queue+"/dead-letters/"+url.PathEscape(orig) {
		t.Errorf("back at %s", got)
	}
}
