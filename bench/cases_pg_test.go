package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// TestMain stops the throwaway PostgreSQL cluster a test started.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and a parenthesis, as a process title
	// may have; ppid 4242, utime 7, stime 3, cutime 20, cstime 5.
	line := "1234 (postgres: a (b) c) S 4242 1234 1234 0 -1 4194560 300 0 0 0 7 3 20 5 20 0 1 0 100 1000 200 18446744073709551615"
	st, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 4242 || st.own != 100*time.Millisecond || st.reaped != 250*time.Millisecond {
		t.Errorf("parsed %+v, want ppid 4242, own 100ms, reaped 250ms", st)
	}
	if _, err := parseProcStat("1234 (x) S 1 2 3"); err == nil {
		t.Error("a short line parsed")
	}
}

// TestClusterCPUFindsTheBackends runs a burst of queries on one database
// of the throwaway cluster and checks that clusterCPU finds their CPU in
// that database's backends, and not in another database's, whose
// connection stays idle meanwhile.
func TestClusterCPUFindsTheBackends(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip("the processes of the server " + pgtest.EnvURL + " names are not read from /proc (P1 says so in its rows)")
	}
	ctx := context.Background()
	open := func() (*db.DB, string) {
		u, drop, err := pgDatabase()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := drop(); err != nil {
				t.Error(err)
			}
		})
		d, err := db.Open(ctx, u, db.SyncNormal)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		if err := d.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		return d, databaseName(u)
	}
	busy, busyName := open()
	_, idleName := open()
	before, err := clusterCPU(busyName)
	if err != nil {
		t.Fatal(err)
	}
	idleBefore, err := clusterCPU(idleName)
	if err != nil {
		t.Fatal(err)
	}
	// About half a second of a backend's CPU: counting rows of a series.
	for range 5 {
		var n int64
		if err := busy.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM generate_series(1, 2000000)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2_000_000 {
			t.Fatalf("counted %d", n)
		}
	}
	after, err := clusterCPU(busyName)
	if err != nil {
		t.Fatal(err)
	}
	idleAfter, err := clusterCPU(idleName)
	if err != nil {
		t.Fatal(err)
	}
	got := after.sub(before)
	idle := idleAfter.sub(idleBefore)
	t.Logf("busy database's backends %v, the rest %v; idle database's backends %v", got.backends, got.rest, idle.backends)
	if got.backends < 50*time.Millisecond {
		t.Errorf("the busy database's backends used %v of CPU, want at least 50ms", got.backends)
	}
	if idle.backends > got.backends/4 {
		t.Errorf("the idle database's backends used %v, the busy one's %v: the backends are not told apart by database", idle.backends, got.backends)
	}
}
