package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// manyQueues is how many queues the scale journey has, as a big
// installation has them (issue 30: 5,000 queues).
const manyQueues = 5000

// A manager at 5,000 queues: the overview is one page of 50 queues, the
// unhealthy first, with the totals of all; the name filter and the
// hide-empty toggle find the others; the charts' picker suggests 20
// names, and those that contain what is typed.
func TestOverviewAtFiveThousandQueues(t *testing.T) {
	a := newApp(t)
	// The queues come from pushes, a thousand queues a call: one message
	// each, read by no group.
	for from := 0; from < manyQueues; from += broker.MaxPushItems {
		items := make([]broker.PushItem, 0, broker.MaxPushItems)
		for i := from; i < min(from+broker.MaxPushItems, manyQueues); i++ {
			items = append(items, broker.PushItem{Queue: fmt.Sprintf("tenant-%04d", i), Partition: "p", TransactionID: "first", Payload: json.RawMessage(`{}`)})
		}
		if _, err := a.broker.Push(a.ctx, items); err != nil {
			t.Fatalf("push: %v", err)
		}
	}
	// Thirty of them have dead letters, tenant-0100 the most.
	for i := range 30 {
		q := fmt.Sprintf("tenant-%04d", 100+i)
		msgs := []msg{{Tx: "first", Partition: "p", Payload: `{}`}}
		errs := map[string]string{"first": "tenant suspended"}
		for k := range 30 - i {
			tx := fmt.Sprintf("more-%d", k)
			msgs = append(msgs, msg{Tx: tx, Partition: "p", Payload: `{}`})
			errs[tx] = "tenant suspended"
		}
		a.push(q, msgs[1:]...)
		a.consume(q, "billing", errs, true)
	}
	v := a.browse()
	v.open("/login")
	v.login("manager", a.user("manager", broker.RoleViewer))

	v.open("/")
	v.count(v.page.Locator(`[data-testid="queues"] tbody tr`), 50, "queue rows on the first page")
	v.contains(v.id("queue-shown"), "queues 1–50 of 5,000", "what the page shows")
	v.contains(v.id("tile-queues"), "5,000", "the queues tile")
	v.contains(v.id("tile-depth"), "495", "the dead letters tile (31 + 30 + … + 2)")
	v.contains(v.page.Locator(`[data-testid="queues"] tbody tr`).First(), "tenant-0100", "the first row: the deepest unhealthy queue")
	v.see(v.id("queue-next"), "the next page's link")
	if n, _ := v.eval(`() => document.documentElement.outerHTML.length`).(int); n > 400_000 || n == 0 {
		t.Errorf("the overview's page is %d characters", n)
	}
	v.screenshot("overview-5000-queues")

	v.fill(v.id("queue-filter"), "tenant-012", "the name filter")
	v.click(v.page.Locator(`[data-testid="queue-filters"] button[type="submit"]`), "Show")
	v.count(v.page.Locator(`[data-testid="queues"] tbody tr`), 10, "queues named tenant-012…")
	v.contains(v.id("queue-shown"), "10 of 5,000 queues match", "what the filter matches")
	v.click(v.id("hide-empty"), "hide queues without dead letters")
	v.click(v.page.Locator(`[data-testid="queue-filters"] button[type="submit"]`), "Show")
	v.count(v.page.Locator(`[data-testid="queues"] tbody tr`), 10, "tenant-0120 to 0129 all have dead letters")
	v.click(v.id("queue-filter-clear"), "Clear")
	v.contains(v.id("queue-shown"), "queues 1–50 of 5,000", "every queue again")
	v.click(v.id("hide-empty"), "hide queues without dead letters")
	v.click(v.page.Locator(`[data-testid="queue-filters"] button[type="submit"]`), "Show")
	v.count(v.page.Locator(`[data-testid="queues"] tbody tr`), 30, "the queues with dead letters")
	v.contains(v.id("queue-shown"), "30 of 5,000 queues match", "what the toggle keeps")
	v.screenshot("overview-5000-queues-with-dead-letters")

	v.open("/charts")
	v.count(v.page.Locator(`#chart-queue-list option`), 20, "the picker's first suggestions")
	v.check(v.id("chart-queue").PressSequentially("tenant-012"), "type into the picker")
	v.count(v.page.Locator(`#chart-queue-list option`), 10, "suggestions for tenant-012")
	v.contains(v.page.Locator(`[data-testid="chart-depth"] [data-testid="chart-note"]`), "Showing the 8 deepest of 30 lines", "what the depth chart leaves out")
	v.screenshot("charts-5000-queues")
}
