// Package storetest is the broker's test suite over a store: the rule
// tests, the model test, the concurrency tests and those of several
// processes, run against a real store that a Harness opens. A store's
// package runs them all from one test of its own:
//
//	func TestStoreSQLite(t *testing.T) { storetest.Exercise(t, harness{}) }
//
// and each is a subtest of that run, named as the test was in broker
// (without its "Test"): go test ./db/sqlite -run 'TestStoreSQLite/PushDedupPerPartition'
// runs one test on one store. The package imports no store: everything
// store-specific comes through the Harness.
package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Harness is what a store's package gives the suite: where a new store
// lives, and how to open one.
type Harness interface {
	// New makes a new, empty store for t, dropped or removed when t
	// ends, and returns where it is, for Open: a file named name in a
	// directory of t's, or a database of its own (name may go unused).
	New(t testing.TB, name string) string
	// Open opens the store at (New's), bringing its schema up to date:
	// again after Close to reopen it, or twice at once for two
	// processes over one store (SeveralProcesses).
	Open(ctx context.Context, at string, o Options) (Store, error)
	// SeveralProcesses reports whether several processes may use one
	// store at once, each told of the others' writes by its Notifier
	// (PostgreSQL). The tests of several processes run only on such a
	// store: on another they are not run (nor counted as passed).
	SeveralProcesses() bool
}

// Options are the store options a test asks Open for.
type Options struct {
	// SyncFull makes every commit durable before it returns (SQLite's
	// synchronous=FULL), so that a write marked Ephemeral differs from
	// the others; otherwise the store syncs as it does by default in
	// the tests (SQLite's NORMAL).
	SyncFull bool
	// NeverAlone makes a process write as one among several even when it
	// is alone on its store (PostgreSQL: its hot writes take the row
	// locks they take beside other processes).
	NeverAlone bool
	// FoldEvery is how often, at most, the store brings the queue page's
	// counts up to date inside a commit: 0 its default, negative at
	// every commit.
	FoldEvery time.Duration
}

// Store is an open store as the suite uses it: the broker's Store (with
// the optional interfaces the broker looks for, so that a test's wrapper
// around it keeps them), and what the tests need beside the broker.
type Store interface {
	broker.ConcurrentStore
	broker.Leader
	// Notifier is the broker.Notifier the store's processes need (nil
	// when the broker's own will do).
	Notifier() broker.Notifier
	// ExecUncatalogued runs one statement of raw SQL outside the
	// store's statement catalog, in a dialect both stores read with ?
	// parameters, for tests that set up or read what the broker cannot.
	ExecUncatalogued(ctx context.Context, query string, args ...any) (sql.Result, error)
	// QueryRowUncatalogued is ExecUncatalogued for a query of one row.
	QueryRowUncatalogued(ctx context.Context, query string, args ...any) *sql.Row
	// Close closes the store.
	Close() error
}
