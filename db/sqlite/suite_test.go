package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker/storetest"
	"github.com/lazarus-dlq/lazarus/db/sqlite"
)

// TestStoreSQLite runs the broker's suite (broker/storetest) on SQLite
// files: go test ./db/sqlite -run 'TestStoreSQLite/NAME' runs one of its tests.
// It is not parallel, so that the suite's tests that are not either run
// alone in the process, as top-level tests do (the search's limits).
func TestStoreSQLite(t *testing.T) { storetest.Exercise(t, harness{}) }

// FuzzSearchSQLite is storetest.FuzzSearch on a SQLite file.
func FuzzSearchSQLite(f *testing.F) { storetest.FuzzSearch(f, harness{}) }

// BenchmarkMaintainMessagesIdleSQLite is
// storetest.BenchmarkMaintainMessagesIdle on a SQLite file.
func BenchmarkMaintainMessagesIdleSQLite(b *testing.B) {
	storetest.BenchmarkMaintainMessagesIdle(b, harness{})
}

// harness gives the suite SQLite files in the test's temporary
// directory.
type harness struct{}

func (harness) New(t testing.TB, name string) string {
	return filepath.Join(t.TempDir(), name)
}

func (harness) Open(ctx context.Context, at string, o storetest.Options) (storetest.Store, error) {
	return openSuiteStore(ctx, at, o)
}

// SeveralProcesses: no, a SQLite file's writes wake only the process
// that made them.
func (harness) SeveralProcesses() bool { return false }

// openSuiteStore opens the SQLite file at with the suite's options; the
// tests sync as NORMAL unless they ask for FULL.
func openSuiteStore(ctx context.Context, at string, o storetest.Options) (storetest.Store, error) {
	sync := sqlite.SyncNormal
	if o.SyncFull {
		sync = sqlite.SyncFull
	}
	d, err := sqlite.OpenWith(ctx, at, sqlite.Options{Sync: sync, FoldEvery: o.FoldEvery})
	if err != nil {
		return nil, err
	}
	return d, nil
}
