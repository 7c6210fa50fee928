package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// following waits until the page follows its live stream (live.js marks
// the wrapper once the stream is open).
func (v *visit) following() {
	v.t.Helper()
	v.count(v.page.Locator("[data-live][data-live-open]"), 1, "the page following its stream")
}

// press presses a key on the focused element.
func (v *visit) press(key string) {
	v.t.Helper()
	v.check(v.page.Keyboard().Press(key), "press %s", key)
}

// failBilling has billing fail the order n at once: a new dead letter of
// the shop, the newest. It returns its transactionId.
func (a *app) failBilling(n int) string {
	a.t.Helper()
	m := orderMsg(n, "eu-1")
	a.push(shopQueue, m)
	a.consume(shopQueue, billing, map[string]string{m.Tx: errDeclined}, true)
	return m.Tx
}

// A developer watches the list while dead letters arrive: with nothing
// selected a new one appears at the top by itself; with a row selected
// the rows stay where they are, under the mouse, and a marker says how
// many are new, which shows them when pressed, the selection kept.
func TestOperatorWatchesNewDeadLettersArrive(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)

	v := a.browse()
	v.login("dev", pw)
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("dl-row"), shopDead, "dead letters")
	v.following()

	// Nobody selecting: it comes in by itself.
	tx := a.failBilling(2001)
	v.count(v.id("dl-row"), shopDead+1, "dead letters once one more failed")
	v.contains(v.id("dl-row").First().GetByTestId("dl-tx"), tx, "the newest row")
	v.check(v.expect.Locator(v.id("live-marker")).ToBeHidden(), "no marker while nothing holds the list")

	// A row selected: two more fail; the list holds still.
	ids := v.rowIDs()
	picked := v.row(ids[2])
	v.click(picked.Locator("input[data-row]"), "the third row's checkbox")
	before, err := picked.BoundingBox()
	v.check(err, "where the selected row is")
	a.failBilling(2002)
	a.failBilling(2003)
	v.contains(v.id("live-marker"), "2 new dead letters", "the marker")
	if got := v.rowIDs(); !slices.Equal(got, ids) {
		t.Fatalf("the rows moved while one was selected:\n%v\nwant\n%v", got, ids)
	}
	after, err := picked.BoundingBox()
	v.check(err, "where the selected row is now")
	if after.Y != before.Y {
		t.Errorf("the selected row moved from y=%v to y=%v", before.Y, after.Y)
	}
	v.check(v.expect.Locator(picked.Locator("input[data-row]")).ToBeChecked(), "the row is still selected")
	v.screenshot("live-new-marker")

	// Pressed: the new ones show; the selection is still the same row.
	v.click(v.id("live-marker"), "the marker")
	v.count(v.id("dl-row"), shopDead+3, "dead letters once shown")
	v.check(v.expect.Locator(v.id("live-marker")).ToBeHidden(), "the marker once pressed")
	v.check(v.expect.Locator(v.row(ids[2]).Locator("input[data-row]")).ToBeChecked(), "the selection kept")
	v.contains(v.page.Locator("[data-selected-count]"), "1 selected", "the selection's count")
	if n := a.count(broker.DLQQuery{Queue: shopQueue}); n != shopDead+3 {
		t.Errorf("broker: %d dead letters, want %d", n, shopDead+3)
	}
}

// A developer triages from the keyboard: "?" lists the keys; j and k move
// the current row, x selects it, r replays through the confirmation, d
// asks before deleting; none of them act while typing in a filter.
func TestOperatorTriagesWithTheKeyboard(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)

	v := a.browse()
	v.login("dev", pw)
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("dl-row"), shopDead, "dead letters")
	v.following()

	v.press("?")
	v.see(v.id("keys-help"), "the keys' help")
	v.contains(v.id("keys-help"), "Replay the selected dead letters", "the help")
	v.check(v.expect.Locator(v.id("keys-help-close")).ToBeFocused(), "the help's Close has the focus")
	v.screenshotWindow("keys-help")
	v.press("Escape")
	v.check(v.expect.Locator(v.id("keys-help")).ToBeHidden(), "the help once closed")

	// Typing in a filter: the keys are letters.
	v.click(v.id("filter-error"), "the error filter")
	v.check(v.page.Keyboard().Type("jxrd"), "type in the filter")
	v.check(v.expect.Locator(v.id("filter-error")).ToHaveValue("jxrd"), "the filter's text")
	v.count(v.page.Locator("tr.cursor"), 0, "current rows while typing")
	v.count(v.page.Locator("dialog[open]"), 0, "dialogs while typing")
	v.fill(v.id("filter-error"), "", "the error filter")
	v.check(v.id("filter-error").Blur(), "leave the filter")

	ids := v.rowIDs()
	cursor := func(i int) {
		t.Helper()
		v.check(v.expect.Locator(v.row(ids[i])).ToBeFocused(), "row %d has the focus", i)
		v.check(v.expect.Locator(v.row(ids[i])).ToHaveClass(regexp.MustCompile(`\bcursor\b`)), "row %d is current", i)
		v.check(v.expect.Locator(v.row(ids[i])).ToHaveAttribute("aria-current", "true"), "row %d says it is current", i)
		v.count(v.page.Locator("tr.cursor"), 1, "current rows")
	}
	v.press("j")
	cursor(0)
	v.press("j")
	v.press("j")
	cursor(2)
	v.press("k")
	cursor(1)
	v.press("x")
	v.check(v.expect.Locator(v.row(ids[1]).Locator("input[data-row]")).ToBeChecked(), "x selects the current row")
	v.contains(v.page.Locator("[data-selected-count]"), "1 selected", "the selection's count")
	v.screenshot("keys-cursor")

	v.press("r")
	v.see(v.id("confirm-dialog"), "the replay's confirmation")
	v.contains(v.id("confirm-summary"), "1 message", "what the replay touches")
	v.screenshotWindow("keys-replay-confirm")
	v.click(v.id("confirm-go"), "the confirmation's Replay")
	v.count(v.row(ids[1]), 0, "the replayed row")
	v.count(v.id("dl-row"), shopDead-1, "dead letters after the replay")
	a.gone(ids[1])
	ids = slices.Delete(ids, 1, 2)
	cursor(1) // the row that took the replayed one's place

	// d on the current row asks first; Escape cancels, nothing goes.
	v.press("j")
	cursor(2)
	v.press("d")
	v.see(v.id("confirm-dialog"), "the delete's confirmation")
	v.contains(v.id("confirm-summary"), "1 dead letter", "what the delete touches")
	v.check(v.expect.Locator(v.id("confirm-cancel")).ToBeFocused(), "Cancel has the focus")
	v.press("Escape")
	v.count(v.page.Locator("dialog[open]"), 0, "dialogs once cancelled")
	v.count(v.id("dl-row"), shopDead-1, "dead letters after a cancelled delete")
	if n := a.count(broker.DLQQuery{Queue: shopQueue}); n != shopDead-1 {
		t.Errorf("broker: %d dead letters, want %d", n, shopDead-1)
	}
	// d selected the current row for want of a selection: cancelled, it
	// is unselected again; a row the person selected (x) stays so.
	box := v.row(ids[2]).Locator("input[data-row]")
	v.check(v.expect.Locator(box).Not().ToBeChecked(), "the row d selected, once cancelled")
	v.press("x")
	v.press("d")
	v.see(v.id("confirm-dialog"), "the delete's confirmation")
	v.click(v.id("confirm-cancel"), "Cancel")
	v.count(v.page.Locator("dialog[open]"), 0, "dialogs once cancelled")
	v.check(v.expect.Locator(box).ToBeChecked(), "the row x selected, after a cancelled d")
}

