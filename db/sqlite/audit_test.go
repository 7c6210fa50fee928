package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Migration 0012 scrubs the names typed at failed logins that are no
// user's (often passwords typed into the wrong field) from the audit
// kept before it; the names of users, and every other entry, stay.
func TestMigrationScrubsTypedNamesOfFailedLogins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	if _, err := b.CreateUser(ctx, "ann", broker.RoleViewer, "hash", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateUser(ctx, "a_b", broker.RoleViewer, "hash", "test"); err != nil {
		t.Fatal(err)
	}
	// Entries as Lazarus wrote them before: the name typed, whatever it was.
	old := map[string]string{
		`failed login as "ann" from 10.0.0.1`:                    `failed login as "ann" from 10.0.0.1`,
		`failed login as "a_b" from 10.0.0.1`:                    `failed login as "a_b" from 10.0.0.1`,
		`failed login as "axb" from 10.0.0.1`:                    `failed login as unknown user from 10.0.0.1`,
		`failed login as "ann2" from 10.0.0.2`:                   `failed login as unknown user from 10.0.0.2`,
		`failed login as "Tr0ub4dor&3 secret" from ::1`:          `failed login as unknown user from ::1`,
		`failed login as "ann\" from 10.0.0.9" from 2001:db8::7`: `failed login as unknown user from 2001:db8::7`,
		`failed login as "my pass from home" from 192.168.1.20`:  `failed login as unknown user from 192.168.1.20`,
		`failed login as "p@ss" from not-an-address`:             `failed login as unknown user`,
		`failed login as "pässwörd…" from 127.0.0.1`:             `failed login as unknown user from 127.0.0.1`,
		`failed login as unknown user from 10.0.0.3`:             `failed login as unknown user from 10.0.0.3`,
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for detail := range old {
			if err := tx.InsertAudit(ctx, &broker.AuditEntry{At: at, Actor: "anonymous", Action: broker.AuditLoginFailed, Detail: detail}); err != nil {
				return err
			}
		}
		// Not a failed login: untouched, whatever it says.
		return tx.InsertAudit(ctx, &broker.AuditEntry{At: at, Actor: "user:ann", Action: broker.AuditLogin, Detail: `failed login as "x" from 1.2.3.4`})
	})
	if err != nil {
		t.Fatal(err)
	}

	reapply(t, d, 12, "0012_audit_unknown_logins.sql")

	got, err := b.Audit(ctx, broker.AuditFilter{Action: broker.AuditLoginFailed}, broker.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, w := range old {
		want[w]++
	}
	for _, e := range got {
		want[e.Detail]--
	}
	for detail, n := range want {
		if n != 0 {
			t.Errorf("after the migration, %q is there %d times too few (negative: too many)", detail, n)
		}
	}
	if len(got) != len(old) {
		t.Errorf("%d failed logins after the migration, want %d", len(got), len(old))
	}
	other, err := b.Audit(ctx, broker.AuditFilter{Action: broker.AuditLogin}, broker.Page{})
	if err != nil || len(other) != 1 || other[0].Detail != `failed login as "x" from 1.2.3.4` {
		t.Fatalf("another action's entry after the migration: %+v, %v", other, err)
	}
}
