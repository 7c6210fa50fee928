package e2e

import (
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Support triages a dead letter of a queue that masks the card number:
// the payload shows ••• where it is, and no Reveal; an admin reveals it,
// reads the number, and finds the reveal in the audit.
func TestMaskedCardNumberRevealedByAnAdmin(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	const card = "4111111111111111"
	a.configure("payments", map[string]any{"retryLimit": 0, "maskPaths": []string{"$.card.number", "$..email"}})
	a.push("payments", msg{Tx: "pay-1", Partition: "p", Payload: `{"orderId":7,"card":{"number":"` + card + `","brand":"visa"},"customer":{"email":"ada@example.com"}}`})
	a.consume("payments", "billing", map[string]string{"pay-1": "card declined"}, true)
	page, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: "payments", Limit: 1})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("the dead letter: %v %d", err, len(page.Items))
	}
	path := "/queues/payments/dead-letters/" + page.Items[0].MessageID() + "?group=billing"

	support := a.browse()
	support.login("sam", a.user("sam", broker.RoleViewer))
	support.open(path)
	support.contains(support.id("payload-pretty"), `"number": "•••"`, "the card number masked")
	support.contains(support.id("payload-pretty"), `"brand": "visa"`, "the brand, not masked")
	if txt := support.text(support.page.Locator("main"), "the page"); containsAny(txt, card, "ada@example.com") {
		t.Errorf("support's page shows a masked value")
	}
	support.contains(support.id("payload-masked"), "$.card.number, $..email", "the note that names the masked fields")
	support.contains(support.id("payload-masked"), "Only admins may reveal them", "who may reveal them")
	support.count(support.id("reveal"), 0, "a Reveal button for support")
	support.screenshot("masked-support")

	admin := a.browse()
	admin.login("root", a.user("root", broker.RoleAdmin))
	admin.open(path)
	admin.contains(admin.id("payload-masked"), "$.card.number", "the masked paths named")
	admin.contains(admin.id("payload-pretty"), `"number": "•••"`, "masked for the admin too, until revealed")
	admin.click(admin.id("reveal"), "Reveal")
	admin.contains(admin.id("payload-revealed"), "$.card.number", "the revealed note")
	admin.contains(admin.id("payload-pretty"), card, "the card number revealed")
	admin.screenshot("masked-revealed")

	admin.open("/audit?action=reveal")
	admin.count(admin.id("audit-row"), 1, "reveal entries")
	admin.contains(admin.id("audit-row"), "root", "who revealed")
	admin.contains(admin.id("audit-row"), "$.card.number, $..email", "the fields revealed")
	admin.contains(admin.id("audit-row"), page.Items[0].MessageID(), "the dead letter revealed")
	admin.screenshot("masked-audit")
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
