package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(envPauseChild) != "" {
		os.Exit(pauseChild()) // the paused process of pause_test.go
	}
	os.Exit(pgtest.Main(m))
}

// openStore opens a new PostgreSQL database of the migrated schema, closed
// when the test ends; twice on one URL is two processes' stores.
func openStore(t *testing.T, dsn string) *Store {
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
		// What is inside a literal, a quoted name or a comment is left as
		// it is, whatever it looks like.
		{`SELECT 'CROSS JOIN b ON', 'WHERE +a.b', "MAX(a, b)" /* what? x'' */, ? -- ?`, `SELECT 'CROSS JOIN b ON', 'WHERE +a.b', "MAX(a, b)" /* what? x'' */, $1 -- ?`},
		{`SELECT x'00ff', X''`, `SELECT '\x00ff'::bytea, '\x'::bytea`},
		{`SELECT group_concat(name), group_concat(name, ' ')`, `SELECT string_agg(name, ','), string_agg(name, ' ')`},
	} {
		if got := translated(c.sqlite); got != c.pg {
			t.Errorf("translated(%q)\n got %q\nwant %q", c.sqlite, got, c.pg)
		}
	}
	// Arguments follow the renumbering.
	text, args, err := textAndArgs(`SELECT ?2 FROM t WHERE x = ?3`, []any{"unused", "two", "three"})
	if err != nil || text != `SELECT $1 FROM t WHERE x = $2` || len(args) != 2 || args[0] != "two" || args[1] != "three" {
		t.Errorf("textAndArgs: %q %v", text, args)
	}
	// A statement given its own PostgreSQL text takes that.
	q := sqlcore.PGQuery(`SELECT sqlite_only(?)`, `SELECT pg_only(?)`)
	if got := translated(q); got != `SELECT pg_only($1)` {
		t.Errorf("query's text: %q", got)
	}
}

// News told on one store reaches the waiters of another process on the
// same database, keys with any bytes included; a store's own news is
// told to its own waiters once.
func TestPGNotifierCarriesNewsBetweenProcesses(t *testing.T) {
	dsn := pgtest.Database(t, "db", Prepare)
	a, b := openStore(t, dsn), openStore(t, dsn)
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

// A process that nobody else listens to sends no news, and holds it:
// once another listens (a count finds its listening connection, whether
// or not it counts as a member, or it tells that it joined), the news
// held is sent, none lost.
func TestPGNewsWaitsForAListener(t *testing.T) {
	ctx := context.Background()
	until := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("never %s", what)
			}
			time.Sleep(10 * time.Millisecond) // polling a condition
		}
	}
	// listener is another process's listening connection, as the
	// notifier's: it LISTENs and holds listenLock; it is no member.
	listener := func(t *testing.T, dsn string, lock int64) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		for _, q := range []string{"LISTEN " + channel, fmt.Sprintf("SELECT pg_advisory_lock_shared(%d)", lock)} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	hears := func(t *testing.T, c *pgx.Conn, key string) {
		t.Helper()
		for {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			n, err := c.WaitForNotification(wctx)
			cancel()
			if err != nil {
				t.Fatalf("no news of %q: %v", key, err)
			}
			if strings.HasSuffix(n.Payload, ":"+key) {
				return
			}
		}
	}
	for _, c := range []struct {
		name       string
		countEvery time.Duration
		tell       bool  // the listener tells that it joined (joinChannel)
		lock       int64 // what the listener holds
	}{
		{"found by a count", memberEvery, false, listenLock},
		{"told of a join", time.Hour, true, listenLock},
		// A process of a version before listenLock listens without it.
		{"a member that holds no listener lock", memberEvery, false, memberLock},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := pgtest.Database(t, "db", Prepare) // no listener of another subtest's left on it
			a, err := openPostgres(ctx, dsn, Options{Sync: SyncNormal}, c.countEvery)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			until(t, "counted nobody else listening", func() bool { return !a.news.others.Load() })
			br := broker.New(broker.Config{Store: a, Notifier: a.Notifier()})
			t.Cleanup(br.Close)
			key := "orders-" + strings.ReplaceAll(c.name, " ", "-")
			if _, err := br.Push(ctx, []broker.PushItem{{Queue: key, Payload: []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			until(t, "a round of news held", func() bool { return a.news.unsent.Load() > 0 })
			if n := a.news.sent.Load(); n != 0 {
				t.Fatalf("with nobody else listening, a sent news %d times", n)
			}
			l := listener(t, dsn, c.lock)
			if c.tell {
				if _, err := l.Exec(ctx, `SELECT pg_notify($1, 'newcomer')`, joinChannel); err != nil {
					t.Fatal(err)
				}
			}
			hears(t, l, key)
		})
	}
}

