package e2e

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// The payments system a manager watches: queue "payments" read by the
// consumer groups "ledger" and "notify", queue "emails" read by "mailer"
// (always fine), and queue "exports", configured and never used.
const (
	payQueue    = "payments"
	ledger      = "ledger"
	notify      = "notify"
	mailQueue   = "emails"
	mailer      = "mailer"
	exportQueue = "exports"
)

const (
	errLedgerLocked = "ledger account locked: EUR-4711 is being reconciled"
	errSMTP         = "smtp 451 4.7.1 try again later"
)

// payments is when the payments system's traffic happened. Every batch
// runs 7½ minutes into a 15-minute step, so that none straddles a bucket
// of any range (minutes, 15 minutes, hours, 4 hours).
type payments struct {
	batch1 time.Time // 6 days and 7½ to 22½ minutes ago: 20 payments, ledger fails 4
	batch2 time.Time // 5 hours ago: 20 payments, ledger fails 8, notify 2
	replay time.Time // 3 hours ago: 6 of ledger's replayed; 4 copies complete, 2 fail again
	batch4 time.Time // 1½ hours ago: 20 payments, ledger fails 6
	batch5 time.Time // 8 to 23 minutes ago: 10 payments, notify fails 1; 30 emails
}

// What the payments system ends with: ledger has 4+8-6+2+6 = 14 dead
// letters, notify 2+1 = 3. In the last 24 h, payments had 112 acks of
// which 19 failed (17.0 %), emails 30 acks; 12 replayed copies were
// settled (6 by ledger, 6 by notify, which reads the partition too), 10
// of them completed.
const (
	payLedgerDead = 14
	payNotifyDead = 3
)

// paymentMsg is a payment message.
func paymentMsg(n int) msg {
	return msg{
		Tx:        fmt.Sprintf("pay-%d", n),
		Partition: "eu-1",
		Trace:     fmt.Sprintf("0af7651916cd43dd8448eb211c80%04d", n),
		Payload:   fmt.Sprintf(`{"paymentId":"pay-%d","amount":%d.50,"currency":"EUR","method":"card"}`, n, 10+n),
	}
}

// payFails maps the transactionIds pay-N of ns to err.
func payFails(err string, ns ...int) map[string]string {
	m := map[string]string{}
	for _, n := range ns {
		m[fmt.Sprintf("pay-%d", n)] = err
	}
	return m
}

// paymentsTraffic makes the payments system's traffic over the last six
// days, moving the app's clock from batch to batch.
func (a *app) paymentsTraffic() payments {
	a.t.Helper()
	defer a.clock.set(0)
	base := time.Now().UTC().Truncate(15 * time.Minute)
	mid := 7*time.Minute + 30*time.Second
	p := payments{
		batch1: base.Add(-6*24*time.Hour - 15*time.Minute + mid),
		batch2: base.Add(-5*time.Hour + mid),
		replay: base.Add(-3*time.Hour + mid),
		batch4: base.Add(-90*time.Minute + mid),
		// The 1 h chart checks batch 5 minute by minute: it starts a
		// second into its minute, so that a slow machine has most of a
		// minute to make it.
		batch5: base.Add(-15*time.Minute + 7*time.Minute + time.Second),
	}
	at := func(t time.Time) { a.clock.set(time.Until(t)) }
	pushPayments := func(from, to int) {
		var msgs []msg
		for n := from; n <= to; n++ {
			msgs = append(msgs, paymentMsg(n))
		}
		a.push(payQueue, msgs...)
	}

	at(p.batch1)
	a.configure(payQueue, map[string]any{"retryLimit": 0})
	a.configure(mailQueue, map[string]any{"retryLimit": 0})
	a.configure(exportQueue, map[string]any{"retryLimit": 3})
	pushPayments(1, 20)
	a.consume(payQueue, ledger, payFails(errLedgerLocked, 3, 7, 11, 15), false)
	a.consume(payQueue, notify, nil, false)

	at(p.batch2)
	pushPayments(21, 40)
	a.consume(payQueue, ledger, payFails(errLedgerLocked, 21, 22, 23, 24, 25, 26, 27, 28), false)
	a.consume(payQueue, notify, payFails(errSMTP, 39, 40), false)

	// The ledger is unlocked for some accounts: six of its dead letters
	// are replayed; four copies go through, two fail again.
	at(p.replay)
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: payQueue, Group: ledger, Limit: 100})
	if err != nil {
		a.t.Fatalf("list ledger's dead letters: %v", err)
	}
	again := map[string]string{}
	replayed := 0
	for _, d := range page.Items {
		var n int
		if _, err := fmt.Sscanf(d.TransactionID, "pay-%d", &n); err != nil || n < 21 || n > 26 {
			continue
		}
		res, err := a.broker.Replay(a.ctx, d.MessageID(), "user:dev")
		if err != nil {
			a.t.Fatalf("replay %s: %v", d.TransactionID, err)
		}
		replayed++
		if n >= 25 {
			again[res.TransactionID] = errLedgerLocked
		}
	}
	if replayed != 6 || len(again) != 2 {
		a.t.Fatalf("replayed %d of ledger's dead letters (%d to fail again), want 6 (2)", replayed, len(again))
	}
	a.consume(payQueue, ledger, again, false)
	a.consume(payQueue, notify, nil, false)

	at(p.batch4)
	pushPayments(41, 60)
	a.consume(payQueue, ledger, payFails(errLedgerLocked, 41, 42, 43, 44, 45, 46), false)
	a.consume(payQueue, notify, nil, false)

	at(p.batch5)
	pushPayments(61, 70)
	a.consume(payQueue, ledger, nil, false)
	a.consume(payQueue, notify, payFails(errSMTP, 70), false)
	var mails []msg
	for n := 1; n <= 30; n++ {
		mails = append(mails, msg{Tx: fmt.Sprintf("mail-%d", n), Partition: "all", Payload: fmt.Sprintf(`{"template":"receipt","to":"c%d@example.com"}`, n)})
	}
	a.push(mailQueue, mails...)
	a.consume(mailQueue, mailer, nil, false)

	for group, want := range map[string]int64{ledger: payLedgerDead, notify: payNotifyDead} {
		if n := a.count(broker.DLQQuery{Queue: payQueue, Group: group}); n != want {
			a.t.Fatalf("%s has %d dead letters of %s, want %d", group, n, payQueue, want)
		}
	}
	return p
}

