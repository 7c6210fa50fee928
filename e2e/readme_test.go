package e2e

import (
	"log/slog"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/demo"
)

// The README's picture (docs/dead-letters.png is a copy of
// screenshots/readme-dead-letters.png) is what a newcomer sees after
// go tool task run: lazarus demo's database, its week of generated
// history behind it, after 12 minutes of the demo's traffic
// (demo.Simulate); the dead letters of the first queue, orders, with
// their error groups and the list, as admin.
func TestReadmeScreenshotIsTheDemosDeadLetters(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	const ran = 12 * time.Minute
	offset := -ran
	a.clock.set(offset)
	defer a.clock.set(0)
	if mark, err := demo.WriteHistory(a.ctx, demo.Config{Broker: a.broker}); err != nil || mark.Until.IsZero() {
		t.Fatalf("WriteHistory = %+v, %v", mark, err)
	}
	advance := func(d time.Duration) { offset += d; a.clock.set(offset) }
	if err := demo.Simulate(a.ctx, demo.Config{Broker: a.broker, Clock: a.clock.Now, Logger: slog.New(slog.DiscardHandler)}, ran, advance, nil); err != nil {
		t.Fatalf("Simulate: %v", err)
	}
	a.clock.set(0)
	n := a.count(broker.DLQQuery{Queue: "orders"})
	if n == 0 {
		t.Fatal("no dead letter of orders after 12 minutes of the demo")
	}

	pw := a.user("admin", broker.RoleAdmin)
	v := a.browse()
	v.login("admin", pw)
	v.open("/queues/orders/dead-letters")
	v.see(v.id("error-groups"), "the error groups")
	groups, err := v.id("error-group").Count()
	v.check(err, "count the error groups")
	// The opening batch's error at least; more as the hour of the day
	// brings them (the demo follows the day's rhythm: at night twelve
	// minutes may bring no other).
	if groups < 1 {
		t.Errorf("%d error groups of orders, want the opening batch's at least", groups)
	}
	rows, err := v.id("dl-row").Count()
	v.check(err, "count the rows")
	if rows == 0 || int64(rows) > n {
		t.Errorf("%d rows of %d dead letters of orders", rows, n)
	}
	v.screenshot("readme-dead-letters")
}
