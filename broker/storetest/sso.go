package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// testSSOLogin: a single sign-on makes its user at the first login (by
// subject, with the name given then), sets the role and queues of the
// claims at every login, never takes a local user's name over, refuses a
// person the claims give no role, and audits each outcome; its user has
// no password.
func testSSOLogin(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	if _, err := s.b.CreateUser(s.ctx, "admin", broker.RoleAdmin, "hash", "cli"); err != nil {
		t.Fatal(err)
	}
	const sub = "https://idp.example 248289761001"
	orders := broker.MustParseQueueScope("orders*")
	req := broker.SSOLoginRequest{Subject: sub, Name: "ann@example.com", Role: broker.RoleViewer, Queues: orders, From: "10.0.0.1"}

	secret, u, err := s.b.SSOLogin(s.ctx, req)
	if err != nil || secret == "" || u.Name != "ann@example.com" || u.Subject != sub || u.Role != broker.RoleViewer || !u.Queues.Equal(orders) {
		t.Fatalf("first login: %q %+v %v", secret, u, err)
	}
	stored, err := s.b.UserByName(s.ctx, "ann@example.com")
	if err != nil || stored.Subject != sub || stored.PasswordHash != "" || !stored.Queues.Equal(orders) {
		t.Fatalf("stored: %+v %v", stored, err)
	}
	if got, err := s.b.SessionUser(s.ctx, secret); err != nil || got.ID != u.ID {
		t.Fatalf("session: %+v %v", got, err)
	}

	t.Run("LaterLoginsSetTheClaimsRoleAndQueuesAndKeepTheName", func(t *testing.T) {
		again := req
		again.Name, again.Role, again.Queues = "ann-renamed", broker.RoleOperator, broker.QueueScope{}
		_, u2, err := s.b.SSOLogin(s.ctx, again)
		if err != nil || u2.ID != u.ID || u2.Name != "ann@example.com" || u2.Role != broker.RoleOperator || !u2.Queues.All() {
			t.Fatalf("%+v %v", u2, err)
		}
		if _, err := s.b.UserByName(s.ctx, "ann-renamed"); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("a second user was made: %v", err)
		}
	})
	t.Run("NoRoleIsRefusedAndAudited", func(t *testing.T) {
		none := req
		none.Role = ""
		if _, _, err := s.b.SSOLogin(s.ctx, none); !errors.Is(err, broker.ErrDenied) || err.Error() != broker.SSONoRole {
			t.Fatalf("%v", err)
		}
		assertAudited(t, s, broker.AuditLoginFailed, "no group maps to a role")
	})
	t.Run("ALocalUsersNameIsNotTakenOver", func(t *testing.T) {
		other := broker.SSOLoginRequest{Subject: "https://idp.example mallory", Name: "admin", Role: broker.RoleAdmin, From: "10.0.0.2"}
		if _, _, err := s.b.SSOLogin(s.ctx, other); !errors.Is(err, broker.ErrDenied) || err.Error() != broker.SSONameTaken {
			t.Fatalf("%v", err)
		}
		assertAudited(t, s, broker.AuditLoginFailed, "the name is a local user's")
		admin, err := s.b.UserByName(s.ctx, "admin")
		if err != nil || admin.Subject != "" || admin.PasswordHash != "hash" {
			t.Fatalf("the local admin changed: %+v %v", admin, err)
		}
	})
	t.Run("AnotherSubjectsNameIsNotTakenOver", func(t *testing.T) {
		other := broker.SSOLoginRequest{Subject: "https://other.example 248289761001", Name: "ann@example.com", Role: broker.RoleAdmin, From: "10.0.0.2"}
		if _, _, err := s.b.SSOLogin(s.ctx, other); !errors.Is(err, broker.ErrDenied) {
			t.Fatalf("%v", err)
		}
		assertAudited(t, s, broker.AuditLoginFailed, "another single sign-on user's")
	})
	t.Run("AMissingOrInvalidNameIsRefused", func(t *testing.T) {
		for _, c := range []struct{ name, why string }{{"", "no name claim"}, {"ann smith", "not a valid user name"}} {
			r := broker.SSOLoginRequest{Subject: "https://idp.example new-" + c.why, Name: c.name, Role: broker.RoleViewer, From: "10.0.0.4"}
			if _, _, err := s.b.SSOLogin(s.ctx, r); !errors.Is(err, broker.ErrDenied) {
				t.Fatalf("%q: %v", c.name, err)
			}
			assertAudited(t, s, broker.AuditLoginFailed, c.why)
		}
	})
	t.Run("ASingleSignOnUserGetsNoPassword", func(t *testing.T) {
		if _, err := s.b.PutUser(s.ctx, "ann@example.com", broker.RoleAdmin, "newhash", "cli"); !errors.Is(err, broker.ErrConflict) {
			t.Fatalf("%v", err)
		}
		// Even a password check that lets an empty hash in does not log
		// a single sign-on user in with a password.
		_, _, err := s.b.Login(s.ctx, broker.LoginRequest{Name: "ann@example.com", From: "10.0.0.3", CheckFunc: func(hash string) bool {
			return hash == ""
		}})
		if !errors.Is(err, broker.ErrDenied) {
			t.Fatalf("a password login of a single sign-on user: %v", err)
		}
	})
	t.Run("LoginIsAudited", func(t *testing.T) {
		assertAudited(t, s, broker.AuditLogin, "through single sign-on")
		assertAudited(t, s, broker.AuditUser, "created at a single sign-on")
	})
}

// assertAudited fails unless an audit entry of action has detail in its
// text.
func assertAudited(t *testing.T, s *bundle, action, detail string) {
	t.Helper()
	entries, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: action}, broker.Page{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Detail, detail) {
			return
		}
	}
	t.Fatalf("no %s entry says %q: %+v", action, detail, entries)
}
