package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/password"
)

// users returns the users of a database file.
func users(t *testing.T, path string) []broker.User {
	t.Helper()
	b, closeDB, err := openBroker(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	us, err := b.Users(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return us
}

func TestFirstStartCreatesAnAdminAndPrintsItsPasswordOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lazarus.db")
	s := startServer(t, Config{DBPath: path, AdminToken: "tok"})
	out := s.stderr.String()
	if !strings.Contains(out, "FIRST START") || !strings.Contains(out, "user name:  admin") || !strings.Contains(out, s.url+"/login") {
		t.Fatalf("stderr %q", out)
	}
	_, after, _ := strings.Cut(out, "password:   ")
	pw, _, _ := strings.Cut(after, "\n")
	if len(pw) != password.GeneratedLength {
		t.Fatalf("password %q", pw)
	}
	us := users(t, path)
	if len(us) != 1 || us[0].Name != "admin" || us[0].Role != broker.RoleAdmin || !password.Match(us[0].PasswordHash, pw) {
		t.Fatalf("users %+v", us)
	}
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}

	// A second start has a user: nothing is created, nothing printed.
	again := startServer(t, Config{DBPath: path, AdminToken: "tok"})
	if strings.Contains(again.stderr.String(), "password") {
		t.Fatalf("second start printed %q", again.stderr.String())
	}
	if us := users(t, path); len(us) != 1 {
		t.Fatalf("users %+v", us)
	}
}

