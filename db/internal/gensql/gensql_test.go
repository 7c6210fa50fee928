package gensql

import (
	"reflect"
	"testing"
)

func TestCollect(t *testing.T) {
	sites, err := Collect("testdata/fixture")
	if err != nil {
		t.Fatal(err)
	}
	want := []Site{
		{Func: "Tx.Insert", Wrapper: "Exec", Expr: `query + " RETURNING " + col`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT a, b FROM t`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT a, b FROM t WHERE x = ?`, Var: "overridden"},
		{Func: "Tx.Both", Wrapper: "Insert", Const: true, SQL: `INSERT INTO t (a) VALUES (?)`, Col: "id"},
		{Func: "Tx.Both", Wrapper: "Exec", Expr: "`SELECT ` + name"},
		{Func: "Tx.Both", Const: true, SQL: `DELETE FROM t`, Var: "picked"},
		{Func: "Tx.Both", Wrapper: "Exec", Expr: "s"},
		{Func: "pgDialect.Split", Wrapper: "Exec", Const: true, SQL: `SELECT 'pg'`, Only: "postgres"},
		{Func: "sqliteDialect.Split", Wrapper: "Exec", Const: true, SQL: `SELECT 'sqlite'`, Only: "sqlite"},
	}
	if !reflect.DeepEqual(sites, want) {
		t.Errorf("Collect:\n got %+v\nwant %+v", sites, want)
	}
	dyn := Dynamic(sites)
	wantDyn := []string{"Tx.Both: Exec(`SELECT ` + name)", "Tx.Both: Exec(s)"}
	if !reflect.DeepEqual(dyn, wantDyn) {
		t.Errorf("Dynamic: got %q, want %q", dyn, wantDyn)
	}
}
