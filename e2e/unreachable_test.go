package e2e

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// cutOff makes every request of the page fail from now on, as when the
// server is down or the network gone; the returned func puts it back.
func (v *visit) cutOff() func() {
	v.t.Helper()
	handler := func(r playwright.Route) { _ = r.Abort("connectionrefused") }
	v.check(v.page.Route("**/*", handler), "cut the page off")
	return func() { v.check(v.page.Unroute("**/*", handler), "reconnect the page") }
}

// alertSays waits until the page's alert says s.
func (v *visit) alertSays(s string) {
	v.t.Helper()
	v.check(v.expect.Locator(v.page.GetByRole("alert")).ToContainText(s), "the alert should say %q", s)
}

// filterIs checks that the error filter of the form and of the URL are
// both want: the list shown is the one the form describes.
func (v *visit) filterIs(want string) {
	v.t.Helper()
	v.check(v.expect.Locator(v.id("filter-error")).ToHaveValue(want), "the error filter in the form")
	u, err := url.Parse(v.page.URL())
	v.check(err, "parse the URL")
	if got := u.Query().Get("error"); got != want {
		v.t.Errorf("the error filter in the URL is %q, want %q", got, want)
	}
}

// A developer works while Lazarus cannot be reached: a filter, a replay
// and an answer from a proxy in between each say so in an alert, change
// nothing, and never leave the list under a filter it was not made with;
// once Lazarus answers again, everything works.
func TestOperatorIsToldWhenLazarusCannotBeReached(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)
	v := a.browse()
	v.login("dev", pw)
	list := "/queues/" + shopQueue + "/dead-letters"
	timeouts := int(a.count(broker.DLQQuery{Queue: shopQueue, ErrorContains: "timeout"}))
	v.open(list + "?error=timeout")
	v.count(v.id("dl-row"), timeouts, "rows of timeouts")

	// A filter while the server is down: an alert, and the form goes back
	// to the filter of the list it stands over.
	reconnect := v.cutOff()
	v.fill(v.id("filter-error"), "insufficient_funds", "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.alertSays("Lazarus could not be reached")
	v.filterIs("timeout")
	v.count(v.id("dl-row"), timeouts, "rows of timeouts, still")
	v.contains(v.page.GetByRole("alert"), "the form is back to the filter of what is shown below", "the alert about the filter")
	v.screenshot("unreachable-filter")

	// A replay: an alert that nothing was changed; the row stays, and so
	// does the dead letter.
	first := v.rowIDs()[0]
	v.click(v.row(first).GetByTestId("row-replay"), "Replay on the first row")
	v.alertSays("Lazarus could not be reached: nothing was changed. Try again.")
	v.count(v.row(first), 1, "the row not replayed")
	if _, err := a.broker.DeadLetter(a.ctx, first, ""); err != nil {
		t.Errorf("dead letter %s: %v, want it still there", first, err)
	}
	reconnect()

	// A proxy between answers for a Lazarus it cannot reach: its page is
	// not put into ours.
	proxy := func(r playwright.Route) {
		_ = r.Fulfill(playwright.RouteFulfillOptions{Status: playwright.Int(502), ContentType: playwright.String("text/html"),
			Body: "<html><body><h1 data-testid=\"proxy-page\">502 Bad Gateway</h1></body></html>"})
	}
	v.check(v.page.Route("**"+list+"?*", proxy), "route the list to a failing proxy")
	v.fill(v.id("filter-error"), "insufficient_funds", "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.alertSays("Lazarus could not be reached (502 Bad Gateway)")
	v.filterIs("timeout")
	v.count(v.id("proxy-page"), 0, "the proxy's page in ours")
	v.count(v.id("dl-row"), timeouts, "rows of timeouts, still")
	v.check(v.page.Unroute("**"+list+"?*", proxy), "route the list to Lazarus again")

	// Lazarus again: the filter works and the alert goes.
	v.fill(v.id("filter-error"), "insufficient_funds", "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("dl-row"), shopDeclined, "rows of declined cards")
	v.filterIs("insufficient_funds")
	v.count(v.page.GetByRole("alert"), 0, "alerts once Lazarus answers")
	declined := v.rowIDs()[0]
	v.click(v.row(declined).GetByTestId("row-replay"), fmt.Sprintf("Replay on %s", declined))
	v.contains(v.id("flash"), "Replayed", "the replay's message")
	v.count(v.row(declined), 0, "the replayed row")
	a.gone(declined)
}
