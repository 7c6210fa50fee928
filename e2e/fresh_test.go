package e2e

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// focused is the data-testid of the element with the focus ("" none),
// and the data-id of its row in the list, if it is in one.
func (v *visit) focused() (testid, row string) {
	v.t.Helper()
	out, _ := v.eval(`() => {
		const el = document.activeElement;
		if (!el || el === document.body) return ["", ""];
		const tr = el.closest("tr[data-id]");
		return [el.getAttribute("data-testid") || el.tagName, tr ? tr.getAttribute("data-id") : ""];
	}`).([]any)
	if len(out) != 2 {
		return "", ""
	}
	a, _ := out[0].(string)
	b, _ := out[1].(string)
	return a, b
}

// focusIs waits until the focus is on the element with data-testid
// testid (in the row of id, when row is set).
func (v *visit) focusIs(testid, row, what string) {
	v.t.Helper()
	l := v.id(testid)
	if row != "" {
		l = v.row(row).GetByTestId(testid)
	}
	if err := v.expect.Locator(l).ToBeFocused(); err != nil {
		got, in := v.focused()
		v.t.Fatalf("%s: the focus should be on %s %s, it is on %q (row %q): %v", what, testid, row, got, in, err)
	}
}

// A developer replays and deletes from a dead letter's page, and the
// page shows what is now true after each action, in place: after Replay
// it is the page of a dead letter that was replayed (by whom, as which
// copy), with no button left to replay it again; after Delete, of one
// deleted, with its Restore; after Restore (or the flash's Undo) the
// dead letter again, with its buttons. The focus goes to the new state,
// not to the top of the page.
func TestOperatorSeesWhatIsTrueAfterEachAction(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	const queue = "orders"
	a.configure(queue, map[string]any{"retryLimit": 0, "retryDelay": 0})
	a.push(queue, msg{Tx: "ord-1", Partition: "eu", Payload: `{"order":1}`}, msg{Tx: "ord-2", Partition: "eu", Payload: `{"order":2}`})
	a.consume(queue, "billing", map[string]string{"ord-1": "card declined", "ord-2": "card declined"}, true)
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: queue, Group: "billing"})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("dead letters %+v, %v", page.Items, err)
	}
	pw := a.user("dev", broker.RoleOperator)
	v := a.browse()
	v.login("dev", pw)

	// Replay: the page becomes the replayed dead letter's.
	replayed := page.Items[0].MessageID()
	v.open("/queues/" + queue + "/dead-letters/" + replayed + "?group=billing")
	v.contains(v.id("fact-replays"), "replayed 0 times", "the replays before")
	v.click(v.id("detail-replay"), "Replay")
	v.contains(v.id("flash"), "Replayed", "the replay's message")
	v.contains(v.id("fate"), "Replayed by user:dev", "what became of it, in place")
	v.count(v.id("detail-actions"), 0, "the replay and delete buttons after the replay")
	v.count(v.id("fact-replays"), 0, "the replays count of a live dead letter")
	v.focusIs("gone", "", "after the replay")
	v.screenshot("fresh-after-replay")
	a.gone(replayed)

	// Delete: the page says it was deleted and can be restored; Restore
	// makes it a dead letter again, on the same page.
	deleted := page.Items[1].MessageID()
	v.open("/queues/" + queue + "/dead-letters/" + deleted + "?group=billing")
	v.click(v.id("detail-delete"), "Delete")
	v.contains(v.id("confirm-summary"), "Undo (or Restore on its page) brings it back within 24 hours", "the delete's question, saying what is true")
	v.check(v.expect.Locator(v.id("confirm-summary")).Not().ToContainText("for good?"), "the delete's question does not say for good")
	v.click(v.id("confirm-go"), "Delete in the dialog")
	v.contains(v.id("flash"), "Undo brings it back within 24 hours", "the delete's message")
	v.contains(v.id("fate"), "Deleted in billing by user:dev", "what became of it, in place")
	v.see(v.id("restore"), "the Restore button")
	v.count(v.id("detail-actions"), 0, "the replay and delete buttons after the delete")
	v.screenshot("fresh-after-delete")
	a.gone(deleted)
	v.click(v.id("restore"), "Restore")
	v.contains(v.id("flash"), "it is a dead letter again", "the restore's message")
	v.see(v.id("detail-actions"), "the buttons of the dead letter, again")
	v.count(v.id("gone"), 0, "the page of a dead letter that is gone, after the restore")
	v.count(v.page.GetByText("no longer a dead letter"), 0, "\"no longer a dead letter\" after the restore")
	if _, err := a.broker.DeadLetter(a.ctx, deleted, "billing"); err != nil {
		t.Fatalf("dead letter %s after the restore: %v", deleted, err)
	}

	// The flash's Undo does the same.
	v.click(v.id("detail-delete"), "Delete")
	v.click(v.id("confirm-go"), "Delete in the dialog")
	v.see(v.id("gone"), "the page of the deleted dead letter")
	v.click(v.id("flash-undo"), "Undo in the flash")
	v.see(v.id("detail-actions"), "the buttons of the dead letter, after Undo")
	v.count(v.id("gone"), 0, "the page of a dead letter that is gone, after Undo")
	v.screenshot("fresh-after-undo")
}

