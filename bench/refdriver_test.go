package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"log/slog"
	"path/filepath"
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
	if e.settings.conn.qpsg != 1 || e.settings.conn.tempStore != 2 || e.settings.conn.mutex != 0 {
		t.Fatalf("ours read as QPSG %d, temp_store %d, own mutex %d; want 1, 2, 0 (db/sqlite/driver.go, db/sqlite/open.go)", e.settings.conn.qpsg, e.settings.conn.tempStore, e.settings.conn.mutex)
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
