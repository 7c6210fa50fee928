package e2e

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// operatorControls are the testids of every replay and delete control; a
// viewer must see none of them.
var operatorControls = []string{"row-replay", "row-delete", "bulkbar", "bulk-replay", "bulk-delete", "all-replay", "all-delete", "detail-actions", "detail-replay", "detail-delete"}

// noOperatorControls fails when the page shows a replay or delete control
// or a selection checkbox.
func (v *visit) noOperatorControls(where string) {
	v.t.Helper()
	for _, c := range operatorControls {
		v.count(v.id(c), 0, where+": "+c)
	}
	v.count(v.page.Locator("input[data-row], input[data-select-page]"), 0, where+": selection checkboxes")
}

// A support person (viewer) finds a customer's failed order by the error
// text and by its transactionId, reads its payload and error, and has no
// way to replay or delete anything.
func TestViewerFindsAndReadsADeadLetter(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("sam", broker.RoleViewer)

	v := a.browse()
	v.login("sam", pw)
	v.contains(v.id("whoami"), "viewer", "the role shown")
	v.noOperatorControls("overview")

	// From the overview to the queue's dead letters.
	v.click(v.id("queue-"+shopQueue).GetByTestId("queue-depth"), "the queue's dead-letter count")
	v.atPath("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("dl-row"), shopDead, "dead letters of the shop")
	v.noOperatorControls("dead-letter list")

	// The error groups lead to their dead letters, and the filters stay
	// usable after.
	v.click(v.id("error-group-filter").Filter(playwright.LocatorFilterOptions{HasText: "insufficient_funds"}), "the declined cards' error group")
	v.count(v.id("dl-row"), shopDeclined, "rows of the declined cards' error group")
	v.contains(v.id("chip").First(), "insufficient_funds", "the error group's chip")
	v.click(v.id("chip").First().GetByRole("link"), "the chip's remove button")
	v.count(v.id("chip"), 0, "chips once the filter is removed")
	v.count(v.id("dl-row"), shopDead, "dead letters once the filter is removed")

	// By error text: exactly the declined cards, and the filter is in
	// the URL so it can be shared.
	v.fill(v.id("filter-error"), "insufficient_funds", "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("dl-row"), shopDeclined, "rows matching insufficient_funds")
	for i := range shopDeclined {
		v.contains(v.id("dl-error").Nth(i), "insufficient_funds", "error of a filtered row")
	}
	v.contains(v.id("chip").First(), "insufficient_funds", "the filter's chip")
	if u, err := url.Parse(v.page.URL()); err != nil || u.Query().Get("error") != "insufficient_funds" {
		t.Errorf("the error filter is not in the URL: %s", v.page.URL())
	}

	// By transactionId, from a fresh form: the customer's order.
	v.fill(v.id("filter-error"), "", "error filter")
	v.fill(v.id("filter-tx"), lostOrderTx, "transactionId filter")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("dl-row"), 1, "rows with transactionId "+lostOrderTx)
	v.contains(v.id("dl-tx"), lostOrderTx, "the row's transactionId")
	v.contains(v.id("dl-error"), "no shipping address", "the row's error")
	v.screenshot("deadletters-filtered-viewer")
	v.noOperatorControls("filtered list")

	// Its page: payload pretty, then raw; the error in full.
	v.click(v.id("dl-link"), "the dead letter's id")
	v.see(v.id("dl-id"), "the dead letter's id")
	v.contains(v.id("fact-tx"), lostOrderTx, "the transactionId fact")
	v.contains(v.id("facts"), shipping, "the group fact")
	pretty := v.id("payload-pretty")
	v.see(pretty, "the pretty payload")
	v.contains(pretty, `"email": "ana@example.com"`, "the pretty payload")
	v.contains(pretty, `"shipping": null`, "the pretty payload")
	raw := v.id("payload-raw")
	v.check(v.expect.Locator(raw).ToBeHidden(), "the raw payload is hidden at first")
	v.click(v.id("show-raw"), "Raw")
	v.see(raw, "the raw payload")
	v.check(v.expect.Locator(pretty).ToBeHidden(), "the pretty payload is hidden once Raw is picked")
	if got := v.text(raw, "the raw payload"); got != lostOrderPayload {
		t.Errorf("raw payload:\n got %s\nwant %s", got, lostOrderPayload)
	}
	if got := v.text(v.id("dl-error-full"), "the full error"); got != errAddress {
		t.Errorf("full error:\n got %q\nwant %q", got, errAddress)
	}
	v.click(v.id("show-pretty"), "Pretty")
	v.see(pretty, "the pretty payload again")
	v.screenshot("deadletter-detail")
	v.noOperatorControls("dead-letter page")

	// Reading changed nothing.
	if n := a.count(broker.DLQQuery{Queue: shopQueue}); n != shopDead {
		t.Errorf("the shop has %d dead letters after a viewer's visit, want %d", n, shopDead)
	}
}

// A support person opens a queue with a partition per customer: the page
// lists the first 200 by name and says so, and the finder narrows them to
// the customer asked about, whose dead letters are one click away.
func TestViewerFindsAPartitionAmongMany(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	msgs := make([]msg, 0, 320)
	for i := range 320 {
		msgs = append(msgs, orderMsg(i, fmt.Sprintf("customer-%04d", i)))
	}
	a.push("invoices", msgs...)
	pw := a.user("sam", broker.RoleViewer)

	v := a.browse()
	v.login("sam", pw)
	v.open("/queues/invoices")
	v.count(v.id("partitions").Locator("tbody tr"), 200, "partition rows")
	v.contains(v.id("partition-shown"), "The first 200 of 320 partitions", "what the list shows")
	v.fill(v.id("partition-find"), "customer-012", "the partition finder")
	v.click(v.id("partition-finder").GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Find"}), "Find")
	v.count(v.id("partitions").Locator("tbody tr"), 10, "partitions starting with customer-012")
	v.contains(v.id("partition-shown"), `10 partitions whose name starts with "customer-012".`, "what the list shows")
	v.layoutOK("queue page, found partitions")
	v.screenshot("queue-partition-finder")
	v.click(v.id("partitions").Locator("tbody tr").First().GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "dead letters"}), "the first one's dead letters")
	v.atPath("/queues/invoices/dead-letters")
	v.see(v.id("filter-partition"), "the partition filter")
}