// Of two processes on one database, one leads at a time; when the leader
// stops, the other takes the lead.
func TestLeadIsOneProcessAtATime(t *testing.T) {
	dsn := pgtest.Database(t, "db", Prepare)
	a, b := openStore(t, dsn), openStore(t, dsn)
	var leaders atomic.Int32
	var most atomic.Int32
	lead := func(d *Store, ctx context.Context, started chan<- string, name string) {
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
		"/var/lib/lazarus/lazarus.db":                                         "/var/lib/lazarus/lazarus.db",
		"postgres://lz:s3cret@db.example:6432/lazarus?sslmode=require":        "postgres://lz@db.example:6432/lazarus",
		"postgresql://lz:s3cret@/lazarus?host=/run/postgresql":                "postgres://lz@/lazarus?host=/run/postgresql",
		"host=/run/postgresql dbname=lazarus user=lz password=s3cret":         "postgres://lz@/lazarus?host=/run/postgresql",
		"host=db.example port=6432 dbname=lazarus user=lz password='s3 cret'": "postgres://lz@db.example:6432/lazarus",
	} {
		if got := Describe(in); got != want {
			t.Errorf("Describe(%q) = %q, want %q", in, got, want)
		}
	}
}

// A write that waited for the writer's lock while another process
// removed a queue sees that removal: its broker forgets the queue before
// it looks anything up, and the push makes the queue again rather than
// go into the removed partition (a statement's snapshot is taken before
// it waits: the generation must be read after the lock).
func TestAWriteThatWaitedSeesWhatTheOtherProcessRemoved(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	d := openStore(t, dsn)
	b := broker.New(broker.Config{Store: d, Notifier: d.Notifier()})
	t.Cleanup(b.Close)
	push := func(txid string) error {
		_, err := b.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: txid, Payload: []byte(`{}`)}})
		return err
	}
	if err := push("old"); err != nil { // b's cache holds q and p
		t.Fatal(err)
	}
	// Another process: it holds the writer's lock while b's push waits
	// for it, and removes the queue.
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(writerLock)); err != nil {
		t.Fatal(err)
	}
	pushed := make(chan error, 1)
	go func() { pushed <- push("new") }()
	// Read from outside other's transaction, whose reads of
	// pg_stat_activity would see one snapshot of it (PostgreSQL caches
	// them a transaction): a push that began to wait after the first
	// look was never seen.
	waitForLock(t, d, "advisory")
	for _, table := range []string{"messages", "consumers", "subscriptions", "partitions", "queues"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+table); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-pushed; err != nil {
		t.Fatalf("the push that waited: %v", err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 10})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].TransactionID != "new" {
		t.Fatalf("pop: %+v %v, want the message pushed after the removal", res.Messages, err)
	}
}

