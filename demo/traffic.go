package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/mail"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The payloads of the demo queues, as producers send them and workers
// decode them. The workers decode for real, so a malformed payload fails
// with the error encoding/json gives.

// Order is a message of the orders queue.
type Order struct {
	OrderID    string     `json:"orderId"`
	CustomerID string     `json:"customerId"`
	Email      string     `json:"email"`
	Items      []LineItem `json:"items"`
	Total      float64    `json:"total"`
	Currency   string     `json:"currency"`
	Shipping   *Address   `json:"shipping,omitempty"` // none for digital goods
	Source     string     `json:"source"`
	PlacedAt   time.Time  `json:"placedAt"`
}

// LineItem is a line of an Order.
type LineItem struct {
	SKU       string  `json:"sku"`
	Name      string  `json:"name"`
	Quantity  int     `json:"quantity"`
	UnitPrice float64 `json:"unitPrice"`
}

// Address is where an Order ships to.
type Address struct {
	Line1      string `json:"line1"`
	City       string `json:"city"`
	PostalCode string `json:"postalCode"`
	Country    string `json:"country"`
}

// legacyOrder is what the old checkout service sends: the total as a string.
type legacyOrder struct {
	Order
	Total string `json:"total"`
}

// Payment is a message of the payments queue.
type Payment struct {
	PaymentID      string  `json:"paymentId"`
	OrderID        string  `json:"orderId"`
	Amount         float64 `json:"amount"`
	Currency       string  `json:"currency"`
	Method         string  `json:"method"`
	Card           *Card   `json:"card,omitempty"`
	IdempotencyKey string  `json:"idempotencyKey"`
}

// Card is the card a Payment is charged to.
type Card struct {
	Brand    string `json:"brand"`
	Last4    string `json:"last4"`
	ExpMonth int    `json:"expMonth"`
	ExpYear  int    `json:"expYear"`
}

// Email is a message of the emails queue.
type Email struct {
	MessageID string            `json:"messageId"`
	Template  string            `json:"template"`
	Email     string            `json:"email"`
	Locale    string            `json:"locale"`
	Vars      map[string]string `json:"vars"`
}

var (
	firstNames = []string{"ada", "grace", "linus", "margaret", "ken", "barbara", "dennis", "frances", "alan", "radia"}
	lastNames  = []string{"lovelace", "hopper", "torvalds", "hamilton", "thompson", "liskov", "ritchie", "allen", "turing", "perlman"}
	products   = []LineItem{
		{SKU: "SKU-1001", Name: "Mechanical keyboard", UnitPrice: 129.00},
		{SKU: "SKU-1002", Name: "USB-C hub", UnitPrice: 39.90},
		{SKU: "SKU-2040", Name: "27in monitor", UnitPrice: 289.00},
		{SKU: "SKU-3300", Name: "Standing desk mat", UnitPrice: 54.50},
		{SKU: "SKU-4410", Name: "Noise-cancelling headphones", UnitPrice: 199.99},
	}
	digital   = LineItem{SKU: "DIG-0007", Name: "Pro plan, 12 months", UnitPrice: 96.00}
	addresses = []Address{
		{Line1: "12 Rue de Rivoli", City: "Paris", PostalCode: "75004", Country: "FR"},
		{Line1: "Karl-Marx-Allee 90", City: "Berlin", PostalCode: "10243", Country: "DE"},
		{Line1: "221B Baker Street", City: "London", PostalCode: "NW1 6XE", Country: "GB"},
		{Line1: "Calle de Alcala 48", City: "Madrid", PostalCode: "28014", Country: "ES"},
	}
	vatRates  = map[string]float64{"FR": 0.20, "DE": 0.19, "GB": 0.20, "ES": 0.21}
	templates = []string{"order_confirmation", "shipping_update", "password_reset", "weekly_digest"}
	locales   = []string{"en-GB", "fr-FR", "de-DE", "es-ES"}
)

