//go:build sqlite_trace

package main

import (
	"database/sql"
	"sync"

	"github.com/lazarus-dlq/lazarus/db"
	"github.com/mattn/go-sqlite3"
)

// traceAvailable: this build can see the SQL that runs.
const traceAvailable = true

var installOnce sync.Once

// installTrace hooks into the go-sqlite3 drivers that the databases of
// the process open, db.Open's included: a connection opened while a
// recorder is active reports each statement it runs to that recorder.
func installTrace() {
	installOnce.Do(func() {
		// The references open refDriver; db.Open its own driver; plain
		// go-sqlite3 for whatever else.
		for _, name := range []string{"sqlite3", refDriver, db.DriverName} {
			hookDriver(name)
		}
	})
}

func hookDriver(name string) {
	d, err := sql.Open(name, ":memory:")
	if err != nil {
		return
	}
	drv, ok := d.Driver().(*sqlite3.SQLiteDriver)
	d.Close()
	if !ok {
		return
	}
	prev := drv.ConnectHook
	drv.ConnectHook = func(c *sqlite3.SQLiteConn) error {
		if prev != nil {
			if err := prev(c); err != nil {
				return err
			}
		}
		r := activeRecorder.Load()
		if r == nil {
			return nil
		}
		return c.SetTrace(&sqlite3.TraceConfig{
			EventMask: sqlite3.TraceStmt,
			Callback: func(info sqlite3.TraceInfo) int {
				r.record(info.StmtOrTrigger)
				return 0
			},
		})
	}
}
