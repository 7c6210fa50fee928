package e2e

import (
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/oidctest"
	"github.com/lazarus-dlq/lazarus/web"
)

// Support staff log in through the company's OpenID provider (a real one,
// started by the test: internal/oidctest): the login page offers it
// beside the local form, the provider's own login form is filled in, and
// the browser comes back logged in as a viewer of the orders queues, the
// user made from the provider's claims, who sees those queues only.
// Logging out ends the session here
// and at the provider, which sends the browser back to the login page.
// Someone of a group that maps to no role is told so, on the login page.
func TestSupportLogsInThroughTheProvider(t *testing.T) {
	t.Parallel()
	p := oidctest.Start(t, oidctest.Config{ClientID: "lazarus", ClientSecret: "e2e-client-secret", Users: []oidctest.User{
		{Subject: "sub-sam", Username: "sam", Password: "sam-provider-pw", Claims: map[string]any{"groups": []string{"support"}}},
		{Subject: "sub-nina", Username: "nina", Password: "nina-provider-pw", Claims: map[string]any{"groups": []string{"marketing"}}},
	}})
	a := startAppWith(t, nil, nil, func(publicURL string) *web.SSOConfig {
		p.AllowRedirect(publicURL+"/login/sso/callback", publicURL+"/login")
		return &web.SSOConfig{
			Issuer: p.Issuer, ClientID: "lazarus", ClientSecret: "e2e-client-secret",
			RedirectURL: publicURL + "/login/sso/callback", PostLogoutURL: publicURL + "/login",
			Label: "Log in with Example SSO",
			Mapping: broker.SSOMapping{Claim: "groups", Groups: []broker.SSOGroup{
				{Value: "lazarus-admins", Role: broker.RoleAdmin},
				{Value: "support", Role: broker.RoleViewer, Queues: broker.MustParseQueueScope("orders*")},
			}},
		}
	})
	a.shop()
	// A card payment of the orders queues, its card number masked.
	const card = "4111111111111111"
	a.configure("orders-cards", map[string]any{"retryLimit": 0, "maskPaths": []string{"$.card.number"}})
	a.push("orders-cards", msg{Tx: "card-1", Partition: "p", Payload: `{"orderId":7,"card":{"number":"` + card + `","brand":"visa"}}`})
	a.consume("orders-cards", "billing", map[string]string{"card-1": "card declined"}, true)
	cards, err := a.broker.DeadLetters(a.ctx, broker.DLQQuery{Queue: "orders-cards", Limit: 1})
	if err != nil || len(cards.Items) != 1 {
		t.Fatalf("the card's dead letter: %v", err)
	}
	cardPath := "/queues/orders-cards/dead-letters/" + cards.Items[0].MessageID() + "?group=billing"
	a.configure("payments", map[string]any{"retryLimit": 1})
	a.push("payments", msg{Tx: "pay-1", Partition: "Default", Payload: `{"amount":"10.00"}`})
	adminPW := a.user("admin", broker.RoleAdmin)

	v := a.browse()
	v.open("/")
	v.atPath("/login")
	v.see(v.id("login-form"), "the local login form")
	v.contains(v.id("login-sso"), "Log in with Example SSO", "the single sign-on button")
	v.screenshot("sso-login")
	v.click(v.id("login-sso"), "log in through the provider")
	v.see(v.id("provider-login"), "the provider's login form")
	v.fill(v.id("provider-username"), "sam", "the provider's user name")
	v.fill(v.id("provider-password"), "sam-provider-pw", "the provider's password")
	v.click(v.id("provider-submit"), "sign in at the provider")
	v.atPath("/")
	v.contains(v.id("whoami"), "sam", "who is logged in")
	v.contains(v.id("whoami"), "viewer", "the role the support group maps to")
	u, err := a.broker.UserByName(a.ctx, "sam")
	if err != nil || u.Subject != p.Issuer+" sub-sam" || u.Queues.String() != "orders*" {
		t.Fatalf("the user made at the login: %+v %v", u, err)
	}
	// The support group's queues only (orders*): payments is absent, and
	// its page is not found.
	v.see(v.id("queue-"+shopQueue), "the orders queue")
	v.count(v.id("queue-payments"), 0, "the payments queue, out of the support group's queues")
	v.screenshot("sso-logged-in")
	if r, err := v.page.Goto(a.url + "/queues/payments"); err != nil || r.Status() != 404 {
		t.Errorf("the payments queue's page for support: %v %v", r, err)
	}
	// The card number is masked to support, who may not reveal it.
	v.open(cardPath)
	v.contains(v.id("payload-pretty"), `"number": "•••"`, "the card number masked")
	if txt := v.text(v.page.Locator("main"), "the page"); strings.Contains(txt, card) {
		t.Errorf("support's page shows the card number")
	}
	v.count(v.id("reveal"), 0, "a Reveal button for support")
	v.screenshot("sso-masked")

	v.click(v.id("logout"), "log out")
	v.atPath("/login")
	if ended := p.EndedSessions(); len(ended) != 1 || ended[0].Subject != "sub-sam" {
		t.Errorf("the provider's session was not ended: %+v", ended)
	}
	v.open("/")
	v.atPath("/login")
	v.count(v.id("whoami"), 0, "a user name after logging out")
	// The local admin, the way in when the provider is down, sees every
	// queue.
	v.login("admin", adminPW)
	v.see(v.id("queue-payments"), "the payments queue, to the local admin")
	// The admin reveals the card number, and finds the reveal in the
	// audit.
	v.open(cardPath)
	v.contains(v.id("payload-pretty"), `"number": "•••"`, "masked for the admin too, until revealed")
	v.click(v.id("reveal"), "Reveal")
	v.contains(v.id("payload-pretty"), card, "the card number revealed")
	v.open("/audit?action=reveal")
	v.count(v.id("audit-row"), 1, "reveal entries")
	v.contains(v.id("audit-row"), "admin", "who revealed")
	v.contains(v.id("audit-row"), "$.card.number", "the field revealed")
	v.screenshot("sso-revealed-audit")

	w := a.browse()
	w.open("/login")
	w.click(w.id("login-sso"), "log in through the provider")
	w.fill(w.id("provider-username"), "nina", "the provider's user name")
	w.fill(w.id("provider-password"), "nina-provider-pw", "the provider's password")
	w.click(w.id("provider-submit"), "sign in at the provider")
	w.atPath("/login/sso/callback")
	msg := w.text(w.id("login-error"), "the refusal")
	if !strings.Contains(msg, "no role in Lazarus") {
		t.Errorf("the refusal says %q", msg)
	}
	w.see(w.id("login-form"), "the local login form, still offered")
	w.count(w.id("whoami"), 0, "a user name after the refusal")
	w.screenshot("sso-refused")
}
