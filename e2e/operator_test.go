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
	v.contains(v.id("flash"), "Deleting the dead letters of 3 messages", "the delete's message")
	v.check(v.expect.Locator(dialog).Not().ToBeVisible(), "the confirmation closes")
	v.followJob("3")
	v.open("/queues/" + shopQueue + "/dead-letters")
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
	v.contains(v.id("flash"), fmt.Sprintf("Replaying %d messages", want), "the replay's message")
	v.followJob(fmt.Sprint(want))
	v.open("/queues/" + shopQueue + "/dead-letters?error=insufficient_funds")
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
	v.check(v.expect.Locator(v.id("tile-replays").Locator(".value")).ToHaveText("100.0 %"), "the replays tile shows that every replay succeeded")

	// The audit names who did what.
	v.open("/audit")
	v.see(v.id("audit"), "the audit")
	for _, s := range []string{"user:dev", "replay", "delete"} {
		v.contains(v.id("audit"), s, "the audit")
	}
	v.screenshot("audit")
}

// watchPosts counts, from now on in this page, the changes htmx sends
// (anything but a GET), as it sends them: a delete that Enter set off
// would be counted before the key press returns.
func (v *visit) watchPosts() {
	v.t.Helper()
	_, err := v.page.Evaluate(`() => {
		window.__posts = 0;
		document.addEventListener("htmx:beforeRequest", (e) => {
			if (e.detail.requestConfig.verb !== "get") window.__posts++;
		});
	}`)
	v.check(err, "watch the requests")
}

// posts is how many changes the page sent since watchPosts; -1 when the
// page is another one since (a form submitted without htmx navigates).
func (v *visit) posts() int {
	v.t.Helper()
	n, ok := v.eval(`() => window.__posts === undefined ? -1 : window.__posts`).(int)
	if !ok {
		return -1
	}
	return n
}

// Every destructive dialog opens with the focus on Cancel, and Enter
// pressed as it opens cancels: nothing is sent, nothing is deleted. The
// dialogs: a row's Delete, Delete selected, Delete all matching, the
// dead letter page's Delete, and the large one that asks for the queue's
// name (where Enter in the name field does not submit either). Delete
// itself, clicked or reached with Tab, still deletes.
func TestOperatorDestructiveDialogsOpenOnCancel(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	const big, bigN = "imports", 1001
	msgs := make([]msg, bigN)
	errs := make(map[string]string, bigN)
	for i := range msgs {
		msgs[i] = msg{Tx: fmt.Sprintf("row-%05d", i), Payload: fmt.Sprintf(`{"row":%d}`, i)}
		errs[msgs[i].Tx] = "column price is empty"
	}
	a.push(big, msgs...)
	a.consume(big, "indexer", errs, true)
	pw := a.user("dev", broker.RoleOperator)
	shopTotal := func() int64 { return a.count(broker.DLQQuery{Queue: shopQueue}) }

	v := a.browse()
	v.login("dev", pw)
	dialog, cancel := v.id("confirm-dialog"), v.id("confirm-cancel")
	// enterCancels opens a dialog with open, checks that Cancel has the
	// focus, presses Enter and checks that the dialog went and nothing
	// was sent or deleted.
	enterCancels := func(what string, open func()) {
		t.Helper()
		open()
		v.see(dialog, what)
		v.check(v.expect.Locator(cancel).ToBeFocused(), "%s opens with the focus on Cancel", what)
		v.check(v.page.Keyboard().Press("Enter"), "press Enter in %s", what)
		v.check(v.expect.Locator(dialog).ToHaveCount(0), "%s closes on Enter", what)
		if n := v.posts(); n != 0 {
			t.Fatalf("%s: Enter sent %d changes (-1: left the page), want none", what, n)
		}
		if n := shopTotal(); n != shopDead {
			t.Fatalf("%s: %d dead letters after Enter, want all %d", what, n, shopDead)
		}
	}

	v.open("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("dl-row"), shopDead, "dead letters")
	v.watchPosts()
	ids := v.rowIDs()
	enterCancels("a row's Delete", func() { v.click(v.row(ids[0]).GetByTestId("row-delete"), "Delete on the first row") })
	enterCancels("Delete selected", func() {
		v.click(v.page.Locator("input[data-row]").First(), "the first row's checkbox")
		v.click(v.id("bulk-delete"), "Delete selected")
	})
	enterCancels("Delete all matching", func() { v.click(v.id("all-delete"), "Delete all matching") })

	v.open("/queues/" + shopQueue + "/dead-letters/" + ids[0])
	v.watchPosts()
	enterCancels("the dead letter page's Delete", func() { v.click(v.id("detail-delete"), "Delete on the dead letter page") })

	v.open("/queues/" + big + "/dead-letters")
	v.watchPosts()
	v.click(v.id("all-delete"), "Delete all matching of "+big)
	v.see(dialog, "the queue-name confirmation")
	v.check(v.expect.Locator(cancel).ToBeFocused(), "the queue-name confirmation opens with the focus on Cancel")
	v.check(v.page.Keyboard().Press("Enter"), "press Enter in the queue-name confirmation")
	v.check(v.expect.Locator(dialog).ToHaveCount(0), "the queue-name confirmation closes on Enter")
	v.click(v.id("all-delete"), "Delete all matching of "+big)
	typed := v.id("confirm-queue")
	for _, name := range []string{"import", big} {
		v.fill(typed, name, "the queue name")
		v.check(typed.Press("Enter"), "press Enter in the queue-name field with %q", name)
		v.see(dialog, "the queue-name confirmation after Enter in its field")
	}
	if n := v.posts(); n != 0 {
		t.Fatalf("the queue-name confirmation: Enter sent %d changes, want none", n)
	}
	if n := a.count(broker.DLQQuery{Queue: big}); n != bigN {
		t.Fatalf("%s: %d dead letters after Enter, want all %d", big, n, bigN)
	}
	v.click(cancel, "Cancel")
	v.check(v.expect.Locator(dialog).ToHaveCount(0), "Cancel closes the queue-name confirmation")

	// Delete itself deletes: reached with Tab from Cancel and pressed
	// with Enter, or clicked.
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.click(v.row(ids[0]).GetByTestId("row-delete"), "Delete on the first row")
	v.see(dialog, "a row's Delete")
	v.check(v.expect.Locator(cancel).ToBeFocused(), "a row's Delete opens with the focus on Cancel")
	v.check(v.page.Keyboard().Press("Shift+Tab"), "Shift+Tab to Delete")
	v.check(v.expect.Locator(v.id("confirm-go")).ToBeFocused(), "Shift+Tab moves to Delete")
	v.check(v.page.Keyboard().Press("Enter"), "press Enter on Delete")
	v.contains(v.id("flash"), "Deleted dead letter", "the delete's message")
	v.count(v.row(ids[0]), 0, "the deleted row")
	a.gone(ids[0])
	v.click(v.row(ids[1]).GetByTestId("row-delete"), "Delete on the next row")
	v.check(v.expect.Locator(cancel).ToBeFocused(), "the next row's Delete opens with the focus on Cancel")
	v.click(v.id("confirm-go"), "the dialog's Delete")
	v.count(v.row(ids[1]), 0, "the deleted row")
	a.gone(ids[1])
	if n := shopTotal(); n != shopDead-2 {
		t.Errorf("broker: %d dead letters after two deletes, want %d", n, shopDead-2)
	}
}