// A leader whose lock's connection is cut (its backend terminated, as
// when the server or the network drops it) stops its work at once, and
// a process takes the lead again.
func TestLeadEndsWhenItsConnectionIsCut(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	a := openStore(t, dsn)
	runs := make(chan context.Context, 4)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Lead(lctx, func(ctx context.Context) { runs <- ctx; <-ctx.Done() })
	}()
	first := <-runs
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var cut bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND ((classid::bigint << 32) | objid::bigint) = $1`, int64(leadLock)).Scan(&cut); err != nil || !cut {
		t.Fatalf("cut the leader's connection: %v %v", cut, err)
	}
	select {
	case <-first.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the leader's work went on after its lock's connection was cut")
	}
	select {
	case again := <-runs:
		if again.Err() != nil {
			t.Fatal("led again with a context already done")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("nobody took the lead again")
	}
	stop()
	<-done
}

// A function that goes on after one of its statements failed (ignoring
// the error) cannot commit: PostgreSQL rolled the transaction back, and
// Update says so rather than report a write that is not there.
func TestAWriteWhoseStatementFailedIsNotReportedCommitted(t *testing.T) {
	ctx := context.Background()
	d := openStore(t, pgtest.Database(t, "db", Prepare))
	err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		st := tx.(*sqlcore.Tx)
		if _, err := st.Exec(ctx, `INSERT INTO settings (key, value) VALUES ('a', 'b')`); err != nil {
			return err
		}
		_, _ = st.Exec(ctx, `SELECT no_such_function()`) // fails; ignored
		return nil
	})
	if err == nil {
		t.Fatal("Update reported the write committed")
	}
	if errors.Is(err, broker.ErrCommitUnknown) {
		t.Fatalf("Update: %v; the server answered ROLLBACK: the outcome is known", err)
	}
	var n int
	if err := d.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM settings WHERE key = 'a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("settings a: %d rows (%v), want none", n, err)
	}
}

// A PostgreSQL database migrated by a newer Lazarus is refused, as a
// SQLite file is, rather than served without what its migrations added.
func TestPGRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	d := openStore(t, dsn)
	if _, err := d.ExecUncatalogued(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if again, err := Open(ctx, dsn, SyncNormal); err == nil {
		again.Close()
		t.Fatal("opened a database of schema version 9999")
	} else if !strings.Contains(err.Error(), "schema version 9999") {
		t.Fatalf("open: %v, want the newer schema said", err)
	}
}

// When the listening connections are cut, every waiter is woken once a
// process listens again (news sent meanwhile may be lost), and news
// crosses between the processes again.
func TestPGNotifierListensAgainAfterItsConnectionIsCut(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	a, b := openStore(t, dsn), openStore(t, dsn)
	waiting := b.Notifier().Watch("orders")
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var cut int
	if err := admin.QueryRow(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`, int64(listenLock>>32), int64(listenLock&0xffffffff)).Scan(&cut); err != nil || cut != 2 {
		t.Fatalf("cut the listening connections: %d (%v), want both", cut, err)
	}
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("b's waiter was not woken when b listened again")
	}
	// Listening again: news from a reaches b (sent until it does, as
	// a's own listener may not be back yet either).
	next := b.Notifier().Watch("orders")
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.Notifier().Notify("orders")
		select {
		case <-next:
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("news from a never reached b after the cut")
		}
	}
}

// Whatever a payload's words, the tsvector made of them is one
// PostgreSQL takes (under its 1 MiB, positions counted), and says when it
// holds only part of them.
func TestPGTsvectorAlwaysFits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openStore(t, pgtest.Database(t, "db", Prepare))
	ints := make([]string, 150_000)
	for i := range ints {
		ints[i] = strconv.Itoa(1_000_000 + i)
	}
	long := make([]string, 1000)
	for i := range long {
		long[i] = fmt.Sprintf("%04d%s", i, strings.Repeat("x", 2100))
	}
	var often strings.Builder
	for i := range 300 {
		for j := range 40 {
			fmt.Fprintf(&often, "w%d%s ", j, strings.Repeat("y", i%3))
		}
	}
	odd := make([]string, 200_000)
	for i := range odd {
		odd[i] = fmt.Sprintf("%x", i*7919)
	}
	for _, c := range []struct {
		name string
		text string
		cut  bool
	}{
		{"Integers", strings.Join(ints, " "), true},
		{"LongWords", strings.Join(long, " "), true},
		{"LongWordsUnderTheBudget", strings.Join(long[:450], " "), false},
		{"ManyPositions", often.String(), false},
		{"OddLengths", strings.Join(odd, " "), true},
		{"Small", "a b c", false},
	} {
		v, cut := tsvectorCut(c.text)
		if cut != c.cut {
			t.Errorf("%s: cut %v, want %v", c.name, cut, c.cut)
		}
		var n int
		if err := d.QueryRowUncatalogued(ctx, `SELECT length(CAST($1 AS tsvector))`, v).Scan(&n); err != nil {
			t.Errorf("%s: PostgreSQL refuses the tsvector: %v", c.name, err)
		}
	}
}
