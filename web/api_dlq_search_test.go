package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// GET /api/v1/dlq searches payloads and error texts (q) and payload
// fields (field, repeatable), with the other filters.
func TestListDeadLettersSearch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.fail("payments", "", "billing", "pay-1", `{"orderId":"ord_123","amount":250,"card":{"brand":"amex"},"tags":["vip"]}`, "card_declined")
	s.clock.Advance(time.Minute)
	s.fail("payments", "", "billing", "pay-2", `{"orderId":"ord_456","amount":50,"card":{"brand":"visa"}}`, "Upstream timeout after 30s")
	s.clock.Advance(time.Minute)
	s.fail("refunds", "", "billing", "ref-1", `{"orderId":"ord_123","amount":250}`, "upstream TIMEOUT")

	q := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"FieldEverywhere", q("field", "orderId = ord_123"), []string{"ref-1", "pay-1"}},
		{"FieldInQueue", q("queue", "payments", "field", "orderId = ord_123"), []string{"pay-1"}},
		{"FieldNested", q("field", "card.brand = visa"), []string{"pay-2"}},
		{"FieldRange", q("field", "amount > 100"), []string{"ref-1", "pay-1"}},
		{"Fields", q("field", "amount > 100", "field", "tags contains vip"), []string{"pay-1"}},
		{"FieldUnknownPath", q("field", "customer.id = 7"), nil},
		{"TextPayload", q("q", "ord_456"), []string{"pay-2"}},
		{"TextError", q("q", "timeout"), []string{"ref-1", "pay-2"}},
		{"TextPhrase", q("q", `"upstream timeout"`), []string{"ref-1", "pay-2"}},
		{"TextAndQueue", q("q", "timeout", "queue", "refunds"), []string{"ref-1"}},
		{"TextAndField", q("q", "timeout", "field", "amount < 100"), []string{"pay-2"}},
		{"TextOperatorsAreWords", q("q", "timeout OR card_declined"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			l := s.deadLetters(tc.query)
			var got []string
			for _, m := range l.Messages {
				got = append(got, m.TransactionID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || l.Total != int64(len(tc.want)) {
				t.Fatalf("got %v total %d, want %v", got, l.Total, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, query, want string }{
		{"NoOperator", q("field", "orderId"), `field filter "orderId"`},
		{"BadOperator", q("field", "orderId ~ 1"), "operator"},
		{"BadPath", q("field", "a..b = 1"), `field filter "a..b = 1"`},
		{"OrderedBool", q("field", "active > true"), "compares numbers or strings"},
		{"NoWords", q("q", "***"), "no word"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("GET", "/api/v1/dlq?"+tc.query, "").wantError(http.StatusBadRequest, tc.want)
		})
	}
}

// The bulk API takes the same search (q, field) in its filter: a dry run
// counts what it matches, the action removes exactly those.
func TestBulkBySearch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.fail("payments", "", "billing", "pay-1", `{"orderId":"ord_1","amount":250}`, "card_declined")
	s.fail("payments", "", "billing", "pay-2", `{"orderId":"ord_2","amount":50}`, "card_declined")
	s.fail("payments", "", "billing", "pay-3", `{"orderId":"ord_3","amount":300}`, "timeout")
	var c bulkCount
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"payments","q":"card_declined","field":["amount > 100"]},"dryRun":true}`).want(http.StatusOK).decode(&c)
	if c.Matching == nil || *c.Matching != 1 {
		t.Fatalf("dry run %s, want 1 matching", mustJSON(c))
	}
	var res bulkAnswer
	s.call("POST", "/api/v1/dlq/delete", `{"wait":true,"filter":{"queue":"payments","q":"card_declined","field":["amount > 100"]}}`).want(http.StatusOK).decode(&res)
	if res.Done != 1 {
		t.Fatalf("delete %s, want 1 done", mustJSON(res))
	}
	var got []string
	for _, m := range s.deadLetters("queue=payments").Messages {
		got = append(got, m.TransactionID)
	}
	if fmt.Sprint(got) != "[pay-3 pay-2]" {
		t.Fatalf("left %v, want pay-3 and pay-2", got)
	}
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"payments","field":["amount >> 1"]},"dryRun":true}`).wantError(http.StatusBadRequest, "field filter")
}
