package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The writer's statements run beneath database/sql (rawConn); what they
// scan must be what database/sql would have scanned, errors included,
// for every kind of value SQLite gives and every destination the store
// uses.
func TestTheWritersScanAgreesWithDatabaseSQL(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	ctx := context.Background()
	values := []string{`42`, `-7`, `0`, `1`, `2.5`, `3.0`, `-0.0`, `1e3`, `'text'`, `'17'`, `'1'`, `'true'`, `'F'`, `''`, `x'00ff10'`, `x''`, `NULL`}
	dests := []func() any{
		func() any { return new(int64) }, func() any { return new(int) }, func() any { return new(string) },
		func() any { return new([]byte) }, func() any { return new(bool) }, func() any { return new(float64) },
		func() any { return new(any) }, func() any { return new(sql.NullString) }, func() any { return new(sql.NullInt64) },
	}
	for _, v := range values {
		for _, mk := range dests {
			q := `SELECT ` + v
			want, got := mk(), mk()
			wantErr := d.write.QueryRowContext(ctx, q).Scan(want)
			var gotErr error
			if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
				gotErr = tx.(*sqlcore.Tx).QueryRow(ctx, q).Scan(got)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s into %T", v, want)
			if (wantErr == nil) != (gotErr == nil) {
				t.Errorf("%s: database/sql says %v, the writer %v", name, wantErr, gotErr)
				continue
			}
			if wantErr == nil && !reflect.DeepEqual(want, got) {
				t.Errorf("%s: database/sql scanned %#v, the writer %#v", name, reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem())
			}
		}
	}
	// No row, several rows, an error in the SQL.
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		st := tx.(*sqlcore.Tx)
		var n int64
		if err := st.QueryRow(ctx, `SELECT 1 WHERE 0`).Scan(&n); err != sql.ErrNoRows {
			t.Errorf("no row: %v, want sql.ErrNoRows", err)
		}
		if err := st.QueryRow(ctx, `SELECT nope FROM nowhere`).Scan(&n); err == nil {
			t.Error("a query that cannot prepare scanned nothing and said nothing")
		}
		rows, err := st.Query(ctx, `SELECT value FROM json_each('[3,1,2]')`)
		if err != nil {
			return err
		}
		var got []int64
		for rows.Next() {
			if err := rows.Scan(&n); err != nil {
				return err
			}
			got = append(got, n)
		}
		if rows.Err() != nil || rows.Close() != nil || rows.Close() != nil || !reflect.DeepEqual(got, []int64{3, 1, 2}) {
			t.Errorf("rows %v, err %v", got, rows.Err())
		}
		if err := rows.Scan(&n); err == nil {
			t.Error("Scan after Close said nothing")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The writer keeps at most maxStatements prepared; past that a statement
// is prepared, run and closed, and still does its work.
func TestTheWriterKeepsAtMostMaxStatementsPrepared(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	ctx := context.Background()
	execSQL(t, d, `CREATE TABLE t (v INTEGER)`)
	n := maxStatements + 20
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		st := tx.(*sqlcore.Tx)
		for i := range n {
			if _, err := st.Exec(ctx, fmt.Sprintf(`INSERT INTO t VALUES (%d)`, i)); err != nil {
				return err
			}
			rows, err := st.Query(ctx, fmt.Sprintf(`SELECT v FROM t WHERE v = %d`, i))
			if err != nil {
				return err
			}
			if !rows.Next() {
				t.Errorf("row %d not found", i)
			}
			rows.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var count int
	if err := d.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM t`).Scan(&count); err != nil || count != n {
		t.Fatalf("%d rows (%v), want %d", count, err, n)
	}
	if len(d.main.raw.stmts) > maxStatements {
		t.Errorf("%d statements kept prepared, want at most %d", len(d.main.raw.stmts), maxStatements)
	}
}
