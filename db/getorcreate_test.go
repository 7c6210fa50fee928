package db

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// CreateQueue, CreatePartition and GroupID are get-or-creates that cannot
// race (STORAGE.md rule 3): a name already taken gives the thing that has
// it, not an error and not a second one. On both stores.
func TestGetOrCreateGivesWhatHasTheName(t *testing.T) {
	for store, dsn := range map[string]func() string{
		"sqlite":   func() string { return filepath.Join(t.TempDir(), "l.db") },
		"postgres": func() string { return pgtest.Database(t, "db", Prepare) },
	} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			d, err := Open(ctx, dsn(), SyncNormal)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			first := broker.Queue{Name: "q", Options: broker.DefaultOptions(), CreatedAt: now}
			first.Options.RetryLimit = 7
			var p1 broker.Partition
			var g1 int64
			if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
				if err := tx.CreateQueue(ctx, &first); err != nil {
					return err
				}
				if err := tx.Subscribe(ctx, first.ID, mustGroup(ctx, t, tx, "g", &g1), broker.Start{}, now); err != nil {
					return err
				}
				p1 = broker.Partition{QueueID: first.ID, Name: "p", UUID: broker.NewUUID(now), CreatedAt: now}
				return tx.CreatePartition(ctx, &p1)
			}); err != nil {
				t.Fatal(err)
			}
			again := broker.Queue{Name: "q", Options: broker.DefaultOptions(), CreatedAt: now.Add(time.Hour)}
			p2 := broker.Partition{QueueID: first.ID, Name: "p", UUID: broker.NewUUID(now.Add(time.Hour)), CreatedAt: now.Add(time.Hour)}
			var g2 int64
			var consumers int
			if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
				if err := tx.CreateQueue(ctx, &again); err != nil {
					return err
				}
				if err := tx.CreatePartition(ctx, &p2); err != nil {
					return err
				}
				mustGroup(ctx, t, tx, "g", &g2)
				return tx.(*sqlcore.Tx).QueryRow(ctx, `SELECT COUNT(*) FROM consumers WHERE partition_id = ?`, p1.ID).Scan(&consumers)
			}); err != nil {
				t.Fatalf("create again: %v, want the existing ones", err)
			}
			if again.ID != first.ID || again.Options.RetryLimit != 7 || !again.CreatedAt.Equal(now) {
				t.Errorf("queue again: %+v, want the first (id %d, retryLimit 7)", again, first.ID)
			}
			if p2.ID != p1.ID || p2.UUID != p1.UUID {
				t.Errorf("partition again: %+v, want the first %+v", p2, p1)
			}
			if g2 != g1 || consumers != 1 {
				t.Errorf("group again %d (first %d), consumers of the partition %d, want the same group and one consumer", g2, g1, consumers)
			}
		})
	}
}

func mustGroup(ctx context.Context, t *testing.T, tx broker.Tx, name string, id *int64) int64 {
	t.Helper()
	var err error
	if *id, err = tx.GroupID(ctx, name, true); err != nil {
		t.Fatal(err)
	}
	return *id
}
