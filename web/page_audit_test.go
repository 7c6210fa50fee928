package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A name typed at a failed login is kept only when it is a user's: the
// name of no user is often a password typed into the wrong field, and it
// is recorded as "unknown user". Failed logins are on /audit for admins
// only; the other roles see the rest of the audit.
func TestFailedLoginsAreForAdminsAndKeepNoTypedName(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.addUser("ann", broker.RoleViewer)
	const typed = "hunter2-correct-horse" // a password, typed as the name
	s.browserFrom("127.0.5.1").login("ann", "not-anns-password").want(http.StatusUnauthorized)
	s.browserFrom("127.0.5.2").login(typed, "whatever-was-typed").want(http.StatusUnauthorized)
	s.clock.Advance(time.Minute)

	all, err := s.broker.Audit(s.ctx, broker.AuditFilter{}, broker.Page{})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, e := range all {
		if strings.Contains(e.Detail, "hunter2") || strings.Contains(e.Actor, "hunter2") {
			t.Errorf("the audit keeps the typed name: %+v", e)
		}
		if e.Action == broker.AuditLoginFailed {
			failed = append(failed, e.Detail)
		}
	}
	if strings.Join(failed, "\n") != "failed login as unknown user from 127.0.5.2\nfailed login as \"ann\" from 127.0.5.1" {
		t.Fatalf("failed logins recorded as %q", failed)
	}

	viewer, _ := s.loggedIn(broker.RoleViewer)
	operator, _ := s.loggedIn(broker.RoleOperator)
	admin, _ := s.loggedIn(broker.RoleAdmin)
	for _, tc := range []struct {
		name      string
		b         *browser
		seesFails bool
	}{{"Viewer", viewer, false}, {"Operator", operator, false}, {"Admin", admin, true}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/audit", "/audit?action=login_failed", "/audit?actor=anonymous"} {
				page := tc.b.get(path).want(http.StatusOK)
				rows := page.doc().Find(`[data-testid="audit-row"]`)
				shown := 0
				rows.Each(func(_ int, r *goquery.Selection) {
					if strings.Contains(r.Text(), broker.AuditLoginFailed) {
						shown++
					}
				})
				if want := map[bool]int{true: 2, false: 0}[tc.seesFails]; shown != want {
					t.Errorf("%s shows %d failed logins, want %d", path, shown, want)
				}
				if !tc.seesFails && path == "/audit" && page.testid("empty") != "" {
					t.Errorf("%s shows nothing: the logins of others are still for all", path)
				}
			}
			opts := tc.b.get("/audit").doc().Find(`select[name="action"] option[value="login_failed"]`).Length()
			if (opts == 1) != tc.seesFails {
				t.Errorf("the action filter offers login_failed: %v", opts == 1)
			}
		})
	}
}

// The audit page's action filter offers the actions of error groups and
// notifications, and finds their entries.
func TestAuditFiltersByErrorGroupAndNotificationActions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b, _ := s.loggedIn(broker.RoleAdmin)
	if _, err := s.broker.CreateChannel(s.ctx, broker.Channel{Name: "ops", Kind: broker.ChannelSlack, URL: "https://hooks.slack.example/services/T/B/x"}, "user:admin"); err != nil {
		t.Fatal(err)
	}
	page := b.get("/audit?action=" + broker.AuditNotifyChannel).want(http.StatusOK).doc()
	for _, a := range []string{broker.AuditErrorGroup, broker.AuditNotifyChannel, broker.AuditNotifyChannelDelete, broker.AuditNotifyRule,
		broker.AuditNotifyRuleDelete, broker.AuditNotifyTest} {
		if page.Find(`select[name="action"] option[value="`+a+`"]`).Length() != 1 {
			t.Errorf("the audit filter has no %s", a)
		}
	}
	if n := page.Find(`[data-testid="audit-row"]`).Length(); n != 1 {
		t.Errorf("%d notify_channel entries, want 1", n)
	}
}
