package sqlite

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// An export's page query walks an index in order, on the first page and
// the next: with no full-text condition the list's (a dead_letters
// index, no scan of the dead letters, no sort: a temp B-tree would read
// every match before the first row); with free text or a field filter's
// words the full-text index's, in docid order (each page would else
// match and sort the whole search again: an export of n matches cost n²).
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
			query, args := stmtText(sqlcore.ExportStmt(f, after, 500))
			text := queryPlan(t, d, query, args...)
			if strings.Contains(text, "SCAN d\n") || strings.HasSuffix(text, "SCAN d") || strings.Contains(text, "SCAN dead_letters") ||
				strings.Contains(text, "TEMP B-TREE") || !strings.Contains(text, "USING INDEX dead_letters_") && !strings.Contains(text, "USING COVERING INDEX dead_letters_") {
				t.Errorf("%s (after %v): plan\n%s\nwants a dead_letters index in order, no scan, no sort", name, after, text)
			}
		}
	}
	// Free text and a field filter's words: the full-text index read a
	// block at a time in docid order (INDEX 3:DESC, or with the block's
	// docid bound 3 | docid <=), no sort; a page's rows looked up by the
	// block's docids (id or seq) in their order, no match of the whole
	// search materialized (the sort is of the page's rows only). A bulk
	// action's chunk walks the index joined to the rows, no sort.
	field := func(s string) broker.FieldFilter {
		ff, err := broker.ParseFieldFilter(s)
		if err != nil {
			t.Fatal(err)
		}
		return ff
	}
	for name, f := range map[string]broker.Filter{
		"Text":      {QueueID: 1, Text: `"timeout"`},
		"TextAll":   {Text: `"timeout"`, MaxID: 99},
		"Field":     {QueueID: 1, GroupID: 2, Fields: []broker.FieldFilter{field("orderId = ord_1")}},
		"FieldMore": {QueueID: 1, Fields: []broker.FieldFilter{field("brand contains visa"), field("amount > 100")}},
		"TextGroup": {QueueID: 1, Fingerprint: "boom", Text: `"timeout"`},
		"TextTx":    {QueueID: 1, TransactionID: "t", Text: `"timeout"`},
	} {
		for i, ph := range sqlcore.ExportPhases(f) {
			join := "SEARCH d USING INTEGER PRIMARY KEY (rowid=?)"
			if ph.Payloads() {
				join = "SEARCH d USING INDEX sqlite_autoindex_dead_letters_1 (seq=?"
			}
			for _, below := range []int64{0, 42} {
				walk := "VIRTUAL TABLE INDEX 3:DESC"
				if below > 0 {
					walk = "VIRTUAL TABLE INDEX 262147:DESC"
				}
				query, args := sqlcore.IndexBlockQuery(ph, below)
				if text := queryPlan(t, d, query, args...); !strings.HasPrefix(text, "SCAN dead_letter_") || !strings.Contains(text, walk) || strings.Contains(text, "TEMP B-TREE") {
					t.Errorf("%s phase %d (below %d): block plan\n%s\nwants the index in docid order (%s), no sort", name, i, below, text, walk)
				}
				query, args = stmtText(sqlcore.IndexStmt(ph, below, 500))
				if text := queryPlan(t, d, query, args...); !strings.HasPrefix(text, "SCAN t "+walk) || !strings.Contains(text, join) || strings.Contains(text, "TEMP B-TREE") || strings.Contains(text, "LIST SUBQUERY") {
					t.Errorf("%s phase %d (below %d): keys plan\n%s\nwants the index in docid order (%s), then %s, no sort", name, i, below, text, walk, join)
				}
			}
			query, args := blockQuery(ph, []int64{9, 8, 7}, 500)
			if text := queryPlan(t, d, query, args...); !strings.HasPrefix(text, "SCAN k VIRTUAL TABLE") || !strings.Contains(text, join) || strings.Contains(text, "LIST SUBQUERY") || strings.Contains(text, "SCAN d") {
				t.Errorf("%s phase %d: page plan\n%s\nwants the block's docids, then %s", name, i, text, join)
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
			out, _, err = tx.ExportDeadLetters(ctx, broker.Filter{}, &broker.ExportCursor{After: after}, limit, maxBytes)
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

// An export driven by the full-text index hands over every dead letter
// the filter selects, once, whatever the page size or byte cap: free
// text in both indexes (a row matching by its error text and by its
// payload comes once), a field filter's words, pages cut between a
// message's dead letters in two groups, other queues left out; the
// index read in many small blocks, and pages that read their blocks'
// worth without a row (empty, not the last). (Not parallel: it makes the
// blocks small.)
func TestExportByIndexIsComplete(t *testing.T) {
	defer func(b, r int) { sqlcore.ExportBlock, sqlcore.ExportBlockReads = b, r }(sqlcore.ExportBlock, sqlcore.ExportBlockReads)
	sqlcore.ExportBlock, sqlcore.ExportBlockReads = 3, 2
	ctx := context.Background()
	d, b := openBroker(t)
	for _, queue := range []string{"q", "r"} {
		var items []broker.PushItem
		for i := range 9 {
			p := fmt.Sprintf(`{"n":%d}`, i)
			if i%2 == 1 {
				p = fmt.Sprintf(`{"n":%d,"w":"alpha"}`, i)
			}
			items = append(items, broker.PushItem{Queue: queue, Partition: "p", TransactionID: fmt.Sprintf("%s-%d", queue, i), Payload: []byte(p)})
		}
		if _, err := b.Push(ctx, items); err != nil {
			t.Fatal(err)
		}
		for _, g := range []string{"g", "h"} {
			res, err := b.Pop(ctx, broker.PopRequest{Queue: queue, Group: g, Batch: 10})
			if err != nil || len(res.Messages) != 9 {
				t.Fatalf("pop = %+v, %v", res, err)
			}
			for i, m := range res.Messages {
				e := "boom"
				if i%3 == 0 {
					e = "alpha down"
				}
				if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: e, Group: g}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, q := range []broker.DLQQuery{
		{Queue: "q", Text: "alpha"},
		{Text: "alpha"},
		{Queue: "q", Fields: []string{"w = alpha"}},
		{Queue: "q", Group: "h", Fields: []string{"w contains alpha", "n > 2"}},
		{Queue: "q", Text: "down", Fields: []string{"n >= 3"}},
	} {
		q.Limit = 1000
		want := map[string]bool{}
		page, err := b.DeadLetters(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, dl := range page.Items {
			want[dl.TransactionID+"/"+dl.Group] = true
		}
		if len(want) == 0 {
			t.Fatalf("%+v selects nothing", q)
		}
		var f broker.Filter
		if err := d.View(ctx, func(tx broker.Tx) error {
			f = filterOf(t, ctx, tx, q)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// A bulk action's chunks by the same index: every key, once, up
		// to the limit.
		wantIDs := map[int64]bool{}
		for _, dl := range page.Items {
			wantIDs[dl.ID] = true
		}
		for _, limit := range []int{1, 3, 1000} {
			var keys []broker.DeadLetterKey
			if err := d.View(ctx, func(tx broker.Tx) (err error) {
				keys, err = tx.DeadLetterKeys(ctx, f, limit)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			ids := map[int64]bool{}
			for _, k := range keys {
				if !wantIDs[k.ID] || ids[k.ID] {
					t.Errorf("%+v: keys by %d: %d not selected or twice", q, limit, k.ID)
				}
				ids[k.ID] = true
			}
			if len(keys) != min(limit, len(wantIDs)) {
				t.Errorf("%+v: %d keys by %d, want %d", q, len(keys), limit, min(limit, len(wantIDs)))
			}
		}
		for _, limit := range []int{1, 2, 3, 500} {
			for _, maxBytes := range []int64{1, 1 << 20} {
				got := map[string]bool{}
				var after *broker.ExportCursor
				for pages := 0; ; pages++ {
					if pages > 200 {
						t.Fatalf("%+v by %d: no end", q, limit)
					}
					var out []broker.DeadLetter
					var next *broker.ExportCursor
					if err := d.View(ctx, func(tx broker.Tx) (err error) {
						out, next, err = tx.ExportDeadLetters(ctx, f, after, limit, maxBytes)
						return err
					}); err != nil {
						t.Fatal(err)
					}
					if len(out) > max(limit, 2) {
						t.Fatalf("%+v by %d: a page of %d", q, limit, len(out))
					}
					for _, dl := range out {
						k := dl.TransactionID + "/" + dl.Group
						if got[k] {
							t.Fatalf("%+v by %d, %d bytes: %s twice", q, limit, maxBytes, k)
						}
						got[k] = true
					}
					if next == nil {
						break
					}
					after = next
				}
				if !maps.Equal(got, want) {
					t.Errorf("%+v by %d, %d bytes: exported %v, want %v", q, limit, maxBytes, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
				}
			}
		}
	}
}

// filterOf is the store's filter of q (the broker's resolution, by hand).
func filterOf(t *testing.T, ctx context.Context, tx broker.Tx, q broker.DLQQuery) broker.Filter {
	t.Helper()
	var f broker.Filter
	if q.Queue != "" {
		qu, err := tx.QueueByName(ctx, q.Queue)
		if err != nil {
			t.Fatal(err)
		}
		f.QueueID = qu.ID
	}
	if q.Group != "" {
		gid, err := tx.GroupID(ctx, q.Group, false)
		if err != nil {
			t.Fatal(err)
		}
		f.GroupID = gid
	}
	if q.Text != "" {
		f.Text = broker.TextMatch(q.Text, true)
	}
	for _, s := range q.Fields {
		ff, err := broker.ParseFieldFilter(s)
		if err != nil {
			t.Fatal(err)
		}
		f.Fields = append(f.Fields, ff)
	}
	return f
}
