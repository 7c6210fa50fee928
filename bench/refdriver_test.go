package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/db"
)

func testEnv(t *testing.T) *env {
	t.Helper()
	e, err := newEnv(context.Background(), envConfig{quick: true, sync: db.SyncNormal, log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

// The references' connections have every setting of ours, the query
// planner stability guarantee and temp_store included, and so a prepared
// statement of theirs stays prepared as ours do; plain go-sqlite3 prepares
// it again on each run (db's TestPreparedStatementsStayPrepared).
func TestReferencesHaveOursConnectionSettings(t *testing.T) {
	ctx := context.Background()
	e := testEnv(t)
	if c := e.settings.conn; c.qpsg != 1 || c.tempStore != 2 || c.mutex != 0 || c.stmtCache != db.ReadStmtCache {
		t.Fatalf("ours read as QPSG %d, temp_store %d, own mutex %d, statement cache %d; want 1, 2, 0, %d (db/sqlite/driver.go, db/sqlite/open.go)", c.qpsg, c.tempStore, c.mutex, c.stmtCache, db.ReadStmtCache)
	}
	if err := e.settings.checkRef(ctx, filepath.Join(t.TempDir(), "check.db"), db.SyncNormal); err != nil {
		t.Fatalf("a reference's settings: %v", err)
	}
	r, err := e.openRaw(ctx, "ref-settings", db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	got, err := readConnSettings(ctx, r.db)
	if err != nil {
		t.Fatal(err)
	}
	if got != e.settings.conn {
		t.Errorf("a reference connection: %+v, ours %+v", got, e.settings.conn)
	}
	if err := e.settings.checkRef(ctx, filepath.Join(t.TempDir(), "check.db"), db.SyncNormal); err != nil {
		t.Errorf("checkRef: %v", err)
	}

	const query = `SELECT id FROM q WHERE lease_until <= ? ORDER BY id LIMIT ?`
	runs := func(d *sql.DB) int {
		t.Helper()
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		n := -1
		err = c.Raw(func(dc any) error {
			st, err := dc.(*sqlite3.SQLiteConn).Prepare(query)
			if err != nil {
				return err
			}
			defer st.Close()
			for i := range 10 {
				rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, []driver.NamedValue{{Ordinal: 1, Value: int64(i)}, {Ordinal: 2, Value: int64(1 + i)}})
				if err != nil {
					return err
				}
				rows.Close()
			}
			n = reprepares(st.(*sqlite3.SQLiteStmt))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := runs(r.db); n != 0 {
		t.Errorf("reference: the statement was prepared again %d times in 10 runs, want 0", n)
	}
	plain, err := sql.Open("sqlite3", "file:"+r.path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if n := runs(plain); n < 9 {
		t.Errorf("plain go-sqlite3: prepared again %d times in 10 runs; if SQLite no longer does this, the check above proves nothing", n)
	}
}

// checkRef refuses a reference that lost a setting.
func TestCheckRefRefusesADifferentSetting(t *testing.T) {
	e := testEnv(t)
	s := e.settings
	s.conn.qpsg = 0 // what a reference without the hook would have
	if err := s.checkRef(context.Background(), filepath.Join(t.TempDir(), "c.db"), db.SyncNormal); err == nil {
		t.Error("checkRef accepted a reference whose QPSG differs from ours")
	}
}

// A reference keeps its statements prepared between calls, as ours do:
// a statement that goqite runs through database/sql stays in go-sqlite3's
// cache after it is done (without the cache it is finalized, and the
// next call prepares it again).
func TestReferencesKeepTheirStatementsPrepared(t *testing.T) {
	ctx := context.Background()
	e := testEnv(t)
	g, err := e.openGoqite(ctx, "ref-cache", db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	if err := g.sendBatch(ctx, [][]byte{[]byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.q.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := g.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Raw(func(dc any) error {
		sc := dc.(*sqlite3.SQLiteConn)
		if n := db.StmtCacheSize(sc); n != db.ReadStmtCache {
			t.Errorf("goqite's connection keeps %d statements prepared, ours %d", n, db.ReadStmtCache)
		}
		if n := reflect.ValueOf(sc).Elem().FieldByName("stmtCache").Len(); n < 2 {
			t.Errorf("after a send and a receive, goqite's connection keeps %d statements prepared, want its 2", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
