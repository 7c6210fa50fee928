package sqlcore

import (
	"sync"
)

// PGGiven holds the PostgreSQL texts given by PGQuery: SQLite text ->
// PostgreSQL text. The PostgreSQL store's translator reads it.
var PGGiven sync.Map

// PGQuery returns sqlite, having noted pg as its PostgreSQL text
// (PGGiven): for a statement the PostgreSQL store's translator (postgres.translated)
// does not translate. Call it where the
// statement is defined (a package variable), so that both texts are
// read side by side.
func PGQuery(sqlite, pg string) string {
	PGGiven.Store(sqlite, pg)
	return sqlite
}
