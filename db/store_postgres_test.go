package db_test

import (
	"context"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker/storetest"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// TestStorePostgres runs the broker's suite (broker/storetest) on
// PostgreSQL databases of internal/pgtest (a throwaway cluster, or the
// server LAZARUS_TEST_POSTGRES names), the tests of several processes
// among them: go test ./db -run 'TestStorePostgres/NAME' runs one of its
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
	return pgtest.Database(t, "lazarus", db.Prepare)
}

func (postgresHarness) Open(ctx context.Context, at string, o storetest.Options) (storetest.Store, error) {
	return openSuiteStore(ctx, at, o)
}

// SeveralProcesses: yes, the processes of one database tell each other
// their news (LISTEN/NOTIFY).
func (postgresHarness) SeveralProcesses() bool { return true }
