package e2e

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// drawAgain has the live list drawn again, as news of any change of the
// queue does, and waits until the row's Delete button is a new element.
func (v *visit) drawAgain(id string) {
	v.t.Helper()
	button := `[data-testid="dl-row"][data-id="` + id + `"] [data-testid="row-delete"]`
	v.eval(`() => { const b = document.querySelector('` + button + `'); if (b) b.dataset.before = "1"; htmx.trigger("#dl", "live-refresh"); }`)
	v.count(v.page.Locator(button+`[data-before]`), 0, "the row's button from before the list was drawn again")
}

// A Delete confirmed after the live list was drawn again behind its
// dialog still deletes (htmx sends nothing for the button that asked,
// gone from the page: the same button of the new list sends it). When
// the dead letter left the list meanwhile, nothing is sent and the page
// says so.
func TestAConfirmationOutlivesTheListDrawnAgain(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)
	v := a.browse()
	v.login("dev", pw)
	v.open("/queues/" + shopQueue + "/dead-letters")
	v.count(v.id("dl-row"), shopDead, "dead letters")
	ids := v.rowIDs()
	dialog := v.id("confirm-dialog")

	v.click(v.row(ids[0]).GetByTestId("row-delete"), "Delete on the first row")
	v.see(dialog, "a row's Delete")
	v.drawAgain(ids[0])
	v.click(v.id("confirm-go"), "the dialog's Delete")
	v.contains(v.id("flash"), "Deleted dead letter", "the delete's message")
	v.count(v.row(ids[0]), 0, "the deleted row")
	a.gone(ids[0])

	v.watchPosts()
	v.click(v.row(ids[1]).GetByTestId("row-delete"), "Delete on the next row")
	v.see(dialog, "the next row's Delete")
	if _, err := a.broker.Delete(a.ctx, ids[1], "", "someone else"); err != nil {
		t.Fatalf("delete %s beside the page: %v", ids[1], err)
	}
	v.drawAgain(ids[1])
	v.count(v.row(ids[1]), 0, "the row deleted meanwhile")
	v.click(v.id("confirm-go"), "the dialog's Delete")
	v.contains(v.id("changed-meanwhile"), "nothing was sent", "the page says the row had gone")
	if n := v.posts(); n != 0 {
		t.Errorf("a Delete confirmed for a row gone meanwhile sent %d changes, want none", n)
	}
	v.screenshot("confirm-changed-meanwhile")
	if n := a.count(broker.DLQQuery{Queue: shopQueue}); n != shopDead-2 {
		t.Errorf("broker: %d dead letters, want %d", n, shopDead-2)
	}
}

// A confirmation whose question changed while it was open (a release of
// a hold that now lets more messages go) is asked again, with the new
// question, rather than carried over: nothing is sent until it is
// answered.
func TestAChangedQuestionIsAskedAgain(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)
	if _, _, err := a.broker.Hold(a.ctx, broker.HoldRequest{Queue: shopQueue, Group: "billing", Reason: "PSP outage", Actor: "e2e"}); err != nil {
		t.Fatal(err)
	}
	v := a.browse()
	v.login("dev", pw)
	v.open("/queues/" + shopQueue + "/dead-letters")
	release := v.id("release-button")
	v.click(release, "Release")
	summary := v.id("confirm-summary")
	before := v.text(summary, "the release's question")
	v.watchPosts()
	a.push(shopQueue, msg{Tx: "order-9001", Partition: "eu-1", Payload: `{"orderId":"order-9001"}`})
	form := v.page.Locator(`form[data-confirm]:has([data-testid="release-button"])`)
	v.eval(`() => { document.querySelectorAll('form[data-confirm]').forEach((f) => f.dataset.before = "1"); htmx.trigger("#dl", "live-refresh"); }`)
	v.count(form.And(v.page.Locator("[data-before]")), 0, "the release's form from before the list was drawn again")
	if q, _ := form.GetAttribute("data-confirm"); q == before {
		t.Fatalf("the release's question did not change with a message more: %q", q)
	}
	v.click(v.id("confirm-go"), "the first dialog's Release")
	v.see(v.id("confirm-dialog"), "the dialog asked again")
	if after := v.text(summary, "the question asked again"); after == before {
		t.Fatalf("asked again with the old question %q", after)
	}
	if n := v.posts(); n != 0 {
		t.Fatalf("a changed question's answer sent %d changes before it was asked again", n)
	}
	v.screenshot("confirm-asked-again")
	v.click(v.id("confirm-go"), "the new dialog's Release")
	v.contains(v.id("flash"), "Released group billing", "the release")
}
