package db

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// TestRebuildTextIndexIndexesEveryDeadLetterAgain: with the full-text
// indexes emptied, a search finds nothing; RebuildTextIndex writes them
// again, from every dead letter's error text and payload, on both
// stores.
func TestRebuildTextIndexIndexesEveryDeadLetterAgain(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			var d *DB
			if store == "sqlite" {
				var err error
				if d, err = Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
			} else {
				var err error
				if d, err = Open(ctx, pgtest.Database(t, "db", Prepare), SyncNormal); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
			}
			b := broker.New(broker.Config{Store: d})
			items := []broker.PushItem{
				{Queue: "q", Partition: "p", TransactionID: "a", Payload: []byte(`{"brand":"visa"}`)},
				{Queue: "q", Partition: "p", TransactionID: "b", Payload: []byte(`{"brand":"amex"}`)},
				{Queue: "q", Partition: "p", TransactionID: "c", Payload: []byte(`{"brand":"visa"}`)},
			}
			fileDeadLetters(t, b, items, func(m broker.Delivery) string { return "declined by issuer " + m.TransactionID })
			find := func(when, text string, want int) {
				t.Helper()
				got, err := b.SearchText(ctx, text, 10)
				if err != nil || len(got) != want {
					t.Fatalf("%s: search %q: %d dead letters, %v; want %d", when, text, len(got), err, want)
				}
			}
			find("filed", "visa", 2)
			find("filed", "issuer", 3)
			var err error
			if s, ok := d.Store.(interface {
				ExecSearchUncatalogued(ctx context.Context, query string, args ...any) (sql.Result, error)
			}); ok {
				// SQLite: the indexes are the search file's (its store
				// attaches it read-only).
				for _, q := range []string{`DELETE FROM dead_letter_errors`, `DELETE FROM dead_letter_payloads`} {
					if _, err = s.ExecSearchUncatalogued(ctx, q); err != nil {
						break
					}
				}
			} else {
				err = d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
					for _, q := range []string{`DELETE FROM dead_letter_errors`, `DELETE FROM dead_letter_payloads`} {
						if _, err := tx.(*sqlcore.Tx).Exec(ctx, q); err != nil {
							return err
						}
					}
					return nil
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			find("emptied", "visa", 0)
			find("emptied", "issuer", 0)
			if err := d.RebuildTextIndex(ctx); err != nil {
				t.Fatal(err)
			}
			find("rebuilt", "visa", 2)
			find("rebuilt", "amex", 1)
			find("rebuilt", "issuer", 3)
		})
	}
}

// fileDeadLetters pushes items (of one queue), pops them for group g
// and gives each up with the error errText says.
func fileDeadLetters(t *testing.T, b *broker.Broker, items []broker.PushItem, errText func(broker.Delivery) string) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: items[0].Queue, Group: "g", Batch: len(items)})
	if err != nil || len(res.Messages) != len(items) {
		t.Fatalf("pop = %+v, %v", res, err)
	}
	for _, m := range res.Messages {
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: errText(m), Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
}
