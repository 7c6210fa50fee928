package db

import (
	"os"
	"testing"

	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// TestMain runs the tests and stops the throwaway PostgreSQL cluster the
// tests that call pgtest.Database started, so that none outlives the
// test binary.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
