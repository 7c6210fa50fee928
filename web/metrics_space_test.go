package web_test

import (
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
