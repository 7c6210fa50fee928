package postgres

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The PostgreSQL statements. The statements of sqlcore.Tx and of the
// dialects are written in SQLite's dialect (../internal/sqlcore/tx_*.go,
// pg_*.go here, ../sqlite/sqlite_*.go), and the PostgreSQL store runs the text the
// catalog gives for each (catalog, catalog.go), generated from them
// and committed: what runs on PostgreSQL is read, and reviewed, in the
// tree. testdata/statements.sql is the same catalog for a reader:
// each statement's SQLite text beside its PostgreSQL one, marked
// translated or hand-written (docs/postgres.md, "The PostgreSQL
// statements").
//
// To add or change a statement: write it in SQLite's dialect where it
// runs, as a constant (or a package variable set by sqlcore.PGQuery or
// sqlcore.PGInsert); when the translator (translate.go) does not make the
// right PostgreSQL text of it, give that text beside it with
// sqlcore.PGQuery(sqlite, pg). Then run go generate ./db and review the diff of
// testdata/statements.sql. TestPGStatementsFile fails while the
// catalog is stale, TestPGStatementsPrepare prepares every PostgreSQL
// text on a migrated database.
//
// A filter's statement is composed of fragments (sqlcore.Frag,
// sqlcore.Stmt): the catalog holds each fragment's PostgreSQL text
// (fragments), and stmt builds a composed statement from them
// (compose); TestPGComposedStatementsPrepare prepares every statement
// each filter composes.
//
// The generator is a test of this package (statements_test.go), not
// a program, because the translator is unexported here; it finds the
// statements with db/internal/gensql (go/ast and go/types).
//
//go:generate go test -run ^TestPGStatementsFile$ -update .

// stmt is the catalogued PostgreSQL statement of query (a SQLite text).
//
// A text the catalog lacks is an error (errNotCatalogued), which fails
// the statement and its transaction: a statement added without go
// generate fails the first test that runs it on PostgreSQL, never runs
// untranslated. Two kinds of callers are let through: the functions the
// catalog lists as building statements it cannot hold yet
// (builtAtRunTime, the end of testdata/statements.sql), whose texts
// are translated as they first run (translate.go), and tests (a caller in a
// _test.go file), whose texts are their own. Each text let through is
// noted once a process: LAZARUS_PG_MISSES names a file it is appended
// to, for a test run to count them. Whether a caller may run a text the
// catalog lacks is asked on every run of it, never read from what an
// earlier caller was let through: a test that ran a text first does not
// open it to the code under test.
//
// A statement composed of fragments (sqlcore.Stmt) comes with its
// fragments instead: composedStmt.
func stmt(query string) (*statement, error) {
	if s, ok := catalog[query]; ok {
		return s, nil
	}
	by, ok := uncatalogued()
	if !ok {
		return nil, fmt.Errorf("%w: %.80q, run by %s", errNotCatalogued, query, by)
	}
	if s, ok := letThrough.Load(query); ok {
		return s.(*statement), nil
	}
	s := translateStatement(query)
	if _, seen := letThrough.LoadOrStore(query, s); !seen {
		noteMiss(query, by)
	}
	return s, nil
}

// composedStmt is the PostgreSQL statement composed of s's fragments
// (compose), kept in composed by s's SQLite text. A fragment the
// catalog lacks is an error (errNotCatalogued) naming the function that
// composed it.
func composedStmt(s *sqlcore.Stmt) (*statement, error) {
	q := s.SQL()
	if st, ok := composed.get(q); ok {
		return st, nil
	}
	st, err := compose(s.Parts())
	if err != nil {
		by, _ := uncatalogued()
		return nil, fmt.Errorf("%w, run by %s", err, by)
	}
	composed.put(q, s.Parts(), st)
	return st, nil
}

// composed holds the composed statements composedStmt has built.
var composed = newComposedCache(composedCap)

// composedCap is how many composed statements composed keeps: the
// filters' shapes a dashboard uses (a few dozen; every combination of
// every filter is some thousands). One beyond it evicts the one used
// longest ago, to be composed again when it next runs: a filter an API
// caller shapes at will costs memory up to the cap, never more, and is
// never refused for it.
const composedCap = 1024

// composedCache is a least-recently-used cache of composed statements
// by their SQLite text, with the fragments of each.
type composedCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element // of *composedEntry
	order   list.List                // most recently used first
	evicted int64
}

type composedEntry struct {
	text  string
	parts []sqlcore.Frag
	st    *statement
}

func newComposedCache(max int) *composedCache {
	return &composedCache{max: max, entries: map[string]*list.Element{}}
}

func (c *composedCache) get(text string) (*statement, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[text]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*composedEntry).st, true
}

func (c *composedCache) put(text string, parts []sqlcore.Frag, st *statement) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[text]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.entries[text] = c.order.PushFront(&composedEntry{text: text, parts: slices.Clone(parts), st: st})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*composedEntry).text)
		c.evicted++
	}
}

// stats are how many statements c holds and how many it has evicted.
func (c *composedCache) stats() (held int, evicted int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.evicted
}

// each calls fn with every statement c holds, its SQLite text and
// fragments (for tests).
func (c *composedCache) each(fn func(text string, parts []sqlcore.Frag)) {
	c.mu.Lock()
	var all []*composedEntry
	for e := c.order.Front(); e != nil; e = e.Next() {
		all = append(all, e.Value.(*composedEntry))
	}
	c.mu.Unlock()
	for _, e := range all {
		fn(e.text, e.parts)
	}
}

