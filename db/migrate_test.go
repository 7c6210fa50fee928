package db

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Migration 0008 gives the dead letters of a database made before it
// their messages' transactionIds, so that the filter by transactionId
// finds them.
func TestDeadLetterTransactionIDsAreBackfilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	var items []broker.PushItem
	for _, id := range []string{"order-1", "order-2", "order-3"} {
		items = append(items, broker.PushItem{Queue: "q", Partition: "p", TransactionID: id, Payload: []byte(`{}`)})
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 3})
	if err != nil || len(res.Messages) != 3 {
		t.Fatalf("pop = %+v, %v", res, err)
	}
	for _, m := range res.Messages {
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "boom", Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}

	// Back to the schema before 0008, then 0008 again.
	w := d.WriteDB()
	for _, stmt := range []string{
		`DROP INDEX dead_letters_transaction`,
		`ALTER TABLE dead_letters DROP COLUMN transaction_id`,
		`DELETE FROM schema_migrations WHERE version = 8`,
	} {
		if _, err := w.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	body, err := migrations.ReadFile("migrations/0008_dead_letter_transaction.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.applyMigration(ctx, 8, "0008_dead_letter_transaction.sql", string(body)); err != nil {
		t.Fatal(err)
	}

	var mismatched, total int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(d.transaction_id <> m.transaction_id), 0)
		FROM dead_letters d JOIN messages m ON m.seq = d.seq`).Scan(&total, &mismatched); err != nil {
		t.Fatal(err)
	}
	if total != 3 || mismatched != 0 {
		t.Fatalf("after the migration: %d dead letters, %d with another transactionId than their message; want 3, 0", total, mismatched)
	}
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", TransactionID: "order-2"})
	if err != nil || len(page.Items) != 1 || page.Items[0].TransactionID != "order-2" {
		t.Fatalf("filter by order-2 = %+v, %v; want that one dead letter", page, err)
	}
}
