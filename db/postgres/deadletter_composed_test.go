package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// deadLetterFilters are dead-letter filters that, together, take every
// branch of the conditions' composition (sqlcore.AddWhere): each way a
// column is written (as is, or +col out of SQLite's index choice: by a
// transactionId, an error group, a consumer version, the full-text
// index), the cap both ways, free text capped, in a window and below a
// floor, and each field filter's operator with each type of value.
func deadLetterFilters(queue, group, partition int64) []broker.Filter {
	at := time.UnixMilli(1_780_000_000_000)
	cols := broker.Filter{QueueID: queue, GroupID: group, PartitionID: partition, Fingerprint: "fp", From: at.Add(-time.Hour), To: at.Add(time.Hour),
		ErrorContains: "declined", MaxID: 1 << 40, MaxFailedAt: at.Add(time.Hour)}
	with := func(f broker.Filter, change func(*broker.Filter)) broker.Filter {
		change(&f)
		return f
	}
	out := []broker.Filter{
		{},
		{QueueID: queue, GroupID: group},
		{QueueID: queue, PartitionID: partition},
		with(cols, func(f *broker.Filter) { f.Cap = broker.CapAt }),
		with(cols, func(f *broker.Filter) { f.Cap = broker.CapBelow }),
		with(cols, func(f *broker.Filter) { f.TransactionID = "a" }),
		with(cols, func(f *broker.Filter) { f.ErrorContains, f.MaxID = "", 0 }),
		// A consumer version: by its index, or +col beside an error group.
		{QueueID: queue, GroupID: group, PartitionID: partition, ConsumerVersion: "v1", MaxID: 1 << 40, MaxFailedAt: at},
		with(cols, func(f *broker.Filter) { f.ConsumerVersion = "v1" }),
		with(cols, func(f *broker.Filter) { f.Text = "visa" }),
		with(cols, func(f *broker.Filter) { f.Text, f.TransactionID = "visa", "a" }),
		{QueueID: queue, Text: "visa", MatchCap: 5},
		{QueueID: queue, Text: "visa", Window: &broker.MatchWindow{Above: &broker.Cursor{At: at, ID: 9}, MinID: 1, MaxID: 1 << 40, MinSeq: 1, MaxSeq: 1 << 40}},
		{QueueID: queue, Text: "visa", Window: &broker.MatchWindow{MinID: 1, MaxID: 1 << 40, MinSeq: 1, MaxSeq: 1 << 40}},
		{QueueID: queue, Text: "visa", Floor: &broker.Cursor{At: at.Add(-time.Hour), ID: 1}},
		// Error contains with the words it bounds (broker.ErrorWords),
		// whole or a prefix, alone, in an error group, in a window.
		with(cols, func(f *broker.Filter) { f.ErrorWords = `"declined"` }),
		{QueueID: queue, GroupID: group, ErrorContains: "connection refused", ErrorWords: `"refused*"`, MatchCap: 5},
		{QueueID: queue, ErrorContains: "card declined", ErrorWords: `"declined*"`, Window: &broker.MatchWindow{MinID: 1, MaxID: 1 << 40, MinSeq: 1, MaxSeq: 1 << 40}},
	}
	for _, op := range []string{"=", "!=", ">", ">=", "<", "<=", "contains", "~"} {
		for _, v := range []any{"visa", int64(12), 12.5, true, false, nil} {
			if _, ordering := map[string]bool{">": true, ">=": true, "<": true, "<=": true}[op]; ordering && (v == nil || v == true || v == false) {
				continue // the broker's parser orders strings and numbers only
			}
			ff := broker.FieldFilter{Path: `$."brand"`, Op: op, Value: v}
			out = append(out, broker.Filter{QueueID: queue, Fields: []broker.FieldFilter{ff}})
		}
	}
	words := broker.FieldFilter{Path: `$."brand"`, Op: "=", Value: "visa", Words: `"visa"`}
	out = append(out,
		broker.Filter{QueueID: queue, Fields: []broker.FieldFilter{words, {Path: `$."amount"`, Op: ">", Value: int64(10)}}},
		with(cols, func(f *broker.Filter) { f.Fields = []broker.FieldFilter{words} }),
		broker.Filter{QueueID: queue, Fields: []broker.FieldFilter{words}, Window: &broker.MatchWindow{MinID: 1, MaxID: 1 << 40, MinSeq: 1, MaxSeq: 1 << 40}},
		// A queue scope's queues (every queue's lists, a scoped reader).
		broker.Filter{QueueIDs: []int64{queue, queue + 1}},
		broker.Filter{QueueIDs: []int64{}, Text: "visa"},
	)
	return out
}

