package main

/*
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
int sqlite3_db_config(sqlite3*, int op, ...);
int sqlite3_stmt_status(sqlite3_stmt*, int op, int reset);

// bench_qpsg sets SQLITE_DBCONFIG_ENABLE_QPSG (1007) on a connection when
// on is 0 or 1 (reads it when -1) and returns the setting as it then
// stands (-1 on error), as db/driver.go's lazarus_qpsg does.
static int bench_qpsg(void *db, int on) {
	int now = -1;
	if (sqlite3_db_config((sqlite3*)db, 1007, on, &now) != 0) return -1;
	return now;
}

// bench_reprepares is SQLITE_STMTSTATUS_REPREPARE (5) of a statement.
static int bench_reprepares(void *stmt) {
	return sqlite3_stmt_status((sqlite3_stmt*)stmt, 5, 0);
}
*/
import "C"

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/mattn/go-sqlite3"
)

// connSettings are the per-connection settings that a go-sqlite3 DSN
// cannot carry and that db's driver gives every connection of ours: the
// query planner stability guarantee (QPSG) and temp_store. The references
// get the same, read from ours (probeSettings), so that no reference
// prepares its statements again on each run where ours does not
// (db/driver.go says why that matters: a third of a pop's CPU).
type connSettings struct {
	qpsg      int
	tempStore int
}

// readConnSettings reads the connection settings of one connection of d.
func readConnSettings(ctx context.Context, d *sql.DB) (connSettings, error) {
	c, err := d.Conn(ctx)
	if err != nil {
		return connSettings{}, err
	}
	defer c.Close()
	return connSettingsOf(ctx, c)
}

func connSettingsOf(ctx context.Context, c *sql.Conn) (connSettings, error) {
	s := connSettings{qpsg: -1}
	err := c.Raw(func(dc any) error {
		sc, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("not a go-sqlite3 connection: %T", dc)
		}
		s.qpsg = qpsg(sc, -1)
		return nil
	})
	if err != nil {
		return s, err
	}
	if err := c.QueryRowContext(ctx, "PRAGMA temp_store").Scan(&s.tempStore); err != nil {
		return s, fmt.Errorf("temp_store: %w", err)
	}
	return s, nil
}

// qpsg sets (on 0 or 1) or reads (on -1) the QPSG setting of a
// connection; -1 when the handle cannot be found.
func qpsg(c *sqlite3.SQLiteConn, on int) int {
	h := cHandle(c, "db", "_Ctype_struct_sqlite3")
	if h == nil {
		return -1
	}
	return int(C.bench_qpsg(h, C.int(on)))
}

// reprepares says how many times SQLite has prepared a statement again
// since it was first prepared (-1 if unknown).
func reprepares(s *sqlite3.SQLiteStmt) int {
	h := cHandle(s, "s", "_Ctype_struct_sqlite3_stmt")
	if h == nil {
		return -1
	}
	return int(C.bench_reprepares(h))
}

// cHandle is the C pointer go-sqlite3 keeps in the named field of v, if
// that field is a non-nil pointer to the C type named cType (nil
// otherwise), as db/driver.go reads it.
func cHandle(v any, field, cType string) unsafe.Pointer {
	f := reflect.ValueOf(v).Elem().FieldByName(field)
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return nil
	}
	if t := f.Type().Elem(); t.Name() != cType || t.PkgPath() != "github.com/mattn/go-sqlite3" {
		return nil
	}
	return f.UnsafePointer()
}

// refConnectHook gives a reference connection the settings s: QPSG and
// temp_store, as db's driver does for ours.
func refConnectHook(s connSettings) func(c *sqlite3.SQLiteConn) error {
	return func(c *sqlite3.SQLiteConn) error {
		if s.qpsg == 0 || s.qpsg == 1 {
			if got := qpsg(c, s.qpsg); got != s.qpsg {
				return errors.New("reference: SQLite refused the query planner stability guarantee setting")
			}
		}
		if _, err := c.Exec(fmt.Sprintf("PRAGMA temp_store=%d", s.tempStore), nil); err != nil {
			return fmt.Errorf("reference: temp_store: %w", err)
		}
		return nil
	}
}
