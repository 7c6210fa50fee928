package db

import (
	"database/sql"
)

// maxStatements caps the statements the writer keeps prepared: the
// queries of the broker are few, but dead-letter filters combine into
// more.
const maxStatements = 512

// sqlResultInsert is insert over exec, for SQLite's executors: the
// statement's changes and last rowid.
func sqlResultInsert(res sql.Result, err error) (n, last int64, _ error) {
	if err != nil {
		return 0, 0, err
	}
	if n, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	last, err = res.LastInsertId()
	return n, last, err
}