// A developer works in a view of one consumer group, billing, on
// messages shipping completed: every replay offered there goes to
// billing alone unless she chooses otherwise, and the choice of every
// group names shipping, which would process them again. Without a group
// in the view, every group stays the default of a bulk replay.
func TestOperatorReplaysToTheGroupOfTheView(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)
	v := a.browse()
	v.login("dev", pw)

	// A row's Replay in billing's list: for billing only.
	v.open("/queues/" + shopQueue + "/dead-letters?group=" + billing)
	v.count(v.id("dl-row"), shopBillingDead, "billing's dead letters")
	first := v.rowIDs()[0]
	v.click(v.row(first).GetByTestId("row-replay"), "Replay on the first row")
	v.contains(v.id("flash"), "to billing only", "the replay's message")
	copyTx := broker.OwnGroupTransaction(first, billing)
	v.contains(v.id("flash"), copyTx, "the copy, for billing alone")

	// A dead letter's page, and its Edit page: billing only first and
	// primary; every group asks first, naming shipping, which completed it.
	v.count(v.row(first), 0, "the replayed row")
	rows := v.rowIDs()
	other := rows[len(rows)-1]
	v.open("/queues/" + shopQueue + "/dead-letters/" + other + "?group=" + billing)
	v.check(v.expect.Locator(v.id("detail-replay-own")).ToHaveClass("primary"), "billing only is the primary replay")
	v.check(v.expect.Locator(v.id("detail-actions").Locator("button").First()).ToHaveAttribute("data-testid", "detail-replay-own"), "billing only comes first")
	v.click(v.id("detail-replay"), "Replay for every group")
	v.contains(v.id("confirm-summary"), "shipping completed it already and processes it again", "the question names the group that completed it")
	v.click(v.id("confirm-cancel"), "Cancel")
	if _, err := a.broker.DeadLetter(a.ctx, other, billing); err != nil {
		t.Fatalf("a cancelled replay replayed %s: %v", other, err)
	}
	v.click(v.id("detail-edit"), "Edit and replay")
	v.check(v.expect.Locator(v.id("edit-replay-own")).ToHaveClass("primary"), "billing only is the Edit page's main button")
	v.check(v.expect.Locator(v.id("edit-replay-every")).ToHaveAttribute("data-confirm", confirmEvery(other)), "the every-group replay's question")

	v.open("/queues/" + shopQueue + "/dead-letters?group=" + billing)
	v.count(v.id("dl-row"), shopBillingDead-1, "billing's dead letters")

	// Replay selected and Replay all matching: billing only is checked.
	v.click(v.page.Locator("input[data-row]").First(), "the first row's checkbox")
	v.click(v.id("bulk-replay"), "Replay selected")
	v.check(v.expect.Locator(v.id("confirm-mode-own")).ToBeChecked(), "billing only is the default of Replay selected")
	v.contains(v.id("confirm-mode-own-label"), "Replay to billing only", "the choice of billing")
	v.contains(v.id("confirm-untouched"), "shipping has none of these dead letters", "the group that completed them")
	v.screenshotWindow("fresh-replay-selected-own")
	v.click(v.id("confirm-cancel"), "Cancel")
	v.click(v.id("all-replay"), "Replay all matching")
	v.check(v.expect.Locator(v.id("confirm-mode-own")).ToBeChecked(), "billing only is the default of Replay all matching")
	v.click(v.id("confirm-go"), "Replay in the dialog")
	v.contains(v.id("flash"), "to group billing only", "the job's message")
	v.followJob(fmt.Sprint(shopBillingDead - 1))
	if n := a.count(broker.DLQQuery{Queue: shopQueue, Group: shipping}); n != shopShippingDead {
		t.Errorf("shipping has %d dead letters after billing's replay, want its %d", n, shopShippingDead)
	}

	// The copy failed again: its page replays it to billing only.
	a.consume(shopQueue, billing, map[string]string{copyTx: "card declined again"}, true)
	v.open("/queues/" + shopQueue + "/dead-letters/" + first + "?group=" + billing)
	v.see(v.id("fate"), "the replayed original")
	v.click(v.id("fate-outcome"), "the copy that failed again")
	v.contains(v.id("detail-replay-own"), "Replay for billing only", "the copy for billing alone, replayed to billing only")
	v.count(v.id("detail-replay"), 0, "a replay to every group of a copy for billing alone")

	// No group in the view: every group stays the bulk default.
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.click(v.id("all-replay"), "Replay all matching")
	v.check(v.expect.Locator(v.id("confirm-mode-every")).ToBeChecked(), "every group is the default without a group in the view")
}

