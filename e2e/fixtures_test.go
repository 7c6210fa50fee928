package e2e

import (
	"fmt"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The shop: queue "orders" read by the consumer groups "billing" and
// "shipping", with dead letters filed over the last hours.
const (
	shopQueue = "orders"
	billing   = "billing"
	shipping  = "shipping"
)

// Errors the shop's workers send, as real workers do.
const (
	errTimeout  = "payment gateway timeout after 30000 ms (POST https://pay.example.com/v2/charges)"
	errDeclined = "card declined: insufficient_funds (issuer response 51)"
	errSchema   = `schema validation failed: $.amount must be a number, got "12,50"`
)

// errAddress is shipping's error for the order support looks for.
var errAddress = addressError(1042)

// addressError is shipping's error for order n, which has no address:
// each names its own order (one error group: the numbers are masked).
func addressError(n int) string {
	return fmt.Sprintf("java.lang.IllegalStateException: order %d has no shipping address\n", n) +
		"\tat com.example.shop.shipping.LabelService.create(LabelService.java:88)\n" +
		"\tat com.example.shop.shipping.OrderListener.onMessage(OrderListener.java:41)\n" +
		"\tat io.lazarus.client.Worker.run(Worker.java:133)\n" +
		"Caused by: java.lang.NullPointerException: address is null\n" +
		"\t... 3 more"
}

// The order support looks for: it failed for shipping with errAddress.
const (
	lostOrderTx      = "order-1042"
	lostOrderPayload = `{"orderId":1042,"customer":{"name":"Ana Lima","email":"ana@example.com"},"items":[{"sku":"MUG-01","qty":2,"price":"6.25"}],"total":"12.50","shipping":null}`
)

// The shop's dead letters, by group: 12 in all, 9 of billing (3 timeouts,
// 4 declined cards, 2 schema errors) and 3 of shipping.
const (
	shopDead         = 12
	shopDeclined     = 4
	shopBillingDead  = 9
	shopShippingDead = 3
)

// orderMsg is an ordinary order message.
func orderMsg(n int, partition string) msg {
	return msg{
		Tx:        fmt.Sprintf("order-%d", n),
		Partition: partition,
		Trace:     fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e%04d", n),
		Payload:   fmt.Sprintf(`{"orderId":%d,"customer":{"name":"Customer %d","email":"c%d@example.com"},"items":[{"sku":"TSHIRT-M","qty":1,"price":"19.90"}],"total":"19.90"}`, n, n, n),
	}
}

// shop fills the app with the shop's traffic: batches pushed and worked
// through by both groups at different times, most messages completed,
// some dead-lettered after their retries.
func (a *app) shop() {
	a.t.Helper()
	defer a.clock.set(0)
	a.clock.set(-6 * time.Hour)
	a.configure(shopQueue, map[string]any{"retryLimit": 2, "retryDelay": 0, "leaseTime": 60})

	batch := func(ago time.Duration, from, to int, partition string, billingErrs, shippingErrs map[string]string) {
		a.clock.set(-ago)
		var msgs []msg
		for n := from; n <= to; n++ {
			m := orderMsg(n, partition)
			if m.Tx == lostOrderTx {
				m.Payload = lostOrderPayload
			}
			msgs = append(msgs, m)
		}
		a.push(shopQueue, msgs...)
		a.consume(shopQueue, billing, billingErrs, false)
		a.consume(shopQueue, shipping, shippingErrs, false)
	}
	// Five hours ago the payment gateway timed out three times.
	batch(5*time.Hour, 1001, 1010, "eu-1", map[string]string{"order-1003": errTimeout, "order-1004": errTimeout, "order-1007": errTimeout}, nil)
	// Two hours ago four cards were declined.
	batch(2*time.Hour, 1011, 1030, "us-1", map[string]string{"order-1012": errDeclined, "order-1015": errDeclined, "order-1021": errDeclined, "order-1029": errDeclined}, nil)
	// Twenty minutes ago shipping failed on orders without an address.
	batch(20*time.Minute, 1031, 1045, "eu-1", nil, map[string]string{"order-1033": addressError(1033), "order-1038": addressError(1038), lostOrderTx: errAddress})
	// Three minutes ago a producer sent amounts as text.
	batch(3*time.Minute, 1046, 1050, "us-1", map[string]string{"order-1047": errSchema, "order-1049": errSchema}, nil)

	if n := a.count(broker.DLQQuery{Queue: shopQueue}); n != shopDead {
		a.t.Fatalf("the shop has %d dead letters, want %d", n, shopDead)
	}
	// Each of shipping's errors names its own order, as a real worker's
	// would (the screenshots show them side by side).
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: shopQueue, Group: shipping, Limit: 100})
	if err != nil {
		a.t.Fatal(err)
	}
	for _, dl := range page.Items {
		if n := strings.TrimPrefix(dl.TransactionID, "order-"); !strings.Contains(dl.Error, "order "+n+" ") {
			a.t.Fatalf("shipping's dead letter of %s says %q", dl.TransactionID, strings.SplitN(dl.Error, "\n", 2)[0])
		}
	}
}
