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
		{Func: "storeTx.insert", Wrapper: "exec", Expr: `query + " RETURNING " + col`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT a, b FROM t`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT a, b FROM t WHERE x = ?`, Var: "overridden"},
		{Func: "storeTx.Both", Wrapper: "insert", Const: true, SQL: `INSERT INTO t (a) VALUES (?)`, Col: "id"},
		{Func: "storeTx.Both", Wrapper: "exec", Expr: "`SELECT ` + name"},
		{Func: "storeTx.Both", Const: true, SQL: `DELETE FROM t`, Var: "picked"},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `DELETE FROM t`, Var: "picked"},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `UPDATE t SET a = 1`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT a FROM t`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT 1 LIMIT 1`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT 1`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT u.a FROM u`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT t.a FROM t`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `DELETE FROM t`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `DELETE FROM u`},
		{Func: "storeTx.Both", Wrapper: "exec", Expr: "`SELECT ` + name + ` FROM ` + table"},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT a FROM t WHERE j LIMIT 1`},
		{Func: "storeTx.Both", Wrapper: "exec", Const: true, SQL: `SELECT a FROM t ORDER BY a`},
		{Func: "storeTx.Passes", Wrapper: "exec", Const: true, SQL: `SELECT 2 FROM t WHERE a = ?`},
		{Func: "storeTx.Passes", Wrapper: "passOn", Const: true, SQL: `DELETE FROM t WHERE a = 1`},
		{Func: "storeTx.Passes", Wrapper: "probe", Const: true, SQL: `DELETE FROM t WHERE a = 2`},
		{Func: "storeTx.Tables", Wrapper: "exec", Const: true, SQL: `SELECT x.minute FROM a x FOR UPDATE`, Only: "postgres"},
		{Func: "storeTx.Tables", Wrapper: "exec", Const: true, SQL: `SELECT x.hour FROM b x FOR UPDATE`, Only: "postgres"},
		{Func: "storeTx.Tables", Wrapper: "exec", Const: true, SQL: `SELECT x.minute FROM a x`, Only: "sqlite"},
		{Func: "storeTx.Tables", Wrapper: "exec", Const: true, SQL: `SELECT x.hour FROM b x`, Only: "sqlite"},
		{Func: "storeTx.Tables", Wrapper: "exec", Const: true, SQL: `UPDATE t SET m = 1`},
		{Func: "storeTx.Split", Wrapper: "exec", Const: true, SQL: `SELECT 'pg'`, Only: "postgres"},
		{Func: "storeTx.Split", Wrapper: "exec", Const: true, SQL: `SELECT 'sqlite'`, Only: "sqlite"},
	}
	if !reflect.DeepEqual(sites, want) {
		t.Errorf("Collect:\n got %+v\nwant %+v", sites, want)
	}
	dyn := Dynamic(sites)
	wantDyn := []string{"storeTx.Both: exec(`SELECT ` + name + ` FROM ` + table)", "storeTx.Both: exec(`SELECT ` + name)"}
	if !reflect.DeepEqual(dyn, wantDyn) {
		t.Errorf("Dynamic: got %q, want %q", dyn, wantDyn)
	}
}
