package db

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openPG opens a new PostgreSQL database of the migrated schema, closed
// when the test ends; twice on one URL is two processes' stores.
func openPG(t *testing.T, dsn string) *DB {
	t.Helper()
	d, err := Open(context.Background(), dsn, SyncNormal)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestPGSQLTranslatesSQLitesDialect(t *testing.T) {
	for _, c := range []struct{ sqlite, pg string }{
		{`SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		// A bare ? is one more than the highest number before it.
		{`SELECT ?2, ?1, ?`, `SELECT $2, $1, $3`},
		// Quotes and comments are left alone.
		{`SELECT '?', "a?" -- what?
			FROM t WHERE x = ?`, `SELECT '?', "a?" -- what?
			FROM t WHERE x = $1`},
		// SQLite leaves ?1 unused: the others are numbered densely.
		{`SELECT ?2 FROM t WHERE x = ?3`, `SELECT $1 FROM t WHERE x = $2`},
		{`SELECT MAX(a, b), MAX(c), MIN(MAX(a, 1), (SELECT MIN(x) FROM y))`, `SELECT GREATEST(a, b), MAX(c), LEAST(GREATEST(a, 1), (SELECT MIN(x) FROM y))`},
		{`DELETE FROM t WHERE id IN (SELECT value FROM json_each(?))`, `DELETE FROM t WHERE id IN (SELECT value::bigint FROM json_array_elements_text($1::json) AS value)`},
		{`SELECT 1 FROM a x CROSS JOIN b y ON y.id = x.id`, `SELECT 1 FROM a x JOIN b y ON y.id = x.id`},
		{`SELECT CAST(a AS INTEGER), CAST(? AS BLOB), x'' LIMIT -1`, `SELECT CAST(a AS BIGINT), CAST($1 AS BYTEA), '\x'::bytea LIMIT ALL`},
		{`DELETE FROM temp.copies_in`, `DELETE FROM pg_temp.copies_in`},
		{`SELECT 1 WHERE +d.fingerprint = ? AND (+d.transaction_id = ?) AND d.n = +5`, `SELECT 1 WHERE d.fingerprint = $1 AND (d.transaction_id = $2) AND d.n = +5`},
	} {
		if got := pgSQL(c.sqlite); got != c.pg {
			t.Errorf("pgSQL(%q)\n got %q\nwant %q", c.sqlite, got, c.pg)
		}
	}
	// Arguments follow the renumbering.
	text, args := pgArgs(`SELECT ?2 FROM t WHERE x = ?3`, []any{"unused", "two", "three"})
	if text != `SELECT $1 FROM t WHERE x = $2` || len(args) != 2 || args[0] != "two" || args[1] != "three" {
		t.Errorf("pgArgs: %q %v", text, args)
	}
	// A statement given its own PostgreSQL text takes that.
	q := pgQuery(`SELECT sqlite_only(?)`, `SELECT pg_only(?)`)
	if got := pgSQL(q); got != `SELECT pg_only($1)` {
		t.Errorf("pgQuery's text: %q", got)
	}
}

// News told on one store reaches the waiters of another process on the
// same database, keys with any bytes included; a store's own news is
// told to its own waiters once.
func TestPGNotifierCarriesNewsBetweenProcesses(t *testing.T) {
	dsn := pgtest.Database(t, "db", Prepare)
	a, b := openPG(t, dsn), openPG(t, dsn)
	for _, key := range []string{"orders", "\x00jobs", "a:b %"} {
		seen := b.Notifier().Watch(key)
		other := b.Notifier().Watch(key + "-not")
		a.Notifier().Notify(key)
		select {
		case <-seen:
		case <-time.After(30 * time.Second):
			t.Fatalf("news of %q sent by a never reached b", key)
		}
		select {
		case <-other:
			t.Fatalf("news of %q woke the waiters of %q", key, key+"-not")
		default:
		}
	}
	own := a.Notifier().Watch("mine")
	a.Notifier().Notify("mine")
	select {
	case <-own:
	default:
		t.Fatal("a's own news did not reach its waiter at once")
	}
}

// Of two processes on one database, one leads at a time; when the leader
// stops, the other takes the lead.
func TestLeadIsOneProcessAtATime(t *testing.T) {
	dsn := pgtest.Database(t, "db", Prepare)
	a, b := openPG(t, dsn), openPG(t, dsn)
	var leaders atomic.Int32
	var most atomic.Int32
	lead := func(d *DB, ctx context.Context, started chan<- string, name string) {
		d.Lead(ctx, func(ctx context.Context) {
			n := leaders.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			started <- name
			<-ctx.Done()
			leaders.Add(-1)
		})
	}
	started := make(chan string, 2)
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() { defer close(doneA); lead(a, ctxA, started, "a") }()
	first := <-started
	if first != "a" || !a.Leading() {
		t.Fatalf("the first to lead: %s (a leading: %v)", first, a.Leading())
	}
	go func() { defer close(doneB); lead(b, ctxB, started, "b") }()
	// b tries every leadRetry; a leads meanwhile, so b must not start.
	select {
	case who := <-started:
		t.Fatalf("%s led while a did", who)
	case <-time.After(3 * leadRetry):
	}
	if b.Leading() {
		t.Fatal("b says it leads while a does")
	}
	stopA()
	<-doneA
	select {
	case who := <-started:
		if who != "b" {
			t.Fatalf("after a stopped, %s led", who)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("b never took the lead after a stopped")
	}
	if most.Load() != 1 {
		t.Fatalf("%d led at once", most.Load())
	}
	stopB()
	<-doneB
}

func TestDescribeLeavesThePasswordOut(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/lazarus/lazarus.db":                                  "/var/lib/lazarus/lazarus.db",
		"postgres://lz:s3cret@db.example:6432/lazarus?sslmode=require": "postgres://lz@db.example:6432/lazarus",
		"postgresql://lz:s3cret@/lazarus?host=/run/postgresql":         "postgres://lz@/lazarus?host=/run/postgresql",
	} {
		if got := Describe(in); got != want {
			t.Errorf("Describe(%q) = %q, want %q", in, got, want)
		}
	}
}
