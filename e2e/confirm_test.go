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