func newOrder(rng *rand.Rand, tenant string) (string, any) {
	first, last := pick(rng, firstNames), pick(rng, lastNames)
	o := Order{
		OrderID:    randomID(rng, "ord_"),
		CustomerID: randomID(rng, "cus_"),
		Email:      first + "." + last + "@" + tenant + ".example",
		Currency:   "EUR",
		Source:     pick(rng, []string{"web", "web", "web", "ios", "android"}),
		PlacedAt:   time.Now().UTC().Truncate(time.Millisecond),
	}
	if rng.Float64() < rates.digitalOrder {
		o.Items = []LineItem{withQuantity(digital, 1)} // nothing to ship
	} else {
		for range 1 + rng.IntN(3) {
			o.Items = append(o.Items, withQuantity(pick(rng, products), 1+rng.IntN(3)))
		}
		a := pick(rng, addresses)
		o.Shipping = &a
	}
	for _, it := range o.Items {
		o.Total += it.UnitPrice * float64(it.Quantity)
	}
	o.Total = math.Round(o.Total*100) / 100
	if rng.Float64() < rates.legacyOrder {
		o.Source = "checkout-v1"
		return o.OrderID, legacyOrder{Order: o, Total: fmt.Sprintf("%.2f", o.Total)}
	}
	return o.OrderID, o
}

func withQuantity(it LineItem, n int) LineItem {
	it.Quantity = n
	return it
}

func newPayment(rng *rand.Rand, tenant string) (string, any) {
	p := Payment{
		PaymentID: randomID(rng, "pay_"),
		OrderID:   randomID(rng, "ord_"),
		Amount:    math.Round((5+rng.Float64()*400)*100) / 100,
		Currency:  "EUR",
		Method:    "card",
	}
	p.IdempotencyKey = tenant + ":" + p.PaymentID
	if rng.Float64() < rates.sepa {
		p.Method = "sepa_debit"
	} else {
		c := Card{Brand: pick(rng, []string{"visa", "mastercard", "amex"}), Last4: fmt.Sprintf("%04d", 1000+rng.IntN(9000)), ExpMonth: 1 + rng.IntN(12), ExpYear: 2027 + rng.IntN(5)}
		switch r := rng.Float64(); {
		case r < rates.declinedCard: // the test cards of a sandbox: declined and expired
			c.Last4 = "0002"
		case r < rates.declinedCard+rates.expiredCard:
			c.Last4, c.ExpYear = "0069", 2024
		}
		p.Card = &c
	}
	return p.IdempotencyKey, p
}

func newEmail(rng *rand.Rand, tenant string) (string, any) {
	first, last := pick(rng, firstNames), pick(rng, lastNames)
	e := Email{
		MessageID: randomID(rng, "msg_"),
		Template:  pick(rng, templates),
		Email:     first + "." + last + "@" + tenant + ".example",
		Locale:    pick(rng, locales),
		Vars:      map[string]string{"firstName": strings.ToUpper(first[:1]) + first[1:], "orderId": randomID(rng, "ord_")},
	}
	switch r := rng.Float64(); {
	case r < rates.badAddress/2: // typed into a form without validation
		e.Email = first + "." + last + "@"
	case r < rates.badAddress:
		e.Email = first + " " + last + " at " + tenant + ".example"
	case r < rates.badAddress+rates.unknownTemplate: // a template the sender knows and the notifier does not, yet
		e.Template = "invoice_reminder_v3"
	}
	return e.MessageID, e
}

// The workers. Each fails now and then as such workers do: a bug for some
// inputs, a refusal by a provider, an upstream having a bad day; how often
// is in rates (rates.go).

// billOrder works out the tax of an order and raises the invoice.
func billOrder(_ context.Context, rng *rand.Rand, d broker.Delivery) (string, bool) {
	var o Order
	if err := json.Unmarshal(d.Payload, &o); err != nil {
		return err.Error(), false
	}
	// A bug for orders of digital goods, which have no shipping address:
	// it panics, and the panic's stack is the error.
	gross := o.Total * (1 + vatRates[o.Shipping.Country])
	if gross <= 0 {
		return "validation failed: field 'total' must be positive", true
	}
	if rng.Float64() < rates.billingTimeout {
		return "upstream timeout after 30s: POST https://billing.internal.example/v1/invoices", false
	}
	// The invoice database failing over: longer than the retries take.
	if hit(d, 1, rates.billingFailover) {
		return "insert invoice: dial tcp 10.0.7.21:5432: connect: connection refused", false
	}
	return "", false
}