// confirmEvery is the question of the Edit page's replay to every group
// of a dead letter of billing that shipping completed.
func confirmEvery(id string) string {
	return "Replay an edited copy of " + id[:8] + "…" + id[len(id)-4:] + " to every group (billing, shipping)? shipping completed it already and processes it again."
}

// Support filters the list at 1280×800: the first row of what the
// filter matches is on screen without scrolling, the error groups panel
// closed above it (open without a filter, and one click away).
func TestSupportSeesTheFilteredListFirst(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	// Billing fails in six more ways: ten error groups in all, nine of
	// billing's, as many as the panel shows.
	var more []msg
	errs := map[string]string{}
	for i, what := range []string{"inventory", "tax", "fraud check", "currency rates", "loyalty points", "invoice pdf"} {
		m := orderMsg(2001+i, "eu-1")
		more = append(more, m)
		errs[m.Tx] = what + " service unavailable: connection refused"
	}
	a.push(shopQueue, more...)
	a.consume(shopQueue, billing, errs, true)
	a.consume(shopQueue, shipping, nil, false)
	pw := a.user("sam", broker.RoleViewer)
	v := a.browse()
	v.login("sam", pw)
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("error-group"), 10, "error groups")
	v.check(v.expect.Locator(v.id("error-groups")).ToHaveAttribute("open", ""), "the error groups panel, open without a filter")
	v.see(v.id("error-group").First(), "the error groups")

	for _, filter := range []string{"group=" + billing, "error=insufficient_funds", "group=" + shipping + "&since=24h"} {
		v.open("/queues/" + shopQueue + "/dead-letters?" + filter)
		row := v.id("dl-row").First()
		v.see(row, "the first row")
		box, err := row.BoundingBox()
		v.check(err, "the first row's box")
		if box == nil || box.Y+box.Height > 800 {
			t.Errorf("%s: the first row ends at %v px, below the 800 px window", filter, box)
		}
		v.check(v.expect.Locator(v.id("error-groups")).Not().ToHaveAttribute("open", ""), "the error groups panel of %s, closed", filter)
	}
	v.screenshotWindow("fresh-filtered-list-first")
	v.click(v.id("error-groups-toggle"), "the error groups panel")
	v.see(v.id("error-group").First(), "the error groups, opened")
}

