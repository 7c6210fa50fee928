package e2e

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/demo"
)

// A newcomer's demo database, as lazarus demo leaves it at its first
// start: a week of synthetic history behind it. A manager opening the
// charts and the overview sees a week's shape, and is told plainly which
// part of it is generated.
func TestDemoDatabaseShowsAWeekMarkedAsDemoData(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	mark, err := demo.WriteHistory(a.ctx, demo.Config{Broker: a.broker})
	if err != nil || mark.Until.IsZero() {
		t.Fatalf("WriteHistory = %+v, %v", mark, err)
	}
	pw := a.user("manager", broker.RoleViewer)
	v := a.browse()
	v.login("manager", pw)

	v.open("/charts?range=7d")
	note := v.id("demo-history")
	v.see(note, "the demo data note on the charts")
	v.contains(note, "History before "+mark.Until.UTC().Format("2 Jan 15:04")+" UTC is generated", "the note names when the generated history ends")
	for _, chart := range []string{"depth", "flow", "oldest", "failures", "replays"} {
		v.count(v.id("chart-"+chart).GetByTestId("chart-empty"), 0, "an empty "+chart+" chart")
	}
	v.screenshot("charts-demo-week")

	v.open("/")
	v.see(v.id("demo-history"), "the demo data note on the overview")
	v.count(v.page.Locator(`[data-testid="sparkline"]`), 3, "a sparkline per demo queue")
	v.screenshot("overview-demo-week")
}
