package e2e

import (
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// phoneWidth is the width of a common phone's screen, in CSS pixels.
const phoneWidth = 390

// onScreen fails (and goes on) unless the element l finds is wholly
// within the window's width.
func (v *visit) onScreen(l playwright.Locator, what, where string) {
	v.t.Helper()
	v.see(l, what)
	box, err := l.BoundingBox()
	v.check(err, "the box of %s", what)
	width, _ := v.eval(`() => document.documentElement.clientWidth`).(int)
	if box == nil || box.X < 0 || box.X+box.Width > float64(width) {
		v.t.Errorf("%s: %s is not within the %d px window: %+v", where, what, width, box)
	}
}

// An admin on a phone: every page fits the 390 px screen. The header
// wraps with Log out on screen, nothing scrolls sideways (wide tables
// scroll within their own box), in light and dark.
func TestAdminOnAPhone(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("root", broker.RoleAdmin)
	v := a.browse()
	v.check(v.page.SetViewportSize(phoneWidth, 844), "a phone's window")
	v.login("root", pw)
	pages := []struct{ path, name string }{
		{"/", "phone-overview"},
		{"/queues/" + shopQueue, "phone-queue"},
		{"/queues/" + shopQueue + "/dead-letters", "phone-deadletters"},
		{"/error-groups", "phone-error-groups"},
		{"/error-groups/1", "phone-error-group"},
		{"/charts", "phone-charts"},
		{"/audit", "phone-audit"},
		{"/admin/users", "phone-users"},
		{"/admin/thresholds", "phone-thresholds"},
	}
	for _, p := range pages {
		v.open(p.path)
		v.onScreen(v.id("logout"), "Log out", p.name)
		v.screenshot(p.name)
	}
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.click(v.id("dl-row").First().Locator("a").First(), "the first dead letter")
	v.see(v.id("facts"), "the dead letter's facts")
	// A table that scrolls in its own box is still a table to a screen
	// reader.
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.see(v.page.GetByRole("table").First(), "the dead letters, as a table")
	v.click(v.id("dl-row").First().Locator("a").First(), "the first dead letter")
	v.see(v.id("facts"), "the dead letter's facts")
	v.onScreen(v.id("logout"), "Log out", "phone-deadletter")
	v.screenshot("phone-deadletter")
	v.scheme(playwright.ColorSchemeDark)
	v.screenshot("phone-deadletter-dark")
	v.open("/admin/thresholds")
	v.screenshot("phone-thresholds-dark")
	v.scheme(playwright.ColorSchemeLight)

	// The thresholds page on a laptop, light and dark.
	v.check(v.page.SetViewportSize(1280, 800), "a laptop's window")
	v.screenshot("thresholds")
	v.scheme(playwright.ColorSchemeDark)
	v.screenshot("thresholds-dark")
}
