package db

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An export's page query walks an index in the list's order: no scan of
// the dead letters, no sort (a temp B-tree would read every match before
// the first row), whatever the filter, on the first page and the next.
func TestExportPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for name, f := range map[string]broker.Filter{
		"All":         {},
		"Queue":       {QueueID: 1},
		"Group":       {QueueID: 1, GroupID: 2},
		"Partition":   {QueueID: 1, PartitionID: 3},
		"Range":       {QueueID: 1, GroupID: 2, From: at.Add(-time.Hour), To: at},
		"Error":       {QueueID: 1, ErrorContains: "timeout"},
		"Transaction": {QueueID: 1, TransactionID: "t"},
	} {
		for _, after := range []*broker.Cursor{nil, {At: at, ID: 42}} {
			query, args := exportQuery(f, after, 500)
			rows, err := d.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			rows.Close()
			text := strings.Join(plan, "\n")
			if strings.Contains(text, "SCAN d\n") || strings.HasSuffix(text, "SCAN d") || strings.Contains(text, "SCAN dead_letters") ||
				strings.Contains(text, "TEMP B-TREE") || !strings.Contains(text, "USING INDEX dead_letters_") && !strings.Contains(text, "USING COVERING INDEX dead_letters_") {
				t.Errorf("%s (after %v): plan\n%s\nwants a dead_letters index in order, no scan, no sort", name, after, text)
			}
		}
	}
}

// A page of an export ends once its payloads and errors reach the byte
// cap (and holds one row at least); pages follow each other by keyset
// without a row twice or left out.
func TestExportPagesAreCutByBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	big := `"` + strings.Repeat("p", 100<<10) + `"` // 100 KiB
	for i := range 10 {
		if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("m%d", i), Payload: []byte(big)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ids := popAck(t, b, "g", broker.AckDLQ); len(ids) != 10 {
		t.Fatalf("dead-lettered %v", ids)
	}
	page := func(after *broker.Cursor, limit int, maxBytes int64) (out []broker.DeadLetter) {
		t.Helper()
		if err := d.View(ctx, func(tx broker.Tx) error {
			var err error
			out, err = tx.ExportDeadLetters(ctx, broker.Filter{}, after, limit, maxBytes)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if n := len(page(nil, 500, 250<<10)); n != 3 {
		t.Fatalf("a page capped at 250 KiB of 100 KiB rows has %d rows, want 3 (the one that passes the cap ends it)", n)
	}
	if n := len(page(nil, 500, 1)); n != 1 {
		t.Fatalf("a page capped below one row has %d rows, want 1", n)
	}
	if n := len(page(nil, 4, 1<<30)); n != 4 {
		t.Fatalf("a page of limit 4 has %d rows", n)
	}
	seen := map[string]bool{}
	var after *broker.Cursor
	for {
		p := page(after, 500, 250<<10)
		if len(p) == 0 {
			break
		}
		for _, dl := range p {
			if seen[dl.TransactionID] || string(dl.Payload) != big {
				t.Fatalf("%s twice, or its payload changed", dl.TransactionID)
			}
			seen[dl.TransactionID] = true
		}
		last := p[len(p)-1]
		after = &broker.Cursor{At: last.FailedAt, ID: last.ID}
	}
	if len(seen) != 10 {
		t.Fatalf("the pages held %d dead letters, want 10", len(seen))
	}
}
