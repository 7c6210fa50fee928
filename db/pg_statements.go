package db

import (
	"fmt"
	"os"
	"sync"
)

// The PostgreSQL statements. db's statements are written in SQLite's
// dialect (tx_*.go), and the PostgreSQL store runs the text the catalog
// gives for each (pgCatalog, pg_catalog.go), generated from them and
// committed: what runs on PostgreSQL is read, and reviewed, in the tree.
// testdata/pg_statements.sql is the same catalog for a reader: each
// statement's SQLite text beside its PostgreSQL one, marked translated
// or hand-written (docs/postgres.md, "The PostgreSQL statements").
//
// To add or change a statement: write it in SQLite's dialect where it
// runs, as a constant (or a package variable set by pgQuery or
// pgInsert); when the translator (pg_sql.go) does not make the right
// PostgreSQL text of it, give that text beside it with pgQuery(sqlite,
// pg). Then run go generate ./db and review the diff of
// testdata/pg_statements.sql. TestPGStatementsFile fails while the
// catalog is stale, TestPGStatementsPrepare prepares every PostgreSQL
// text on a migrated database.
//
// The generator is a test of this package (pg_statements_test.go), not
// a program, because the translator is unexported here; it finds the
// statements with db/internal/gensql (go/ast and go/types).
//
//go:generate go test -run ^TestPGStatementsFile$ -update .

// pgStmt is the catalogued PostgreSQL statement of query (a SQLite text).
//
// A text the catalog lacks (a statement built at run time that is not
// yet assembled from catalogued parts) is translated as it first runs,
// and noted (pgMissed): LAZARUS_PG_MISSES names a file each such text
// is appended to, once a process, for the tests that look for them.
func pgStmt(query string) *pgStatement {
	if s, ok := pgCatalog[query]; ok {
		return s
	}
	if _, seen := pgMissed.LoadOrStore(query, true); !seen {
		noteMiss(query)
	}
	return pgTranslate(query)
}

// pgMissed holds the texts run on PostgreSQL that the catalog lacks.
var pgMissed sync.Map

var pgMissesMu sync.Mutex

// noteMiss appends query to the file LAZARUS_PG_MISSES names, if any.
func noteMiss(query string) {
	path := os.Getenv("LAZARUS_PG_MISSES")
	if path == "" {
		return
	}
	pgMissesMu.Lock()
	defer pgMissesMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\n\x00\n", query)
}
