package web_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// Everything a person or a program does that carries a secret — logins
// good and bad, a password typed into the name field (twice: slowed down), a token made on the
// users page and used on the API, a wrong token, a refused CSRF check,
// failures that are logged — leaves no password, token or session secret
// in the log (at debug level, the most it says), and no payload or error
// text either; the database keeps tokens and sessions only as hashes.
func TestSecretsAndPayloadsAreNotLogged(t *testing.T) {
	t.Parallel()
	const adminToken = "admin-token-f6d1c0ffee"
	s := setup(t, closedAPI, func(c *web.Config) { c.AdminToken = adminToken })
	bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	const (
		wrongPassword   = "wrong-password-b9e4d1"
		misplacedSecret = "typed-in-the-name-field-7a2c" // a password in the user name field
		payloadMarker   = "payload-marker-5d8e0a"
		errorMarker     = "error-marker-93c1f7"
	)

	// Logins: good, wrong password, a password as the name, no CSRF token.
	admin, me := s.loggedIn(broker.RoleAdmin)
	sessionCookie := admin.cookie("lazarus_session")
	s.browser().login(me.Name, wrongPassword).want(http.StatusUnauthorized)
	s.clock.Advance(time.Minute) // past the slowdown of the failure
	s.browser().login(misplacedSecret, passwordOf(me.Name)).want(http.StatusUnauthorized)
	// At once again: refused as too many failures, and logged as such.
	s.browser().login(misplacedSecret, passwordOf(me.Name)).want(http.StatusTooManyRequests)
	s.browser().postRaw("/login", url.Values{"name": {me.Name}, "password": {passwordOf(me.Name)}}, nil).want(http.StatusForbidden)

	// A token made on the users page, shown once.
	worker := s.addUser("worker", broker.RoleOperator)
	page, _ := admin.followToUsers(admin.post("/admin/tokens", url.Values{"user": {fmt.Sprint(worker.ID)}, "name": {"ci"}}))
	secret := page.testid("new-token-value")
	if !strings.HasPrefix(secret, broker.TokenPrefix) {
		t.Fatalf("token %q", secret)
	}

	// The token at work: a push, a pop, a failure with an error text, the
	// dead letter read back; a wrong token; the admin token.
	s.request(s.ctx, "POST", "/api/v1/configure", `{"queue":"q","options":{"retryLimit":0}}`, bearer(adminToken)).want(http.StatusOK)
	s.request(s.ctx, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":{"card":"`+payloadMarker+`"}}]}`, bearer(secret)).want(http.StatusCreated)
	var p popped
	s.request(s.ctx, "GET", "/api/v1/pop/queue/q", "", bearer(secret)).want(http.StatusOK).decode(&p)
	ack, _ := json.Marshal(map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.Messages[0].PartitionID,
		"leaseId": p.LeaseID, "status": "failed", "error": errorMarker})
	s.request(s.ctx, "POST", "/api/v1/ack", string(ack), bearer(secret)).want(http.StatusOK)
	s.request(s.ctx, "GET", "/api/v1/dlq?queue=q", "", bearer(secret)).want(http.StatusOK)
	s.request(s.ctx, "GET", "/api/v1/dlq", "", bearer(broker.TokenPrefix+"not-a-real-token")).wantError(http.StatusUnauthorized)
	s.request(s.ctx, "GET", "/api/v1/dlq", "", bearer(adminToken+"-not")).wantError(http.StatusUnauthorized)
	// A refused push with a payload, a page with the error in its filter.
	s.request(s.ctx, "POST", "/api/v1/push", `{"items":[{"queue":"bad/name","payload":"`+payloadMarker+`"}]}`, bearer(secret)).wantError(http.StatusBadRequest)
	admin.get("/queues/q/dead-letters?error=" + errorMarker).want(http.StatusOK)
	admin.post("/logout", nil).wantRedirect("/login")

	// Tokens and sessions are stored hashed: no column of any table holds
	// a secret (the session id is in the cookie, encrypted).
	for _, secret := range []string{secret, adminToken} {
		if where := findInDatabase(t, s, secret); where != "" {
			t.Errorf("secret %q stored in the clear in %s", secret, where)
		}
	}
	var hash string
	if err := s.db.QueryRowUncatalogued(s.ctx, `SELECT hash FROM tokens WHERE name = 'ci'`).Scan(&hash); err != nil || hash != broker.HashToken(secret) {
		t.Errorf("token stored as %q (%v), want its hash", hash, err)
	}
	for _, pw := range []string{passwordOf(me.Name), passwordOf("worker")} {
		if where := findInDatabase(t, s, pw); where != "" {
			t.Errorf("password stored in the clear in %s", where)
		}
	}

	// An internal error is logged, with its cause but not the request's
	// payload.
	s.db.Close()
	s.request(s.ctx, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":"`+payloadMarker+`"}]}`, bearer(adminToken)).wantError(http.StatusInternalServerError)

	logs := s.logs.String()
	for _, want := range []string{"logged in", "login failed", "login failed: no such user", "too many failures", "csrf check failed", "request failed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q: the test did not cover what it means to", want)
		}
	}
	never := map[string]string{
		"a password":                   passwordOf(me.Name),
		"a wrong password":             wrongPassword,
		"a password typed as the name": misplacedSecret,
		"an API token":                 secret,
		"the token's random part":      strings.TrimPrefix(secret, broker.TokenPrefix),
		"the admin token":              adminToken,
		"a wrong token":                "not-a-real-token",
		"a session cookie":             sessionCookie,
		"a payload":                    payloadMarker,
		"an error text":                errorMarker,
	}
	for what, secret := range never {
		if secret != "" && strings.Contains(logs, secret) {
			t.Errorf("the log holds %s (%q):\n%s", what, secret, logs)
		}
	}
}

// findInDatabase names the table and column where s occurs in any text
// of the database, or "".
func findInDatabase(t *testing.T, b *bundle, s string) string {
	t.Helper()
	db := b.db.WriteDB()
	list := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if b.db.Postgres() {
		list = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	rows, err := db.QueryContext(b.ctx, list)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	for _, table := range tables {
		rows, err := db.QueryContext(b.ctx, `SELECT * FROM "`+table+`"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if strings.Contains(string(v), s) {
					rows.Close()
					return table + "." + cols[i]
				}
			}
		}
		rows.Close()
	}
	return ""
}
