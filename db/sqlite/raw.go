package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// maxStatements caps the statements the writer keeps prepared: the
// queries of the broker are few, but dead-letter filters combine into
// more.
const maxStatements = 512

// rawConn runs the writer's statements on go-sqlite3's connection itself,
// beneath database/sql, keeping them prepared.
//
// Why: the writer holds its connection for its whole life and uses it from
// one goroutine at a time, so database/sql's pool, its locks and its
// dependency tracking buy nothing there; they, its Rows and its
// reflection-driven Scan were 20 % of a pop+ack's instructions (callgrind:
// database/sql 22k of 257k, and most of the runtime's allocation beside
// it). Readers keep database/sql: they share a pool.
//
// The connection is taken from database/sql once, at open (Conn.Raw), and
// used after Raw returned, which database/sql's documentation forbids for
// code that shares the connection: here nothing else uses it (the writer's
// *sql.Conn is only ever used by the writer, between its statements), and
// go-sqlite3 keeps no state that database/sql would reset behind our back
// (it implements neither SessionResetter nor Validator).
type rawConn struct {
	c     *sqlite3.SQLiteConn
	h     unsafe.Pointer // its C handle
	stmts map[string]*sqlite3.SQLiteStmt
	args  []driver.NamedValue // reused: one statement runs at a time
	// memo is the writer's sqlcore.Memo: emptied before any statement
	// that may change what it keeps (sqlcore.MemoKeeps); memoVersion is
	// the database's data version after the last commit it survived.
	memo        *sqlcore.Memo
	memoVersion uint32
}

// newRawConn takes the driver's connection out of the writer's *sql.Conn.
func newRawConn(ctx context.Context, conn *sql.Conn) (*rawConn, error) {
	r := &rawConn{stmts: map[string]*sqlite3.SQLiteStmt{}, memo: sqlcore.NewMemo()}
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("sqlite: the writer's connection is a %T, not go-sqlite3's", dc)
		}
		r.c, r.h = c, interruptHandle(c)
		if r.h == nil {
			return errors.New("sqlite: no handle of the writer's connection")
		}
		return nil
	})
	return r, err
}

// totalChanges counts the rows the writer has inserted, updated or
// deleted since it opened: unchanged across a function, it wrote nothing.
func (r *rawConn) totalChanges() int64 { return totalChanges(r.h) }

// statementsRun is how many times the statements the writer keeps
// prepared ran (for tests: SQLite's own statements, as FTS5 runs on its
// tables, are not among them).
func (r *rawConn) statementsRun() int64 {
	var n int64
	for _, st := range r.stmts {
		n += int64(runs(st))
	}
	return n
}

// stmt returns query prepared, kept for the next time unless
// maxStatements are kept already (keep false: the caller closes it).
func (r *rawConn) stmt(query string) (st *sqlite3.SQLiteStmt, keep bool, err error) {
	if st, ok := r.stmts[query]; ok {
		return st, true, nil
	}
	ds, err := r.c.Prepare(query)
	if err != nil {
		return nil, false, err
	}
	st = ds.(*sqlite3.SQLiteStmt)
	// Every statement here is closed by this code (with its rows, or at
	// close); go-sqlite3's finalizer would close a forgotten one from
	// another thread, which without a connection mutex (NOMUTEX) could
	// race the writer: a leak must cost memory only.
	runtime.SetFinalizer(st, nil)
	if len(r.stmts) >= maxStatements {
		return st, false, nil
	}
	r.stmts[query] = st
	return st, true, nil
}

