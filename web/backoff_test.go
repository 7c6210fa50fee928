package web_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/lazarus-dlq/lazarus/broker"
)

// The queue page says the retry schedule in words, with what follows the
// last retry; retryBackoff and retryDelayMax are enforced, so neither the
// configure answer nor the page calls them not enforced.
func TestQueuePageShowsTheRetrySchedule(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var answer struct {
		NotEnforced []string `json:"notEnforced"`
	}
	s.call("POST", "/api/v1/configure", `{"queue":"q","options":{"retryLimit":5,"retryDelay":1000,"retryBackoff":2,"retryDelayMax":5000}}`).want(http.StatusOK).decode(&answer)
	if slices.Contains(answer.NotEnforced, "retryBackoff") || slices.Contains(answer.NotEnforced, "retryDelayMax") {
		t.Errorf("configure says notEnforced %v", answer.NotEnforced)
	}
	s.configure("drop", `{"retryLimit":3,"retryDelay":500,"retryBackoff":3,"dlqAfterMaxRetries":false}`)
	s.configure("once", `{"retryLimit":0}`)
	s.configure("plain", `{}`)
	b, _ := s.loggedIn(broker.RoleViewer)
	for queue, want := range map[string]string{
		"q":     "2 (retries wait 1 s, 2 s, 4 s, 5 s, 5 s, then the dead letters)",
		"drop":  "3 (retries wait 500 ms, 1.5 s, 4.5 s, then dropped)",
		"once":  "1 (no retry: the first failure goes to the dead letters)",
		"plain": "1 (retries wait 1 s, 1 s, 1 s, then the dead letters)",
	} {
		r := b.get("/queues/" + queue).want(http.StatusOK)
		opts := r.doc().Find(`[data-testid="options"]`).Text()
		if !strings.Contains(opts, want) {
			t.Errorf("%s: options %q, want %q", queue, opts, want)
		}
		if strings.Contains(opts, "not enforced") {
			t.Errorf("%s: an option is called not enforced: %q", queue, opts)
		}
	}
	opts := b.get("/queues/q").want(http.StatusOK).doc().Find(`[data-testid="options"]`).Text()
	if !strings.Contains(opts, "5000 ms (the longest a wait grows to: 5 s)") {
		t.Errorf("retryDelayMax row: %q", opts)
	}
}

// The dead letter's page and its API answer show the wait each failed
// attempt was given before the retry that followed.
func TestDeadLetterShowsTheWaitsItHad(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":2,"retryDelay":1000,"retryBackoff":2.5}`)
	if _, err := s.broker.Push(s.ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "order-1", Payload: json.RawMessage(`{"n":1}`)}}); err != nil {
		t.Fatal(err)
	}
	s.failAs("billing", broker.AckFailed, "timeout")
	s.clock.Advance(time.Second)
	s.failAs("billing", broker.AckFailed, "timeout again")
	s.clock.Advance(2500 * time.Millisecond)
	id := s.failAs("billing", broker.AckFailed, "for good").ID()

	b, _ := s.loggedIn(broker.RoleViewer)
	doc := b.get("/queues/q/dead-letters/" + id + "?group=billing").want(http.StatusOK).doc()
	var got []string
	doc.Find(`[data-testid="attempt-wait"]`).Each(func(_ int, w *goquery.Selection) {
		got = append(got, strings.TrimSpace(w.Text()))
	})
	if want := []string{"came back after 1 s", "came back after 2.5 s"}; !slices.Equal(got, want) {
		t.Errorf("attempts' waits %q, want %q", got, want)
	}

	var out struct {
		History struct {
			Attempts []struct {
				Attempt int    `json:"attempt"`
				WaitMs  *int64 `json:"waitMs"`
			} `json:"attempts"`
		} `json:"history"`
	}
	s.call("GET", "/api/v1/dlq/"+id, "").want(http.StatusOK).decode(&out)
	a := out.History.Attempts
	if len(a) != 2 || a[0].WaitMs == nil || *a[0].WaitMs != 1000 || a[1].WaitMs == nil || *a[1].WaitMs != 2500 {
		t.Errorf("API attempts %+v, want waitMs 1000 and 2500", a)
	}
}
