package demo

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func delivery(t *testing.T, partition string, payload any) broker.Delivery {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return broker.Delivery{Message: broker.Message{Payload: b}, Partition: partition}
}

// The workers fail on real causes, with the texts real code gives.
func TestWorkersFailWithRealisticErrors(t *testing.T) {
	t.Parallel()
	order := Order{OrderID: "ord_1", Items: []LineItem{withQuantity(products[0], 1)}, Total: 129, Shipping: &addresses[0]}
	digitalOrder := order
	digitalOrder.Shipping = nil
	declined := Payment{PaymentID: "pay_1", Amount: 10, Method: "card", Card: &Card{Brand: "visa", Last4: "0002"}}
	badEmail := Email{MessageID: "msg_1", Template: "order_confirmation", Email: "ada.lovelace@"}
	tests := []struct {
		name       string
		h          handler
		payload    any
		wantPrefix string
		permanent  bool
	}{
		{"LegacyTotalIsADecodeError", billOrder, legacyOrder{Order: order, Total: "129.00"},
			"json: cannot unmarshal string into Go struct field Order.total of type float64", false},
		{"DigitalOrderPanicsWithAStack", billOrder, digitalOrder,
			"panic: runtime error: invalid memory address or nil pointer dereference [recovered]\n\ngoroutine ", false},
		{"DeclinedCardGoesStraightToTheDLQ", chargePayment, declined, "card_declined: insufficient funds", true},
		{"InvalidAddressGoesStraightToTheDLQ", sendEmail, badEmail, "validation failed: field 'email' must be a valid address", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, permanent := handle(context.Background(), tt.h, rand.New(rand.NewPCG(1, 2)), delivery(t, "acme-corp", tt.payload))
			if !strings.HasPrefix(got, tt.wantPrefix) || permanent != tt.permanent {
				t.Errorf("got (%q, %v), want prefix %q and permanent %v", got, permanent, tt.wantPrefix, tt.permanent)
			}
		})
	}
}

// Every payload a producer makes is valid JSON that a healthy worker
// accepts as its type, except the deliberate legacy orders.
func TestProducersMakeValidJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, q := range queues() {
		for range 200 {
			txid, p := q.produce(rng, "acme-corp")
			b, err := json.Marshal(p)
			if err != nil || !json.Valid(b) {
				t.Fatalf("%s: payload does not marshal: %v", q.name, err)
			}
			if txid == "" || len(txid) > broker.MaxNameLength {
				t.Fatalf("%s: transactionId %q", q.name, txid)
			}
		}
	}
}
