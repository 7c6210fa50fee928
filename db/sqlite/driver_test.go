package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/mattn/go-sqlite3"
)

// Every connection Lazarus opens has the query planner stability
// guarantee on, its temporary storage in memory and no mutex of its own,
// whichever pool it belongs to.
func TestEveryConnectionHasStablePlansAndTempInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	check := func(name string, c *sql.Conn) {
		t.Helper()
		err := c.Raw(func(dc any) error {
			if got := QPSG(dc.(*sqlite3.SQLiteConn), -1); got != 1 {
				t.Errorf("%s: QPSG = %d, want 1", name, got)
			}
			if got := HasMutex(dc.(*sqlite3.SQLiteConn)); got != 0 {
				t.Errorf("%s: the connection has a mutex of its own (%d), want none (SQLITE_OPEN_NOMUTEX)", name, got)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var temp int
		if err := c.QueryRowContext(ctx, "PRAGMA temp_store").Scan(&temp); err != nil {
			t.Fatal(err)
		}
		if temp != 2 {
			t.Errorf("%s: temp_store = %d, want 2 (MEMORY)", name, temp)
		}
	}
	check("writer", d.main.conn)
	check("background writer", d.bg.conn)
	// Hold several at once so that the pools open more than one.
	for _, pool := range []struct {
		name string
		db   *sql.DB
		n    int
	}{{"read pool", d.read, 3}, {"write pool", d.write, 1}} {
		var held []*sql.Conn
		for range pool.n {
			c, err := pool.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
			check(pool.name, c)
		}
		for _, c := range held {
			c.Close()
		}
	}
}

// The reason for the guarantee: go-sqlite3 clears a statement's bindings
// after each run, and SQLite prepares a statement again at its next run
// when a bound value could have changed its plan (a LIMIT ?, an equality
// some candidate plan filters on). With the plain driver, each run of a
// query like the pop's prepares it again; with ours, never.
func TestPreparedStatementsStayPrepared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const query = `SELECT partition_id FROM consumers WHERE queue_id = ? AND group_id = ? ORDER BY leased_at LIMIT ?`
	runs := func(t *testing.T, c *sql.Conn) int {
		t.Helper()
		var n int
		err := c.Raw(func(dc any) error {
			st, err := dc.(*sqlite3.SQLiteConn).Prepare(query)
			if err != nil {
				return err
			}
			defer st.Close()
			for i := range 10 {
				rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, []driver.NamedValue{
					{Ordinal: 1, Value: int64(1)}, {Ordinal: 2, Value: int64(1 + i%2)}, {Ordinal: 3, Value: int64(1 + i)},
				})
				if err != nil {
					return err
				}
				rows.Close()
			}
			n = Reprepares(st.(*sqlite3.SQLiteStmt))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	ours, err := d.read.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	if n := runs(t, ours); n != 0 {
		t.Errorf("our driver: the statement was prepared again %d times in 10 runs, want 0", n)
	}

	plain, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pc, err := plain.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if n := runs(t, pc); n < 9 {
		t.Errorf("plain go-sqlite3: the statement was prepared again %d times in 10 runs; "+
			"if SQLite or go-sqlite3 no longer does this, the QPSG connect hook may be unneeded", n)
	}
}

// Each reading connection keeps ReadStmtCache statements prepared in
// go-sqlite3's cache, and StmtCacheSize reads that back (the bench gives
// its references the same cache by it); a connection without the DSN
// setting keeps none.
func TestReadersKeepTheirStatementsPrepared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	d, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	size := func(db *sql.DB) int {
		t.Helper()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		n := -2
		if err := c.Raw(func(dc any) error { n = StmtCacheSize(dc.(*sqlite3.SQLiteConn)); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := size(d.read); n != ReadStmtCache {
		t.Errorf("a reader's statement cache holds %d, want %d", n, ReadStmtCache)
	}
	plain, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if n := size(plain); n != 0 {
		t.Errorf("plain go-sqlite3's statement cache holds %d, want 0", n)
	}
}

// SQLite keeps no memory statistics (each of its allocations took a
// process-wide mutex for them), with a store open and working.
func TestSQLiteKeepsNoMemoryStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "m.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := memoryUsed(); n != 0 {
		t.Errorf("SQLite counts %d bytes in use: its memory statistics are on", n)
	}
}

// synchronousIn returns the writer connection's synchronous setting seen
// from inside an Update on ctx (1 NORMAL, 2 FULL; -1 on error).
func synchronousIn(t *testing.T, d *Store, o broker.UpdateOptions) int {
	t.Helper()
	ctx := context.Background()
	v := -1
	err := d.Update(ctx, o, func(tx broker.Tx) error {
		return tx.(*sqlcore.Tx).QueryRow(ctx, "PRAGMA synchronous").Scan(&v)
	})
	if err != nil {
		t.Error(err)
	}
	return v
}

// Under FULL, a write marked ephemeral commits without waiting for the
// disk and the next ordinary write waits again; under NORMAL nothing
// changes. A group with any ordinary write commits under FULL.
func TestEphemeralWritesDoNotWaitForTheDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eph := broker.UpdateOptions{Ephemeral: true}
	for _, tc := range []struct {
		sync                Sync
		ephemeral, ordinary int // the setting each commits under
	}{{SyncFull, 1, 2}, {SyncNormal, 1, 1}} {
		d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), tc.sync)
		if err != nil {
			t.Fatal(err)
		}
		for i, ephemeral := range []bool{false, true, true, false, true, false} {
			c, want := broker.UpdateOptions{}, tc.ordinary
			if ephemeral {
				c, want = eph, tc.ephemeral
			}
			if got := synchronousIn(t, d, c); got != want {
				t.Errorf("%s, write %d (ephemeral %v): synchronous = %d, want %d", tc.sync, i, ephemeral, got, want)
			}
		}
		if tc.sync == SyncFull {
			setting := func() int {
				var v int
				if err := d.main.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&v); err != nil {
					t.Fatal(err)
				}
				return v
			}
			mixed := []writeRequest{{ctx: ctx, o: eph}, {ctx: ctx}}
			if err := d.syncFor(mixed[:1]); err != nil || setting() != 1 {
				t.Errorf("ephemeral group: synchronous = %d (%v), want 1", setting(), err)
			}
			if err := d.syncFor(mixed); err != nil || setting() != 2 {
				t.Errorf("mixed group: synchronous = %d (%v), want 2", setting(), err)
			}
		}
		d.Close()
	}
}

// Writes that queue up behind another are committed together by the
// writer goroutine: a group that mixes a lease with an ordinary write
// commits under FULL, both of them.
func TestMixedGroupCommitsUnderFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncFull)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	release := holdWriter(d)
	got := make(chan int, 2)
	for _, c := range []broker.UpdateOptions{{Ephemeral: true}, {}} {
		go func() { got <- synchronousIn(t, d, c) }()
	}
	waitQueued(d, 2)
	release()
	for range 2 {
		if v := <-got; v != 2 {
			t.Errorf("a write of a mixed group committed under synchronous = %d, want 2 (FULL)", v)
		}
	}
}