// A manager hides a line of a chart with its legend entry, from the mouse
// and the keyboard, and reads the chart's values as a table; a queue's
// group has the same colour whatever the range or the queue picked.
func TestManagerTogglesChartLinesAndReadsTheirTable(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("boss", broker.RoleViewer)

	v := a.browse()
	v.login("boss", pw)
	v.open("/charts?range=24h&queue=" + shopQueue)
	chart := v.id("chart-depth")
	toggles := chart.GetByTestId("chart-legend-toggle")
	v.count(toggles, 2, "the depth chart's legend entries")
	toggle := toggles.Filter(playwright.LocatorFilterOptions{HasText: billing})
	key, err := toggle.GetAttribute("data-series-toggle")
	v.check(err, "the legend entry's line")
	line := chart.Locator(fmt.Sprintf(`g.series[data-series=%q]`, key))
	other := chart.Locator(fmt.Sprintf(`g.series:not([data-series=%q])`, key))
	v.see(line, "billing's line")
	colour := views.SeriesClass(shopQueue + " / " + billing)
	v.check(v.expect.Locator(line).ToHaveClass(regexp.MustCompile(`\b`+colour+`\b`)), "billing's line has its colour")

	v.click(toggle, "billing's legend entry")
	v.check(v.expect.Locator(toggle).ToHaveAttribute("aria-pressed", "false"), "the entry says it is off")
	v.check(v.expect.Locator(line).ToBeHidden(), "billing's line once off")
	v.see(other, "shipping's line")
	v.screenshot("chart-legend-off")
	v.check(toggle.Focus(), "focus the legend entry")
	v.press("Enter")
	v.check(v.expect.Locator(toggle).ToHaveAttribute("aria-pressed", "true"), "the entry says it is on")
	v.see(line, "billing's line once on again")

	// The table, opened from the keyboard.
	table := chart.GetByTestId("chart-table")
	v.check(table.Locator("summary").Focus(), "focus the table's summary")
	v.press("Enter")
	v.see(table.Locator("table"), "the depth chart's table")
	heads, err := table.Locator("thead th").AllTextContents()
	v.check(err, "the table's heads")
	if !slices.Equal(heads, []string{"Time (UTC)", billing, shipping}) {
		t.Errorf("the table's heads %q", heads)
	}
	newest := table.GetByTestId("chart-table-row").First()
	cells, err := newest.Locator("td").AllTextContents()
	v.check(err, "the table's newest row")
	if !slices.Equal(cells, []string{fmt.Sprint(shopBillingDead), fmt.Sprint(shopShippingDead)}) {
		t.Errorf("the table's newest row %q, want billing %d and shipping %d", cells, shopBillingDead, shopShippingDead)
	}
	v.screenshot("chart-table")

	// Every queue, another range: the same colour for the same group.
	v.open("/charts?range=7d")
	toggle = v.id("chart-depth").GetByTestId("chart-legend-toggle").Filter(playwright.LocatorFilterOptions{HasText: shopQueue + " / " + billing})
	key, err = toggle.GetAttribute("data-series-toggle")
	v.check(err, "the legend entry's line")
	line = v.id("chart-depth").Locator(fmt.Sprintf(`g.series[data-series=%q]`, key))
	v.check(v.expect.Locator(line).ToHaveClass(regexp.MustCompile(`\b`+colour+`\b`)), "billing's line has the same colour on 7 d of every queue")
}
