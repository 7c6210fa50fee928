package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func TestSSOFlagsMakeTheConfig(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig("serve", []string{
		"--public-url", "https://lazarus.example.com/",
		"--oidc-issuer", "https://idp.example.com/realms/ops/", "--oidc-client-id", "lazarus",
		"--oidc-client-secret-file", secretFile, "--oidc-scopes", "openid profile,groups",
		"--oidc-role", "lazarus-admins=admin", "--oidc-role", "support = viewer",
		"--oidc-queues", "support=orders*, billing", "--oidc-label", "Log in with Keycloak",
	}, envOf(map[string]string{"LAZARUS_OIDC_ROLES": "ignored=admin"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.SSO
	if s == nil || s.Issuer != "https://idp.example.com/realms/ops" || s.ClientID != "lazarus" || s.ClientSecret != "s3cret-from-file" ||
		!slices.Equal(s.Scopes, []string{"profile", "groups"}) || s.NameClaim != "preferred_username" || s.Label != "Log in with Keycloak" ||
		s.RedirectURL != "https://lazarus.example.com/login/sso/callback" || s.PostLogoutURL != "https://lazarus.example.com/login" {
		t.Fatalf("%+v", s)
	}
	m := s.Mapping
	if m.Claim != "groups" || len(m.Groups) != 2 ||
		m.Groups[0].Value != "lazarus-admins" || m.Groups[0].Role != broker.RoleAdmin || !m.Groups[0].Queues.All() ||
		m.Groups[1].Value != "support" || m.Groups[1].Role != broker.RoleViewer || m.Groups[1].Queues.String() != "billing, orders*" {
		t.Fatalf("mapping %+v", m)
	}
}

func TestSSOFromTheEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("serve", nil, envOf(map[string]string{
		"LAZARUS_PUBLIC_URL": "http://127.0.0.1:8080", "LAZARUS_OIDC_ISSUER": "http://127.0.0.1:5556/dex",
		"LAZARUS_OIDC_CLIENT_ID": "lazarus", "LAZARUS_OIDC_CLIENT_SECRET": "s3cret",
		"LAZARUS_OIDC_NAME_CLAIM": "email", "LAZARUS_OIDC_CLAIM": "realm_access.roles",
		"LAZARUS_OIDC_ROLES": "ops=operator; support=viewer", "LAZARUS_OIDC_QUEUES": "support=orders*,billing;ops=*-eu",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.SSO
	if s == nil || s.ClientSecret != "s3cret" || s.NameClaim != "email" || s.Mapping.Claim != "realm_access.roles" || len(s.Mapping.Groups) != 2 ||
		s.Mapping.Groups[0].Queues.String() != "*-eu" || s.Mapping.Groups[1].Queues.String() != "billing, orders*" {
		t.Fatalf("%+v", s)
	}
	if none, err := parseConfig("serve", nil, envOf(nil), io.Discard); err != nil || none.SSO != nil {
		t.Fatalf("without an issuer: %+v %v", none.SSO, err)
	}
}

func TestSSOFlagsRefuseBadInput(t *testing.T) {
	t.Parallel()
	base := []string{"--public-url", "https://l.example", "--oidc-issuer", "https://idp.example", "--oidc-client-id", "lazarus"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"SettingsWithoutIssuer", []string{"--oidc-role", "a=admin"}, nil, "need --oidc-issuer"},
		{"SecretWithoutIssuer", nil, map[string]string{"LAZARUS_OIDC_CLIENT_SECRET": "x"}, "need --oidc-issuer"},
		{"IssuerNotAURL", []string{"--public-url", "https://l.example", "--oidc-issuer", "idp.example", "--oidc-client-id", "x", "--oidc-role", "a=admin"}, nil, "--oidc-issuer must be an http or https URL"},
		{"NoClientID", []string{"--public-url", "https://l.example", "--oidc-issuer", "https://idp.example", "--oidc-role", "a=admin"}, nil, "needs --oidc-client-id"},
		{"NoPublicURL", []string{"--oidc-issuer", "https://idp.example", "--oidc-client-id", "x", "--oidc-role", "a=admin"}, nil, "needs --public-url"},
		{"NoRole", base, nil, "at least one --oidc-role"},
		{"UnknownRole", append(slices.Clone(base), "--oidc-role", "a=god"), nil, "--oidc-role must be VALUE=ROLE"},
		{"RoleWithoutValue", append(slices.Clone(base), "--oidc-role", "=admin"), nil, "--oidc-role must be VALUE=ROLE"},
		{"ValueTwice", append(slices.Clone(base), "--oidc-role", "a=admin", "--oidc-role", "a=viewer"), nil, "maps \"a\" twice"},
		{"QueuesOfNoRole", append(slices.Clone(base), "--oidc-role", "a=admin", "--oidc-queues", "b=orders*"), nil, "no --oidc-role maps"},
		{"BadPattern", append(slices.Clone(base), "--oidc-role", "a=admin", "--oidc-queues", "a=orders/x"), nil, "queue pattern"},
		{"EmptyPatterns", append(slices.Clone(base), "--oidc-role", "a=admin", "--oidc-queues", "a="), nil, "--oidc-queues must be VALUE=PATTERNS"},
		{"SecretTwice", append(slices.Clone(base), "--oidc-role", "a=admin", "--oidc-client-secret-file", "/nonexistent"), map[string]string{"LAZARUS_OIDC_CLIENT_SECRET": "x"}, "secret once"},
		{"SecretFileMissing", append(slices.Clone(base), "--oidc-role", "a=admin", "--oidc-client-secret-file", "/nonexistent/secret"), nil, "--oidc-client-secret-file"},
		{"NotOnDemo", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.name == "NotOnDemo" {
				if _, err := parseConfig("demo", []string{"--oidc-issuer", "https://idp.example"}, envOf(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "flag provided but not defined") {
					t.Fatalf("demo took --oidc-issuer: %v", err)
				}
				return
			}
			_, err := parseConfig("serve", tt.args, envOf(tt.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

// serve passes the single sign-on on to the dashboard: the login page
// offers it beside the local form, and the start says so in the log.
func TestServeOffersTheSingleSignOn(t *testing.T) {
	t.Parallel()
	// A database of its own: without --db the server opens lazarus.db in
	// the working directory, the checkout.
	cfg, err := parseConfig("serve", []string{"--db", filepath.Join(t.TempDir(), "lazarus.db"), "--public-url", "http://127.0.0.1:1",
		"--oidc-issuer", "http://127.0.0.1:2/realms/ops", "--oidc-client-id", "lazarus", "--oidc-role", "ops=admin",
		"--oidc-label", "Log in with Keycloak"}, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)
	resp, err := http.Get(s.url + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `data-testid="login-sso">Log in with Keycloak</a>`) || !strings.Contains(string(body), `data-testid="login-form"`) {
		t.Fatalf("the login page does not offer both logins:\n%s", body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' http://127.0.0.1:2") {
		t.Fatalf("CSP %q", csp)
	}
	if logs := s.logs.String(); !strings.Contains(logs, "single sign-on through an OpenID Connect provider") || !strings.Contains(logs, "issuer=http://127.0.0.1:2/realms/ops") {
		t.Fatalf("the start does not say it:\n%s", logs)
	}
}
