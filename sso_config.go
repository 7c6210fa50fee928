package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// listFlag is a flag that may be given more than once (--oidc-role a=b
// --oidc-role c=d), each value kept in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// ssoFlags are the single sign-on's flags, as typed.
type ssoFlags struct {
	issuer, clientID, secretFile, scopes, nameClaim, claim, label string
	roles, queues                                                 listFlag
}

// ssoEnvHelp lists the single sign-on's settings of the environment only.
const ssoEnvHelp = `  LAZARUS_OIDC_CLIENT_SECRET  the single sign-on client's secret (or
                          --oidc-client-secret-file; never a flag's value, which
                          ps shows)
`

// defineSSOFlags adds the single sign-on's flags to fs.
func defineSSOFlags(fs *flag.FlagSet, env func(key, def string) string) *ssoFlags {
	f := &ssoFlags{}
	fs.StringVar(&f.issuer, "oidc-issuer", env("LAZARUS_OIDC_ISSUER", ""),
		"single sign-on: the OpenID Connect provider's issuer URL, e.g. https://keycloak.example.com/realms/ops; empty: local passwords only (env LAZARUS_OIDC_ISSUER; docs/sso.md)")
	fs.StringVar(&f.clientID, "oidc-client-id", env("LAZARUS_OIDC_CLIENT_ID", ""),
		"single sign-on: the client id registered at the provider (env LAZARUS_OIDC_CLIENT_ID)")
	fs.StringVar(&f.secretFile, "oidc-client-secret-file", env("LAZARUS_OIDC_CLIENT_SECRET_FILE", ""),
		"single sign-on: a file holding the client's secret (or LAZARUS_OIDC_CLIENT_SECRET; none: a public client, PKCE only) (env LAZARUS_OIDC_CLIENT_SECRET_FILE)")
	fs.StringVar(&f.scopes, "oidc-scopes", env("LAZARUS_OIDC_SCOPES", "profile,email"),
		"single sign-on: the scopes asked for beside openid, comma-separated; add groups for Dex (env LAZARUS_OIDC_SCOPES)")
	fs.StringVar(&f.nameClaim, "oidc-name-claim", env("LAZARUS_OIDC_NAME_CLAIM", "preferred_username"),
		"single sign-on: the claim that names the user made at the first login, e.g. email (env LAZARUS_OIDC_NAME_CLAIM)")
	fs.StringVar(&f.claim, "oidc-claim", env("LAZARUS_OIDC_CLAIM", "groups"),
		"single sign-on: the claim whose values --oidc-role and --oidc-queues map, e.g. roles; a dotted path reads a nested claim (realm_access.roles) (env LAZARUS_OIDC_CLAIM)")
	fs.Var(&f.roles, "oidc-role",
		"single sign-on: VALUE=ROLE, repeatable: members of VALUE (a value of --oidc-claim) get ROLE (viewer, operator or admin); the highest of a person's wins, and one with none is refused (env LAZARUS_OIDC_ROLES: VALUE=ROLE;VALUE=ROLE)")
	fs.Var(&f.queues, "oidc-queues",
		"single sign-on: VALUE=PATTERNS, repeatable: members of VALUE see only the queues of PATTERNS ('orders*,billing'); a person sees the queues of all their groups, every queue when one has no --oidc-queues (env LAZARUS_OIDC_QUEUES: VALUE=PATTERNS;VALUE=PATTERNS)")
	fs.StringVar(&f.label, "oidc-label", env("LAZARUS_OIDC_LABEL", ""),
		"single sign-on: the login page's button, e.g. 'Log in with Keycloak' (env LAZARUS_OIDC_LABEL)")
	return f
}