// point is the chart's data point whose hover title starts with the time
// and the series' name.
func (v *visit) point(chart string, at time.Time, series string) playwright.Locator {
	return v.id("chart-" + chart).GetByTestId("chart-point").Filter(playwright.LocatorFilterOptions{HasText: views.Exact(at) + " · " + series + ":"})
}

// hoverPoint hovers the chart's point of series at the time, and checks
// that it shows itself and that its title says value.
func (v *visit) hoverPoint(chart string, at time.Time, series, value string) {
	v.t.Helper()
	p := v.point(chart, at, series)
	v.count(p, 1, fmt.Sprintf("%s chart: points of %s at %s", chart, series, views.Exact(at)))
	v.check(p.Hover(), "hover the %s chart's point of %s at %s", chart, series, views.Exact(at))
	want := views.Exact(at) + " · " + series + ": " + value
	v.check(v.expect.Locator(p.Locator("title")).ToHaveText(want), "%s chart: the hovered point's title", chart)
	fill, err := p.Evaluate(`c => getComputedStyle(c).fill`, nil)
	v.check(err, "read the hovered point's fill")
	if s, _ := fill.(string); s == "" || s == "transparent" || s == "none" || strings.HasPrefix(s, "rgba(0, 0, 0, 0)") {
		v.t.Errorf("%s chart: the hovered point of %s at %s does not show (fill %v)", chart, series, views.Exact(at), fill)
	}
}

// atCharts waits until the page is the charts with this range and queue
// in the URL.
func (v *visit) atCharts(rng, queue string) {
	v.t.Helper()
	err := v.page.WaitForURL(func(s string) bool {
		u, err := url.Parse(s)
		return err == nil && u.Path == "/charts" && u.Query().Get("range") == rng && u.Query().Get("queue") == queue
	})
	v.check(err, "want the charts of range %q and queue %q in the URL", rng, queue)
}

// rangeIs checks that the range links mark rng, and only it, as current.
func (v *visit) rangeIs(rng string) {
	v.t.Helper()
	current := regexp.MustCompile(`(^|\s)current(\s|$)`)
	for _, r := range []string{"1h", "24h", "7d", "30d"} {
		l := v.id("chart-range-" + r)
		if r == rng {
			v.check(v.expect.Locator(l).ToHaveClass(current), "the %s range link is marked current", r)
		} else {
			v.check(v.expect.Locator(l).Not().ToHaveClass(current), "the %s range link is not marked current", r)
		}
	}
}

