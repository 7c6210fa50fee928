package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

var benchSink int

// BenchmarkStatementLookup: what a statement costs before it runs. Jobs'
// text composed of fragments (all a SQLite statement costs), then its
// PostgreSQL statement looked up (composedStmt: the composed one
// kept); the same of a dead-letter list's keyset page (ExportStmt); and a
// constant statement's lookup in the catalog (stmt).
func BenchmarkStatementLookup(b *testing.B) {
	f, p := broker.JobFilter{State: "running", Queue: "q"}, broker.Page{Limit: 50, After: &broker.Cursor{ID: 9}}
	b.Run("JobsText", func(b *testing.B) {
		for b.Loop() {
			s := sqlcore.JobsStmt(f, p)
			benchSink += len(s.SQL()) + len(s.Args())
		}
	})
	b.Run("JobsPG", func(b *testing.B) {
		for b.Loop() {
			s := sqlcore.JobsStmt(f, p)
			st, err := composedStmt(&s)
			if err != nil {
				b.Fatal(err)
			}
			benchSink += len(st.text) + len(s.Args())
		}
	})
	ef, after := broker.Filter{QueueID: 1, GroupID: 2, Fingerprint: "fp"}, &broker.Cursor{At: time.UnixMilli(1_780_000_000_000), ID: 9}
	b.Run("DeadLettersText", func(b *testing.B) {
		for b.Loop() {
			s := sqlcore.ExportStmt(ef, after, 500)
			benchSink += len(s.SQL()) + len(s.Args())
		}
	})
	b.Run("DeadLettersPG", func(b *testing.B) {
		for b.Loop() {
			s := sqlcore.ExportStmt(ef, after, 500)
			st, err := composedStmt(&s)
			if err != nil {
				b.Fatal(err)
			}
			benchSink += len(st.text) + len(s.Args())
		}
	})
	key := ""
	for k := range catalog {
		if strings.HasSuffix(k, ` FROM queues WHERE name = ?`) {
			key = k
		}
	}
	b.Run("CataloguedPG", func(b *testing.B) {
		for b.Loop() {
			s, err := stmt(key)
			if err != nil {
				b.Fatal(err)
			}
			benchSink += len(s.text)
		}
	})
}