// ssoConfig checks the single sign-on's flags and makes its
// configuration: nil when no issuer is set. The redirect URL is the
// public URL's, which must be set.
func (f *ssoFlags) config(getenv func(string) string, publicURL string) (*web.SSOConfig, error) {
	if f.issuer == "" {
		if f.clientID != "" || f.secretFile != "" || len(f.roles) > 0 || len(f.queues) > 0 || getenv("LAZARUS_OIDC_CLIENT_SECRET") != "" {
			return nil, errors.New("the single sign-on settings need --oidc-issuer (LAZARUS_OIDC_ISSUER)")
		}
		return nil, nil
	}
	u, err := url.Parse(f.issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--oidc-issuer must be an http or https URL such as https://keycloak.example.com/realms/ops, got %q", f.issuer)
	}
	if f.clientID == "" {
		return nil, errors.New("--oidc-issuer needs --oidc-client-id (LAZARUS_OIDC_CLIENT_ID)")
	}
	if publicURL == "" {
		return nil, errors.New("--oidc-issuer needs --public-url: the provider sends browsers back to <public url>" + ssoCallbackPath + ", which must be registered there")
	}
	secret := getenv("LAZARUS_OIDC_CLIENT_SECRET")
	if f.secretFile != "" {
		if secret != "" {
			return nil, errors.New("give the single sign-on client's secret once: --oidc-client-secret-file or LAZARUS_OIDC_CLIENT_SECRET")
		}
		b, err := os.ReadFile(f.secretFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
		if secret == "" {
			return nil, fmt.Errorf("--oidc-client-secret-file: %s is empty", f.secretFile)
		}
	}
	var scopes []string
	for _, s := range strings.FieldsFunc(f.scopes, func(r rune) bool { return r == ',' || r == ' ' }) {
		if s != "openid" {
			scopes = append(scopes, s)
		}
	}
	if f.nameClaim == "" || f.claim == "" {
		return nil, errors.New("--oidc-name-claim and --oidc-claim must not be empty")
	}
	roles, queues := []string(f.roles), []string(f.queues)
	if len(roles) == 0 {
		roles = splitList(getenv("LAZARUS_OIDC_ROLES"))
	}
	if len(queues) == 0 {
		queues = splitList(getenv("LAZARUS_OIDC_QUEUES"))
	}
	mapping, err := parseSSOMapping(f.claim, roles, queues)
	if err != nil {
		return nil, err
	}
	return &web.SSOConfig{
		Issuer:        strings.TrimRight(f.issuer, "/"),
		ClientID:      f.clientID,
		ClientSecret:  secret,
		Scopes:        scopes,
		RedirectURL:   publicURL + ssoCallbackPath,
		PostLogoutURL: publicURL + "/login",
		NameClaim:     f.nameClaim,
		Mapping:       mapping,
		Label:         f.label,
	}, nil
}

// ssoCallbackPath is where the provider sends browsers back (web/sso.go).
const ssoCallbackPath = "/login/sso/callback"

// splitList reads an environment variable's list: items separated by ';'
// (queue patterns hold commas), blanks dropped.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ";") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseSSOMapping reads the VALUE=ROLE and VALUE=PATTERNS items of
// --oidc-role and --oidc-queues. At least one role is needed (nobody
// could log in otherwise); a value is mapped once; queues are given only
// to a value that has a role.
func parseSSOMapping(claim string, roles, queues []string) (broker.SSOMapping, error) {
	m := broker.SSOMapping{Claim: claim}
	if len(roles) == 0 {
		return m, errors.New("--oidc-issuer needs at least one --oidc-role VALUE=ROLE (LAZARUS_OIDC_ROLES): without one, nobody can log in through it")
	}
	index := map[string]int{}
	for _, item := range roles {
		value, role, ok := strings.Cut(item, "=")
		value, role = strings.TrimSpace(value), strings.TrimSpace(role)
		if !ok || value == "" || !broker.Role(role).Valid() {
			return m, fmt.Errorf("--oidc-role must be VALUE=ROLE with ROLE viewer, operator or admin, got %q", item)
		}
		if _, dup := index[value]; dup {
			return m, fmt.Errorf("--oidc-role maps %q twice", value)
		}
		index[value] = len(m.Groups)
		m.Groups = append(m.Groups, broker.SSOGroup{Value: value, Role: broker.Role(role)})
	}
	seen := map[string]bool{}
	for _, item := range queues {
		value, patterns, ok := strings.Cut(item, "=")
		value = strings.TrimSpace(value)
		if !ok || value == "" || strings.TrimSpace(patterns) == "" {
			return m, fmt.Errorf("--oidc-queues must be VALUE=PATTERNS such as support=orders*,billing, got %q", item)
		}
		i, ok := index[value]
		if !ok {
			return m, fmt.Errorf("--oidc-queues gives queues to %q, which no --oidc-role maps to a role", value)
		}
		if seen[value] {
			return m, fmt.Errorf("--oidc-queues maps %q twice", value)
		}
		seen[value] = true
		sc, err := broker.ParseQueueScope(patterns)
		if err != nil {
			return m, fmt.Errorf("--oidc-queues %s: %w", value, err)
		}
		m.Groups[i].Queues = sc
	}
	return m, nil
}
