package storetest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func testUsersAndTokens(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	admin, err := s.b.CreateUser(s.ctx, "root", broker.RoleAdmin, "hash", "cli")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("NamesAreUnique", func(t *testing.T) {
		if _, err := s.b.CreateUser(s.ctx, "root", broker.RoleViewer, "h", "cli"); !errors.Is(err, broker.ErrConflict) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("BadRoleOrName", func(t *testing.T) {
		for _, c := range []struct{ name, role string }{{"ok", "god"}, {"not ok", "viewer"}, {"", "viewer"}} {
			if _, err := s.b.CreateUser(s.ctx, c.name, broker.Role(c.role), "h", "cli"); !errors.Is(err, broker.ErrInvalid) {
				t.Errorf("%v: %v", c, err)
			}
		}
	})
	t.Run("LastAdminStays", func(t *testing.T) {
		if err := s.b.SetUserRole(s.ctx, admin.ID, broker.RoleViewer, "cli"); !errors.Is(err, broker.ErrConflict) {
			t.Fatalf("demote: %v", err)
		}
		if err := s.b.DeleteUser(s.ctx, admin.ID, "cli"); !errors.Is(err, broker.ErrConflict) {
			t.Fatalf("delete: %v", err)
		}
	})
	t.Run("TokensAuthenticateWithTheUsersCurrentRole", func(t *testing.T) {
		op, err := s.b.CreateUser(s.ctx, "ops", broker.RoleOperator, "h", "root")
		if err != nil {
			t.Fatal(err)
		}
		secret, tok, err := s.b.CreateToken(s.ctx, op.ID, "ci", "root")
		if err != nil || !strings.HasPrefix(secret, broker.TokenPrefix) || tok.Hash == secret {
			t.Fatalf("%q %+v %v", secret, tok, err)
		}
		got, err := s.b.Authenticate(s.ctx, secret)
		if err != nil || got.User != "ops" || got.Role != broker.RoleOperator {
			t.Fatalf("%+v %v", got, err)
		}
		if err := s.b.SetUserRole(s.ctx, op.ID, broker.RoleViewer, "root"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.b.Authenticate(s.ctx, secret); got.Role != broker.RoleViewer {
			t.Fatalf("role after demotion: %s", got.Role)
		}
		for _, bad := range []string{"", secret + "x", "lzr_nope", strings.TrimPrefix(secret, broker.TokenPrefix)} {
			if _, err := s.b.Authenticate(s.ctx, bad); !errors.Is(err, broker.ErrNotFound) {
				t.Errorf("%q: %v", bad, err)
			}
		}
		if err := s.b.RevokeToken(s.ctx, tok.ID, op.ID, "root"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.b.Authenticate(s.ctx, secret); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("revoked token: %v", err)
		}
	})
	t.Run("QueueScopesAreKeptAndNarrowTokens", func(t *testing.T) {
		orders := broker.MustParseQueueScope("orders*, billing")
		u, err := s.b.CreateUserWith(s.ctx, broker.UserParams{Name: "support", Role: broker.RoleViewer, PasswordHash: "h", Queues: &orders}, "root")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.b.UserByName(s.ctx, "support"); err != nil || !got.Queues.Equal(orders) {
			t.Fatalf("read back: %q %v", got.Queues, err)
		}
		eu := broker.MustParseQueueScope("*-eu")
		secret, _, err := s.b.CreateTokenWith(s.ctx, broker.TokenParams{UserID: u.ID, Name: "eu", Queues: eu}, "root")
		if err != nil {
			t.Fatal(err)
		}
		whole, _, err := s.b.CreateToken(s.ctx, u.ID, "whole", "root")
		if err != nil {
			t.Fatal(err)
		}
		tok, err := s.b.Authenticate(s.ctx, secret)
		if err != nil || !tok.Queues.Equal(eu) || !tok.UserQueues.Equal(orders) {
			t.Fatalf("token: %q, user's %q, %v", tok.Queues, tok.UserQueues, err)
		}
		for q, want := range map[string]bool{"orders-eu": true, "orders-us": false, "billing": false, "shipping-eu": false} {
			if got := tok.Scope().Allows(q); got != want {
				t.Errorf("token allows %s: %v, want %v", q, got, want)
			}
		}
		if tok, _ := s.b.Authenticate(s.ctx, whole); !tok.Scope().Allows("billing") || tok.Scope().Allows("shipping") {
			t.Errorf("an unlimited token sees its user's queues: %q", tok.Scope())
		}
		// A user's new scope holds for their tokens and sessions at once,
		// and PutUser without one keeps it.
		if err := s.b.SetUserQueues(s.ctx, u.ID, broker.QueueScope{}, "root"); err != nil {
			t.Fatal(err)
		}
		if tok, _ := s.b.Authenticate(s.ctx, whole); !tok.Scope().All() {
			t.Errorf("after widening: %q", tok.Scope())
		}
		if err := s.b.SetUserQueues(s.ctx, u.ID, orders, "root"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.b.PutUser(s.ctx, "support", broker.RoleOperator, "h2", "root"); err != nil {
			t.Fatal(err)
		}
		session, err := s.b.CreateSession(s.ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if su, err := s.b.SessionUser(s.ctx, session); err != nil || !su.Queues.Equal(orders) || su.Role != broker.RoleOperator {
			t.Fatalf("session's user: %+v %v", su, err)
		}
		users, _ := s.b.Users(s.ctx)
		for _, o := range users {
			if o.Name == "support" && !o.Queues.Equal(orders) {
				t.Errorf("Users: %q", o.Queues)
			}
		}
		all := broker.QueueScope{}
		if _, err := s.b.PutUserWith(s.ctx, broker.UserParams{Name: "support", Role: broker.RoleOperator, PasswordHash: "h2", Queues: &all}, "root"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.b.UserByID(s.ctx, u.ID); !got.Queues.All() {
			t.Errorf("PutUserWith every queue: %q", got.Queues)
		}
	})
	t.Run("SessionKeysAreMadeOnceAndKept", func(t *testing.T) {
		h1, b1, err := s.b.SessionKeys(s.ctx)
		if err != nil || len(h1) != 64 || len(b1) != 32 {
			t.Fatalf("%d %d %v", len(h1), len(b1), err)
		}
		h2, b2, _ := s.b.SessionKeys(s.ctx)
		if !bytes.Equal(h1, h2) || !bytes.Equal(b1, b2) {
			t.Fatal("keys changed")
		}
	})
}
