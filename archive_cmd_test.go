package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/archive"
	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// `lazarus archive import FILE --db PATH` files an archive's dead letters
// back into the database that expired them (same message ids, payloads
// and errors), says how many it imported and skipped and why (a line
// that is not a dead letter, one already filed), and is audited.
func TestArchiveImportCommandRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "l.db")
	d, err := db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := broker.ClockFunc(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	a, err := archive.New(filepath.Join(dir, "archive"))
	if err != nil {
		t.Fatal(err)
	}
	b := broker.New(broker.Config{Store: d, Clock: clock, Archive: a})
	if _, err := b.Configure(ctx, "orders", map[string]json.RawMessage{"deadLetterRetentionSeconds": json.RawMessage(`60`),
		"deadLetterArchive": json.RawMessage(`true`), "retryLimit": json.RawMessage(`0`)}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pop(ctx, broker.PopRequest{Queue: "orders", Group: "billing", Batch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "orders", Partition: "p", TransactionID: "t1", Payload: json.RawMessage(`{"card":"<declined>"}`)}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "orders", Group: "billing", Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", res, err)
	}
	m := res.Messages[0]
	if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckDLQ, Error: "card declined", Group: m.Group}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if _, err := b.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	d.Close()

	// The archive's file, and a line that is not a dead letter after it.
	file := filepath.Join(a.Root(), archive.FileName("orders", now))
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	mixed := filepath.Join(dir, "mixed.ndjson")
	var plain bytes.Buffer
	if err := archive.Read(bytes.NewReader(raw), func(_ int, l []byte) error { plain.Write(l); plain.WriteByte('\n'); return nil }); err != nil {
		t.Fatal(err)
	}
	plain.WriteString("{broken\n")
	if err := os.WriteFile(mixed, plain.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := run(ctx, []string{"archive", "import", file, "--db", path}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "1 dead letters imported, 0 skipped\n" {
		t.Errorf("first import said %q", got)
	}
	out.Reset()
	if err := run(ctx, []string{"archive", "import", "--db", path, mixed}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "0 dead letters imported, 2 skipped\n") ||
		!strings.Contains(got, "line 1: its group has this dead letter already") || !strings.Contains(got, "line 2: not a JSON object") {
		t.Errorf("second import said %q", got)
	}

	d, err = db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b = broker.New(broker.Config{Store: d})
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "orders", Limit: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("dead letters back: %+v, %v", page.Items, err)
	}
	if dl := page.Items[0]; dl.MessageID() != broker.MessageID(m.CreatedAt, m.Seq) || string(dl.Payload) != `{"card":"<declined>"}` || dl.Error != "card declined" || dl.Partition != "p" {
		t.Errorf("back: %+v", dl)
	}
	au, err := b.Audit(ctx, broker.AuditFilter{Action: broker.AuditArchiveImport}, broker.Page{Limit: 10})
	if err != nil || len(au) != 2 || au[1].Count != 1 || au[1].Actor != cliActor {
		t.Errorf("audit %+v, %v", au, err)
	}

	if err := run(ctx, []string{"archive", "import", "--db", path}, envOf(nil), nil, io.Discard, io.Discard); err == nil {
		t.Error("no file: no error")
	}
}
