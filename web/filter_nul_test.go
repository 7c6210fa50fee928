package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A NUL byte (or bytes that are not UTF-8) in a filter is answered as any
// other text that matches nothing, on both stores: PostgreSQL's text
// cannot hold a NUL, SQLite's can, and neither may make it a 500. Free
// text and field filters check their text: not UTF-8 is a 400 there.
func TestNULInFiltersMatchesNothing(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.fail("payments", "p1", "billing", "pay-1", `{"orderId":"ord_1"}`, "card declined")
	op, _ := s.loggedIn(broker.RoleOperator)
	for _, bad := range []string{"a\x00b", "\x00", "a\xffb"} {
		esc := url.QueryEscape(bad)
		path := url.PathEscape(bad)
		checked := http.StatusOK // free text and field filters: UTF-8 or a 400
		if bad == "a\xffb" {
			checked = http.StatusBadRequest
		}
		for _, tc := range []struct {
			path string
			page bool
			want int
		}{
			{"/api/v1/dlq?queue=" + esc, false, http.StatusOK},
			{"/api/v1/dlq?queue=payments&consumerGroup=" + esc, false, http.StatusOK},
			{"/api/v1/dlq?queue=payments&partition=" + esc, false, http.StatusOK},
			{"/api/v1/dlq?error=" + esc, false, http.StatusOK},
			{"/api/v1/dlq?transactionId=" + esc, false, http.StatusOK},
			{"/api/v1/dlq?queue=payments&error=" + esc + "&transactionId=" + esc, false, http.StatusOK},
			{"/api/v1/dlq?field=" + url.QueryEscape("orderId = "+bad), false, checked},
			{"/api/v1/resources/queues/" + path, false, http.StatusNotFound},
			{"/api/v1/search?q=" + esc, false, checked},
			{"/queues/payments/dead-letters?error=" + esc, true, http.StatusOK},
			{"/queues/payments/dead-letters?transactionId=" + esc, true, http.StatusOK},
			{"/queues/payments/dead-letters?partition=" + esc, true, http.StatusOK},
			{"/queues/payments/dead-letters?group=" + esc, true, http.StatusOK},
			{"/queues/" + path + "/dead-letters", true, http.StatusNotFound},
			{"/queues/" + path, true, http.StatusNotFound},
			{"/audit?queue=" + esc + "&actor=" + esc, true, http.StatusOK},
			{"/jobs?queue=" + esc, true, http.StatusOK},
			{"/charts?queue=" + esc, true, http.StatusOK}, // the page says no queue has that name
			{"/?partition=" + esc, true, http.StatusOK},
		} {
			var r response
			if tc.page {
				r = op.get(tc.path)
			} else {
				r = s.call("GET", tc.path, "")
			}
			if r.status != tc.want {
				t.Errorf("GET %s: status %d, want %d; body %.300s", tc.path, r.status, tc.want, r.body)
			}
		}
	}
	// A bulk action by such a filter acts on nothing.
	for _, body := range []string{
		`{"filter":{"queue":"payments","error":"a\u0000b"},"dryRun":true}`,
		`{"filter":{"queue":"payments","transactionId":"a\u0000b","consumerGroup":"x\u0000"},"dryRun":true}`,
		`{"filter":{"queue":"payments","error":"a\u0000b"},"wait":true}`,
		`{"filter":{"queue":"payments","transactionId":"\u0000"},"wait":true}`,
	} {
		if r := s.call("POST", "/api/v1/dlq/delete", body); r.status != http.StatusOK {
			t.Errorf("bulk delete %s: status %d; body %.300s", body, r.status, r.body)
		}
	}
	if l := s.deadLetters("queue=payments"); l.Total != 1 {
		t.Fatalf("after the bulk deletes by NUL filters: %d dead letters, want 1", l.Total)
	}
	// An ack naming a lease by such an id finds no lease (on PostgreSQL
	// its locking read binds the id as postgres.text too).
	for _, lease := range []string{`\u0000`, `a\u0000b`} {
		body := `{"transactionId":"pay-1","leaseId":"` + lease + `","status":"completed","consumerGroup":"billing"}`
		if r := s.call("POST", "/api/v1/ack", body); r.status != http.StatusConflict {
			t.Errorf("ack by lease %q: status %d, want 409; body %.300s", lease, r.status, r.body)
		}
	}
	// An error text that held a NUL is found by a filter holding it (on
	// PostgreSQL both are kept with U+FFFD in its place).
	s.fail("payments", "p1", "billing", "pay-2", `{"orderId":"ord_2"}`, "bad\x00byte")
	if l := s.deadLetters("error=" + url.QueryEscape("d\x00b")); l.Total != 1 || len(l.Messages) != 1 || l.Messages[0].TransactionID != "pay-2" {
		t.Fatalf("error filter with a NUL: %+v", l)
	}
}