// TestPGComposedStatementsAreCatalogued: every dead-letter method run on
// a migrated PostgreSQL with each of deadLetterFilters composes its
// statement of catalogued fragments and runs it; then every text
// composed in this test (composed, made large enough for all) is made of catalogued
// fragments, has as many parameters as SQLite's, is what the translator
// makes of the whole where no fragment's text was written by hand, and
// PREPAREs; and every catalogued fragment is in one of them.
func TestPGComposedStatementsAreCatalogued(t *testing.T) {
	ctx := context.Background()
	kept := composed
	composed = newComposedCache(1 << 20)
	defer func() { composed = kept }()
	dsn := pgtest.Database(t, "db", Prepare)
	d := openStore(t, dsn)
	b := broker.New(broker.Config{Store: d})
	var items []broker.PushItem
	for i := range 4 {
		items = append(items, broker.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprint(i), Payload: []byte(`{"brand":"visa","amount":12}`)})
	}
	fileDeadLetters(t, b, items, func(broker.Delivery) string { return "card declined by visa" })
	var queue, group, partition int64
	err := d.View(ctx, func(tx broker.Tx) error {
		dls, err := tx.(*sqlcore.Tx).ListDeadLetters(ctx, broker.Filter{}, broker.Page{Limit: 1})
		if err == nil && len(dls) == 1 {
			queue, group, partition = dls[0].QueueID, dls[0].GroupID, dls[0].PartitionID
		}
		return err
	})
	if err != nil || queue == 0 {
		t.Fatalf("the dead letters: %v", err)
	}
	at := time.UnixMilli(1_780_000_000_000)
	for i, f := range deadLetterFilters(queue, group, partition) {
		err := d.View(ctx, func(btx broker.Tx) error {
			tx := btx.(*sqlcore.Tx)
			columnsOnly := f.Text == "" && f.ErrorWords == "" && len(f.Fields) == 0 && f.Floor == nil && f.Window == nil
			run := []func() error{
				func() error { _, err := tx.ListDeadLetters(ctx, f, broker.Page{Limit: 10}); return err },
				func() error { _, err := tx.ListDeadLetters(ctx, f, broker.Page{Limit: 10, Offset: 5}); return err },
				func() error {
					_, err := tx.ListDeadLetters(ctx, f, broker.Page{Limit: 10, After: &broker.Cursor{At: at, ID: 9}})
					return err
				},
				func() error { _, err := tx.CountDeadLetters(ctx, f); return err },
				func() error { _, err := tx.CountDeadLettersUpTo(ctx, f, 100); return err },
				func() error { _, err := tx.CountDeadLetterMessages(ctx, f); return err },
				func() error { _, _, err := tx.NewestFailure(ctx, f); return err },
				func() error { _, err := tx.DeadLetterKeys(ctx, f, 10); return err },
				func() error { _, err := tx.DeadLetterKeys(ctx, f, 1); return err },
				func() error {
					_, err := tx.DrawDeadLetterKeys(ctx, broker.DrawKeys{Filter: f, Ranks: []int64{0, 3}})
					return err
				},
				func() error {
					_, err := tx.CountDeadLettersAbove(ctx, f, broker.Bound{FailedAt: at, ID: 1}, 0)
					return err
				},
				func() error {
					_, err := tx.CountDeadLettersAbove(ctx, f, broker.Bound{FailedAt: at, ID: 1}, 3)
					return err
				},
				func() error {
					// Page by page, a row a page: every cursor's statement.
					var cur *broker.ExportCursor
					for range 10 {
						out, next, err := tx.ExportDeadLetters(ctx, f, cur, 1, 1<<20)
						if err != nil || next == nil || len(out) == 0 {
							return err
						}
						cur = next
					}
					return nil
				},
			}
			if columnsOnly {
				run = append(run,
					func() error { _, _, err := tx.DeadLetterPosition(ctx, f, nil, 2); return err },
					func() error { _, _, err := tx.DeadLetterPosition(ctx, f, &broker.Cursor{At: at, ID: 9}, 2); return err },
					func() error { _, err := tx.DeadLetterWindow(ctx, f, nil, nil); return err },
					func() error {
						_, err := tx.DeadLetterWindow(ctx, f, &broker.Cursor{At: at, ID: 9}, &broker.Cursor{At: at.Add(-time.Hour), ID: 1})
						return err
					},
				)
			}
			for j, fn := range run {
				if err := fn(); err != nil {
					return fmt.Errorf("call %d: %w", j, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("filter %d %+v: %v", i, f, err)
			if errors.Is(err, errNotCatalogued) {
				t.FailNow()
			}
		}
	}
	// An index's matches below a docid (IndexStmt's below, which
	// DeadLetterKeys leaves at 0).
	for _, ph := range sqlcore.ExportPhases(broker.Filter{QueueID: queue, Text: "visa"}) {
		s := sqlcore.IndexStmt(ph, 5, 10)
		if _, err := composedStmt(&s); err != nil {
			t.Fatal(err)
		}
	}
	// Jobs' and the audit's, every combination (composedFamilies).
	for _, fam := range composedFamilies {
		for _, s := range fam.stmts() {
			if _, err := composedStmt(&s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, evicted := composed.stats(); evicted > 0 {
		t.Fatalf("%d composed statements evicted: the cache of this test is too small", evicted)
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	used := map[string]bool{}
	n := 0
	composed.each(func(q string, parts []sqlcore.Frag) {
		pg, err := compose(parts)
		if err != nil {
			t.Errorf("%v\n%s", err, q)
			return
		}
		n++
		hand := false
		for _, p := range parts {
			used[string(p)] = true
			_, given := sqlcore.PGGiven.Load(string(p))
			hand = hand || given
		}
		m, _ := mask(q)
		if got, want := paramCount(pg.text), strings.Count(m, "?"); got != want {
			t.Errorf("%d parameters on PostgreSQL, %d on SQLite\n%s", got, want, pg.text)
		}
		if whole := translated(q); !hand && whole != pg.text {
			t.Errorf("composed\n%s\nbut the whole translates to\n%s", pg.text, whole)
		}
		if _, err := conn.Prepare(ctx, "", pg.text); err != nil {
			t.Errorf("%v\n%s", err, pg.text)
		}
	})
	t.Logf("%d composed statements checked", n)
	for text := range fragments {
		if !used[text] {
			t.Errorf("fragment %.80q is in no statement composed here: add a filter that uses it", text)
		}
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