// clear empties c.
func (c *composedCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.order.Init()
}

// compose is the PostgreSQL statement of a text composed of parts
// (sqlcore.Stmt): each part's catalogued text (fragments), its
// parameters numbered on from the last part's. A part the catalog lacks
// is an error (errNotCatalogued).
func compose(parts []sqlcore.Frag) (*statement, error) {
	var b strings.Builder
	s := &statement{}
	n := 0
	for _, p := range parts {
		f, ok := fragments[string(p)]
		if !ok {
			return nil, fmt.Errorf("%w: fragment %.80q", errNotCatalogued, p)
		}
		k := renumber(&b, f.text, n)
		n += k
		s.stores = s.stores || f.stores
	}
	s.text = b.String()
	return s, nil
}

// renumber writes text (a fragment's PostgreSQL text, its parameters
// $1 to $k) to b with each parameter $i written $(i+from), and returns
// k. Quotes and comments are copied as they are (mask).
func renumber(b *strings.Builder, text string, from int) int {
	m, kept := mask(text)
	k := 0
	var o strings.Builder
	for i := 0; i < len(m); i++ {
		j := i + 1
		for m[i] == '$' && j < len(m) && m[j] >= '0' && m[j] <= '9' {
			j++
		}
		if j == i+1 {
			o.WriteByte(m[i])
			continue
		}
		n, _ := strconv.Atoi(m[i+1 : j])
		k = max(k, n)
		o.WriteByte('$')
		o.WriteString(strconv.Itoa(n + from))
		i = j - 1
	}
	b.WriteString(unmask(o.String(), kept))
	return k
}

// paramCount is the highest parameter ($n) of a PostgreSQL text.
func paramCount(text string) int {
	var b strings.Builder
	return renumber(&b, text, 0)
}

// errNotCatalogued is the error of a statement the PostgreSQL catalog
// lacks.
var errNotCatalogued = errors.New("db: statement not in the PostgreSQL catalog (run go generate ./db)")

// letThrough holds the texts stmt let through, translated.
var letThrough sync.Map

// uncatalogued reports the function of this package or of sqlcore that
// runs a text the catalog lacks (the first of the stack but the
// wrappers), and whether it may: it is in a test file of this package,
// sqlcore or db (a test's own text), or it or one of the functions of
// this package or sqlcore that called it is one of builtAtRunTime.
func uncatalogued() (string, bool) {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	by := ""
	for {
		f, more := frames.Next()
		name, ours := funcName(f.Function)
		if test := strings.HasSuffix(f.File, "_test.go"); test || !ours {
			// A test's own text (db's tests reach this store through
			// db.DB), or not ours.
			return by, by == "" && (ours || test && strings.HasPrefix(f.Function, chooserPackage+"."))
		}
		if builtAtRunTime[name] {
			return name, true
		}
		if by == "" && !wrappers[name] {
			by = name
		}
		if !more {
			return by, false
		}
	}
}

// funcName is the name gensql gives a function of this package or sqlcore
// (Tx.ListDeadLetters, dialect.PushCopies, scanKeys) from the
// runtime's (…/sqlcore.(*Tx).ListDeadLetters.func1), and whether it is
// one of theirs.
func funcName(function string) (string, bool) {
	name, ok := strings.CutPrefix(function, corePackage+".")
	if !ok {
		name, ok = strings.CutPrefix(function, thisPackage+".")
	}
	if !ok {
		return "", false
	}
	name = strings.NewReplacer("(*", "", ")", "").Replace(name)
	if i := strings.Index(name, ".func"); i > 0 {
		name = name[:i]
	}
	return name, true
}

// thisPackage and corePackage are the import paths of db/postgres and
// db/internal/sqlcore, as the runtime names their functions.
var (
	thisPackage = reflect.TypeFor[Store]().PkgPath()
	corePackage = reflect.TypeFor[sqlcore.Tx]().PkgPath()
)

// chooserPackage is the import path of db, whose tests run this store
// through db.DB.
var chooserPackage = path.Dir(thisPackage)

// wrappers are the functions that pass a statement on: sqlcore.Tx's
// (gensql.Wrappers), the PostgreSQL executors' and stmt's own.
var wrappers = map[string]bool{
	"Tx.Exec": true, "Tx.Query": true, "Tx.QueryRow": true, "Tx.QueryIDs": true, "Tx.Insert": true, "Tx.ExecLater": true,
	"writer.Exec": true, "writer.Query": true, "writer.QueryRow": true, "writer.Insert": true, "writer.ExecLater": true,
	"reader.Exec": true, "reader.Query": true, "reader.QueryRow": true, "reader.Insert": true, "reader.ExecLater": true,
	"Tx.QueryStmt": true, "Tx.QueryRowStmt": true,
	"writer.QueryStmt": true, "writer.QueryRowStmt": true, "reader.QueryStmt": true, "reader.QueryRowStmt": true,
	"bind": true, "bindStmt": true, "textAndArgs": true, "stmt": true, "composedStmt": true, "uncatalogued": true,
}

var missesMu sync.Mutex

// noteMiss appends query, and the function that ran it, to the file
// LAZARUS_PG_MISSES names, if any.
func noteMiss(query, by string) {
	path := os.Getenv("LAZARUS_PG_MISSES")
	if path == "" {
		return
	}
	missesMu.Lock()
	defer missesMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "-- by %s\n%s\n\x00\n", by, query)
}
