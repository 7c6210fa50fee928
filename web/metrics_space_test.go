package web_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// TestMetricsSayTheDatabaseSize: /metrics has the database's size and
// free bytes, as the header says them, and whether it gives space back.
func TestMetricsSayTheDatabaseSize(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	items := make([]broker.PushItem, 500)
	for i := range items {
		items[i] = broker.PushItem{Queue: "q", Payload: []byte(`"` + strings.Repeat("x", 1000) + `"`)}
	}
	if _, err := s.broker.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.WriteDB().Exec("DELETE FROM messages"); err != nil {
		t.Fatal(err)
	}
	want, err := s.broker.Space(s.ctx)
	// SQLite's freed pages are on its free list, and given back; the
	// PostgreSQL store's room is vacuum's to reuse, inside its tables, and
	// none is counted as free or given back by Lazarus.
	gives := 1.0
	if s.db.Postgres() {
		gives = 0
		if err != nil || want.Bytes() <= 0 || want.FreePages != 0 {
			t.Fatalf("space %+v, %v", want, err)
		}
	} else if err != nil || want.FreePages < 100 {
		t.Fatalf("space %+v, %v", want, err)
	}
	fams := scrape(t, s, nil)
	for name, v := range map[string]float64{
		"lazarus_database_bytes":            float64(want.Bytes()),
		"lazarus_database_free_bytes":       float64(want.FreeBytes()),
		"lazarus_database_gives_space_back": gives,
	} {
		if got, ok := metricValue(t, fams, name, nil); !ok || got != v {
			t.Errorf("%s = %v (found %v), want %v", name, got, ok, v)
		}
	}
}

// TestMetricsSayTheSearchFile: on SQLite /metrics has the search file's
// size (with its log, as the file system has it), how many dead letters
// its indexes are behind (none once a search has waited for them) and
// whether its indexer fails; PostgreSQL, whose text indexes are in its
// tables, has none of them.
func TestMetricsSayTheSearchFile(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	for i := range 3 {
		s.fail("q", "", "", fmt.Sprintf("t-%d", i), `{"word":"findme"}`, "boom")
	}
	names := []string{"lazarus_search_file_bytes", "lazarus_search_index_behind", "lazarus_search_index_failing"}
	if s.db.Postgres() {
		fams := scrape(t, s, nil)
		for _, n := range names {
			if _, ok := fams[n]; ok {
				t.Errorf("PostgreSQL's /metrics has %s", n)
			}
		}
		return
	}
	// A search waits until the indexes hold every dead letter filed.
	if l := s.deadLetters("queue=q&q=findme"); len(l.Messages) != 3 {
		t.Fatalf("search: %d dead letters", len(l.Messages))
	}
	fams := scrape(t, s, nil)
	var size float64
	for _, f := range []string{s.db.Path() + "-search", s.db.Path() + "-search-wal"} {
		if fi, err := os.Stat(f); err == nil {
			size += float64(fi.Size())
		}
	}
	for name, v := range map[string]float64{names[0]: size, names[1]: 0, names[2]: 0} {
		if got, ok := metricValue(t, fams, name, nil); !ok || got != v {
			t.Errorf("%s = %v (found %v), want %v", name, got, ok, v)
		}
	}
	if size == 0 {
		t.Fatal("no search file beside the database")
	}
}
