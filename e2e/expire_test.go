package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A support person looks at a queue whose dead letters expire after two
// days (deadLetterRetentionSeconds). The list says so and how many go
// within the next 24 h, with a link to exactly those, and each row says
// when it expires; a dead letter's page says when it expires; the link to
// one that already expired says it expired, when, and by which rule,
// instead of "not found".
func TestSupportSeesWhatExpires(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	const queue = "orders"
	a.configure(queue, map[string]any{"retryLimit": 0, "deadLetterRetentionSeconds": 2 * 24 * 3600})
	file := func(ago time.Duration, txids ...string) {
		t.Helper()
		a.clock.set(-ago)
		errs := map[string]string{}
		var ms []msg
		for _, tx := range txids {
			ms = append(ms, msg{Tx: tx, Partition: "acme", Payload: fmt.Sprintf(`{"order":%q,"total":"19.90"}`, tx)})
			errs[tx] = "card declined: do_not_honor"
		}
		a.push(queue, ms...)
		a.consume(queue, "billing", errs, true)
	}
	file(50*time.Hour, "ord-expired")                                  // older than two days: expires at the next maintenance
	file(47*time.Hour, "ord-4701", "ord-4702", "ord-4703")             // expire in about 1 h
	file(30*time.Hour, "ord-3001", "ord-3002")                         // in about 18 h
	file(10*time.Hour, "ord-1001", "ord-1002", "ord-1003", "ord-1004") // in about 38 h
	a.clock.set(0)
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: queue, TransactionID: "ord-expired"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("the old dead letter: %+v %v", page.Items, err)
	}
	oldID := page.Items[0].MessageID()
	if _, err := a.broker.Maintain(a.ctx); err != nil {
		t.Fatal(err)
	}
	a.gone(oldID)

	pw := a.user("sam", broker.RoleViewer)
	v := a.browse()
	v.login("sam", pw)
	v.open("/queues/" + queue + "/dead-letters")
	v.contains(v.id("expiring"), "expire 2 days after they failed", "the rule, in words")
	v.contains(v.id("expiring-count"), "5", "how many expire within 24 h")
	v.count(v.id("dl-expires"), 9, "each row's expiry")
	v.contains(v.id("dl-expires").First(), "expires in 37 h", "the newest row's expiry (38 h less the seconds since)")
	v.screenshot("deadletters-expiring")

	v.click(v.id("expiring-link"), "the link to what expires within 24 h")
	v.count(v.id("dl-row"), 5, "the rows that expire within 24 h")
	v.contains(v.id("matching"), "5 dead letters match these filters", "the count of the linked list")
	v.contains(v.id("dl-expires").Last(), "expires in 59 min", "the oldest row's expiry")

	v.click(v.id("dl-link").First(), "the first of those")
	v.contains(v.id("fact-expires"), "expires in 17 h", "the dead letter's expiry")
	v.contains(v.id("fact-expires"), "deadLetterRetentionSeconds", "the rule")

	v.open("/queues/" + queue + "/dead-letters/" + oldID + "?group=billing")
	v.contains(v.id("gone-head"), "no longer a dead letter", "the page of an expired dead letter")
	v.contains(v.id("fate-expired"), "Expired in billing", "that it expired")
	v.contains(v.id("fate-rule"), "deadLetterRetentionSeconds: 2 days", "by which rule")
	v.contains(v.id("fate-expired"), "cannot be restored", "that it is gone for good")
	v.count(v.id("restore"), 0, "a Restore button")
	v.screenshot("deadletter-gone-expired")

	v.open("/charts?range=1h&queue=" + queue)
	v.contains(v.id("chart-retention"), "billing: dead letters expired (1)", "the retention chart's line")
	v.id("chart-retention").ScrollIntoViewIfNeeded()
	v.screenshotWindow("charts-retention")
}
