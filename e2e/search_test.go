package e2e

import (
	"net/url"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// searchFor types q into the header's search box, reached with "/" from
// the page (the focus in no field), and sends it with Enter.
func (v *visit) searchFor(q string) {
	v.t.Helper()
	v.scripted()
	v.eval(`() => document.activeElement && document.activeElement.blur()`) // the focus on the page, in no field
	v.check(v.page.Keyboard().Press("/"), "press /")
	v.check(v.expect.Locator(v.id("search-q")).ToBeFocused(), "/ should focus the search box")
	v.fill(v.id("search-q"), q, "the search box")
	v.check(v.id("search-q").Press("Enter"), "send the search")
}

// A support person (viewer) finds messages from the header's search box
// on any page, by what a customer or a log hands them: a transactionId,
// a traceId, an id from a list; a prefix lists several, a message that is
// not a dead letter says where it is, and text that matches nothing says so.
func TestViewerSearchesFromTheHeader(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("sam", broker.RoleViewer)
	v := a.browse()
	v.login("sam", pw)

	// From the overview, by transactionId: the dead letter opens.
	v.searchFor(lostOrderTx)
	v.atPath("/queues/" + shopQueue + "/dead-letters/" + a.idOf(lostOrderTx))
	v.contains(v.id("fact-tx"), lostOrderTx, "the found dead letter's transactionId")
	v.contains(v.id("dl-error-full"), "no shipping address", "the found dead letter's error")

	// By the short id a list shows, typed on another page.
	v.open("/queues/" + shopQueue + "/dead-letters?group=" + billing)
	short := v.text(v.id("dl-link").First(), "the first row's short id")
	v.searchFor(short)
	v.see(v.id("facts"), "the dead letter of the short id")
	v.contains(v.id("dl-id"), short[len(short)-4:], "the dead letter's id")

	// By traceId.
	v.open("/charts")
	v.searchFor("4bf92f3577b34da6a3ce929d0e0e1042")
	v.contains(v.id("fact-tx"), lostOrderTx, "the dead letter of the trace")

	// A prefix: a list, capped, the text still in the box, and Escape
	// leaves the box.
	v.searchFor("order-10")
	v.atPath("/search")
	// The shop's 50 orders: its 12 dead letters first, then the 38
	// messages that are none.
	v.contains(v.id("search-summary"), "50 matches", "the list's summary")
	v.count(v.id("search-row"), 50, "rows of the prefix")
	v.see(v.id("search-row").First().GetByTestId("search-error"), "a dead letter's error in the first row")
	v.contains(v.id("search-row").Last().GetByTestId("search-state"), "not a dead letter", "the last row")
	v.contains(v.id("search-row").First(), "orders", "a row's queue")
	if got, _ := v.id("search-q").InputValue(); got != "order-10" {
		t.Errorf("the box holds %q on the results page", got)
	}
	if u, _ := url.Parse(v.page.URL()); u.Query().Get("q") != "order-10" {
		t.Errorf("the search is not in the URL: %s", v.page.URL())
	}
	v.scripted()
	v.check(v.id("search-q").Focus(), "focus the box")
	v.check(v.id("search-q").Press("Escape"), "Escape")
	v.check(v.expect.Locator(v.id("search-q")).Not().ToBeFocused(), "Escape should leave the box")
	v.screenshot("search-results")

	// A message that was completed: where it is.
	v.searchFor("order-1050")
	v.see(v.id("not-dead"), "the note that it is no dead letter")
	v.count(v.id("place"), 2, "its groups")
	v.contains(v.id("places"), "done", "its state in the groups")
	v.screenshot("search-message")

	// "/" typed in a field is text, not a jump to the box.
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.check(v.id("filter-tx").Press("/"), "type / in the transactionId filter")
	v.check(v.expect.Locator(v.id("filter-tx")).ToHaveValue("/"), "the / typed into the filter")
	v.check(v.expect.Locator(v.id("search-q")).Not().ToBeFocused(), "the box stays unfocused")

	// Nothing.
	v.searchFor("no-such-order-77")
	v.contains(v.id("search-none"), "No message or dead letter matches", "the no-match note")
	v.see(v.id("search-hints"), "what can be searched")
	v.screenshot("search-none")
	v.noOperatorControls("search")

	// On a phone the header still fits, the box on a line of its own.
	v.check(v.page.SetViewportSize(phoneWidth, 844), "a phone's window")
	v.open("/search?q=order-10")
	v.onScreen(v.id("logout"), "Log out", "phone-search")
	v.onScreen(v.id("search-q"), "the search box", "phone-search")
	v.screenshot("phone-search")
	v.screenshotWindow("phone-search-top")
	v.scheme(playwright.ColorSchemeDark)
	v.screenshotWindow("phone-search-top-dark")
}

// idOf is the message id of the shop's dead letter with a transactionId.
func (a *app) idOf(txid string) string {
	a.t.Helper()
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: shopQueue, TransactionID: txid, Limit: 1})
	if err != nil || len(page.Items) != 1 {
		a.t.Fatalf("the dead letter of %s: %+v, %v", txid, page, err)
	}
	return page.Items[0].MessageID()
}

// A support person (viewer) finds a payment by the orderId a customer
// quotes, which is only in its payload, from the overview's search box.
func TestViewerFindsAPaymentByItsOrderIDFromTheOverview(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	a.configure("payments", map[string]any{"retryLimit": 0})
	a.push("payments",
		msg{Tx: "pay-77", Partition: "eu", Payload: `{"orderId":"ord_8Zk2Q","amount":4200,"currency":"EUR"}`},
		msg{Tx: "pay-78", Partition: "eu", Payload: `{"orderId":"ord_9Xy1R","amount":1250,"currency":"EUR"}`})
	a.consume("payments", "ledger", map[string]string{"pay-77": "ledger rejected: account frozen", "pay-78": "ledger rejected: account frozen"}, false)
	pw := a.user("sam", broker.RoleViewer)
	v := a.browse()
	v.login("sam", pw)

	v.atPath("/")
	v.searchFor("ord_8Zk2Q")
	v.atPath("/queues/payments/dead-letters/" + a.idOfIn("payments", "pay-77"))
	v.contains(v.id("fact-tx"), "pay-77", "the payment's transactionId")
	v.contains(v.id("payload-pretty"), "ord_8Zk2Q", "the payment's payload")
	v.screenshot("search-payload-found")

	// Words of an error: the list of both.
	v.searchFor("account frozen")
	v.count(v.id("search-row"), 2, "dead letters whose error says account frozen")
	v.contains(v.id("search-row").First(), "words in payload or error", "what they matched")
	v.screenshot("search-text-results")
}

// idOfIn is the message id of queue's dead letter with a transactionId.
func (a *app) idOfIn(queue, txid string) string {
	a.t.Helper()
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: queue, TransactionID: txid, Limit: 1})
	if err != nil || len(page.Items) != 1 {
		a.t.Fatalf("the dead letter of %s: %+v, %v", txid, page, err)
	}
	return page.Items[0].MessageID()
}
