package e2e

import (
	"fmt"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// rowIDs are the data-id of the list's rows, top to bottom.
func (v *visit) rowIDs() []string {
	v.t.Helper()
	rows, err := v.id("dl-row").All()
	v.check(err, "list the rows")
	ids := make([]string, len(rows))
	for i, r := range rows {
		id, err := r.GetAttribute("data-id")
		v.check(err, "read a row's id")
		ids[i] = id
	}
	return ids
}

// row is the list's row of a dead letter.
func (v *visit) row(id string) playwright.Locator {
	return v.page.Locator(fmt.Sprintf(`[data-testid="dl-row"][data-id=%q]`, id))
}

// A developer (operator) replays one dead letter, deletes three picked
// with click and shift-click, then replays everything a filter matches,
// and sees the counts follow on the list and the overview, as the broker
// has them.
func TestOperatorReplaysAndDeletes(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)
	shopTotal := func() int64 { return a.count(broker.DLQQuery{Queue: shopQueue}) }

	v := a.browse()
	v.login("dev", pw)
	v.contains(v.id("tile-depth"), fmt.Sprint(shopDead), "the dead-letters tile")
	v.contains(v.id("queue-"+shopQueue).GetByTestId("queue-depth"), fmt.Sprint(shopDead), "the queue's dead letters")
	v.screenshot("overview")

	v.click(v.id("queue-"+shopQueue).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: shopQueue, Exact: playwright.Bool(true)}), "the queue")
	v.atPath("/queues/" + shopQueue)
	v.contains(v.id("queue-dlq-link"), fmt.Sprintf("%d dead letters", shopDead), "the queue's dead-letter link")
	v.screenshot("queue")

	v.click(v.id("queue-dlq-link"), "the queue's dead letters")
	v.atPath("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("dl-row"), shopDead, "dead letters")
	v.contains(v.id("all-replay"), fmt.Sprint(shopDead), "the replay-all button's count")
	v.check(v.page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: playwright.ColorSchemeDark}), "switch to dark")
	v.screenshot("deadletters-dark")
	v.check(v.page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: playwright.ColorSchemeLight}), "switch to light")

	// Replay one: a message says so, the row goes, the count drops.
	ids := v.rowIDs()
	first := ids[0]
	v.click(v.row(first).GetByTestId("row-replay"), "Replay on the first row")
	v.contains(v.id("flash"), "Replayed", "the replay's message")
	v.count(v.row(first), 0, "the replayed row")
	v.count(v.id("dl-row"), shopDead-1, "dead letters after one replay")
	v.contains(v.id("all-replay"), fmt.Sprint(shopDead-1), "the replay-all button's count")
	a.gone(first)
	if n := shopTotal(); n != shopDead-1 {
		t.Errorf("broker: %d dead letters after one replay, want %d", n, shopDead-1)
	}

	// Pick three with a click and a shift-click, delete them.
	ids = v.rowIDs()
	boxes := v.page.Locator("input[data-row]")
	v.click(boxes.Nth(0), "the first row's checkbox")
	v.check(boxes.Nth(2).Click(playwright.LocatorClickOptions{Modifiers: []playwright.KeyboardModifier{*playwright.KeyboardModifierShift}}), "shift-click the third row's checkbox")
	for i := range 3 {
		v.check(v.expect.Locator(boxes.Nth(i)).ToBeChecked(), "row %d is selected", i)
	}
	v.check(v.expect.Locator(boxes.Nth(3)).Not().ToBeChecked(), "row 3 is not selected")
	v.contains(v.page.Locator("[data-selected-count]"), "3 selected", "the selection count")
	v.click(v.id("bulk-delete"), "Delete selected")
	dialog := v.id("confirm-dialog")
	v.see(dialog, "the confirmation")
	v.contains(v.id("confirm-summary"), "3 dead letters", "the confirmation's summary")
	v.click(v.id("confirm-go"), "the confirmation's Delete")
	v.contains(v.id("flash"), "3 done", "the delete's message")
	v.check(v.expect.Locator(dialog).Not().ToBeVisible(), "the confirmation closes")
	v.count(v.id("dl-row"), shopDead-4, "dead letters after deleting three")
	for _, id := range ids[:3] {
		v.count(v.row(id), 0, "a deleted row")
		a.gone(id)
	}
	if n := shopTotal(); n != shopDead-4 {
		t.Errorf("broker: %d dead letters after deleting three, want %d", n, shopDead-4)
	}

	// Replay everything a filter matches: the declined cards.
	declined := broker.DLQQuery{Queue: shopQueue, ErrorContains: "insufficient_funds"}
	want := a.count(declined)
	if want == 0 {
		t.Fatal("no declined cards left to replay")
	}
	v.fill(v.id("filter-error"), "insufficient_funds", "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("dl-row"), int(want), "rows matching insufficient_funds")
	v.screenshot("deadletters-filtered")
	v.click(v.id("all-replay"), "Replay all matching")
	v.see(dialog, "the confirmation")
	v.contains(v.id("confirm-summary"), fmt.Sprintf("%d dead letters", want), "the confirmation's summary")
	v.contains(v.id("confirm-summary"), "insufficient_funds", "the confirmation's filter")
	v.screenshotWindow("bulk-confirm")
	v.click(v.id("confirm-go"), "the confirmation's Replay")
	v.contains(v.id("flash"), fmt.Sprintf("%d done", want), "the replay's message")
	v.see(v.id("empty"), "the empty list")
	v.count(v.id("dl-row"), 0, "rows matching insufficient_funds after the replay")
	if n := a.count(declined); n != 0 {
		t.Errorf("broker: %d declined cards left after replaying all, want 0", n)
	}
	left := shopDead - 4 - want
	if n := shopTotal(); n != left {
		t.Errorf("broker: %d dead letters after replaying the filter, want %d", n, left)
	}

	// The overview and the queue page count what is left.
	v.click(v.page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Overview", Exact: playwright.Bool(true)}).First(), "Overview")
	v.atPath("/")
	v.check(v.expect.Locator(v.id("tile-depth").Locator(".value")).ToHaveText(fmt.Sprint(left)), "the dead-letters tile shows %d", left)
	v.check(v.expect.Locator(v.id("queue-"+shopQueue).GetByTestId("queue-depth")).ToHaveText(fmt.Sprint(left)), "the queue's dead letters show %d", left)
	v.contains(v.id("tile-replays"), fmt.Sprintf("%d replayed", 1+want), "the replays tile")
	v.open("/queues/" + shopQueue)
	v.contains(v.id("queue-dlq-link"), fmt.Sprintf("%d dead letters", left), "the queue's dead-letter link")

	// The fix is deployed: the workers settle the replayed copies, and
	// the overview says the replays succeeded.
	a.consume(shopQueue, billing, nil, false)
	a.consume(shopQueue, shipping, nil, false)
	v.open("/")
	v.check(v.expect.Locator(v.id("tile-replays").Locator(".value")).ToHaveText("100 %"), "the replays tile shows that every replay succeeded")

	// The audit names who did what.
	v.open("/audit")
	v.see(v.id("audit"), "the audit")
	for _, s := range []string{"user:dev", "replay", "delete"} {
		v.contains(v.id("audit"), s, "the audit")
	}
	v.screenshot("audit")
}
