package e2e

import (
	"fmt"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Above 1,000 dead letters a bulk action asks for the queue's name, and its
// button stays disabled until the name is typed exactly.
func TestBigBulkAsksForTheQueueName(t *testing.T) {
	t.Parallel()
	const queue, group, n = "imports", "indexer", 1001
	a := newApp(t)
	msgs := make([]msg, n)
	errs := make(map[string]string, n)
	for i := range msgs {
		msgs[i] = msg{Tx: fmt.Sprintf("row-%05d", i), Payload: fmt.Sprintf(`{"row":%d,"file":"catalog-2026-05.csv"}`, i)}
		errs[msgs[i].Tx] = fmt.Sprintf("line %d: column \"price\" is empty", i+2)
	}
	a.push(queue, msgs...)
	a.consume(queue, group, errs, true)
	if got := a.count(broker.DLQQuery{Queue: queue}); got != n {
		t.Fatalf("broker: %d dead letters, want %d", got, n)
	}
	pw := a.user("dev", broker.RoleOperator)

	v := a.browse()
	v.login("dev", pw)
	v.open("/queues/" + queue + "/dead-letters")
	v.see(v.id("dl-row").First(), "the dead letters")
	v.click(v.id("all-delete"), "Delete all matching")
	v.see(v.id("confirm-dialog"), "the confirmation")
	v.contains(v.id("confirm-summary"), "1,001 dead letters", "the confirmation's summary")
	typed, goBtn := v.id("confirm-queue"), v.id("confirm-go")
	v.see(typed, "the queue-name box")
	v.check(v.expect.Locator(goBtn).ToBeDisabled(), "Delete is disabled before the name is typed")
	for _, wrong := range []string{"import", "Imports", "imports ", "imports2"} {
		v.fill(typed, wrong, "the queue name")
		v.check(v.expect.Locator(goBtn).ToBeDisabled(), "Delete is disabled with %q typed", wrong)
	}
	v.fill(typed, queue, "the queue name")
	v.check(v.expect.Locator(goBtn).ToBeEnabled(), "Delete is enabled once the name is typed")
	v.screenshotWindow("bulk-confirm-typed")
	v.click(goBtn, "the confirmation's Delete")
	v.contains(v.id("flash"), "Deleting 1,001 dead letters", "the delete's message")
	v.followJob("1,001")
	v.open("/queues/" + queue + "/dead-letters")
	v.see(v.id("empty"), "the empty list")
	if got := a.count(broker.DLQQuery{Queue: queue}); got != 0 {
		t.Errorf("broker: %d dead letters left, want 0", got)
	}
}
