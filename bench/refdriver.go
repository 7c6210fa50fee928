package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/db"
)

// connSettings are the per-connection settings that db's driver gives
// every connection of ours: the query planner stability guarantee
// (QPSG) and temp_store, which a go-sqlite3 DSN cannot carry, and no
// mutex of its own (_mutex=no in the DSN), and go-sqlite3's statement
// cache (_stmt_cache_size in the DSN). The references get the same, read
// from ours (probeSettings), so that no reference prepares its statements
// again on each run, or on each call, where ours does not
// (db/sqlite/driver.go says why that matters: a third of a pop's CPU;
// without the cache goqite prepares each of its statements on each
// call, while our writer keeps its own prepared and our readers keep
// theirs in go-sqlite3's cache).
type connSettings struct {
	qpsg      int
	tempStore int
	mutex     int // 1: the connection has a mutex of its own (ours have none: SQLITE_OPEN_NOMUTEX)
	stmtCache int // statements kept prepared by go-sqlite3's cache (0: none)
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
		s.qpsg, s.mutex, s.stmtCache = qpsg(sc, -1), db.HasMutex(sc), db.StmtCacheSize(sc)
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

// qpsg and reprepares are db's: the same cgo the store uses for its own
// connections.
var (
	qpsg       = db.QPSG
	reprepares = db.Reprepares
)

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
