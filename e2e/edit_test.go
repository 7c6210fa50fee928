package e2e

import (
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An operator fixes a dead letter's payload by hand: billing refused an
// order whose total was written with a comma. She opens the dead letter,
// chooses Edit and replay, corrects the field, previews the diff (one line
// out, one in), replays the edited copy to billing only (analytics, which
// also gave up on it, keeps its own dead letter), confirms in words and
// lands on the list with a flash naming the copy. Billing then pops the
// edit, byte for byte.
func TestOperatorEditsAndReplaysADeadLetter(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	const queue = "orders"
	a.configure(queue, map[string]any{"retryLimit": 0, "retryDelay": 0})
	a.push(queue, msg{Tx: "ord-8001", Partition: "acme", Payload: `{"order":8001,"customer":{"id":"c-17","name":"Ada <b>L</b>"},"total":"49,90","currency":"EUR"}`})
	a.consume(queue, "billing", map[string]string{"ord-8001": `invalid total "49,90": want a decimal point`}, false)
	a.consume(queue, "analytics", map[string]string{"ord-8001": "schema mismatch"}, false)
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: queue, Group: "billing"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("dead letters %+v, %v", page.Items, err)
	}
	id := page.Items[0].MessageID()

	pw := a.user("olga", broker.RoleOperator)
	v := a.browse()
	v.login("olga", pw)
	v.open("/queues/" + queue + "/dead-letters/" + id + "?group=billing")
	v.contains(v.id("detail-replay"), "Replay for every group (billing, analytics)", "the default replay, in words")
	v.contains(v.id("detail-replay-own"), "Replay for billing only", "the replay to billing only")
	v.screenshot("deadletter-replay-choice")
	v.click(v.id("detail-edit"), "Edit and replay")
	v.atPath("/queues/" + queue + "/dead-letters/" + id + "/edit")
	v.contains(v.id("edit-original"), `"total": "49,90"`, "the original, indented")
	v.contains(v.id("edit-original"), `"name": "Ada <b>L</b>"`, "the original's markup, as text")

	area := v.id("edit-payload")
	text, err := area.InputValue()
	v.check(err, "read the textarea")
	if !strings.Contains(text, `"total": "49,90"`) {
		t.Fatalf("the textarea holds %q", text)
	}
	edited := strings.Replace(text, `"total": "49,90"`, `"total": "49.90"`, 1)
	v.fill(area, edited, "the edited payload")
	v.click(v.id("edit-preview-button"), "Preview")
	v.contains(v.id("diff-summary"), "1 line removed, 1 line added", "the diff's summary")
	v.count(v.page.Locator(`[data-testid="diff-line"][data-op="-"]`), 1, "removed lines")
	v.contains(v.page.Locator(`[data-testid="diff-line"][data-op="-"]`), `"total": "49,90"`, "the removed line")
	v.contains(v.page.Locator(`[data-testid="diff-line"][data-op="+"]`), `"total": "49.90"`, "the added line")
	v.screenshot("edit-and-replay-preview")

	// Not JSON: where, and nothing replayed.
	v.fill(area, strings.Replace(edited, `"currency"`, `currency`, 1), "a broken edit")
	v.click(v.id("edit-preview-button"), "Preview")
	v.contains(v.id("edit-error"), "Not valid JSON at line 8, column 3", "where the edit is not JSON")
	v.fill(area, edited, "the edited payload again")
	v.see(v.id("edit-preview-stale"), "the note that the preview is of another text")
	v.click(v.id("edit-preview-button"), "Preview")
	v.contains(v.id("diff-summary"), "1 line removed, 1 line added", "the diff again")
	v.count(v.id("edit-preview-stale"), 0, "the note, once previewed again")

	v.click(v.id("edit-replay-own"), "Replay edited copy for billing only")
	v.see(v.id("confirm-dialog"), "the confirmation")
	v.contains(v.id("confirm-summary"), "Replay an edited copy of "+id[:8]+"…"+id[len(id)-4:]+" to billing only? The other groups (analytics) pass the copy by; its dead letters in analytics stay.", "the confirmation, in words")
	v.contains(v.id("confirm-go"), "Replay", "the confirmation's button")
	v.screenshotWindow("edit-and-replay-confirm")
	v.click(v.id("confirm-go"), "Replay")
	v.atPath("/queues/" + queue + "/dead-letters")
	v.contains(v.id("flash"), "Replayed an edited copy of "+id[:8], "the flash")
	v.contains(v.id("flash"), "to billing only as ", "the flash names the mode and the copy")
	v.screenshot("edit-and-replay-done")

	if n := a.count(broker.DLQQuery{Queue: queue, Group: "billing"}); n != 0 {
		t.Errorf("billing has %d dead letters, want 0", n)
	}
	if n := a.count(broker.DLQQuery{Queue: queue, Group: "analytics"}); n != 1 {
		t.Errorf("analytics has %d dead letters, want its own 1", n)
	}
	res, err := a.broker.Pop(a.ctx, broker.PopRequest{Queue: queue, Group: "billing", Batch: 10})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("billing popped %+v, %v", res.Messages, err)
	}
	if got := string(res.Messages[0].Payload); got != edited {
		t.Errorf("billing popped\n%s\nwant the edit\n%s", got, edited)
	}
	if !strings.Contains(v.text(v.id("flash"), "the flash"), " as "+res.Messages[0].ID()+":") {
		t.Errorf("the flash does not name the copy %s", res.Messages[0].ID())
	}
}
