package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// slackHook is a Slack incoming webhook of the test's own, on the
// loopback: it keeps the text of each message POSTed to it and says so
// on arrived.
type slackHook struct {
	url     string
	mu      sync.Mutex
	texts   []string
	arrived chan struct{}
}

func newSlackHook(t *testing.T) *slackHook {
	h := &slackHook{arrived: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Text string `json:"text"`
		}
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &m) != nil || m.Text == "" {
			http.Error(w, "not a Slack message", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.texts = append(h.texts, m.Text)
		h.mu.Unlock()
		h.arrived <- struct{}{}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/services/T0001/B0001/e2eSlackSecretPath"
	return h
}

// wait waits for the next message (the sender is woken by the commit
// that wrote it, within seconds) and returns every text so far.
func (h *slackHook) wait(t *testing.T, what string) []string {
	t.Helper()
	select {
	case <-h.arrived:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing arrived at the Slack receiver in 30 s", what)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.texts...)
}

// An admin makes Lazarus tell the team's Slack of new kinds of failure
// (SPEC section 8; DASHBOARD.md "Owning a failure", step 1, Told): from
// the header's Notifications, she adds a Slack channel pointed at the
// test's receiver, a rule for error_group.new on the queue payments,
// and sends a test, which arrives. Then the billing worker, through the
// HTTP API, dead-letters a charge with an error nobody has seen: the
// receiver gets exactly one message, naming the queue and the error,
// linking to the error group's page at the public URL; a second dead
// letter of the same group tells nobody. The delivery log shows both
// notifications sent, newest first.
func TestAdminIsToldOfANewErrorGroupInSlack(t *testing.T) {
	t.Parallel()
	const queue, group = "payments", "billing"
	const errText = "card processor refused: 402 insufficient funds (PAY-2210)"
	a := newAppNotifying(t)
	hook := newSlackHook(t)
	a.configure(queue, map[string]any{"retryLimit": 0, "retryDelay": 0})
	pw := a.user("ines", broker.RoleAdmin)
	a.user("billing-worker", broker.RoleOperator)
	w := a.worker(queue, group, "billing-worker")

	v := a.browse()
	v.login("ines", pw)
	v.click(v.id("nav-notify"), "Notifications in the header")
	v.atPath("/admin/notify")
	v.see(v.id("no-channels"), "the empty state of channels")

	// A Slack channel.
	slack := v.id("add-slack")
	v.fill(slack.GetByLabel("Name"), "payments-oncall", "the channel's name")
	v.fill(slack.GetByLabel("Incoming webhook URL"), hook.url, "the Slack URL")
	v.click(slack.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Add Slack channel"}), "Add Slack channel")
	v.atPath("/admin/notify")
	v.contains(v.id("flash"), "Channel payments-oncall (slack) created", "what the creation did")
	row := v.id("channel-payments-oncall")
	v.see(row, "the channel's row")
	where := v.text(row, "the channel's row")
	if strings.Contains(where, "e2eSlackSecretPath") {
		v.problem("the channel's row shows the Slack URL's path, its secret: " + where)
	}

	// A rule: new error groups of payments, to it.
	rule := v.id("add-rule")
	v.click(rule.GetByLabel("error_group.new"), "the event error_group.new")
	v.fill(rule.GetByLabel("Queues"), queue, "the queue pattern")
	v.click(rule.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Add rule"}), "Add rule")
	v.atPath("/admin/notify")
	v.contains(v.id("flash"), "error_group.new of queues payments", "the rule added")
	v.count(v.page.Locator(`[data-testid^="rule-"]`), 1, "the rules")
	v.screenshot("notify-channels-and-rules")

	// A webhook: its signing secret is shown once, with Copy, and gone
	// at the next load; then deleted again.
	hookForm := v.id("add-webhook")
	v.fill(hookForm.GetByLabel("Name"), "audit-hook", "the webhook's name")
	v.fill(hookForm.GetByLabel("URL"), "https://hooks.example.com/lazarus", "the webhook's URL")
	v.click(hookForm.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Add webhook"}), "Add webhook")
	v.atPath("/admin/notify")
	v.contains(v.id("new-secret"), "you will not see it again", "the secret's warning")
	v.check(v.expect.Locator(v.id("new-secret-value")).ToHaveText(regexp.MustCompile(`^whsec_[A-Za-z0-9+/=]{32}$`)), "the signing secret")
	v.see(v.id("new-secret").GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Copy"}), "the secret's Copy")
	v.screenshot("notify-webhook-secret")
	v.open("/admin/notify")
	v.count(v.id("new-secret"), 0, "the secret after a reload")
	v.click(v.id("channel-audit-hook").GetByTestId("delete-channel"), "Delete the webhook")
	v.contains(v.id("flash"), "Channel audit-hook deleted", "the webhook deleted")

	// Send a test: it arrives.
	v.click(row.GetByTestId("send-test"), "Send a test")
	v.atPath("/admin/notify/deliveries")
	got := hook.wait(t, "the test")
	if len(got) != 1 || !strings.HasPrefix(got[0], "[test]") || !strings.Contains(got[0], "payments-oncall") {
		t.Fatalf("the receiver got %q, want one test", got)
	}

	// The first dead letter of a new error group, from the worker.
	push := func(tx string) {
		t.Helper()
		code, body := w.do(http.MethodPost, "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": queue, "partition": "cards", "transactionId": tx, "payload": map[string]any{"charge": tx}}}})
		if code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("push %s: %d %s", tx, code, body)
		}
		_, ms := w.pop(1)
		if len(ms) != 1 {
			t.Fatalf("pop %s: %d messages", tx, len(ms))
		}
		w.ack(ms[0], "failed", errText)
	}
	push("charge-1")
	got = hook.wait(t, "the new error group")
	groups, err := a.broker.ErrorGroupList(a.ctx, broker.ErrorGroupFilter{Queue: queue, Limit: 10})
	if err != nil || len(groups) != 1 {
		t.Fatalf("error groups: %v %v", groups, err)
	}
	link := fmt.Sprintf("<%s/error-groups/%d|Open in Lazarus>", a.url, groups[0].ID)
	if len(got) != 2 || !strings.Contains(got[1], "New error group in payments / billing") || !strings.Contains(got[1], errText) || !strings.Contains(got[1], link) {
		t.Fatalf("the receiver got %q, want the test and the new group (%s)", got, link)
	}
	// A second dead letter of the same group: no notification is written.
	push("charge-2")
	page, err := a.broker.Deliveries(a.ctx, broker.DeliveryQuery{})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("the outbox after the second dead letter: %d notifications, %v", len(page.Items), err)
	}

	// The delivery log: both sent, newest first. The receiver is told
	// before it answers: the mark may come a moment later.
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := a.broker.Deliveries(a.ctx, broker.DeliveryQuery{State: broker.DeliverySent})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d notifications sent after 30 s, want 2", len(page.Items))
		}
		time.Sleep(20 * time.Millisecond) // polling the store's state, not synchronising on time
	}
	v.open("/admin/notify/deliveries")
	rows := v.page.Locator(`[data-testid^="delivery-"][data-state]`)
	v.count(rows, 2, "the deliveries")
	v.check(v.expect.Locator(rows.Nth(0)).ToHaveAttribute("data-event", "error_group.new"), "the newest is the new group")
	v.check(v.expect.Locator(rows.Nth(1)).ToHaveAttribute("data-event", "test"), "then the test")
	for i := range 2 {
		v.check(v.expect.Locator(rows.Nth(i)).ToHaveAttribute("data-state", "sent"), "delivery %d sent", i)
	}
	v.contains(rows.Nth(0), errText, "the error in the log")
	v.check(v.expect.Locator(rows.Nth(0).GetByRole("link")).ToHaveAttribute("href", regexp.MustCompile(fmt.Sprintf(`^/error-groups/%d$`, groups[0].ID))), "the log links to the group")
	v.screenshot("notify-delivery-log")
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if n := len(hook.texts); n != 2 {
		t.Fatalf("the receiver got %d messages, want 2", n)
	}
}
