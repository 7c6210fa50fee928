package e2e

import (
	"net/url"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A visitor without a session is sent to the login page from any page; a
// wrong password or an unknown user fails with a message a person can
// read, and opens no session; the right one leads back to the page asked
// for; logging out ends the session.
func TestLoggedOutVisitorMustLogIn(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.shop()
	pw := a.user("dev", broker.RoleOperator)

	v := a.browse()
	const wanted = "/queues/" + shopQueue + "/dead-letters"
	for _, path := range []string{"/", "/audit", "/queues/" + shopQueue, wanted + "?error=timeout"} {
		v.open(path)
		v.atPath("/login")
		v.see(v.id("login-form"), "the login form, from "+path)
		v.count(v.id("dl-row"), 0, "dead letters shown to a visitor without a session")
		v.count(v.id("whoami"), 0, "a user name shown to a visitor without a session")
	}

	// Wrong password, then unknown user: the same readable refusal.
	for _, try := range []struct{ name, pw string }{{"dev", "not-the-password-at-all"}, {"nobody", pw}} {
		v.fill(v.id("login-name"), try.name, "user name")
		v.fill(v.id("login-password"), try.pw, "password")
		v.click(v.id("login-submit"), "log in")
		msg := v.id("login-error")
		v.see(msg, "the login error")
		text := strings.TrimSpace(v.text(msg, "the login error"))
		if len(text) < 10 || !strings.Contains(text, " ") {
			t.Errorf("login error %q is not a sentence a person can read", text)
		}
		for _, inside := range []string{"sql", "bcrypt", "hash", "panic", "<nil>", "%!", "unknown user", "no such user", "not found"} {
			if strings.Contains(strings.ToLower(text), inside) {
				t.Errorf("login error %q shows %q: internals, or whether the user exists", text, inside)
			}
		}
		v.atPath("/login")
		v.check(v.expect.Locator(v.id("login-password")).ToHaveValue(""), "the password is not sent back into the form")
		if try.name == "dev" {
			v.screenshot("login-error")
		}
	}
	// No session: the pages still send the visitor to the login page.
	v.open("/")
	v.atPath("/login")
	v.count(v.id("whoami"), 0, "a user name after failed logins")

	// Asked for the list, logs in, gets the list.
	v.open(wanted + "?error=timeout")
	v.atPath("/login")
	v.fill(v.id("login-name"), "dev", "user name")
	v.fill(v.id("login-password"), pw, "password")
	v.click(v.id("login-submit"), "log in")
	v.atPath(wanted)
	v.contains(v.id("whoami"), "dev", "who is logged in")
	if u, err := url.Parse(v.page.URL()); err != nil || u.Query().Get("error") != "timeout" {
		t.Errorf("after the login the filter of the page asked for is lost: %s", v.page.URL())
	}
	v.see(v.id("dl-row").First(), "the dead letters")

	// Logging out ends the session.
	v.click(v.id("logout"), "Log out")
	v.atPath("/login")
	v.open("/")
	v.atPath("/login")
	v.count(v.id("whoami"), 0, "a user name after logging out")
}
