package e2e

import (
	"net/url"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Support (a viewer) looks for a payment by its orderId, which is only in
// the payload (its transactionId is another id), on the dead-letter list:
// with a payload field filter, then with free text in payloads; each
// filter is a chip and in the URL, and goes with its chip.
func TestViewerFindsADeadLetterByItsPayload(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("sam", broker.RoleViewer)

	v := a.browse()
	v.login("sam", pw)
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("dl-row"), shopDead, "dead letters of the shop")

	// orderId 1042 is in no transactionId and, as a number, in no error
	// text of its own: the field filter finds exactly the order.
	v.fill(v.id("filter-field"), "orderId = 1042", "payload field filter")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("dl-row"), 1, "rows with orderId 1042")
	v.contains(v.id("dl-tx"), lostOrderTx, "the row's transactionId")
	v.contains(v.id("chip").First(), "orderId = 1042", "the field filter's chip")
	if u, err := url.Parse(v.page.URL()); err != nil || u.Query().Get("field") != "orderId = 1042" {
		t.Errorf("the field filter is not in the URL: %s", v.page.URL())
	}
	v.screenshot("deadletters-field-filter")

	// A second filter adds to the first; a filter that cannot hold finds
	// nothing and says so.
	v.fill(v.id("filter-field"), "customer.email = nobody@example.com", "payload field filter")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("chip"), 2, "two field filters' chips")
	v.see(v.id("empty"), "the empty list")

	// Its chip removes the second only.
	v.click(v.id("chip").Nth(1).GetByRole("link"), "the second filter's remove button")
	v.count(v.id("chip"), 1, "chips once the second filter is removed")
	v.count(v.id("dl-row"), 1, "rows with orderId 1042 again")
	v.click(v.id("chip").First().GetByRole("link"), "the field filter's remove button")
	v.count(v.id("dl-row"), shopDead, "dead letters once the filter is removed")

	// Free text in payloads: the customer's name, any case.
	v.fill(v.id("filter-q"), "ana LIMA", "search box of payloads and errors")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("dl-row"), 1, "rows whose payload holds Ana Lima")
	v.contains(v.id("dl-tx"), lostOrderTx, "the row's transactionId")
	v.contains(v.id("chip").First(), "ana LIMA", "the text's chip")
	// And in error texts: a phrase of the declined cards' error.
	v.fill(v.id("filter-q"), `"card declined"`, "search box of payloads and errors")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("dl-row"), shopDeclined, "rows whose error says card declined")
	v.noOperatorControls("searched list")
}
