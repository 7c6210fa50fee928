package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// TestMaintainAuditRetention: entries older than the retention go, in
// chunks, counted in the report, the totals and one entry of the broker's
// stream; an entry at the bound and younger ones stay.
func TestMaintainAuditRetention(t *testing.T) {
	s := setup(t)
	t0 := s.clock.Now()
	const old = 1234 // more than two chunks
	if err := s.db.Update(s.ctx, func(tx broker.Tx) error {
		for i := range old {
			if err := tx.InsertAudit(s.ctx, &broker.AuditEntry{At: t0.Add(time.Duration(i) * time.Millisecond), Actor: "user:a", Action: broker.AuditReplay, Detail: "old"}); err != nil {
				return err
			}
		}
		for _, at := range []time.Time{t0.Add(time.Hour), t0.Add(48 * time.Hour)} { // the bound, and younger
			if err := tx.InsertAudit(s.ctx, &broker.AuditEntry{At: at, Actor: "user:a", Action: broker.AuditReplay, Detail: "young"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(broker.DefaultAuditRetention + time.Hour) // the bound: t0 + 1 h
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Task(broker.TaskAudit)
	if r.Removed != old || r.Chunks != 3 {
		t.Errorf("audit task: removed %d in %d chunks, want %d in 3", r.Removed, r.Chunks, old)
	}
	all, err := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamAll}, broker.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var young, swept int
	for _, e := range all {
		switch {
		case e.Detail == "young":
			young++
		case e.Action == broker.AuditSwept:
			swept++
			if want := "audit: 1,234 entries older than 400 days removed"; e.Detail != want || e.Actor != broker.BrokerActor || !e.Broker || e.Count != old {
				t.Errorf("swept entry %+v, want %q by %s in the broker's stream", e, want, broker.BrokerActor)
			}
		default:
			t.Errorf("entry kept: %+v", e)
		}
	}
	if young != 2 || swept != 1 {
		t.Errorf("kept %d young entries and %d sweep entries, want 2 and 1", young, swept)
	}
	tot := s.b.MaintenanceTotals()
	audit := slices.IndexFunc(tot, func(t broker.TaskTotals) bool { return t.Task == broker.TaskAudit })
	if len(tot) != len(broker.MaintenanceTasks) || audit < 0 || tot[audit].Removed != old || tot[audit].Runs != 1 {
		t.Errorf("totals %+v", tot)
	}
	// A second run finds nothing and writes no entry.
	rep, err = s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskAudit); r.Removed != 0 || r.Chunks != 1 {
		t.Errorf("second run: %+v", r)
	}
	if tot := s.b.MaintenanceTotals(); tot[audit].Removed != old || tot[audit].Runs != 2 {
		t.Errorf("totals after the second run %+v", tot)
	}
}

// TestMaintainAuditKeptForEver: with KeepForever nothing goes.
func TestMaintainAuditKeptForEver(t *testing.T) {
	s := setup(t)
	b := broker.New(broker.Config{Store: s.db, Clock: s.clock, AuditRetention: broker.KeepForever})
	if err := b.Record(s.ctx, "user:a", broker.AuditReplay, "old"); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(10 * broker.DefaultAuditRetention)
	rep, err := b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskAudit); r.Removed != 0 {
		t.Errorf("removed %d", r.Removed)
	}
	all, err := b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamAll}, broker.Page{Limit: 10})
	if err != nil || len(all) != 1 {
		t.Errorf("audit %v %v, want the entry kept", all, err)
	}
}

// TestMaintainSessions: ended sessions (past their max age, or idle) go in
// chunks; live ones stay, and a login no longer sweeps.
func TestMaintainSessions(t *testing.T) {
	s := setup(t)
	u, err := s.b.CreateUser(s.ctx, "ann", broker.RoleViewer, "x", "test")
	if err != nil {
		t.Fatal(err)
	}
	now := s.clock.Now()
	const ended = 1100
	if err := s.db.Update(s.ctx, func(tx broker.Tx) error {
		for i := range ended {
			se := broker.Session{UserID: u.ID, Hash: "h" + time.Duration(i).String(), CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(broker.SessionMaxAge), LastSeenAt: now.Add(-time.Hour)}
			if i%2 == 0 { // past its max age, seen just now
				se.CreatedAt, se.ExpiresAt, se.LastSeenAt = now.Add(-broker.SessionMaxAge), now.Add(-time.Hour), now.Add(-time.Minute)
			}
			if err := tx.InsertSession(s.ctx, &se); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	live, err := s.b.CreateSession(s.ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(broker.SessionIdle - time.Hour) // the odd ones: idle 12 h now; the live one: 11 h
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskSessions); r.Removed != ended || r.Chunks != 3 {
		t.Errorf("sessions task %+v, want %d removed in 3 chunks", r, ended)
	}
	if _, err := s.b.SessionUser(s.ctx, live); err != nil {
		t.Errorf("live session: %v", err)
	}
	if r := rep.Task(broker.TaskStats); r.Chunks != 4 {
		t.Errorf("stats task %+v, want a chunk for each of the 4 bucket tables", r)
	}
}
