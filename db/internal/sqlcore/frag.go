package sqlcore

import "strings"

// A filter's statement (the jobs', the audit's, the dead letters') has
// as many shapes as the filter has combinations: too many to write out
// one by one. It is composed of fragments instead, each a Frag: a named
// package constant, written in SQLite's dialect with bare ? parameters
// (a head, one WHERE condition, the ORDER BY and LIMIT), or a package
// variable set by PGFrag when its PostgreSQL text is written by hand.
// go generate ./db catalogues each fragment's PostgreSQL text beside the
// statements (db/postgres/catalog.go,
// db/postgres/testdata/statements.sql), and the PostgreSQL store
// builds a composed statement from those texts alone, its parameters
// numbered on from one fragment to the next: a composed text is read,
// fragment by fragment, in the tree, and one of a fragment the catalog
// lacks is refused as an uncatalogued statement is. A composed statement
// goes to the store's executor whole (Tx.QueryStmt, Tx.QueryRowStmt), its
// fragments with it.
//
// A Frag is only ever a constant (gensql refuses a conversion to Frag of
// a text made at run time): a stranger's value goes in as an argument.

// Frag is a fragment of a composed statement (Stmt), in SQLite's
// dialect, with bare ? parameters only.
type Frag string

// The fragments that join a statement's conditions (Stmt.Cond).
const (
	FragWhere Frag = ` WHERE `
	FragAnd   Frag = ` AND `
)

// PGFrag returns sqlite, having noted pg (its parameters bare ? too, as
// many) as its PostgreSQL text (PGGiven): for a fragment the
// PostgreSQL store's translator does not translate. Call it where the
// fragment is defined (a package variable).
func PGFrag(sqlite, pg Frag) Frag {
	PGGiven.Store(string(sqlite), string(pg))
	return sqlite
}

// Stmt is a statement being composed of fragments, and its arguments.
// The zero Stmt is empty.
type Stmt struct {
	parts []Frag
	args  []any
	conds int
	// text: the statement reads the full-text indexes (ReadsText).
	text bool
}

// ReadsText marks the statement as one that reads the full-text
// indexes: it runs once they hold every dead letter committed before
// (Dialect.AwaitTextIndex).
func (s *Stmt) ReadsText() { s.text = true }

// Add appends f and its arguments.
func (s *Stmt) Add(f Frag, args ...any) {
	if s.parts == nil {
		// Room for a filter's usual statement, grown once at most.
		s.parts = make([]Frag, 0, 16)
		s.args = make([]any, 0, 8)
	}
	s.parts = append(s.parts, f)
	s.args = append(s.args, args...)
}

// Cond appends a condition: after FragWhere when it is the first, else
// after FragAnd.
func (s *Stmt) Cond(f Frag, args ...any) {
	if s.conds == 0 {
		s.Add(FragWhere)
	} else {
		s.Add(FragAnd)
	}
	s.conds++
	s.Add(f, args...)
}

// Conds is how many conditions Cond appended.
func (s *Stmt) Conds() int { return s.conds }

// Args are the statement's arguments, in the order of its parameters.
func (s *Stmt) Args() []any { return s.args }

// Parts are the statement's fragments, in order.
func (s *Stmt) Parts() []Frag { return s.parts }

// SQL is the statement's text (its fragments one after the other), in
// SQLite's dialect: the one SQLite's executors run (Executor.QueryStmt).
func (s *Stmt) SQL() string {
	n := 0
	for _, p := range s.parts {
		n += len(p)
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range s.parts {
		b.WriteString(string(p))
	}
	return b.String()
}
