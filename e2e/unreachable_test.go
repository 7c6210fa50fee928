package e2e

import (
	"fmt"
	"net/url"
	"testing"
	"time"

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

// replayAnswerLost routes the next replays to Lazarus, which carries them
// out, and then loses the answer as lose says (a dropped connection, a
// proxy's error): the page cannot know whether they were done. The
// answer is lost once lost is closed: after the list has come again on
// the news of the replay, and the button that sent it is gone with the
// old list.
func (v *visit) replayAnswerLost(lost <-chan struct{}, lose func(playwright.Route) error) func() {
	v.t.Helper()
	pattern := "**/dead-letters/*/replay"
	handler := func(r playwright.Route) {
		defer func() {
			select {
			case <-lost:
			case <-time.After(time.Minute): // the test has failed meanwhile: let the page go on
			}
			_ = lose(r)
		}()
		// Fetch does not send the browser's Sec-Fetch-Site, which is what
		// makes the page's requests same-origin to the CSRF check.
		h := r.Request().Headers()
		h["sec-fetch-site"] = "same-origin"
		res, err := r.Fetch(playwright.RouteFetchOptions{Headers: h})
		if err != nil {
			v.problem("replay through the route: " + err.Error())
		} else if res.Status() != 200 {
			body, _ := res.Text()
			v.problem(fmt.Sprintf("replay through the route: %d %s", res.Status(), body))
		}
	}
	v.check(v.page.Route(pattern, handler), "route the replays")
	return func() { v.check(v.page.Unroute(pattern, handler), "route the replays to Lazarus again") }
}

// A developer works while Lazarus cannot be reached: a filter, a replay
// and an answer from a proxy in between each say so in an alert. A filter
// (a GET) changed nothing and says so, and never leaves the list under a
// filter it was not made with; a replay whose answer was lost may have
// been done, and says to reload to see. Once Lazarus answers again,
// everything works.
func TestOperatorIsToldWhenLazarusIsUnreachable(t *testing.T) {
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

	// A filter while the server is down: an alert that nothing was
	// changed, and the form goes back to the filter of the list it stands
	// over.
	reconnect := v.cutOff()
	v.fill(v.id("filter-error"), "insufficient_funds", "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.alertSays("Lazarus could not be reached, so the filter was not applied")
	v.filterIs("timeout")
	v.count(v.id("dl-row"), timeouts, "rows of timeouts, still")
	v.contains(v.page.GetByRole("alert"), "the form is back to the filter of what is shown below. Nothing was changed; try again.", "the alert about the filter")
	v.screenshot("unreachable-filter")

	// A replay that never reached Lazarus: the page cannot tell it from one
	// whose answer was lost, so it says it may or may not have been done;
	// here it was not, and the row stays.
	const maybe = "Lazarus could not be reached: the replay may or may not have been done. Reload the page to see."
	first := v.rowIDs()[0]
	v.click(v.row(first).GetByTestId("row-replay"), "Replay on the first row")
	v.alertSays(maybe)
	v.count(v.page.GetByText("nothing was changed"), 0, "a claim that nothing was changed")
	v.count(v.row(first), 1, "the row not replayed")
	if _, err := a.broker.DeadLetter(a.ctx, first, ""); err != nil {
		t.Errorf("dead letter %s: %v, want it still there", first, err)
	}
	reconnect()
	v.open(list + "?error=timeout")
	v.count(v.row(first), 1, "the row not replayed, after a reload")
	v.count(v.page.GetByRole("alert"), 0, "alerts after the reload")

	// A replay that Lazarus carried out, its answer lost on the way back:
	// the same alert, and it was done, as the reload shows.
	// The list comes again on the news of the replay before its answer is
	// lost, without the button that sent it: the alert all the same.
	lost := make(chan struct{})
	restore := v.replayAnswerLost(lost, func(r playwright.Route) error { return r.Abort("connectionreset") })
	v.click(v.row(first).GetByTestId("row-replay"), "Replay on the first row, the answer lost")
	v.count(v.row(first), 0, "the replayed row, gone from the list on the news, its answer not yet lost")
	close(lost)
	v.alertSays(maybe)
	restore()
	a.gone(first)
	timeouts--
	v.open(list + "?error=timeout")
	v.count(v.row(first), 0, "the replayed row after the reload")
	v.count(v.id("dl-row"), timeouts, "rows of timeouts after the reload")

	// A proxy that gave up waiting for a Lazarus that went on with the
	// replay: its 504 says the same.
	second := v.rowIDs()[0]
	lost = make(chan struct{})
	restore = v.replayAnswerLost(lost, func(r playwright.Route) error {
		return r.Fulfill(playwright.RouteFulfillOptions{Status: playwright.Int(504), ContentType: playwright.String("text/html"),
			Body: "<html><body><h1 data-testid=\"proxy-page\">504 Gateway Timeout</h1></body></html>"})
	})
	v.click(v.row(second).GetByTestId("row-replay"), "Replay on a row, through a proxy that times out")
	v.count(v.row(second), 0, "the replayed row, gone from the list on the news, before the proxy's answer")
	close(lost)
	v.alertSays("Lazarus could not be reached (504 Gateway Timeout): the replay may or may not have been done. Reload the page to see.")
	v.count(v.id("proxy-page"), 0, "the proxy's page in ours")
	restore()
	a.gone(second)
	timeouts--
	v.open(list + "?error=timeout")
	v.count(v.id("dl-row"), timeouts, "rows of timeouts after the second reload")

	// A proxy between answers for a Lazarus it cannot reach: its page is
	// not put into ours.
	proxy := func(r playwright.Route) {
		_ = r.Fulfill(playwright.RouteFulfillOptions{Status: playwright.Int(502), ContentType: playwright.String("text/html"),
			Body: "<html><body><h1 data-testid=\"proxy-page\">502 Bad Gateway</h1></body></html>"})
	}
	v.check(v.page.Route("**"+list+"?*", proxy), "route the list to a failing proxy")
	v.fill(v.id("filter-error"), "insufficient_funds", "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.alertSays("Lazarus could not be reached (502 Bad Gateway), so the filter was not applied")
	v.filterIs("timeout")
	v.count(v.id("proxy-page"), 0, "the proxy's page in ours")
	v.count(v.id("dl-row"), timeouts, "rows of timeouts, still")
	v.check(v.page.Unroute("**"+list+"?*", proxy), "route the list to Lazarus again")

	// Lazarus itself answers a path that is no route (a page older than the
	// server): its own message, not "could not be reached".
	third := v.rowIDs()[0]
	gone := func(r playwright.Route) {
		_ = r.Continue(playwright.RouteContinueOptions{URL: playwright.String(a.url + list + "/" + third + "/undo")})
	}
	v.check(v.page.Route("**/dead-letters/*/replay", gone), "send the replay to a path that is no route")
	v.click(v.row(third).GetByTestId("row-replay"), "Replay to a route that is gone")
	v.contains(v.id("flash"), "No route serves this path", "Lazarus's own 404")
	v.count(v.page.GetByText("could not be reached"), 0, "an unreachable alert for Lazarus's own answer")
	v.check(v.page.Unroute("**/dead-letters/*/replay", gone), "route the replays to Lazarus again")

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
