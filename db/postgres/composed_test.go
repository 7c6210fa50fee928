package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// composedFamily is a filter's statement (a sqlcore.Stmt) for every
// combination of the filter's conditions that changes its text: each
// branch of the builder taken and not taken.
type composedFamily struct {
	name  string
	stmts func() []sqlcore.Stmt
}

// each calls fn with every combination of n choices of k[i] values
// each (k[i] ≥ 1): c[i] in [0, k[i]).
func each(k []int, fn func(c []int)) {
	c := make([]int, len(k))
	for {
		fn(c)
		i := 0
		for ; i < len(k); i++ {
			if c[i]++; c[i] < k[i] {
				break
			}
			c[i] = 0
		}
		if i == len(k) {
			return
		}
	}
}

func pick[T any](c int, vs ...T) T { return vs[c] }

var composedFamilies = []composedFamily{
	{"Jobs", func() []sqlcore.Stmt {
		var out []sqlcore.Stmt
		each([]int{2, 2, 2, 2}, func(c []int) {
			f := broker.JobFilter{State: pick(c[0], "", "running"), Queue: pick(c[1], "", "q"), Kind: pick(c[2], "", "replay")}
			p := broker.Page{Limit: 50, After: pick(c[3], nil, &broker.Cursor{ID: 9})}
			out = append(out, sqlcore.JobsStmt(f, p))
		})
		return out
	}},
	{"ListAudit", func() []sqlcore.Stmt {
		var out []sqlcore.Stmt
		each([]int{2, 3, 2, 2, 2, 2, 2, 2}, func(c []int) {
			f := broker.AuditFilter{
				Action: pick(c[0], "", "replay"), Stream: pick(c[1], broker.AuditStreamPeople, broker.AuditStreamBroker, broker.AuditStreamAll),
				JobID: pick[int64](c[2], 0, 3), Actor: pick(c[3], "", "ann"), Queue: pick(c[4], "", "q"),
				Except: pick(c[5], nil, []string{"login", "logout"}),
			}
			p := broker.Page{Limit: 50, After: pick(c[6], nil, &broker.Cursor{ID: 9}), Offset: pick(c[7], 0, 100)}
			out = append(out, sqlcore.AuditStmt(f, p))
		})
		return out
	}},
}

// TestPGComposedStatementsPrepare: every statement a filter composes
// (each combination of its conditions, composedFamilies) is made of
// catalogued fragments (compose), has as many parameters as
// arguments on both stores, is the PostgreSQL text the translator makes
// of the whole where no fragment's was written by hand, and PREPAREs on
// a migrated PostgreSQL. (TestPGComposedStatementsAreCatalogued checks
// that every fragment is in a statement composed.)
func TestPGComposedStatementsPrepare(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Database(t, "db", Prepare))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, fam := range composedFamilies {
		seen := map[string]bool{}
		for _, s := range fam.stmts() {
			q := s.SQL()
			if seen[q] {
				continue
			}
			seen[q] = true
			pg, err := compose(s.Parts())
			if err != nil {
				t.Fatalf("%s: %v\n%s", fam.name, err, q)
			}
			hand := false
			for _, p := range s.Parts() {
				_, given := sqlcore.PGGiven.Load(string(p))
				hand = hand || given
			}
			if n := strings.Count(q, "?"); n != len(s.Args()) {
				t.Errorf("%s: %d parameters on SQLite, %d arguments\n%s", fam.name, n, len(s.Args()), q)
			}
			if n := paramCount(pg.text); n != len(s.Args()) {
				t.Errorf("%s: %d parameters on PostgreSQL, %d arguments\n%s", fam.name, n, len(s.Args()), pg.text)
			}
			if whole := translated(q); !hand && whole != pg.text {
				t.Errorf("%s: composed\n%s\nbut the whole translates to\n%s", fam.name, pg.text, whole)
			}
			if _, err := conn.Prepare(ctx, "", pg.text); err != nil {
				t.Errorf("%s: %v\n%s", fam.name, err, pg.text)
			}
		}
		t.Logf("%s: %d statements prepared", fam.name, len(seen))
	}
}

// TestPGComposedFragmentNotCataloguedIsRefused: on PostgreSQL a composed
// statement one of whose fragments the catalog lacks fails with
// errNotCatalogued, naming the fragment and the function, rather than
// run translated.
func TestPGComposedFragmentNotCataloguedIsRefused(t *testing.T) {
	d := openStore(t, pgtest.Database(t, "db", Prepare))
	ctx := context.Background()
	const kind = `kind = ?`
	s, ok := fragments[kind]
	if !ok {
		t.Fatalf("Jobs' kind fragment is not in the catalog")
	}
	delete(fragments, kind)
	defer func() { fragments[kind] = s }()
	composed.clear()
	defer composed.clear()
	err := d.View(ctx, func(tx broker.Tx) error {
		_, err := tx.Jobs(ctx, broker.JobFilter{Kind: "replay"}, broker.Page{Limit: 5})
		return err
	})
	if !errors.Is(err, errNotCatalogued) || !strings.Contains(err.Error(), "Tx.Jobs") || !strings.Contains(err.Error(), kind) {
		t.Fatalf("Jobs without its kind fragment: %v, want errNotCatalogued naming Tx.Jobs and the fragment", err)
	}
	// The other fragments still compose.
	err = d.View(ctx, func(tx broker.Tx) error {
		_, err := tx.Jobs(ctx, broker.JobFilter{State: "running"}, broker.Page{Limit: 5})
		return err
	})
	if err != nil {
		t.Fatalf("Jobs of a state: %v", err)
	}
}
