package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// worker is a consumer group's worker, as a real one talks to Lazarus:
// the HTTP API with a bearer token.
type worker struct {
	t      *testing.T
	app    *app
	queue  string
	group  string
	secret string
}

// workerMessage is a delivered message, as the pop answers it.
type workerMessage struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	Partition     string `json:"partition"`
	LeaseID       string `json:"leaseId"`
}

// worker makes a worker of group for queue, acting with user's token.
func (a *app) worker(queue, group, user string) *worker {
	a.t.Helper()
	u, err := a.broker.UserByName(a.ctx, user)
	if err != nil {
		a.t.Fatalf("user %s: %v", user, err)
	}
	secret, _, err := a.broker.CreateToken(a.ctx, u.ID, "worker", "e2e")
	if err != nil {
		a.t.Fatalf("token: %v", err)
	}
	return &worker{t: a.t, app: a, queue: queue, group: group, secret: secret}
}

func (w *worker) do(method, path string, body any) (int, []byte) {
	w.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			w.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(w.app.ctx, method, w.app.url+path, r)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		w.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return res.StatusCode, out
}

// pop asks for up to batch messages at once (no long-poll): the status
// (204: nothing) and the messages.
func (w *worker) pop(batch int) (int, []workerMessage) {
	w.t.Helper()
	q := url.Values{"consumerGroup": {w.group}, "batch": {fmt.Sprint(batch)}}
	code, body := w.do(http.MethodGet, "/api/v1/pop/queue/"+url.PathEscape(w.queue)+"?"+q.Encode(), nil)
	if code == http.StatusNoContent {
		return code, nil
	}
	if code != http.StatusOK {
		w.t.Fatalf("pop: %d %s", code, body)
	}
	var p struct {
		Messages []workerMessage `json:"messages"`
		LeaseID  string          `json:"leaseId"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		w.t.Fatalf("pop: %v: %s", err, body)
	}
	for i := range p.Messages {
		if p.Messages[i].LeaseID == "" {
			p.Messages[i].LeaseID = p.LeaseID
		}
	}
	return code, p.Messages
}

// ack acknowledges m with status (and the error of a failure).
func (w *worker) ack(m workerMessage, status, errText string) {
	w.t.Helper()
	code, body := w.do(http.MethodPost, "/api/v1/ack", map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"leaseId": m.LeaseID, "status": status, "error": errText, "consumerGroup": w.group})
	if code != http.StatusOK {
		w.t.Fatalf("ack %s %s: %d %s", m.TransactionID, status, code, body)
	}
}

// nothing fails unless a pop gets nothing (204).
func (w *worker) nothing(why string) {
	w.t.Helper()
	if code, ms := w.pop(10); code != http.StatusNoContent {
		w.t.Fatalf("%s: the pop got %d messages (%d), want 204", why, len(ms), code)
	}
}

// drain pops and completes everything there is; it returns how many.
func (w *worker) drain() int {
	w.t.Helper()
	n := 0
	for range 1000 {
		code, ms := w.pop(50)
		if code == http.StatusNoContent {
			return n
		}
		for _, m := range ms {
			w.ack(m, "completed", "")
		}
		n += len(ms)
	}
	w.t.Fatal("drain: the queue never emptied")
	return n
}

// The outage of payments' billing worker, owned from the dashboard
// (DASHBOARD.md "Owning a failure", steps 2, 4 and 5): 120 charges
// dead-lettered with a gateway timeout; the operator holds billing from
// the error group's row (the dialog asks why, its field focused), and the
// banner says who, why, since when and what waits; the worker's pops get
// nothing while new charges wait. After the fix the operator replays the
// group with the canary the dialog offers (on above 100 dead letters:
// 5 at random): the hold lets the canary's copies through, one fails
// again, and the job pauses saying so, linking the copy. The worker is
// fixed, the operator resumes (the rest waits behind the hold) and
// releases the hold: the worker drains it all and the job page says 119
// succeeded, 1 failed again.
func TestOperatorHoldsTestsAndReleases(t *testing.T) {
	t.Parallel()
	const queue, group, n = "payments", "billing", 120
	const errText = "gateway timeout after 30000 ms (POST https://pay.example.com/v2/charges)"
	a := newApp(t)
	a.configure(queue, map[string]any{"retryLimit": 0, "retryDelay": 0})
	msgs := make([]msg, n)
	errs := map[string]string{}
	for i := range msgs {
		msgs[i] = msg{Tx: fmt.Sprintf("charge-%03d", i), Partition: "cards", Payload: fmt.Sprintf(`{"charge":%d,"amount":"%d.00"}`, i, 10+i)}
		errs[msgs[i].Tx] = errText
	}
	a.push(queue, msgs...)
	a.consume(queue, group, errs, true)
	pw := a.user("ana", broker.RoleOperator)
	w := a.worker(queue, group, "ana")

	v := a.browse()
	v.login("ana", pw)

	// Held: from the error group's row.
	v.open("/queues/" + queue + "/dead-letters")
	v.count(v.id("error-group"), 1, "the error groups")
	v.click(v.id("error-group").GetByTestId("hold-button"), "the error group's Hold")
	v.see(v.id("hold-dialog"), "the Hold dialog")
	reason := v.id("hold-reason-input")
	v.check(v.expect.Locator(reason).ToBeFocused(), "the reason should have the focus")
	v.check(v.expect.Locator(reason).ToHaveValue(regexp.MustCompile(`^error group: gateway timeout`)), "the reason suggested")
	v.check(v.expect.Locator(v.id("hold-group")).ToHaveValue(group), "the group held")
	v.fill(reason, "payment gateway down (PAY-1432): hold billing until the fix", "the reason")
	v.screenshotWindow("hold-dialog")
	v.click(v.id("hold-go"), "Hold")
	v.atPath("/queues/" + queue + "/dead-letters")
	v.contains(v.id("flash"), "Held group billing of queue payments", "what the hold did")
	v.contains(v.id("hold-banner"), "Deliveries to group billing of queue payments are held", "the banner")
	v.contains(v.id("hold-by"), "user:ana", "who held it")
	v.contains(v.id("hold-reason"), "PAY-1432", "why")

	// The outage goes on: new charges arrive and wait; the worker's pops
	// get nothing.
	a.push(queue, msg{Tx: "charge-new-1", Partition: "web", Payload: `{"charge":1001}`}, msg{Tx: "charge-new-2", Partition: "web", Payload: `{"charge":1002}`},
		msg{Tx: "charge-new-3", Partition: "web", Payload: `{"charge":1003}`})
	w.nothing("held")
	v.open("/queues/" + queue)
	v.contains(v.id("hold-waiting"), "3 messages waiting", "what waits")
	v.see(v.id("group-"+group).GetByTestId("hold-badge"), "billing's badge on the queue page")
	v.screenshot("hold-banner")
	v.scheme(playwright.ColorSchemeDark)
	v.screenshot("hold-banner-dark")
	v.scheme(playwright.ColorSchemeLight)
	v.open("/")
	v.see(v.id("queue-"+queue).GetByTestId("hold-badge"), "billing's badge on the overview")

	canary(t, a, v, w, queue, group)
}

// canary is the journey's second half: the canary replay through the
// hold, the pause, the fix, the resume and the release.
func canary(t *testing.T, a *app, v *visit, w *worker, queue, group string) {
	t.Helper()
	v.open("/queues/" + queue + "/dead-letters")
	v.click(v.id("all-replay"), "Replay all matching")
	v.see(v.id("confirm-dialog"), "the confirmation")
	v.check(v.expect.Locator(v.id("confirm-canary-on")).ToBeChecked(), "the canary, on above 100 dead letters")
	v.check(v.expect.Locator(v.id("confirm-canary-count")).ToHaveValue("5"), "the canary's count")
	v.click(v.id("confirm-go"), "Replay")
	v.click(v.id("flash-job"), "the flash's link to the job")
	v.contains(v.id("canary-state"), "settling", "the canary, settling")
	v.count(v.id("canary-copy-row"), 5, "the canary's copies, pending")
	v.screenshot("canary-settling")

	// The worker, still broken for one charge, gets the canary's copies
	// through the hold, one at a time, and nothing else.
	var failedTx string
	for i := range 5 {
		code, ms := w.pop(10)
		if code != http.StatusOK || len(ms) != 1 || !strings.HasPrefix(ms[0].TransactionID, broker.ReplayPrefix) {
			t.Fatalf("canary copy %d: %d, %+v", i, code, ms)
		}
		if i == 1 {
			failedTx = ms[0].TransactionID
			w.ack(ms[0], "dlq", "gateway timeout after 30000 ms: card network <still> down")
			continue
		}
		w.ack(ms[0], "completed", "")
	}
	w.nothing("the canary is through; the rest waits")
	v.contains(v.id("canary-reason"), "canary: 1 of 5 failed again", "the canary's verdict")
	v.contains(v.id("job-state"), "paused", "the job, paused by its canary")
	v.count(v.id("canary-failed-row"), 1, "the copy that failed again")
	v.contains(v.id("canary-failed-row").GetByTestId("canary-copy-link"), failedTx, "the failed copy's link")
	v.screenshot("canary-paused")

	// The consumer is fixed; the operator resumes: the rest is replayed,
	// and waits behind the hold.
	v.click(v.id("job-resume"), "Resume")
	v.contains(v.id("job-state"), "done", "the job, replayed the rest")
	v.contains(v.id("job-outcome-summary"), "4 succeeded, 1 failed again, 115 pending", "the rest, waiting")
	w.nothing("still held")

	// Released from the queue page: it says what it lets go, once.
	v.open("/queues/" + queue)
	v.click(v.id("release-button"), "Release")
	v.contains(v.id("confirm-summary"), "The 118 messages waiting will be delivered.", "what the release lets go")
	v.click(v.id("confirm-go"), "the confirmation's Release")
	v.contains(v.id("flash"), "Released group billing of queue payments", "what the release did")
	v.count(v.id("hold-banner"), 0, "banners after the release")
	if got := w.drain(); got != 118 {
		t.Fatalf("the worker drained %d messages, want 118 (115 copies and 3 new charges)", got)
	}
	v.click(v.page.Locator("nav[aria-label=Main] a[href='/jobs']"), "Jobs")
	v.click(v.id("job-link").First(), "the replay job")
	v.contains(v.id("job-outcome-summary"), "119 succeeded, 1 failed again, 0 pending", "the job's outcome")
	v.screenshot("released")
}
