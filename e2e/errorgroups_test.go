package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An operator replays one error group: the overview names the shop's
// biggest groups, the dead-letter list shows them all with their counts,
// trend and a sample, and "Replay this group…" replays exactly that
// group's dead letters through the usual confirmation.
func TestOperatorReplaysAnErrorGroup(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)
	const declinedGroup = "card declined: insufficient_funds (issuer response <n>)"
	group := broker.DLQQuery{Queue: shopQueue, Fingerprint: declinedGroup}
	want := a.count(group)
	if want != 4 {
		t.Fatalf("the shop has %d declined cards, want 4", want)
	}

	v := a.browse()
	v.login("dev", pw)
	v.contains(v.id("queue-"+shopQueue).GetByTestId("queue-error-groups"), declinedGroup, "the overview's top error groups")
	v.count(v.id("queue-"+shopQueue).GetByTestId("queue-error-group"), 3, "the overview's top error groups")

	v.open("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("error-group"), 4, "error groups of the shop")
	declined := v.id("error-group").Filter(playwright.LocatorFilterOptions{HasText: "insufficient_funds"})
	v.contains(declined.GetByTestId("error-group-count"), "4", "the declined cards' count")
	v.contains(declined, "2 h ago", "the declined cards' first and last seen")
	v.see(declined.GetByTestId("sparkline"), "the declined cards' trend")
	v.click(declined.Locator("summary"), "the declined cards' sample error")
	v.contains(declined.GetByTestId("error-group-sample"), errDeclined, "the sample error in full")
	v.screenshot("deadletters-error-groups")
	_, err := v.id("error-groups").Screenshot(playwright.LocatorScreenshotOptions{Path: playwright.String(filepath.Join(screenshotDir, "error-groups-panel.png"))})
	v.check(err, "screenshot of the error groups panel")

	v.click(declined.GetByTestId("group-replay"), "Replay this group…")
	v.see(v.id("confirm-dialog"), "the confirmation")
	v.contains(v.id("confirm-summary"), fmt.Sprintf("%d dead letters", want), "the confirmation's count")
	v.contains(v.id("confirm-summary"), "insufficient_funds", "the confirmation names the group")
	v.screenshotWindow("error-group-confirm")
	v.click(v.id("confirm-go"), "the confirmation's Replay")
	v.contains(v.id("flash"), fmt.Sprintf("Replaying %d messages", want), "the replay's message")
	v.followJob(fmt.Sprint(want))
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("error-group").Filter(playwright.LocatorFilterOptions{HasText: "insufficient_funds"}), 0, "the replayed group")
	v.count(v.id("error-group"), 3, "the other groups")
	v.count(v.id("dl-row"), shopDead-int(want), "dead letters after replaying the group")
	if n := a.count(group); n != 0 {
		t.Errorf("broker: %d declined cards left after replaying their group", n)
	}
	if n := a.count(broker.DLQQuery{Queue: shopQueue}); n != shopDead-want {
		t.Errorf("broker: %d dead letters after replaying the group, want %d", n, shopDead-want)
	}
}
