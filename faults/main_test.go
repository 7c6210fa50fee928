package faults

import (
	"os"
	"testing"

	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// TestMain stops the throwaway cluster of pgtest should a test start one
// (the campaign's own cluster, pgtest.OwnCluster, is stopped by its test).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
