package db

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Migration 0008 gives the dead letters of a database made before it
// their messages' transactionIds, so that the filter by transactionId
// finds them.
func TestDeadLetterTransactionIDsAreBackfilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
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
	reapply(t, d, 8, "0008_dead_letter_transaction.sql",
		`DROP INDEX dead_letters_transaction`,
		`ALTER TABLE dead_letters DROP COLUMN transaction_id`)
	w := d.WriteDB()

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

// Migration 0009 marks ready the consumers of a database made before it
// that have messages past their cursor, and only those.
func TestConsumerReadinessIsBackfilled(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	push(t, b, "x", "x1")
	push(t, b, "y", "y1")
	drained, ids := popAck(t, b, "g", broker.AckCompleted)
	if len(ids) != 1 {
		t.Fatalf("pop got %v from %q, want one message", ids, drained)
	}
	// Whichever partition the pop took is drained; the other still waits.
	want := map[string]bool{"x": false, "y": false}
	for p := range want {
		want[p] = p != drained
	}

	// Back to the schema before 0009, then 0009 again.
	reapply(t, d, 9, "0009_consumers_ready.sql",
		`DROP INDEX consumers_ready`,
		`ALTER TABLE consumers DROP COLUMN ready`,
		`CREATE INDEX consumers_ready ON consumers (queue_id, group_id, leased_at)`)
	wantReady(t, d, "g", want)
	if _, ids := popAck(t, b, "g", broker.AckCompleted); len(ids) != 1 {
		t.Fatalf("pop after the migration got %v, want the waiting message", ids)
	}
}

// A database that a newer Lazarus has migrated is refused, with the
// versions in the message.
func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteDB().ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if d, err := Open(ctx, path, SyncNormal); err == nil {
		d.Close()
		t.Fatal("a database of schema version 99 was opened")
	} else if !strings.Contains(err.Error(), "schema version 99") || !strings.Contains(err.Error(), "newer Lazarus") {
		t.Fatalf("error %q does not say why", err)
	}
}