// named turns args into the driver's values, as database/sql's default
// converter would for the types the store binds.
func (r *rawConn) named(args []any) ([]driver.NamedValue, error) {
	r.args = r.args[:0]
	for i, a := range args {
		v, err := driverValue(a)
		if err != nil {
			return nil, fmt.Errorf("sql: converting argument $%d type: %w", i+1, err)
		}
		r.args = append(r.args, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	return r.args, nil
}

func driverValue(a any) (driver.Value, error) {
	switch v := a.(type) {
	case nil, int64, float64, bool, []byte, string:
		return v, nil
	case int:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case driver.Valuer:
		return v.Value()
	}
	return driver.DefaultParameterConverter.ConvertValue(a)
}

// memoBegun, once a write transaction has begun, empties the memo
// unless nothing has committed since the last commit it survived: a
// commit of another connection or process, or one of this connection
// that it did not see (dataVersion).
func (r *rawConn) memoBegun() {
	if dataVersion(r.h) != r.memoVersion {
		r.memo.Clear()
	}
}

// memoCommitted, after a commit, keeps the memo for the next
// transaction (memoBegun).
func (r *rawConn) memoCommitted() { r.memoVersion = dataVersion(r.h) }

// memoSees empties the memo before a statement that may change what it
// keeps.
func (r *rawConn) memoSees(query string) {
	if !sqlcore.MemoKeeps(query) {
		r.memo.Clear()
	}
}

func (r *rawConn) exec(query string, args []any) (sql.Result, error) {
	r.memoSees(query)
	st, keep, err := r.stmt(query)
	if err != nil {
		return nil, err
	}
	if !keep {
		defer st.Close()
	}
	nv, err := r.named(args)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(context.Background(), nv)
}

func (r *rawConn) query(query string, args []any) (*rawRows, error) {
	r.memoSees(query)
	st, keep, err := r.stmt(query)
	if err != nil {
		return nil, err
	}
	nv, err := r.named(args)
	if err == nil {
		var dr driver.Rows
		if dr, err = st.QueryContext(context.Background(), nv); err == nil {
			rr := &rawRows{rows: dr}
			if !keep {
				rr.stmt = st
			}
			return rr, nil
		}
	}
	if !keep {
		st.Close()
	}
	return nil, err
}

// queryRowScan runs a one-row query (a pragma) and scans its row.
func (r *rawConn) queryRowScan(query string, dest ...any) error {
	rows, err := r.query(query, nil)
	return rawRow{rows: rows, err: err}.Scan(dest...)
}

// close closes the kept statements, before the connection closes.
func (r *rawConn) close() {
	for q, st := range r.stmts {
		st.Close()
		delete(r.stmts, q)
	}
}

// rawRows are a query's rows read from the driver, with database/sql's
// Rows methods for the store's scanning code.
type rawRows struct {
	rows   driver.Rows
	stmt   *sqlite3.SQLiteStmt // not kept: closed with the rows
	vals   []driver.Value
	err    error
	closed bool
}

// Next reads the next row; false at the end or on an error (Err).
func (r *rawRows) Next() bool {
	if r.closed {
		return false
	}
	if r.vals == nil {
		r.vals = make([]driver.Value, len(r.rows.Columns()))
	}
	if err := r.rows.Next(r.vals); err != nil {
		if err != io.EOF {
			r.err = err
		}
		r.Close()
		return false
	}
	return true
}

// Scan copies the row's columns into dest, as database/sql's Rows.Scan
// does for the destinations the store uses.
func (r *rawRows) Scan(dest ...any) error {
	if r.closed {
		return errors.New("sql: Rows are closed")
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(r.vals), len(dest))
	}
	for i, d := range dest {
		if err := assign(d, r.vals[i]); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	return nil
}

// Err is the error that ended Next, if any.
func (r *rawRows) Err() error { return r.err }

// Close resets the statement; it can be called more than once.
func (r *rawRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.rows.Close()
	if r.stmt != nil {
		err = errors.Join(err, r.stmt.Close())
	}
	return err
}

// rawRow is QueryRow's answer: the first row, or sql.ErrNoRows.
type rawRow struct {
	rows *rawRows
	err  error
}

// Scan reads the first row into dest and closes the rows.
func (r rawRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	return r.rows.Scan(dest...)
}

// assign stores a driver value in a destination, converting as
// database/sql's convertAssign does for the types the store scans into:
// integers, floats, booleans, strings, bytes, any, and sql.Scanner (the
// Null types). NULL goes only into a Scanner, *any or *[]byte, as there.
func assign(dest, v any) error {
	switch d := dest.(type) {
	case *int64:
		switch x := v.(type) {
		case int64:
			*d = x
			return nil
		case bool:
			*d = sqlcore.B2I(x)
			return nil
		case float64: // database/sql formats a float and parses the text
			return parseInt(d, strconv.FormatFloat(x, 'g', -1, 64), v)
		case string, []byte:
			return parseInt(d, asString(x), v)
		}
	case *int:
		var n int64
		if err := assign(&n, v); err != nil {
			return fmt.Errorf("converting %s to int: %w", describe(v), errors.Unwrap(err))
		}
		*d = int(n)
		return nil
	case *string:
		switch x := v.(type) {
		case string:
			*d = x
			return nil
		case []byte:
			*d = string(x)
			return nil
		case int64:
			*d = strconv.FormatInt(x, 10)
			return nil
		case float64:
			*d = strconv.FormatFloat(x, 'g', -1, 64)
			return nil
		}
	case *[]byte:
		switch x := v.(type) {
		case []byte:
			*d = x // go-sqlite3 gives each row's blob a copy of its own
			return nil
		case string:
			*d = []byte(x)
			return nil
		case int64:
			*d = strconv.AppendInt(nil, x, 10)
			return nil
		case float64:
			*d = strconv.AppendFloat(nil, x, 'g', -1, 64)
			return nil
		case nil:
			*d = nil
			return nil
		}
	case *bool:
		switch x := v.(type) {
		case int64:
			if x == 0 || x == 1 {
				*d = x == 1
				return nil
			}
		case bool:
			*d = x
			return nil
		case string, []byte:
			if b, err := strconv.ParseBool(asString(x)); err == nil {
				*d = b
				return nil
			}
		}
	case *float64:
		switch x := v.(type) {
		case float64:
			*d = x
			return nil
		case int64:
			*d = float64(x)
			return nil
		case string, []byte:
			f, err := strconv.ParseFloat(asString(x), 64)
			if err != nil {
				return fmt.Errorf("converting %s to float64: %w", describe(v), err)
			}
			*d = f
			return nil
		}
	case *any:
		if b, ok := v.([]byte); ok {
			v = bytes.Clone(b)
		}
		*d = v
		return nil
	case sql.Scanner:
		return d.Scan(v)
	}
	return fmt.Errorf("converting %s to %s is unsupported", describe(v), reflect.TypeOf(dest))
}

// parseInt stores the integer text holds (the text of the value v).
func parseInt(d *int64, text string, v any) error {
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return fmt.Errorf("converting %s to int64: %w", describe(v), err)
	}
	*d = n
	return nil
}

func asString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return v.(string)
}

func describe(v any) string {
	if v == nil {
		return "NULL"
	}
	return fmt.Sprintf("driver %T", v)
}