// chargePayment charges the payment with the card processor.
func chargePayment(_ context.Context, rng *rand.Rand, d broker.Delivery) (string, bool) {
	var p Payment
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return err.Error(), true
	}
	if p.Card != nil {
		switch p.Card.Last4 {
		case "0002":
			return "card_declined: insufficient funds", true
		case "0069":
			return "expired_card: the card's expiration date has passed", true
		}
	}
	// One tenant's account is over its rate limit with the processor today.
	if d.Partition == "globex" && hit(d, 2, rates.globexRateLimit) { // Retry-After outlasts the retries
		return "POST https://api.stripe.example/v1/charges: 429 Too Many Requests (Retry-After: 2)", false
	}
	if rng.Float64() < rates.stripeTimeout {
		return "upstream timeout after 30s: POST https://api.stripe.example/v1/charges", false
	}
	return "", false
}

// sendEmail renders the template and hands the message to the email provider.
func sendEmail(_ context.Context, rng *rand.Rand, d broker.Delivery) (string, bool) {
	var e Email
	if err := json.Unmarshal(d.Payload, &e); err != nil {
		return err.Error(), true
	}
	if a, err := mail.ParseAddress(e.Email); err != nil || a.Address != e.Email {
		return "validation failed: field 'email' must be a valid address", true
	}
	if e.Template == "invoice_reminder_v3" {
		return `render email: template "invoice_reminder_v3" not found`, false
	}
	// One tenant's sending domain is being throttled by the provider.
	if d.Partition == "umbrella" && hit(d, 3, rates.umbrellaThrottle) {
		return "POST https://api.sendgrid.example/v3/mail/send: 429 Too Many Requests", false
	}
	if rng.Float64() < rates.smtpReset {
		return "smtp relay: read tcp 10.0.2.5:41822->10.0.2.40:587: read: connection reset by peer", false
	}
	return "", false
}

// track writes an event to the analytics store; it takes any JSON.
func track(_ context.Context, rng *rand.Rand, d broker.Delivery) (string, bool) {
	var event map[string]any
	if err := json.Unmarshal(d.Payload, &event); err != nil {
		return err.Error(), true
	}
	if rng.Float64() < rates.analyticsReset {
		return "clickhouse: insert into events: read tcp 10.0.4.12:43122->10.0.9.7:9000: read: connection reset by peer", false
	}
	return "", false
}

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

const idAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

func randomID(rng *rand.Rand, prefix string) string {
	b := make([]byte, 12)
	for i := range b {
		b[i] = idAlphabet[rng.IntN(len(idAlphabet))]
	}
	return prefix + string(b)
}

func traceID(rng *rand.Rand) string {
	return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
}

// The messages of a burst: what a producer's bad deploy sends for a
// minute, which its queue's main worker cannot take whatever it tries.

func badOrder(rng *rand.Rand, tenant string) (string, any) {
	id, p := newOrder(rng, tenant)
	if o, ok := p.(Order); ok {
		o.Source = "checkout-v1"
		return id, legacyOrder{Order: o, Total: fmt.Sprintf("%.2f", o.Total)}
	}
	return id, p
}

func badPayment(rng *rand.Rand, tenant string) (string, any) {
	id, p := newPayment(rng, tenant)
	pay := p.(Payment)
	pay.Method = "card"
	pay.Card = &Card{Brand: "visa", Last4: "0002", ExpMonth: 1 + rng.IntN(12), ExpYear: 2027 + rng.IntN(5)}
	return id, pay
}

func badEmail(rng *rand.Rand, tenant string) (string, any) {
	id, p := newEmail(rng, tenant)
	e := p.(Email)
	e.Template = "invoice_reminder_v3"
	return id, e
}
