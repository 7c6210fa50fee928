package e2e

import (
	"net/url"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A visitor whose session expired while a page was open is told so on
// the login page, and the login brings them back to that page, its
// filter kept.
func TestAnExpiredSessionLeadsBackAfterTheLogin(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)
	v := a.browse()
	v.login("dev", pw)
	const wanted = "/queues/" + shopQueue + "/dead-letters"
	v.open(wanted + "?error=timeout")
	v.see(v.id("dl-row").First(), "the dead letters")

	// Half a day later, without a request: the session has expired.
	defer a.clock.set(0)
	a.clock.set(broker.SessionIdle + time.Minute)
	v.open(wanted + "?error=timeout")
	v.atPath("/login")
	v.contains(v.id("login-expired"), "Your session expired; sign in again", "the login page says why")
	v.screenshot("login-expired")
	v.fill(v.id("login-name"), "dev", "user name")
	v.fill(v.id("login-password"), pw, "password")
	v.click(v.id("login-submit"), "log in")
	v.atPath(wanted)
	if u, err := url.Parse(v.page.URL()); err != nil || u.Query().Get("error") != "timeout" {
		t.Errorf("after the login the page's filter is lost: %s", v.page.URL())
	}
	v.see(v.id("dl-row").First(), "the dead letters again")
	v.count(v.id("login-expired"), 0, "the expiry notice after the login")
}