// A developer on a slow Lazarus: a replay that takes long disables its
// button, marks it busy and spins, and when no answer comes in time the
// page says so (the replay may or may not have been done); a filter that
// takes long says it was not applied. The buttons work again after.
func TestOperatorSeesASlowRequestWorkAndTimeOut(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)
	v := a.browse()
	v.login("dev", pw)
	list := "/queues/" + shopQueue + "/dead-letters"
	v.open(list)
	if got := v.eval(`() => htmx.config.timeout`); got != 30000 {
		t.Errorf("htmx's timeout is %v, want 30000 ms", got)
	}
	held := make(chan playwright.Route, 4)
	hold := func(r playwright.Route) { held <- r }
	v.check(v.page.Route("**/dead-letters/*/replay", hold), "hold the replays")
	defer func() {
		// The route off first, then what it held let go: a handler still
		// running may send after this (the channel stays open for it), so
		// it is never closed under a sender.
		_ = v.page.Unroute("**/dead-letters/*/replay")
		for {
			select {
			case r := <-held:
				_ = r.Abort("timedout")
			default:
				return
			}
		}
	}()

	// While the replay is on its way (no timeout, so that it stays so
	// until the test lets it go): disabled, busy, spinning.
	v.eval(`() => { htmx.config.timeout = 0; }`)
	first := v.rowIDs()[0]
	button := v.row(first).GetByTestId("row-replay")
	v.click(button, "Replay on the first row")
	v.check(v.expect.Locator(button).ToBeDisabled(), "the replay button while it works")
	v.check(v.expect.Locator(button).ToHaveAttribute("aria-busy", "true"), "the replay button is busy")
	spins, err := button.Evaluate(`b => getComputedStyle(b, "::after").animationName`, nil)
	v.check(err, "the busy button's spinner")
	if spins != "spin" {
		t.Errorf("the busy button's spinner: animation %v, want spin", spins)
	}
	v.shoot("fresh-slow-replay-busy", false)
	select {
	case r := <-held:
		_ = r.Abort("connectionrefused")
	case <-time.After(timeout * time.Millisecond):
		t.Fatal("the replay never reached the route")
	}
	v.alertSays("Lazarus could not be reached: the replay may or may not have been done. Reload the page to see.")
	v.check(v.expect.Locator(button).ToBeEnabled(), "the replay button after the server stopped answering")

	// With a timeout (shorter for the test), no answer in time says so.
	v.eval(`() => { htmx.config.timeout = 1500; }`)
	v.click(button, "Replay on the first row again")
	v.alertSays("Lazarus did not answer in time: the replay may or may not have been done. Reload the page to see.")
	v.check(v.expect.Locator(button).ToBeEnabled(), "the replay button after the timeout")
	v.check(v.expect.Locator(button).Not().ToHaveAttribute("aria-busy", "true"), "the replay button is no longer busy")

	// A filter that takes too long: the form says it was not applied.
	v.check(v.page.Route("**"+list+"?*", hold), "hold the list")
	v.fill(v.id("filter-error"), "insufficient_funds", "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.check(v.expect.Locator(v.id("filter-submit")).ToBeDisabled(), "Filter while it works")
	v.alertSays("Lazarus did not answer in time, so the filter was not applied")
	v.check(v.expect.Locator(v.id("filter-submit")).ToBeEnabled(), "Filter after the timeout")
	v.check(v.expect.Locator(v.id("filter-error")).ToHaveValue(""), "the form back to the list's filter")
}

