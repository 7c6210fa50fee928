package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Owning a failure (DASHBOARD.md, steps 3 to 5; SPEC section 7): six
// charges of payments' billing dead-letter with a gateway timeout. The
// developer (an operator) finds the open group from the overview and
// acknowledges it with a note and a ticket link; support (a viewer)
// searches for a customer's charge and reads, on its dead letter, what is
// known and who owns it. After the fix the developer replays the group
// with a canary: the group's funnel shows the copies replayed and
// pending, a resolve is refused with that evidence, and once the worker
// (through the HTTP API) completes the copies the funnel says they
// succeeded and the resolve goes through. A new failure brings the group
// back, regressed.
func TestSupportReadsTheNoteAndDeveloperProvesTheFix(t *testing.T) {
	t.Parallel()
	const queue, group, n = "payments", "billing", 6
	const errText = "gateway timeout after 30000 ms (POST https://pay.example.com/v2/charges)"
	const note = "PAY-1432: the payment gateway times out under load; fix in billing 1.8.3"
	const link = "https://tickets.example/PAY-1432"
	a := newApp(t)
	a.configure(queue, map[string]any{"retryLimit": 0, "retryDelay": 0})
	msgs := make([]msg, n)
	errs := map[string]string{}
	for i := range msgs {
		msgs[i] = msg{Tx: fmt.Sprintf("charge-%03d", i), Partition: "cards", Payload: fmt.Sprintf(`{"charge":%d,"customer":"cus_%d"}`, i, 40+i)}
		errs[msgs[i].Tx] = errText
	}
	a.push(queue, msgs...)
	a.consume(queue, group, errs, true)
	devPW := a.user("dev", broker.RoleOperator)
	supportPW := a.user("sam", broker.RoleViewer)
	w := a.worker(queue, group, "dev")

	// Owned: the developer finds the open group from the overview and
	// acknowledges it, with a note and the ticket's link.
	d := a.browse()
	d.login("dev", devPW)
	d.contains(d.id("open-groups-link"), "1 open error group", "the overview's open groups")
	d.screenshot("overview-open-groups")
	d.click(d.id("open-groups-link"), "the open error groups")
	d.atPath("/error-groups")
	d.count(d.id("owned-group"), 1, "the open groups")
	d.contains(d.id("owned-group").GetByTestId("group-dead-letters"), "6", "the group's dead letters")
	d.screenshot("error-groups-open")
	d.click(d.id("owned-group").GetByTestId("group-open"), "the group")
	d.contains(d.id("group-state").First(), "open", "the group's state")
	d.contains(d.id("funnel-filed-life"), "6", "filed in its whole life")
	d.check(d.expect.Locator(d.id("ack-owner")).ToHaveValue("dev"), "Acknowledge's owner: the signed-in user")
	d.fill(d.id("ack-form").GetByTestId("note-input"), note, "the note")
	d.fill(d.id("ack-form").GetByTestId("link-input"), link, "the link")
	d.screenshot("error-group-acknowledge")
	d.click(d.id("ack-go"), "Acknowledge")
	d.contains(d.id("flash"), "Acknowledged: owner dev", "what the acknowledge did")
	d.contains(d.id("group-state").First(), "acknowledged", "the group's state")
	d.contains(d.id("group-note"), "PAY-1432", "the note")
	d.check(d.expect.Locator(d.id("group-known").GetByTestId("group-link")).ToHaveAttribute("href", link), "the ticket's link")
	d.count(d.id("group-change"), 1, "the history")
	// Its dead letters: the list's error group shows the state, linked
	// back to the group.
	d.click(d.id("group-dead-letters-link"), "its dead letters")
	d.count(d.id("dl-row"), n, "the group's dead letters")
	d.click(d.id("error-groups-toggle"), "the error groups panel, closed while a filter is set")
	d.see(d.id("error-group-page"), "the list's error group's state")
	d.contains(d.id("error-group-page").GetByTestId("group-state"), "acknowledged", "the state on the list's error group")
	d.screenshot("dead-letters-group-state")

	// Support: a customer asks about charge-003; its dead letter says
	// what is known.
	s := a.browse()
	s.login("sam", supportPW)
	s.fill(s.id("search-q"), "charge-003", "the search box")
	s.click(s.id("search-go"), "Search")
	// One match, a dead letter: the search leads straight to its page.
	s.see(s.id("dl-id"), "the charge's dead letter")
	s.contains(s.id("fact-tx"), "charge-003", "the charge's transactionId")
	s.contains(s.id("known-issue"), "Known issue", "the banner")
	s.contains(s.id("known-note"), note, "the note on the dead letter")
	s.contains(s.id("known-owner"), "dev", "who owns it")
	s.contains(s.id("known-issue").GetByTestId("group-state"), "acknowledged", "its state")
	s.check(s.expect.Locator(s.id("known-issue").GetByTestId("group-link")).ToHaveAttribute("href", link), "the ticket's link on the banner")
	s.count(s.id("row-replay"), 0, "a viewer's replay buttons")
	s.screenshot("dead-letter-known-issue")
	s.click(s.id("known-group"), "the banner's link to the group")
	s.contains(s.id("group-note"), "PAY-1432", "the group's page, for support")
	s.count(s.id("group-actions"), 0, "a viewer's actions on the group")

	// Proved: the developer replays the group with a canary; the job
	// replays 5 first and waits for them.
	d.open(groupPath(t, a, queue, group))
	d.click(d.id("group-replay"), "Replay with a canary…")
	d.see(d.id("confirm-dialog"), "the confirmation")
	d.check(d.expect.Locator(d.id("confirm-canary-on")).ToBeChecked(), "the canary, asked for by the group's page")
	d.contains(d.id("confirm-summary"), "6 messages", "the confirmation's count")
	d.screenshotWindow("error-group-replay-confirm")
	d.click(d.id("confirm-go"), "Replay")
	d.click(d.id("flash-job"), "the flash's link to the job")
	d.contains(d.id("canary-state"), "settling", "the canary, settling")
	d.count(d.id("canary-copy-row"), 5, "the canary's copies")

	// The group's funnel: 5 replayed, 5 pending; a resolve now is
	// refused, saying why, and offers to force it.
	d.open(groupPath(t, a, queue, group))
	d.contains(d.id("funnel-replayed-life"), "5", "replayed")
	d.contains(d.id("funnel-pending-life"), "5", "pending")
	d.contains(d.id("resolve-evidence"), "5 replayed, 0 succeeded, 0 failed again, 5 pending since", "the evidence offered")
	d.click(d.id("resolve-form").Locator("summary"), "Resolve")
	d.fill(d.id("resolve-version"), "1.8.3", "the version with the fix")
	d.click(d.id("resolve-go"), "Resolve")
	d.contains(d.id("resolve-refused"), "Not resolved: 5 replayed, 0 succeeded, 0 failed again, 5 pending", "the refusal's evidence")
	d.see(d.id("resolve-force"), "Resolve anyway")
	d.screenshot("error-group-resolve-refused")

	// The worker, fixed, completes the canary's copies; the job replays
	// the last one, which it completes too.
	code, ms := w.pop(10)
	if code != http.StatusOK || len(ms) != 5 {
		t.Fatalf("the canary's copies: %d, %+v", code, ms)
	}
	for _, m := range ms {
		if !strings.HasPrefix(m.TransactionID, broker.ReplayPrefix) {
			t.Fatalf("popped %s, want only the canary's copies", m.TransactionID)
		}
		w.ack(m, "completed", "")
	}
	d.click(d.page.Locator("nav[aria-label=Main] a[href='/jobs']"), "Jobs")
	d.click(d.id("job-link").First(), "the replay job")
	d.contains(d.id("job-state"), "done", "the job, the rest replayed")
	if got := w.drain(); got != 1 {
		t.Fatalf("the worker drained %d copies after the canary, want 1", got)
	}
	d.contains(d.id("job-outcome-summary"), "6 succeeded, 0 failed again, 0 pending", "the job's outcome")

	// The funnel filled; the resolve goes through with that evidence.
	d.open(groupPath(t, a, queue, group))
	d.contains(d.id("funnel-replayed-life"), "6", "replayed")
	d.contains(d.id("funnel-succeeded-life"), "6", "succeeded")
	d.contains(d.id("funnel-pending-life"), "0", "pending")
	d.contains(d.id("group-now"), "0 dead letters now", "what is left")
	d.contains(d.id("resolve-evidence"), "6 replayed, 6 succeeded, 0 failed again, 0 pending", "the evidence")
	d.see(d.id("resolve-version"), "Resolve, open once the copies proved the fix")
	d.screenshot("error-group-funnel")
	d.fill(d.id("resolve-version"), "1.8.3", "the version with the fix")
	d.click(d.id("resolve-go"), "Resolve")
	d.contains(d.id("flash"), "Resolved (6 replayed, 6 succeeded, 0 failed again, 0 pending)", "what the resolve did")
	d.contains(d.id("group-state").First(), "resolved", "the group's state")
	d.contains(d.id("group-fixed-version"), "1.8.3", "the version with the fix")
	d.count(d.id("group-change"), 2, "the history")
	d.contains(d.id("group-change").First(), "evidence: 6 replayed, 6 succeeded", "the resolve's evidence, kept")
	d.screenshot("error-group-resolved")
	d.scheme(playwright.ColorSchemeDark)
	d.screenshot("error-group-resolved-dark")
	d.scheme(playwright.ColorSchemeLight)

	// It comes back: a new charge fails the same way, with the fixed
	// version; the group is open again, regressed, first on the list,
	// and its page names the version that failed.
	a.push(queue, msg{Tx: "charge-100", Partition: "cards", Payload: `{"charge":100}`})
	code, ms = w.pop(1)
	if code != http.StatusOK || len(ms) != 1 {
		t.Fatalf("the new charge: %d %+v", code, ms)
	}
	if code, body := w.do(http.MethodPost, "/api/v1/ack", map[string]string{"transactionId": ms[0].TransactionID, "partitionId": ms[0].PartitionID,
		"leaseId": ms[0].LeaseID, "status": "dlq", "error": errText, "consumerGroup": group, "consumerVersion": "1.8.3"}); code != http.StatusOK {
		t.Fatalf("ack of the new charge: %d %s", code, body)
	}
	d.open("/error-groups")
	d.contains(d.id("owned-group").First().GetByTestId("group-state"), "regressed", "the group, back")
	d.contains(d.id("owned-group").First().GetByTestId("group-note"), "PAY-1432", "its note, still there")
	d.screenshot("error-groups-regressed")
	d.fill(d.id("filter-version"), "1.8.3", "the consumer version filter")
	d.click(d.id("filter-submit"), "Filter")
	d.count(d.id("chip"), 1, "the version's chip")
	d.count(d.id("owned-group"), 1, "the groups version 1.8.3 filed into")
	d.click(d.id("owned-group").GetByTestId("group-open"), "the group")
	d.contains(d.id("group-version"), "1.8.3", "the version that failed again")
	d.contains(d.id("group-change").First(), "a new dead letter was filed after it was resolved", "why it opened again")
	d.contains(d.id("group-change").First().GetByTestId("group-state").Last(), "regressed", "the regression in the history")
	d.screenshot("error-group-regressed")
}

// groupPath is the page of the error group of queue's consumer group
// (its only one), read from the broker.
func groupPath(t *testing.T, a *app, queue, group string) string {
	t.Helper()
	gs, err := a.broker.ErrorGroupList(a.ctx, broker.ErrorGroupFilter{Queue: queue, Group: group, Limit: 10})
	if err != nil || len(gs) != 1 {
		t.Fatalf("the error groups of %s/%s: %v, %d", queue, group, err, len(gs))
	}
	return fmt.Sprintf("/error-groups/%d", gs[0].ID)
}