func TestAdminPasswordCreatesOrResetsAdmin(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lazarus.db")
	s := startServer(t, Config{DBPath: path, AdminToken: "tok", AdminPassword: "first password"})
	if strings.Contains(s.stderr.String(), "FIRST START") {
		t.Fatal("a password was generated although LAZARUS_ADMIN_PASSWORD is set")
	}
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	us := users(t, path)
	if len(us) != 1 || us[0].Role != broker.RoleAdmin || !password.Match(us[0].PasswordHash, "first password") {
		t.Fatalf("users %+v", us)
	}
	first := us[0].PasswordHash

	// The same password again leaves the hash (and the sessions) alone.
	s = startServer(t, Config{DBPath: path, AdminToken: "tok", AdminPassword: "first password"})
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	if us := users(t, path); us[0].PasswordHash != first {
		t.Fatal("the same password was hashed again")
	}

	// Another one resets it, and the role with it.
	ctx := context.Background()
	b, closeDB, err := openBroker(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateUser(ctx, "other-admin", broker.RoleAdmin, "h", "test"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUserRole(ctx, us[0].ID, broker.RoleViewer, "test"); err != nil {
		t.Fatal(err)
	}
	closeDB()
	startServer(t, Config{DBPath: path, AdminToken: "tok", AdminPassword: "second password"}).shutdown()
	for _, u := range users(t, path) {
		if u.Name == "admin" && (u.Role != broker.RoleAdmin || !password.Match(u.PasswordHash, "second password")) {
			t.Fatalf("admin after reset: %+v", u)
		}
	}
}

func TestUserAdd(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lazarus.db")
	ctx := context.Background()
	add := func(args []string, stdin string) (string, error) {
		o, err := parseUserAdd(append(args, "--db", path), envOf(nil), io.Discard)
		if err != nil {
			return "", err
		}
		o.cost = bcrypt.MinCost
		var out bytes.Buffer
		err = userAdd(ctx, o, strings.NewReader(stdin), &out, io.Discard)
		return out.String(), err
	}
	t.Run("PasswordFromStdin", func(t *testing.T) {
		out, err := add([]string{"alice", "--role", "operator", "--password-stdin"}, "alice's password\nignored\n")
		if err != nil || !strings.Contains(out, "alice") || strings.Contains(out, "password") {
			t.Fatalf("%q %v", out, err)
		}
	})
	t.Run("GeneratedWhenStdinIsNoTerminal", func(t *testing.T) {
		out, err := add([]string{"--role=viewer", "bob"}, "")
		if err != nil {
			t.Fatal(err)
		}
		_, pw, ok := strings.Cut(strings.TrimSpace(out), "Password (shown only this once): ")
		if !ok || len(pw) != password.GeneratedLength {
			t.Fatalf("output %q", out)
		}
		for _, u := range users(t, path) {
			if u.Name == "bob" && !password.Match(u.PasswordHash, pw) {
				t.Fatal("the printed password is not bob's")
			}
		}
	})
	t.Run("Queues", func(t *testing.T) {
		out, err := add([]string{"erin", "--role", "viewer", "--queues", "orders*, billing", "--password-stdin"}, "erin's password\n")
		if err != nil || !strings.Contains(out, "billing, orders*") {
			t.Fatalf("%q %v", out, err)
		}
		for _, u := range users(t, path) {
			if u.Name == "erin" && u.Queues.String() != "billing, orders*" {
				t.Fatalf("erin's queues: %q", u.Queues)
			}
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		cases := []struct {
			args  []string
			stdin string
			want  string
		}{
			{[]string{"carol", "--role", "operator", "--password-stdin"}, "short\n", "at least 12"},
			{[]string{"carol", "--role", "operator", "--password-stdin"}, "qwertyqwerty\n", "most common passwords"},
			{[]string{"carol", "--role", "operator", "--password-stdin"}, "############\n", "one character repeated"},
			{[]string{"carol", "--role", "operator", "--password-stdin"}, "", "no password"},
			{[]string{"alice", "--role", "viewer"}, "", "already exists"},
			{[]string{"carol", "--role", "root"}, "", "--role must be viewer, operator or admin"},
			{[]string{"carol"}, "", "--role must be"},
			{[]string{"not a name", "--role", "viewer"}, "", "user name"},
			{[]string{"carol", "dave", "--role", "viewer"}, "", "one user name"},
			{[]string{"carol", "--role", "viewer", "--queues", "orders/eu"}, "", "--queues"},
		}
		for _, c := range cases {
			if _, err := add(c.args, c.stdin); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v, want %q", c.args, err, c.want)
			}
		}
		for _, u := range users(t, path) {
			if u.Name == "carol" {
				t.Fatal("carol was created")
			}
		}
	})
	t.Run("Audited", func(t *testing.T) {
		b, closeDB, err := openBroker(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer closeDB()
		entries, _ := b.Audit(ctx, broker.AuditFilter{Action: broker.AuditUser, Actor: "cli"}, broker.Page{})
		if len(entries) != 3 {
			t.Fatalf("audit %+v", entries)
		}
	})
}

func TestTokenCreate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lazarus.db")
	s := startServer(t, Config{DBPath: path, AdminToken: "tok"}) // makes the user admin
	env := envOf(map[string]string{"LAZARUS_DB": path})
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"token", "create", "--user", "admin", "--name", "ci"}, env, nil, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(token, broker.TokenPrefix) || strings.Contains(token, "\n") || !strings.Contains(stderr.String(), "only this once") {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if resp, body := s.do(http.MethodGet, "/api/v1/resources/queues", token, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the new token: %d %s", resp.StatusCode, body)
	}

	// A token limited to some queues finds the others absent.
	if resp, body := s.do(http.MethodPost, "/api/v1/configure", "tok", map[string]any{"queue": "billing", "options": map[string]any{}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("configure: %d %s", resp.StatusCode, body)
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"token", "create", "--user", "admin", "--name", "orders-only", "--queues", "orders*"}, env, nil, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	limited := strings.TrimSpace(stdout.String())
	if resp, _ := s.do(http.MethodGet, "/api/v1/resources/queues/billing", token, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("billing with the unlimited token: %d", resp.StatusCode)
	}
	if resp, _ := s.do(http.MethodGet, "/api/v1/resources/queues/billing", limited, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("billing with the token limited to orders*: %d", resp.StatusCode)
	}

	err := run(context.Background(), []string{"token", "create", "--user", "nobody", "--name", "ci"}, env, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no user nobody") || errors.As(err, new(usageError)) {
		t.Fatalf("unknown user: %v", err)
	}
	err = run(context.Background(), []string{"token", "create", "--user", "admin"}, env, nil, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 2 {
		t.Fatalf("without --name: %v", err)
	}
}

// token create on a database that is not there (a mistaken --db, or the
// demo's file forgotten) says so and leaves no empty database behind.
func TestTokenCreateOnAMissingDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lazarus.db")
	err := run(context.Background(), []string{"token", "create", "--user", "admin", "--name", "ci", "--db", path}, envOf(nil), nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "lazarus-demo.db") {
		t.Fatalf("token create on a missing database: %v", err)
	}
	if _, statErr := os.Stat(path); !errors.Is(statErr, fs.ErrNotExist) {
		t.Errorf("token create left a database behind: %v", statErr)
	}
}
