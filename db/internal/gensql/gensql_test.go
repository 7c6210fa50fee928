package gensql

import (
	"reflect"
	"strings"
	"testing"
)

func TestCollect(t *testing.T) {
	sites, err := Collect("testdata/fixture")
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's sqliteDialect, pgDialect and pgRowLocks are of
	// package sqlcore: their names make them no store's
	// (TestCollectDecidesTheStoreByPackage).
	want := []Site{
		{Func: "Tx.Insert", Wrapper: "Exec", Expr: `query + " RETURNING " + col`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT a, b FROM t`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT a, b FROM t WHERE x = ?`, Var: "overridden"},
		{Func: "Tx.Both", Wrapper: "Insert", Const: true, SQL: `INSERT INTO t (a) VALUES (?)`, Col: "id"},
		{Func: "Tx.Both", Wrapper: "Exec", Expr: "`SELECT ` + name"},
		{Func: "Tx.Both", Const: true, SQL: `DELETE FROM t`, Var: "picked"},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `DELETE FROM t`, Var: "picked"},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `UPDATE t SET a = 1`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT a FROM t`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT 1 LIMIT 1`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT 1`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT u.a FROM u`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT t.a FROM t`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `DELETE FROM t`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `DELETE FROM u`},
		{Func: "Tx.Both", Wrapper: "Exec", Expr: "`SELECT ` + name + ` FROM ` + table"},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT a FROM t WHERE j LIMIT 1`},
		{Func: "Tx.Both", Wrapper: "Exec", Const: true, SQL: `SELECT a FROM t ORDER BY a`},
		{Func: "Tx.Passes", Wrapper: "Exec", Const: true, SQL: `SELECT 2 FROM t WHERE a = ?`},
		{Func: "Tx.Passes", Wrapper: "passOn", Const: true, SQL: `DELETE FROM t WHERE a = 1`},
		{Func: "Tx.Passes", Wrapper: "probe", Const: true, SQL: `DELETE FROM t WHERE a = 2`},
		{Func: "Tx.Tables", Wrapper: "Exec", Const: true, SQL: `SELECT x.minute FROM a x`},
		{Func: "Tx.Tables", Wrapper: "Exec", Const: true, SQL: `SELECT x.hour FROM b x`},
		{Func: "Tx.Tables", Wrapper: "Exec", Const: true, SQL: `UPDATE t SET m = 1`},
		{Func: "Tx.Tables", Wrapper: "Exec", Const: true, SQL: `SELECT b FROM t FOR UPDATE`},
		{Func: "Tx.Tables", Wrapper: "Exec", Const: true, SQL: `SELECT a FROM t FOR UPDATE`},
		{Func: "pgDialect.Split", Wrapper: "Exec", Const: true, SQL: `SELECT 'pg'`},
		{Func: "sqliteDialect.Split", Wrapper: "Exec", Const: true, SQL: `SELECT 'sqlite'`},
		{Func: "Tx.Locked", Wrapper: "Exec", Const: true, SQL: `SELECT a FROM t WHERE a = ?`},
		{Func: "Tx.Locked", Wrapper: "Exec", Const: true, SQL: `SELECT a FROM t WHERE a = ? FOR UPDATE`},
		{Func: "Tx.Composes", Wrapper: "Exec", Expr: "s.SQL()", Composed: true},
		{Func: "Tx.PassesTwo", Wrapper: "both", Const: true, SQL: `DELETE FROM t WHERE a = 3`},
		{Func: "Tx.PassesTwo", Wrapper: "both", Const: true, SQL: `DELETE FROM t WHERE a = 4`},
		{Const: true, SQL: ` WHERE a = ?`, Frag: "fragCond"},
		{Const: true, SQL: ` WHERE b = ?`, Frag: "fragGiven"},
		{Const: true, SQL: `SELECT a FROM t`, Frag: "fragHead"},
	}
	if !reflect.DeepEqual(sites, want) {
		t.Errorf("Collect:\n got %+v\nwant %+v", sites, want)
	}
	dyn := Dynamic(sites)
	wantDyn := []string{"Tx.Both: Exec(`SELECT ` + name + ` FROM ` + table)", "Tx.Both: Exec(`SELECT ` + name)"}
	if !reflect.DeepEqual(dyn, wantDyn) {
		t.Errorf("Dynamic: got %q, want %q", dyn, wantDyn)
	}
	if got, want := Composed(sites), []string{"Tx.Composes: Exec(s.SQL())"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Composed: got %q, want %q", got, want)
	}
}

// TestCollectRefusesAFragMadeAtRunTime: a conversion to Frag of a text
// that is not a constant is an error, naming it.
func TestCollectRefusesAFragMadeAtRunTime(t *testing.T) {
	_, err := Collect("testdata/fragconv")
	if err == nil || !strings.Contains(err.Error(), "Frag(`SELECT ` + name)") {
		t.Fatalf("Collect: %v, want the conversion refused", err)
	}
}

// TestCollectDecidesTheStoreByPackage: what a function of package
// sqlite or postgres runs, method or not, whatever its name, and the
// fragments it defines are that store's only; sqlcore's are both's.
func TestCollectDecidesTheStoreByPackage(t *testing.T) {
	sites, err := Collect("testdata/fixture/postgres", "testdata/fixture/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		`SELECT 'pg method'`: "postgres", `SELECT 'pg function'`: "postgres", `SELECT 'pg, named sqlite'`: "postgres", `SELECT 'pg fragment'`: "postgres",
		`SELECT 'sqlite method'`: "sqlite", `SELECT 'sqlite function'`: "sqlite", `SELECT 'sqlite, named pg'`: "sqlite", `SELECT 'sqlite fragment'`: "sqlite",
	}
	got := map[string]string{}
	for _, s := range sites {
		got[s.SQL] = s.Only
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the store of each text:\n got %v\nwant %v", got, want)
	}
}
