package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// TestPGComposedCacheIsBounded: the composed statements kept are at most
// the cache's cap however many shapes the filters take (an API caller
// picks them); the one used longest ago goes, and runs again when asked
// for (composed anew), never refused.
func TestPGComposedCacheIsBounded(t *testing.T) {
	const limit = 4
	kept := composed
	composed = newComposedCache(limit)
	defer func() { composed = kept }()
	d := openStore(t, pgtest.Database(t, "db", Prepare))
	ctx := context.Background()
	var filters []broker.JobFilter
	seen := map[string]bool{}
	each([]int{2, 2, 2}, func(c []int) {
		f := broker.JobFilter{State: pick(c[0], "", "running"), Queue: pick(c[1], "", "q"), Kind: pick(c[2], "", "replay")}
		s := sqlcore.JobsStmt(f, broker.Page{Limit: 5})
		if !seen[s.SQL()] {
			seen[s.SQL()] = true
			filters = append(filters, f)
		}
	})
	if len(filters) <= limit {
		t.Fatalf("%d shapes of Jobs' statement: too few to fill the cache", len(filters))
	}
	jobs := func(f broker.JobFilter) error {
		return d.View(ctx, func(tx broker.Tx) error {
			_, err := tx.Jobs(ctx, f, broker.Page{Limit: 5})
			return err
		})
	}
	for _, f := range filters {
		if err := jobs(f); err != nil {
			t.Fatalf("Jobs %+v: %v", f, err)
		}
	}
	held, evicted := composed.stats()
	if held != limit || evicted != int64(len(filters)-limit) {
		t.Fatalf("after %d shapes: %d held, %d evicted; want %d held, %d evicted", len(filters), held, evicted, limit, len(filters)-limit)
	}
	// The first shape was evicted: it runs again.
	if err := jobs(filters[0]); err != nil {
		t.Fatalf("Jobs %+v once evicted: %v", filters[0], err)
	}
	if held, evicted2 := composed.stats(); held != limit || evicted2 != evicted+1 {
		t.Fatalf("after the first again: %d held, %d evicted; want %d, %d", held, evicted2, limit, evicted+1)
	}
}

// TestPGATestsTextDoesNotOpenItToTheStore: a text the catalog lacks that
// a test ran directly (let through: a test's own) is still refused when
// the store's code runs it, whatever ran first.
func TestPGATestsTextDoesNotOpenItToTheStore(t *testing.T) {
	key := ""
	for k := range catalog {
		// QueueByName: the queue's columns (whatever their tail) by name.
		if strings.HasPrefix(k, "SELECT id, name, lease_time,") && strings.HasSuffix(k, " FROM queues WHERE name = ?") {
			if key != "" {
				t.Fatal("two statements of QueueByName's shape in the catalog")
			}
			key = k
		}
	}
	if key == "" {
		t.Fatal("QueueByName's statement is not in the catalog")
	}
	st := catalog[key]
	delete(catalog, key)
	defer func() {
		catalog[key] = st
		letThrough.Delete(key)
	}()
	d := openStore(t, pgtest.Database(t, "db", Prepare))
	ctx := context.Background()
	err := d.View(ctx, func(tx broker.Tx) error {
		rows, err := tx.(*sqlcore.Tx).Query(ctx, key, "q")
		if err != nil {
			return err
		}
		return rows.Close()
	})
	if err != nil {
		t.Fatalf("the test's own text: %v", err)
	}
	err = d.View(ctx, func(tx broker.Tx) error {
		_, err := tx.QueueByName(ctx, "q")
		return err
	})
	if !errors.Is(err, errNotCatalogued) || !strings.Contains(err.Error(), "Tx.QueueByName") {
		t.Fatalf("QueueByName without its catalogued statement, after a test ran it: %v, want errNotCatalogued naming Tx.QueueByName", err)
	}
}
