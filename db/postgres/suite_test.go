package postgres_test

import (
	"context"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker/storetest"
	"github.com/lazarus-dlq/lazarus/db/postgres"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// TestStorePostgres runs the broker's suite (broker/storetest) on
// PostgreSQL databases of internal/pgtest (a throwaway cluster, or the
// server LAZARUS_TEST_POSTGRES names), the tests of several processes
// among them: go test ./db/postgres -run 'TestStorePostgres/NAME' runs one of its
// tests. It is not parallel, as TestStoreSQLite.
func TestStorePostgres(t *testing.T) { storetest.Exercise(t, postgresHarness{}) }

// FuzzSearchPostgres is storetest.FuzzSearch on a PostgreSQL database.
func FuzzSearchPostgres(f *testing.F) { storetest.FuzzSearch(f, postgresHarness{}) }

// BenchmarkMaintainMessagesIdlePostgres is
// storetest.BenchmarkMaintainMessagesIdle on a PostgreSQL database.
func BenchmarkMaintainMessagesIdlePostgres(b *testing.B) {
	storetest.BenchmarkMaintainMessagesIdle(b, postgresHarness{})
}

// postgresHarness gives the suite PostgreSQL databases, each a copy of
// a migrated template.
type postgresHarness struct{}

func (postgresHarness) New(t testing.TB, _ string) string {
	return pgtest.Database(t, "lazarus", postgres.Prepare)
}

func (postgresHarness) Open(ctx context.Context, at string, o storetest.Options) (storetest.Store, error) {
	return openSuiteStore(ctx, at, o)
}

// SeveralProcesses: yes, the processes of one database tell each other
// their news (LISTEN/NOTIFY).
func (postgresHarness) SeveralProcesses() bool { return true }

// openSuiteStore opens the database at the URL at with the suite's
// options; the tests sync as NORMAL unless they ask for FULL.
func openSuiteStore(ctx context.Context, at string, o storetest.Options) (storetest.Store, error) {
	sync := postgres.SyncNormal
	if o.SyncFull {
		sync = postgres.SyncFull
	}
	d, err := postgres.OpenWith(ctx, at, postgres.Options{Sync: sync, NeverAlone: o.NeverAlone, FoldEvery: o.FoldEvery})
	if err != nil {
		return nil, err
	}
	return d, nil
}
