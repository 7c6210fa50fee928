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
