package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// login logs in with a check that accepts exactly the hash "right".
func (s *bundle) login(name, replaces string) (string, error) {
	secret, _, err := s.b.Login(s.ctx, broker.LoginRequest{
		Name: name, From: "192.0.2.1", Replaces: replaces,
		CheckFunc: func(hash string) bool { return hash == "right" },
	})
	return secret, err
}

func testLogin(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	if _, err := s.b.CreateUser(s.ctx, "ann", broker.RoleOperator, "right", "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.b.CreateUser(s.ctx, "bob", broker.RoleViewer, "wrong", "cli"); err != nil {
		t.Fatal(err)
	}

	t.Run("RightPasswordOpensASession", func(t *testing.T) {
		secret, err := s.login("ann", "")
		if err != nil || len(secret) < 40 {
			t.Fatalf("%q %v", secret, err)
		}
		u, err := s.b.SessionUser(s.ctx, secret)
		if err != nil || u.Name != "ann" || u.Role != broker.RoleOperator {
			t.Fatalf("%+v %v", u, err)
		}
	})
	t.Run("WrongPasswordAndUnknownUserFailAlike", func(t *testing.T) {
		called := 0
		for _, name := range []string{"bob", "nobody"} {
			_, _, err := s.b.Login(s.ctx, broker.LoginRequest{Name: name, From: "192.0.2.1",
				CheckFunc: func(hash string) bool { called++; return hash == "right" }})
			var be *broker.Error
			if !errors.Is(err, broker.ErrDenied) || !errors.As(err, &be) || be.Message != "wrong user name or password" {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if called != 2 {
			t.Fatalf("the check ran %d times, want once per attempt (unknown users too)", called)
		}
		// An unknown user's empty hash never lets a lax check in.
		if _, _, err := s.b.Login(s.ctx, broker.LoginRequest{Name: "nobody", CheckFunc: func(string) bool { return true }}); !errors.Is(err, broker.ErrDenied) {
			t.Fatalf("unknown user with an accepting check: %v", err)
		}
	})
	t.Run("LoginsAreAudited", func(t *testing.T) {
		ok, _ := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditLogin}, broker.Page{})
		if len(ok) == 0 || ok[0].Actor != "user:ann" || !strings.Contains(ok[0].Detail, "192.0.2.1") {
			t.Fatalf("login audit %+v", ok)
		}
		failed, _ := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditLoginFailed}, broker.Page{})
		if len(failed) < 2 || !strings.Contains(failed[len(failed)-1].Detail, `"bob"`) {
			t.Fatalf("failed login audit %+v", failed)
		}
	})
	t.Run("ANewLoginEndsTheSessionItReplaces", func(t *testing.T) {
		first, _ := s.login("ann", "")
		second, err := s.login("ann", first)
		if err != nil || second == first {
			t.Fatalf("%q %v", second, err)
		}
		if _, err := s.b.SessionUser(s.ctx, first); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("replaced session: %v", err)
		}
		if _, err := s.b.SessionUser(s.ctx, second); err != nil {
			t.Fatalf("new session: %v", err)
		}
	})
	t.Run("LogoutEndsTheSession", func(t *testing.T) {
		secret, _ := s.login("ann", "")
		if err := s.b.Logout(s.ctx, secret, "192.0.2.1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.b.SessionUser(s.ctx, secret); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("after logout: %v", err)
		}
		if err := s.b.Logout(s.ctx, secret, "192.0.2.1"); err != nil {
			t.Fatalf("second logout: %v", err)
		}
		out, _ := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditLogout}, broker.Page{})
		if len(out) != 1 || out[0].Actor != "user:ann" {
			t.Fatalf("logout audit %+v", out)
		}
	})
	t.Run("UnknownSessions", func(t *testing.T) {
		for _, bad := range []string{"", "nope", strings.Repeat("A", 43)} {
			if _, err := s.b.SessionUser(s.ctx, bad); !errors.Is(err, broker.ErrNotFound) {
				t.Errorf("%q: %v", bad, err)
			}
		}
	})
}

func testSessionExpiry(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	u, err := s.b.CreateUser(s.ctx, "ann", broker.RoleViewer, "right", "cli")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("IdleEndsIt", func(t *testing.T) {
		secret, _ := s.b.CreateSession(s.ctx, u.ID)
		s.clock.Advance(broker.SessionIdle - time.Second)
		if _, err := s.b.SessionUser(s.ctx, secret); err != nil {
			t.Fatalf("just before the idle end: %v", err)
		}
		// That use moved the idle end.
		s.clock.Advance(broker.SessionIdle - time.Second)
		if _, err := s.b.SessionUser(s.ctx, secret); err != nil {
			t.Fatalf("sliding: %v", err)
		}
		s.clock.Advance(broker.SessionIdle)
		if _, err := s.b.SessionUser(s.ctx, secret); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("after the idle end: %v", err)
		}
	})
	t.Run("MaxAgeEndsItHoweverBusy", func(t *testing.T) {
		secret, _ := s.b.CreateSession(s.ctx, u.ID)
		for used := time.Duration(0); used < broker.SessionMaxAge-time.Hour; used += time.Hour {
			s.clock.Advance(time.Hour)
			if _, err := s.b.SessionUser(s.ctx, secret); err != nil {
				t.Fatalf("after %s: %v", used, err)
			}
		}
		s.clock.Advance(time.Hour)
		if _, err := s.b.SessionUser(s.ctx, secret); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("after the max age: %v", err)
		}
	})
	t.Run("TheSessionFollowsTheUsersRole", func(t *testing.T) {
		secret, _ := s.b.CreateSession(s.ctx, u.ID)
		if err := s.b.SetUserRole(s.ctx, u.ID, broker.RoleOperator, "cli"); err != nil {
			t.Fatal(err)
		}
		got, err := s.b.SessionUser(s.ctx, secret)
		if err != nil || got.Role != broker.RoleOperator {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("ANewPasswordEndsTheSessions", func(t *testing.T) {
		secret, _ := s.b.CreateSession(s.ctx, u.ID)
		if _, err := s.b.PutUser(s.ctx, "ann", broker.RoleViewer, "right", "cli"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.b.SessionUser(s.ctx, secret); err != nil {
			t.Fatalf("same password: %v", err)
		}
		if _, err := s.b.PutUser(s.ctx, "ann", broker.RoleViewer, "other", "cli"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.b.SessionUser(s.ctx, secret); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("after a new password: %v", err)
		}
	})
	t.Run("DeletingTheUserEndsTheSessions", func(t *testing.T) {
		v, _ := s.b.CreateUser(s.ctx, "temp", broker.RoleViewer, "h", "cli")
		secret, _ := s.b.CreateSession(s.ctx, v.ID)
		if err := s.b.DeleteUser(s.ctx, v.ID, "cli"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.b.SessionUser(s.ctx, secret); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
	})
}