// legend checks the chart's legend, in order.
func (v *visit) legend(chart string, names ...string) {
	v.t.Helper()
	v.check(v.expect.Locator(v.id("chart-"+chart).Locator(".legend li")).ToHaveText(names), "the %s chart's legend", chart)
}

// still moves the mouse off the charts and takes a screenshot, so that
// no hovered point shows in it.
func (v *visit) still(name string) {
	v.t.Helper()
	v.check(v.page.Mouse().Move(0, 0), "move the mouse away")
	v.screenshot(name)
}

// ticks are the labels of a chart's time axis (x) or value axis (y).
func (v *visit) ticks(chart, axis string) []string {
	v.t.Helper()
	anchor := map[string]string{"x": "middle", "y": "end"}[axis]
	texts, err := v.id("chart-" + chart).Locator(`svg text.tick[text-anchor="` + anchor + `"]`).AllTextContents()
	v.check(err, "read the %s chart's %s axis", chart, axis)
	return texts
}

// axesRound fails unless the chart's time axis is labelled at round
// times (like) and its value axis at whole numbers of unit.
func (v *visit) axesRound(chart string, like *regexp.Regexp, unit string) {
	v.t.Helper()
	xs := v.ticks(chart, "x")
	if len(xs) < 3 {
		v.t.Errorf("%s chart: %d labels on the time axis %q, want at least 3", chart, len(xs), xs)
	}
	for _, x := range xs {
		if !like.MatchString(x) {
			v.t.Errorf("%s chart: time axis label %q is not a round time (%s)", chart, x, like)
		}
	}
	whole := regexp.MustCompile(`^\d+` + regexp.QuoteMeta(unit) + `$`)
	for _, y := range v.ticks(chart, "y") {
		if !whole.MatchString(y) {
			v.t.Errorf("%s chart: value axis label %q is not a whole number%s", chart, y, unit)
		}
	}
}

// scheme switches the page's colour scheme.
func (v *visit) scheme(s *playwright.ColorScheme) {
	v.t.Helper()
	v.check(v.page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: s}), "switch the colour scheme")
}

// isRed fails unless the element's text colour is a red.
func (v *visit) isRed(l playwright.Locator, what string) {
	v.t.Helper()
	c, err := l.Evaluate(`e => getComputedStyle(e).color`, nil)
	v.check(err, "read the colour of %s", what)
	var r, g, b int
	if _, err := fmt.Sscanf(fmt.Sprint(c), "rgb(%d, %d, %d)", &r, &g, &b); err != nil || r < 2*g || r < 2*b {
		v.t.Errorf("%s is %v, want a red", what, c)
	}
}