// The row actions, the bulk dialog and the payload, as a keyboard user,
// a phone and a developer with binary payloads need them: after a row's
// Replay the focus is on the next row, not the top of the page; the
// bulk dialog fits a 390 px phone and shows its title and buttons at
// 1280×800; a base64 payload says its decoded size and shows its bytes.
func TestOperatorKeepsHisPlaceAndReadsBytes(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	bin := []byte{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 'I', 'H', 'D', 'R', 0xff, 0xfe}
	enc := base64.StdEncoding.EncodeToString(bin)
	a.push("files", msg{Tx: "file-1", Payload: `"` + enc + `"`})
	a.consume("files", "thumbs", map[string]string{"file-1": "not an image we know"}, true)
	pw := a.user("dev", broker.RoleOperator)
	v := a.browse()
	v.login("dev", pw)

	// The focus after a row's action: the next row.
	v.open("/queues/" + shopQueue + "/dead-letters")
	ids := v.rowIDs()
	v.click(v.row(ids[1]).GetByTestId("row-replay"), "Replay on the second row")
	v.count(v.row(ids[1]), 0, "the replayed row")
	v.focusIs("dl-link", ids[2], "after a row's Replay")
	v.click(v.row(ids[2]).GetByTestId("row-delete"), "Delete on the next row")
	// The dialog is ready once app.js has put the focus on Cancel.
	v.check(v.expect.Locator(v.id("confirm-cancel")).ToBeFocused(), "the dialog opens with the focus on Cancel")
	v.click(v.id("confirm-go"), "Delete in the dialog")
	v.count(v.row(ids[2]), 0, "the deleted row")
	v.focusIs("dl-link", ids[3], "after a row's Delete")

	// The bulk dialog at 1280×800: its title and buttons on screen.
	v.click(v.id("all-replay"), "Replay all matching")
	dialogFits := func(where string, width float64) {
		t.Helper()
		for _, part := range []string{"confirm-title", "confirm-go", "confirm-cancel"} {
			box, err := v.id(part).BoundingBox()
			v.check(err, "%s: the box of %s", where, part)
			if box == nil || box.Y < 0 || box.X < 0 || box.Y+box.Height > 800 || box.X+box.Width > width {
				t.Errorf("%s: %s is not all on screen: %+v", where, part, box)
			}
		}
		out, err := v.id("confirm-dialog").Evaluate(`d => Math.round(d.scrollWidth - d.clientWidth + Math.max(0, d.getBoundingClientRect().right - window.innerWidth))`, nil)
		v.check(err, "%s: the dialog's width", where)
		if over, _ := out.(int); over > 0 {
			t.Errorf("%s: the dialog is %d px too wide", where, over)
		}
		out, err = v.id("confirm-title").Evaluate(`h => Math.round(h.getBoundingClientRect().top - h.closest("dialog").getBoundingClientRect().top)`, nil)
		v.check(err, "%s: the title's place", where)
		if top, _ := out.(int); top < 0 {
			t.Errorf("%s: the dialog's title is cut by %v px", where, -top)
		}
	}
	v.see(v.id("confirm-dialog"), "the confirmation")
	dialogFits("1280×800", 1280)
	v.screenshotWindow("fresh-bulk-dialog-laptop")
	v.click(v.id("confirm-cancel"), "Cancel")

	// On a phone.
	v.check(v.page.SetViewportSize(390, 800), "a phone's window")
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.click(v.id("all-delete"), "Delete all matching")
	v.see(v.id("confirm-dialog"), "the confirmation on a phone")
	v.contains(v.id("confirm-undo-note"), "within 24 hours", "what a delete's undo can do")
	dialogFits("390 px phone", 390)
	v.screenshotWindow("fresh-bulk-dialog-phone")
	v.click(v.id("confirm-cancel"), "Cancel")
	v.check(v.page.SetViewportSize(1280, 800), "back to a laptop's window")

	// A base64 payload: its decoded size, and its bytes in hex.
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: "files"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("dead letters of files %+v, %v", page.Items, err)
	}
	v.open("/queues/files/dead-letters/" + page.Items[0].MessageID() + "?group=thumbs")
	v.contains(v.id("payload-kind"), fmt.Sprintf("a base64 string: %d B decoded", len(bin)), "the decoded size")
	v.click(v.id("show-hex"), "Hex")
	v.contains(v.id("payload-hex"), "00000000  89 50 4e 47 0d 0a 1a 0a  00 00 00 0d 49 48 44 52  |.PNG........IHDR|", "the bytes in hex")
	v.screenshot("fresh-base64-hex")
}
