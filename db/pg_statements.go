package db

// testdata/pg_statements.sql lists every constant statement of db with
// its PostgreSQL text, as pgSQL translates it or as pgQuery gave it
// (docs/postgres.md, "The PostgreSQL statements"). After changing a
// statement or the translator, regenerate it and review its diff:
// TestPGStatementsFile fails while it is stale.
//
// The generator is a test of this package (pg_statements_test.go), not
// a program, because the translator is unexported here; it finds the
// statements with db/internal/gensql (go/ast and go/types).
//
//go:generate go test -run ^TestPGStatementsFile$ -update .