// A manager (viewer) comes to see how the system does: the overview says
// which queue is unhealthy and why, and the charts show its dead letters,
// failures and replays over each range, a queue at a time, with the
// values on hover; a queue with no traffic says so.
func TestManagerWatchesTheCharts(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	p := a.paymentsTraffic()
	pw := a.user("maria", broker.RoleViewer)

	v := a.browse()
	v.login("maria", pw)
	v.contains(v.id("whoami"), "viewer", "the role shown")
	v.noOperatorControls("overview")

	// The overview: totals, a sparkline per queue that has traffic, and
	// the payments queue red, with the reasons in words.
	v.check(v.expect.Locator(v.id("tile-depth").Locator(".value")).ToHaveText(fmt.Sprint(payLedgerDead+payNotifyDead)), "the dead-letters tile")
	v.check(v.expect.Locator(v.id("tile-oldest").Locator(".value")).ToHaveText("6 d"), "the oldest tile")
	v.check(v.expect.Locator(v.id("tile-failures").Locator(".value")).ToHaveText("13.4 %"), "the failures tile (19 of 142 acks)")
	v.check(v.expect.Locator(v.id("tile-replays").Locator(".value")).ToHaveText("66.7 %"), "the replays tile (4 of ledger's 6 copies; notify never failed the originals)")
	for _, tile := range []string{"depth", "oldest", "failures"} {
		v.check(v.expect.Locator(v.id("tile-"+tile)).ToHaveClass(regexp.MustCompile(`\balert\b`)), "the %s tile is red", tile)
	}
	v.check(v.expect.Locator(v.id("tile-replays")).ToHaveClass(regexp.MustCompile(`\bok\b`)), "the replays tile is green")

	pay, mail, exports := v.id("queue-"+payQueue), v.id("queue-"+mailQueue), v.id("queue-"+exportQueue)
	v.count(v.id("sparkline"), 2, "sparklines (exports has no traffic)")
	v.see(pay.GetByTestId("sparkline"), "the payments sparkline")
	v.see(mail.GetByTestId("sparkline"), "the emails sparkline")
	v.count(exports.GetByTestId("sparkline"), 0, "a sparkline for exports")
	alerts := pay.Locator("td:last-child .badge.alert")
	v.count(alerts, 3, "the payments queue's alerts")
	v.contains(alerts.Nth(0), fmt.Sprintf("%d dead letters (limit 10)", payLedgerDead+payNotifyDead), "the depth alert")
	v.contains(alerts.Nth(1), "oldest waits", "the oldest alert")
	v.contains(alerts.Nth(1), "oldest waits 6 d (limit 4 h)", "the oldest alert, in days like the Oldest column")
	v.contains(alerts.Nth(2), "17.0 % of acks failed (limit 5 %)", "the failures alert")
	v.isRed(alerts.Nth(0), "the depth alert")
	v.contains(mail.Locator("td:last-child"), "healthy", "the emails queue's health")
	v.count(mail.Locator("td:last-child .badge.alert"), 0, "the emails queue's alerts")
	v.contains(pay.GetByTestId("queue-depth"), fmt.Sprint(payLedgerDead+payNotifyDead), "the payments dead letters")
	v.screenshot("manager-overview")
	v.scheme(playwright.ColorSchemeDark)
	v.isRed(alerts.Nth(0), "the depth alert in the dark")
	v.screenshot("manager-overview-dark")
	v.scheme(playwright.ColorSchemeLight)

	// The charts, over the last 24 hours by default.
	v.click(v.page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Charts", Exact: playwright.Bool(true)}).First(), "Charts")
	v.atPath("/charts")
	v.rangeIs("24h")
	steps := map[string]int{"1h": 60, "24h": 96, "7d": 168, "30d": 180}
	depth := v.id("chart-depth").GetByTestId("chart-point")
	v.count(depth, 3*steps["24h"], "points of the 3 depth lines over 24 h")
	v.legend("depth", "payments / ledger", "payments / notify", "emails / mailer")
	q := 15 * time.Minute
	v.hoverPoint("depth", p.batch2.Truncate(q), "payments / ledger", "12")
	v.hoverPoint("depth", p.replay.Truncate(q), "payments / ledger", "8")
	v.hoverPoint("depth", p.batch4.Truncate(q), "payments / ledger", "14")
	v.hoverPoint("depth", p.batch2.Truncate(q), "payments / notify", "2")
	v.contains(v.id("chart-flow").Locator("figcaption"), "per 15 min", "the flow chart's title")
	v.hoverPoint("flow", p.batch2.Truncate(q), "filed", "10")
	v.hoverPoint("flow", p.replay.Truncate(q), "replayed", "6")
	v.hoverPoint("failures", p.batch2.Truncate(q), "failed acks", "25 %")
	v.hoverPoint("failures", p.batch4.Truncate(q), "failed acks", "15 %")
	v.hoverPoint("replays", p.replay.Truncate(q), "replays that succeeded", "66.67 %")
	for _, c := range []string{"depth", "flow", "oldest", "failures", "replays"} {
		v.count(v.id("chart-"+c).GetByTestId("chart-empty"), 0, c+" chart's empty state")
	}
	// Axes a person can read: round times, whole counts and percents.
	quarter := regexp.MustCompile(`^([01]\d|2[0-3]):[0-5]0$|^[A-Z][a-z]{2} \d{1,2}$`)
	hours := regexp.MustCompile(`^([01]\d|2[0-3]):00$|^[A-Z][a-z]{2} \d{1,2}$`)
	days := regexp.MustCompile(`^[A-Z][a-z]{2} \d{1,2}$`)
	v.axesRound("depth", hours, "")
	v.axesRound("flow", hours, "")
	v.axesRound("failures", hours, " %")
	v.axesRound("replays", hours, " %")
	v.contains(v.id("chart-oldest").Locator("svg"), " d", "the oldest ages, six days long, in days")
	v.still("manager-charts-24h")
	v.scheme(playwright.ColorSchemeDark)
	v.still("manager-charts-24h-dark")
	v.scheme(playwright.ColorSchemeLight)

	// 1 h: minute by minute, the last batch.
	v.click(v.id("chart-range-1h"), "the 1h range")
	v.atCharts("1h", "")
	v.rangeIs("1h")
	v.count(depth, 3*steps["1h"], "points of the 3 depth lines over 1 h")
	v.contains(v.id("chart-flow").Locator("figcaption"), "per minute", "the flow chart's title")
	v.hoverPoint("depth", p.batch5.Truncate(time.Minute), "payments / notify", "3")
	v.hoverPoint("depth", p.batch5.Truncate(time.Minute), "payments / ledger", "14")
	v.hoverPoint("flow", p.batch5.Truncate(time.Minute), "filed", "1")
	v.hoverPoint("failures", p.batch5.Truncate(time.Minute), "failed acks", "2 %")
	v.see(v.id("chart-replays").GetByTestId("chart-empty"), "the replays chart's empty state over 1 h")
	v.contains(v.id("chart-replays"), "No replayed copy was settled in this range.", "the replays chart over 1 h")
	v.axesRound("depth", quarter, "")
	v.axesRound("flow", quarter, "")
	v.still("manager-charts-1h")

	// 7 d: hour by hour, back to the first batch.
	v.click(v.id("chart-range-7d"), "the 7d range")
	v.atCharts("7d", "")
	v.rangeIs("7d")
	v.count(depth, 3*steps["7d"], "points of the 3 depth lines over 7 d")
	v.contains(v.id("chart-flow").Locator("figcaption"), "per hour", "the flow chart's title")
	v.hoverPoint("depth", p.batch1.Truncate(time.Hour), "payments / ledger", "4")
	v.hoverPoint("flow", p.batch1.Truncate(time.Hour), "filed", "4")
	v.axesRound("depth", days, "")

	// 30 d: in steps of 4 hours.
	v.click(v.id("chart-range-30d"), "the 30d range")
	v.atCharts("30d", "")
	v.rangeIs("30d")
	v.count(depth, 3*steps["30d"], "points of the 3 depth lines over 30 d")
	v.hoverPoint("depth", p.batch1.Truncate(4*time.Hour), "payments / ledger", "4")
	v.axesRound("depth", days, "")
	v.still("manager-charts-30d")

	// One queue: its groups, by name alone; the range stays, and the
	// range links keep the queue.
	v.fill(v.id("chart-queue"), payQueue, "pick the payments queue")
	v.click(v.id("chart-filters").GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Show"}), "Show")
	v.atCharts("30d", payQueue)
	v.rangeIs("30d")
	v.count(depth, 2*steps["30d"], "points of the payments depth lines over 30 d")
	v.legend("depth", "ledger", "notify")
	v.contains(v.id("chart-depth").Locator("figcaption"), "Dead letters waiting in payments, per consumer group", "the depth chart's title")
	v.click(v.id("chart-range-24h"), "the 24h range")
	v.atCharts("24h", payQueue)
	v.rangeIs("24h")
	v.count(depth, 2*steps["24h"], "points of the payments depth lines over 24 h")
	v.hoverPoint("depth", p.batch2.Truncate(q), "ledger", "12")
	v.check(v.expect.Locator(v.id("chart-queue")).ToHaveValue(payQueue), "the queue picked")
	v.still("manager-charts-payments")

	// A queue with no traffic: every chart says so, in words.
	v.fill(v.id("chart-queue"), exportQueue, "pick the exports queue")
	v.click(v.id("chart-filters").GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Show"}), "Show")
	v.atCharts("24h", exportQueue)
	v.count(v.page.GetByTestId("chart-point"), 0, "points of the exports charts")
	for c, say := range map[string]string{
		"depth":    "No dead letters in this range.",
		"flow":     "No dead letters were filed, replayed or deleted in this range.",
		"oldest":   "No dead letter waited in this range.",
		"failures": "No acks in this range.",
		"replays":  "No replayed copy was settled in this range.",
	} {
		v.contains(v.id("chart-"+c).GetByTestId("chart-empty"), say, "the "+c+" chart of exports")
	}
	v.still("manager-charts-empty")

	// A queue whose acks all succeed: its failure rate is a line at 0 %,
	// not "no acks".
	v.open("/charts?range=1h&queue=" + mailQueue)
	v.rangeIs("1h")
	v.hoverPoint("failures", p.batch5.Truncate(time.Minute), "failed acks", "0 %")
	v.see(v.id("chart-depth").GetByTestId("chart-empty"), "the emails depth chart's empty state")
	v.noOperatorControls("charts")
}
