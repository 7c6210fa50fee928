// Package postgres is Lazarus's PostgreSQL store (Store, opened by
// package db on a postgres:// URL or a libpq key=value string):
// pipelined writes (store.go, begin.go), the notifier (notify.go),
// membership (members.go) and leadership (locks.go), the catalog
// of its statements (statements.go, catalog.go) and the schema as
// numbered embedded migrations (migrations_pg/). It runs the broker.Tx
// both stores share, sqlcore.Tx (db/internal/sqlcore), through an
// executor and a dialect of its own (tx.go).
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The PostgreSQL store (STORAGE.md): the same sqlcore.Tx, its statements
// the catalog's PostgreSQL texts of its SQLite ones (statements.go),
// on a pgxpool of connections
// held through database/sql (pgx's stdlib). A View's statements go
// through database/sql; a write's run on its pgx connection itself
// (begin.go), scanned by pgx's rules, which take the destinations of
// this package's scans as database/sql does.
//
// Writers: an Update holds this process's write mutex and, in the
// database, a transaction-scoped advisory lock (writerLock) taken with
// its first statement, to its commit (broker.Store.Update, "Writers"):
// shared by writes marked broker.UpdateOptions.Concurrent (pushes, leases, acks) while
// other processes share the database (members.go), which then run
// beside each other's and settle their conflicts by row locks
// (rowLocks: the consumer read, the ready consumers skipped when
// locked, the partitions pushed to); exclusive for every other write,
// and for all of a process alone, which then runs alone. The ready mark
// and the kept counts are the store's, as on SQLite: marked and folded
// inside the commit. Reads (View) run on a snapshot (REPEATABLE READ,
// READ ONLY) beside the writer. A statement running when ctx ends is
// cancelled, a write's too (its transaction then rolls back); COMMIT is
// not (commit). Row ids are identities: none is given twice.

//go:embed migrations_pg/*.sql
var migrations embed.FS

// writerLock is the key of the advisory lock every write transaction
// holds; migrateLock the one migrations hold (session-scoped), so that
// processes starting together migrate one after the other.
const (
	writerLock  = 0x4c617a61_72757301 // "Lazarus" 1
	migrateLock = 0x4c617a61_72757302
)

// sessionParams bound what a process that stops answering without
// closing its connections (a machine lost, a VM paused, a network cut)
// can hold: the server probes an idle TCP connection after 30 seconds,
// so a dead client's session (and its locks) ends within about a minute
// rather than the operating system's two hours; and a transaction that
// stands idle ends its session (idle_in_transaction_session_timeout:
// writeIdle on the writes' pool, readIdle on the reads'). A URL may set
// them otherwise, for both pools.
var sessionParams = map[string]string{
	"tcp_keepalives_idle":     "30",
	"tcp_keepalives_interval": "10",
	"tcp_keepalives_count":    "3",
}

// idleParam is the server's setting that ends a session whose
// transaction has stood idle (waiting for its client's next statement)
// that long, rolling the transaction back and releasing its locks.
const idleParam = "idle_in_transaction_session_timeout"

// writeIdle is idleParam on the writes' pool: the backstop for a write
// whose process stopped answering while no other process could end its
// session (stuckAfter; fence.go). It is long, not a few seconds: the
// server counts as idle the time it takes to receive a statement too, so
// a large push sent over a slow link, or by a process starved of CPU,
// would lose its session at every try under a short limit (a push of
// some MB under -race at load 30 did, three times in a row), though it
// holds up nobody when nobody waits for its locks.
const writeIdle = "60s"

// stuckAfter is how long a write session that holds the writer's lock
// may stand idle in its transaction, or blocked sending its process
// rows, while another session waits for a lock, before another process
// ends it (fence.go). A write holds the writer's lock (exclusive, or
// shared, which an exclusive waiter then queues every later write
// behind) and its rows' locks to its commit: a process paused in a write
// (SIGSTOP, a VM paused, a machine swapping) stops the writes of every
// process until its session ends. Healthy, a write stands idle only
// while its process works between two of its statements, milliseconds
// (docs/postgres.md gives what was measured); one ended after standing
// longer was rolled back, and runs again on another connection (Update,
// errSessionLost). So a paused process costs the others' writes about
// this long. A URL that sets idleParam sets this too (0 turns it off).
const stuckAfter = 5 * time.Second

// readIdle is idleParam on the reads' pool: a read holds no lock a
// write waits for, and its snapshot holds back only the server's
// cleanup, so a paused reader costs nobody a wait, and a read, which is
// not run again, is given a minute.
const readIdle = "60s"

// IsPostgres reports whether a --db value names a PostgreSQL database (a
// postgres:// or postgresql:// URL, or a libpq key=value string such as
// "host=/run/postgresql dbname=lazarus") rather than a SQLite file.
func IsPostgres(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return true
	}
	key, ok := firstKey(dsn)
	return ok && libpqKeywords[key]
}

// CheckName refuses a --db value that looks like a libpq key=value
// string (a word and = first) whose first word is no connection
// keyword: a mistyped connection string, which must not become a SQLite
// file of that name. Only the word is shown (the string may hold a
// password).
func CheckName(dsn string) error {
	if key, ok := firstKey(dsn); ok && !libpqKeywords[key] {
		return fmt.Errorf("--db starts with %q=, as a PostgreSQL key=value connection string would (host=... dbname=... user=...), but %q is not a connection keyword (for a SQLite file of such a name, write ./%s=... with the ./)", key, key, key)
	}
	return nil
}

// firstKey is the word before the first = of a key=value string.
func firstKey(dsn string) (string, bool) {
	s := strings.TrimLeft(dsn, " \t\n")
	i := strings.IndexByte(s, '=')
	if i <= 0 {
		return "", false
	}
	key := strings.TrimRight(s[:i], " \t")
	for _, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "", false
		}
	}
	return key, true
}

// libpqKeywords are libpq's connection keywords (pgx reads them, and
// passes those it does not know to the server as settings).
var libpqKeywords = wordSet(`host hostaddr port dbname user password passfile
	channel_binding connect_timeout client_encoding options application_name
	fallback_application_name keepalives keepalives_idle keepalives_interval
	keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl
	sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl
	sslcrldir sslsni requirepeer ssl_min_protocol_version ssl_max_protocol_version
	krbsrvname gsslib gssdelegation service target_session_attrs load_balance_hosts
	search_path pool_max_conns pool_min_conns`)

// wordSet is the set of the words of s.
func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// Store is the PostgreSQL store, which package db opens on a URL.
type Store struct {
	pool *pgxpool.Pool
	db   *sql.DB // database/sql over pool
	// readPool and read serve the reads (View) alone (read.go).
	readPool *pgxpool.Pool
	read     *sql.DB

	// wmu makes this process's write transactions one at a time: each
	// holds it from BEGIN to the end of its scope, so that scopes end in
	// commit order before the next write (broker.TxScope). The advisory
	// lock does the same across processes. It also guards the DB's fold
	// notes (unfolded, unfoldedConsumers, foldedAt), which belong to
	// whoever writes, as on SQLite, and seenGen.
	wmu     sync.Mutex
	seenGen int64 // the cache generation as of this process's last write (0: none yet)
	// qmu guards the Updates waiting for the transaction under way
	// (group.go): busy, one is under way; waiting, those queued behind
	// it; closed, Close was called.
	qmu     sync.Mutex
	busy    bool
	waiting []*writeReq
	closed  bool
	news    *notifier

	// path is the URL the store was opened on; sync its durability;
	// folds the notes of the next fold (guarded by wmu); leading is set
	// while this process leads the background work (Lead).
	path    string
	sync    Sync
	log     *slog.Logger
	folds   *sqlcore.Folds
	leading atomic.Bool

	// idleFromURL: the URL set idleParam, which then bounds the fence
	// too (stuckAfter otherwise).
	idleFromURL bool

	// alone: this process was the only one on the database at its last
	// count (members.go), and no process told of its joining since; its
	// hot writes then run as the one writer's. joins counts the
	// processes that told so; countMu guards it, and a count's store of
	// alone, which the news of one joining meanwhile overrules.
	alone     atomic.Bool
	countMu   sync.Mutex
	joins     int64
	ungrouped bool // Options.Ungrouped
	stopCount context.CancelFunc
	countDone sync.WaitGroup

	// wire counts the round trips and statements of this store's
	// writes (wire.go).
	wire wire
}

// ConcurrentWrites reports whether the store runs writes marked
// broker.UpdateOptions.Concurrent beside each other now (broker.ConcurrentStore): the
// PostgreSQL store does while other processes share its database
// (members.go); SQLite's has one writer.
func (d *Store) ConcurrentWrites() bool { return !d.alone.Load() }

// Notifier is the broker.Notifier the store needs: on PostgreSQL one
// that carries the news between the processes of the database
// (notify.go); nil on SQLite, whose one process needs only the
// broker's own.
func (d *Store) Notifier() broker.Notifier { return d.news }

// Sync is the durability asked for: FULL waits for the server's log
// flush at each commit (synchronous_commit on), NORMAL does not (off).
type Sync string

// The durability modes.
const (
	SyncFull   Sync = "FULL"
	SyncNormal Sync = "NORMAL"
)

// Options are the settings of OpenWith; the zero value of each field
// picks its default.
type Options struct {
	Sync Sync // default SyncFull
	// Logger receives what goes wrong in the background (the notifier,
	// membership, each failed try of Wait); default slog.Default().
	Logger *slog.Logger
	// FoldEvery is how often, at most, a write brings the counts kept for
	// the queue page up to date inside its commit. Default 1 s; negative:
	// at every commit, for tests.
	FoldEvery time.Duration
	// NeverAlone makes the process write as one among several even when
	// it is alone on the database: its hot writes run with the row locks
	// they take beside other processes (members.go). For tests of that
	// mode in one process.
	NeverAlone bool
	// Ungrouped runs each write in a transaction of its own (no group
	// commit, group.go): for the benchmark that measures what group
	// commit buys.
	Ungrouped bool
	// Wait is how long Open tries again, with a growing pause, while the
	// server cannot be reached (refused, not started yet, a name that
	// does not resolve yet): a machine that boots Lazarus and PostgreSQL
	// together. 0: one try. Each failed try is logged (without the
	// password); an error the server answers (a wrong password, no such
	// database) is not tried again.
	Wait time.Duration
}

// Open opens the PostgreSQL database at dsn and brings its schema up to
// date.
func Open(ctx context.Context, dsn string, sync Sync) (*Store, error) {
	return OpenWith(ctx, dsn, Options{Sync: sync})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, o Options) (*Store, error) {
	if o.Sync == "" {
		o.Sync = SyncFull
	}
	return openPostgres(ctx, dsn, o, memberEvery)
}

// openPostgres opens the database at the URL dsn and migrates it; the
// process counts the processes of the database every countEvery
// (memberEvery but in tests).
func openPostgres(ctx context.Context, dsn string, o Options, countEvery time.Duration) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open the PostgreSQL database: its URL cannot be parsed (%s); %s", scrubPassword(dsn, err.Error()), percentHint)
	}
	if strings.Contains(cfg.ConnConfig.Host, "@") {
		// postgres://u:p@ss@host: the host became "ss@host".
		return nil, fmt.Errorf("open the PostgreSQL database: its URL's host has an @ in it; %s", percentHint)
	}
	// FULL: a commit waits for the server's log flush, whatever the
	// server's, database's or role's default says. NORMAL, as SQLite's
	// in WAL mode: a crash of Lazarus loses nothing committed; a crash of
	// the server may lose its last commits.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	if o.Sync == SyncNormal {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	for k, v := range sessionParams {
		if _, set := cfg.ConnConfig.RuntimeParams[k]; !set {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "lazarus"
	readCfg := cfg.Copy()
	_, idleSet := cfg.ConnConfig.RuntimeParams[idleParam]
	if !idleSet {
		cfg.ConnConfig.RuntimeParams[idleParam] = writeIdle
		readCfg.ConnConfig.RuntimeParams[idleParam] = readIdle
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redactURL(dsn), err)
	}
	p := &Store{pool: pool, db: stdlib.OpenDBFromPool(pool)}
	if p.readPool, p.read, err = readPool(ctx, readCfg); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", redactURL(dsn), err)
	}
	d := p
	d.path, d.sync, d.log, d.ungrouped = dsn, o.Sync, o.Logger, o.Ungrouped
	d.idleFromURL = idleSet
	if d.log == nil {
		d.log = slog.Default()
	}
	d.folds = sqlcore.NewFolds(o.FoldEvery, d.log)
	if err := p.reachAndMigrate(ctx, o.Wait, redactURL(dsn)); err != nil {
		d.Close()
		return nil, err
	}
	p.news = newNotifier(pool, d.log, p.joined)
	cctx, cancel := context.WithCancel(context.Background())
	p.stopCount = cancel
	p.countDone.Go(func() { p.count(cctx, o.NeverAlone, countEvery) })
	return d, nil
}

// reach waits until the server answers db, for at most wait while it
// cannot be reached (broker.ErrUnavailable: refused, starting up, a name
// not resolved yet), trying again after pauses from reachFirst that
// double up to reachMost, each failed try logged; what the server
// answers otherwise (a wrong password, no such database) ends it at once.
func reach(ctx context.Context, db *sql.DB, wait time.Duration, log *slog.Logger, name string) error {
	start := time.Now()
	pause := reachFirst
	for try := 1; ; try++ {
		err := unavailable(db.PingContext(ctx))
		if err == nil {
			if try > 1 {
				log.Info("PostgreSQL reached", "db", name, "tries", try, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		}
		left := wait - time.Since(start)
		if !errors.Is(err, broker.ErrUnavailable) || left <= 0 || ctx.Err() != nil {
			if try > 1 {
				return fmt.Errorf("not reached in %s (%d tries, --db-wait): %w", time.Since(start).Round(time.Millisecond), try, err)
			}
			return err
		}
		pause = min(pause, left)
		log.Warn("PostgreSQL not reachable yet; trying again", "db", name, "try", try, "retry_in", pause.String(), "wait_left", left.Round(time.Millisecond).String(), "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while waiting for PostgreSQL: %w)", ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, reachMost)
	}
}

// reachAndMigrate waits for the server (reach) and brings the schema up
// to date; should the server go away during the migration (it crashed
// or restarted, the network cut the connection: broker.ErrUnavailable),
// both run again, within the same wait. A migration is one transaction
// that records itself, so one cut short was rolled back, and one whose
// COMMIT went through is skipped the next time. Without this a process
// started while PostgreSQL crashed ended with "migrate: unexpected EOF"
// in spite of its --db-wait (found by the fault campaign, faults/).
func (p *Store) reachAndMigrate(ctx context.Context, wait time.Duration, name string) error {
	start := time.Now()
	for try := 1; ; try++ {
		if err := reach(ctx, p.db, wait-time.Since(start), p.log, name); err != nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		err := p.migrate(ctx, p.log)
		if err == nil || !errors.Is(unavailable(err), broker.ErrUnavailable) || time.Since(start) >= wait || ctx.Err() != nil {
			return err
		}
		p.log.Warn("PostgreSQL went away during the migration; trying again", "db", name, "try", try,
			"wait_left", (wait - time.Since(start)).Round(time.Millisecond).String(), "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while migrating: %w)", ctx.Err(), err)
		case <-time.After(reachFirst): // the server restarting: reach waits for it
		}
	}
}

// The pauses between tries of reach.
const (
	reachFirst = 250 * time.Millisecond
	reachMost  = 5 * time.Second
)

// Describe is a --db value as logs and errors may show it: a file's path
// as it is, a PostgreSQL URL without its password or parameters.
func Describe(dsn string) string {
	if IsPostgres(dsn) {
		return redactURL(dsn)
	}
	return dsn
}

// percentHint says how a URL's password must be written.
const percentHint = "a password (or user name) with @ / : ? # % or a space in it must be percent-encoded in a postgres:// URL: @ as %40, / as %2F, : as %3A, ? as %3F, # as %23, % as %25, a space as %20"

// scrubPassword is msg, an error about dsn, without anything that may be
// dsn's password: what lies between the user's colon and the last @ of
// a URL, or the value of a key=value string's password.
func scrubPassword(dsn, msg string) string {
	var secrets []string
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		rest, ok := strings.CutPrefix(dsn, scheme)
		if !ok {
			continue
		}
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
				secrets = append(secrets, pw)
			}
		}
	}
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "password="); ok && v != "" {
			secrets = append(secrets, strings.Trim(v, "'"))
		}
	}
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
		msg = strings.ReplaceAll(msg, url.PathEscape(s), "xxxxx")
	}
	return msg
}

// redactURL is dsn without its password, for errors and logs.
func redactURL(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "the PostgreSQL URL"
	}
	if strings.HasPrefix(cfg.Host, "/") { // a Unix socket's directory
		return fmt.Sprintf("postgres://%s@/%s?host=%s", cfg.User, cfg.Database, cfg.Host)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

// migrate applies the PostgreSQL migrations not yet recorded, each in a
// transaction of its own, under a session advisory lock.
func (p *Store) migrate(ctx context.Context, log *slog.Logger) error {
	conn, err := p.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLock)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrateLock))
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	files, err := fs.Glob(migrations, "migrations_pg/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(files)
	if err := sqlcore.CheckMigrationNumbers(files); err != nil {
		return err
	}
	known := 0
	if len(files) > 0 {
		known, _ = sqlcore.MigrationVersion(strings.TrimPrefix(files[len(files)-1], "migrations_pg/"))
	}
	var newest sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := sqlcore.RefuseNewer(newest, known); err != nil {
		return err
	}
	from := newest.Int64 // 0: a new database
	for _, f := range files {
		name := strings.TrimPrefix(f, "migrations_pg/")
		version, err := sqlcore.MigrationVersion(name)
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a number", name)
		}
		body, err := migrations.ReadFile(f)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		start := time.Now()
		applied, err := apply(ctx, conn, version, name, string(body))
		if err != nil {
			return err
		}
		if applied {
			sqlcore.LogMigration(log, "postgres", from, version, name, time.Since(start))
			from = int64(version)
		}
	}
	return nil
}

// apply applies one migration, unless it is recorded (applied false).
func apply(ctx context.Context, conn *sql.Conn, version int, name, body string) (applied bool, err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, version).Scan(&n); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`, version, name, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	return true, nil
}

// retries bounds how often a write that failed to serialize (or was
// chosen as a deadlock's victim) runs again.
const retries = 10

// lostRetries bounds how often a write whose session ended before its
// COMMIT was sent (errSessionLost) runs again: once is what a process
// that was paused needs (its other connections stood idle outside a
// transaction, and live on); a second covers a pooled connection the
// server had ended meanwhile. A server that cannot be reached fails the
// next try at once.
const lostRetries = 2

// errSessionLost marks a write whose connection was closed before its
// COMMIT was sent (write): the server ended its session (its transaction
// stood idle past stuckAfter while others waited, or past writeIdle: the
// process was paused, or starved of CPU; or an administrator ended it)
// or the connection broke. Its transaction was rolled back with the
// session, so nothing of it was made, and it may run again on another
// connection.
var errSessionLost = errors.New("the write's database session ended before its commit; it was rolled back")

// update is Update on PostgreSQL: fn runs again (in a new
// transaction, with a new scope) when the transaction failed to
// serialize, when it stopped because another process had changed
// what the cache holds (errCacheMoved: then with its BEGIN sent first
// and the cache emptied), and when its session ended before its COMMIT
// was sent (errSessionLost: on another connection).
func (d *Store) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	eager := false
	lost := 0
	for attempt := 0; ; attempt++ {
		err := d.write(ctx, o, fn, eager)
		// A session lost is told first: its write may also have found
		// the generation moved in the answers it read before the loss.
		if errors.Is(err, errSessionLost) {
			if lost < lostRetries && ctx.Err() == nil {
				lost++
				eager = eager || errors.Is(err, errCacheMoved)
				d.log.Warn("a write's database session ended before its commit (its transaction stood idle while other writes waited for it, or the connection broke); it was rolled back and runs again", "err", err)
				continue
			}
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		if errors.Is(err, errCacheMoved) && attempt < retries {
			eager = true
			continue
		}
		if !retryable(err) || attempt == retries {
			return unavailable(err)
		}
	}
}

// lead runs r's fn once in a write transaction: with its BEGIN sent
// with its first statement (begin.go), or, eager, sent first; then, in
// the same transaction, the Updates that queued meanwhile and may join
// it (group commit, group.go). fn's writes kept for the end and the
// ready mark go with COMMIT (tail, commit); a write that read and wrote
// nothing, and was joined by none, sends nothing at all. lead returns
// r's outcome, and answers those that joined once the transaction has
// ended and its scope with it.
func (d *Store) lead(r *writeReq) (err error) {
	p := d
	ctx, o, fn, eager := r.ctx, r.o, r.fn, r.eager
	if err := ctx.Err(); err != nil {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.isClosed() {
		return sqlcore.ErrClosed
	}
	conn, pgc, err := p.writeConn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	committed, commitSent := false, false
	// A hot write runs beside the other processes' only when there are
	// others (members.go): alone, it writes as the one writer.
	alone := p.alone.Load()
	var lk sqlcore.Locks = sqlcore.NoLocks{}
	if o.Concurrent && !alone {
		lk = rowLocks{}
	}
	_, lockShared := lk.(rowLocks)
	begin := &begin{conn: conn, pgc: pgc, wire: &p.wire, lockShared: lockShared, ephemeral: o.Ephemeral && d.sync == SyncFull, check: !eager, seen: p.seenGen}
	w := &writer{begin: begin, oneTrip: alone}
	st := sqlcore.NewTx(w, dialectFor(lk), lk, &broker.TxScope{})
	g := &group{}
	defer func() {
		if begin.sent && !committed {
			if rerr := rollback(ctx, conn); rerr != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}
		if serr := st.Scope().End(committed); serr != nil {
			d.log.Error("after a transaction", "err", serr)
		}
		// The connection closed under the write before its COMMIT was
		// sent: the session ended, and the transaction with it
		// (errSessionLost). At the COMMIT, only when none of it left
		// (SafeToRetry); that the server ended the session before it
		// ran the COMMIT is commit's to tell, as any other failure there
		// (ErrCommitUnknown, or an answer). One that ctx's end closed
		// (pgx closes a connection whose statement it gives up on) is the
		// caller's doing, and says so as it is.
		lost := func(err error, ended bool) error {
			if err != nil && !committed && pgc.IsClosed() && !ended &&
				(!commitSent || pgconn.SafeToRetry(err)) {
				return fmt.Errorf("%w: %w", errSessionLost, err)
			}
			return err
		}
		// Those that joined: answered once the scope has ended, in commit
		// order; run again by the next transaction when this one failed
		// for r's write alone (errLeaderFailed).
		var lf *leaderFailed
		if errors.As(err, &lf) {
			err = lf.err
			d.requeue(g.all())
		} else {
			g.answer(committed, lost(err, false))
			d.requeue(g.queued())
		}
		err = lost(err, ctx.Err() != nil)
	}()
	if err := p.runWrite(ctx, st, begin, fn, eager); err != nil {
		return err
	}
	if !w.oneTrip && !begin.sent && len(w.later) > 0 {
		// Beside other processes the writer's lock may be waited for:
		// under the caller's context, never under the COMMIT's deadline,
		// whatever fn kept for the end.
		if err := begin.now(ctx); err != nil {
			return err
		}
	}
	// A group joins only a transaction that holds the writer's lock
	// exclusively: beside other processes' writes (rowLocks) the row
	// locks of its writes, taken in no common order, could deadlock
	// with theirs (group.go).
	grouping := !lockShared && !o.Background && !d.ungrouped
	if grouping && !begin.sent {
		// fn's statements are all kept (a push's insert): sent with the
		// COMMIT, BEGIN included, in one round trip when no other write
		// waits; else sent now, and the others join.
		grouping = len(w.later) > 0 && d.othersWaiting()
		if grouping {
			if err := w.flush(ctx); err != nil {
				return err
			}
		}
	}
	if grouping {
		w.detach = true
		ctx = context.WithoutCancel(ctx)
	}
	for {
		if grouping {
			if err := d.runGroup(ctx, st, w, g); err != nil {
				return err
			}
			w.member = -1
		}
		tail, err := newTail(st, w)
		if err != nil {
			return err
		}
		tail.syncOn = begin.ephemeral && g.durable()
		if !begin.sent && tail.empty() && !d.folds.Due(st) {
			// fn neither read nor wrote anything: no transaction at all.
			committed = true
			return nil
		}
		// BEGIN, when still to be sent, goes with the tail: with the
		// COMMIT (commit), or, when the counts are folded, before the
		// fold (tail.send, the fold's before).
		if len(g.ran) > 0 && len(w.later) > 0 && d.folds.Due(st) {
			// The writes a fold would send first (its before) in a round
			// trip of their own, where a failure is told apart.
			if err := tail.send(ctx, pgc); err != nil {
				if w.blame == nil {
					return err
				}
				if err := d.settle(ctx, st, w, g); err != nil {
					return err
				}
				continue
			}
		}
		// When the counts are folded, the tail goes first (foldCounts'
		// before), and COMMIT alone after the fold.
		folded, left, err := d.folds.Counts(ctx, st, func(s string) error { d.wire.add(1); _, err := conn.ExecContext(ctx, s); return err }, func() error {
			return tail.send(ctx, pgc)
		})
		if err != nil {
			return err
		}
		commitSent = true
		if committed, err = d.commit(ctx, pgc, tail); err != nil {
			if w.blame == nil {
				return err
			}
			commitSent = false
			if err := d.settle(ctx, st, w, g); err != nil {
				return err
			}
			continue
		}
		// The generation this process has seen. A transaction of its own
		// that moved it (its own cache was emptied by the broker already)
		// makes the next one empty it once more: rare, and only costly. One
		// that saw it moved but did not empty the cache (a write of the
		// broker's that looks nothing up) leaves it for the next.
		if !st.Scope().Foreign() || st.Scope().ForeignHandled() {
			p.seenGen = begin.gen
		}
		if folded {
			d.folds.Committed(left)
		}
		return nil
	}
}

// writeConn takes a connection of the pool for a write transaction, and
// the pgx connection under it, which the write's pipelines (BEGIN with
// the first statement, the tail with COMMIT) are sent on.
func (p *Store) writeConn(ctx context.Context) (*sql.Conn, *pgx.Conn, error) {
	conn, err := p.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	var pgc *pgx.Conn
	if err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("not a pgx connection: %T", dc)
		}
		pgc = c.Conn()
		return nil
	}); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, pgc, nil
}

// runWrite runs fn on st, the write transaction's, and says whether what
// it did may be committed: not when another process moved the
// generation under it (errCacheMoved, whatever fn made of it: the write
// runs again, eager), nor when fn failed, nor when the round trip that
// was to carry BEGIN failed and fn went on without its statement's
// answer (begin.failed). Eager, BEGIN is sent first and the generation
// read before fn looks anything up: a moved one has the scope empty
// the cache (SetForeign).
func (p *Store) runWrite(ctx context.Context, st *sqlcore.Tx, begin *begin, fn func(broker.Tx) error, eager bool) error {
	if eager {
		if err := begin.now(ctx); err != nil {
			return err
		}
		if begin.gen != p.seenGen {
			st.Scope().SetForeign()
		}
	}
	err := sqlcore.Run(fn, st)
	if begin.moved {
		return errCacheMoved
	}
	if err != nil {
		return err
	}
	return begin.failed
}

// tail is what a write sends last, in the round trip of its COMMIT
// (or, when the counts are folded, just before the fold): BEGIN when
// it was not sent yet, the writes kept for it (writer.later) and the
// ready mark
// (sqlcore.Tx.MarkReadyStatement); and, for a group begun by an
// ephemeral write that holds others, synchronous_commit set back on
// (syncOn). Sent, it is empty.
type tail struct {
	w        *writer
	begins   bool // BEGIN went with the tail (queue)
	mark     string
	markArgs []any
	syncOn   bool
}

// newTail is the tail of st, run by w, as fn left it, its mark in
// PostgreSQL's text.
func newTail(st *sqlcore.Tx, w *writer) (*tail, error) {
	mark, markArgs := st.MarkReadyStatement()
	if mark == "" {
		return &tail{w: w}, nil
	}
	text, args, err := textAndArgs(mark, markArgs)
	return &tail{w: w, mark: text, markArgs: args}, err
}

// empty reports whether there is nothing to send.
func (t *tail) empty() bool { return len(t.w.later) == 0 && t.mark == "" && !t.syncOn }

// queue adds the tail's statements to b: BEGIN when it is still to be
// sent (begins), the writes kept, then the mark, then the setting.
func (t *tail) queue(b *pgx.Batch) {
	t.begins = !t.w.begin.sent
	if t.begins {
		t.w.begin.queue(b)
	}
	for _, l := range t.w.later {
		b.Queue(l.text, l.args...)
	}
	if t.mark != "" {
		b.Queue(t.mark, t.markArgs...)
	}
	if t.syncOn {
		b.Queue(`SET LOCAL synchronous_commit = on`)
	}
}

// read reads the results of what queue added, in order; last is the
// member of the group whose statement was sent before (writer.failed).
func (t *tail) read(r pgx.BatchResults, last int) error {
	if t.begins {
		if err := t.w.begin.read(r); err != nil {
			return t.w.begin.readFailed(err)
		}
	}
	for _, l := range t.w.later {
		if err := l.result(r); err != nil {
			return t.w.failed(l, last, err)
		}
	}
	if t.mark != "" {
		if _, err := r.Exec(); err != nil {
			return fmt.Errorf("mark consumers ready: %w", err)
		}
	}
	if t.syncOn {
		if _, err := r.Exec(); err != nil {
			return fmt.Errorf("synchronous_commit: %w", err)
		}
	}
	return nil
}

// send sends the tail in a round trip of its own, if it holds anything
// or BEGIN is still to be sent (with it), and empties it.
func (t *tail) send(ctx context.Context, pgc *pgx.Conn) error {
	begin := t.w.begin
	first, err := begin.first()
	if err != nil || t.empty() && !first {
		return err
	}
	last := t.w.last
	t.w.last = t.w.member
	err = pipeline(ctx, pgc, begin.wire, t.queue, func(r pgx.BatchResults, _ int) error { return t.read(r, last) })
	t.w.later, t.mark, t.syncOn = nil, "", false
	return err
}

// commit sends the tail and COMMIT in one round trip and reports
// whether the transaction committed. COMMIT is not cancelled with ctx: a
// caller who leaves once it is sent would have the outcome unknown
// (committed, yet reported not, and its scope ended as if rolled back);
// it has a deadline instead. A round trip that broke after the COMMIT
// may have left is broker.ErrCommitUnknown; one that failed once the
// server had said COMMIT is only logged: the write committed.
func (d *Store) commit(ctx context.Context, pgc *pgx.Conn, tail *tail) (committed bool, err error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	answered := false // the server answered the COMMIT
	atCommit := false // the COMMIT's answer is being read
	last := tail.w.last
	tail.w.last = tail.w.member
	err = pipeline(cctx, pgc, tail.w.begin.wire, func(b *pgx.Batch) {
		tail.queue(b)
		b.Queue("COMMIT")
	}, func(r pgx.BatchResults, n int) error {
		if err := tail.read(r, last); err != nil {
			return err
		}
		atCommit = true
		tag, err := r.Exec()
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		answered = true
		if tag.String() != "COMMIT" {
			// The server rolled back a transaction a statement of fn had
			// failed in (fn having gone on, ignoring it): nothing of it
			// is there.
			return fmt.Errorf("commit: the server answered %s", tag)
		}
		committed = true // whatever reading the rest of the answer says
		tail.w.begin.wire.commits.Add(1)
		return nil
	})
	tail.w.later = nil
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, errCacheMoved):
		return false, err // the lock's statement failed: nothing after it ran
	case errors.As(err, &pe) && (pe.Severity == "FATAL" && !atCommit || pe.Code == "25P03"):
		// The server ended the session (another process's fence found it
		// idle, an administrator, a shutdown) and said so in answer to a
		// statement before the COMMIT, or for standing idle (25P03)
		// before reading it: the COMMIT never ran. Rolled back, and safe
		// to run again (lead's lost).
		return false, fmt.Errorf("%w: %w", errSessionLost, err)
	case err != nil && tail.w.blame != nil:
		return false, err // a write of the group failed before the COMMIT: the group settles it
	case err != nil && !committed && !answered && commitUnknown(err):
		return false, fmt.Errorf("%w: %w", broker.ErrCommitUnknown, err)
	case err != nil && !committed:
		return false, err
	case err != nil:
		d.log.Warn("after a commit", "err", err)
	}
	return true, nil
}

// commitUnknown reports whether err, the failure of the round trip that
// carried COMMIT, leaves the outcome unknown: the server did not answer
// (the connection broke or the deadline passed) after the COMMIT may
// have left. An error of the server's (a statement refused, the
// transaction rolled back) is an answer: nothing was committed; and so
// is a failure before anything was sent.
func commitUnknown(err error) bool {
	var pe *pgconn.PgError
	return !errors.As(err, &pe) && !pgconn.SafeToRetry(err)
}

// commitTimeout bounds the round trip of a COMMIT, which its caller's
// context does not cancel.
const commitTimeout = 30 * time.Second

// rollbackTimeout bounds a ROLLBACK: a server that does not answer it
// in that time gets its connection thrown away (the caller marks it bad),
// which ends the transaction as surely, rather than holding the writer.
const rollbackTimeout = 10 * time.Second

// rollback ends conn's transaction, whether or not ctx has ended.
func rollback(ctx context.Context, conn *sql.Conn) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_, err := conn.ExecContext(rctx, "ROLLBACK")
	return err
}

// pipeline sends the statements queue adds to b in one round trip on
// conn, a write transaction's (begin.pgc), as a pipeline, and read
// reads their results in order (n: how many); w counts it.
func pipeline(ctx context.Context, conn *pgx.Conn, w *wire, queue func(*pgx.Batch), read func(pgx.BatchResults, int) error) error {
	var b pgx.Batch
	queue(&b)
	w.add(b.Len())
	r := conn.SendBatch(ctx, &b)
	if err := read(r, b.Len()); err != nil {
		r.Close()
		return err
	}
	return r.Close()
}

// view is View on PostgreSQL: one snapshot, read only.
func (d *Store) View(ctx context.Context, fn func(broker.Tx) error) error {
	conn, err := d.read.Conn(ctx)
	if err != nil {
		return unavailable(fmt.Errorf("begin: %w", err))
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return unavailable(fmt.Errorf("begin: %w", err))
	}
	defer func() {
		if err := rollback(ctx, conn); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	err = fn(sqlcore.NewTx(reader{conn: conn}, dialectFor(sqlcore.NoLocks{}), sqlcore.NoLocks{}, nil))
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		return fmt.Errorf("read: %w", ctxErr)
	}
	return readError(err)
}

func (p *Store) Close() error {
	p.qmu.Lock()
	p.closed = true
	p.qmu.Unlock()
	// The write under way ends before the pools close; those queued are
	// refused (handOn).
	p.wmu.Lock()
	//lint:ignore SA2001 an empty critical section: it waits for the write under way
	p.wmu.Unlock()

	if p.news != nil {
		p.news.close()
	}
	if p.stopCount != nil {
		p.stopCount()
		p.countDone.Wait()
	}
	err := p.db.Close()
	p.pool.Close()
	if p.read != nil {
		err = errors.Join(err, p.read.Close())
		p.readPool.Close()
	}
	return err
}

// retryable reports whether err is PostgreSQL's serialization failure
// or deadlock: the transaction may succeed when run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// unavailable marks PostgreSQL's errors as the broker's: a server that
// cannot be reached, refuses connections or is shutting down is
// broker.ErrUnavailable; a full disk broker.ErrNoSpace.
func unavailable(err error) error {
	if err == nil || errors.Is(err, broker.ErrUnavailable) || errors.Is(err, broker.ErrNoSpace) || errors.Is(err, broker.ErrCommitUnknown) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return fmt.Errorf("%w: %w", broker.ErrNoSpace, err)
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P03", pe.Code == "53300":
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		return err
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || broken(err) {
		return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
	}
	return err
}

// broken reports whether err is a connection that broke (the server
// crashed or went, the network cut it: an end of stream, a reset, a
// closed connection, database/sql's bad connection) rather than an
// answer of the server's. Before a
// COMMIT was sent (commit makes a break after it broker.ErrCommitUnknown
// first), the server rolls the transaction back when its connection
// goes: nothing was changed, and the request may be sent again. The
// fault campaign (faults/) found these answered 500 when PostgreSQL
// crashed under load.
func broken(err error) bool {
	var oe *net.OpError // not net.Error: a context's deadline is one, and a read past its budget is not a break
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.As(err, &oe)
}

// Prepare brings the schema of the database at dsn up to date and closes
// it again: for a template that tests copy (internal/pgtest).
func Prepare(dsn string) error {
	d, err := Open(context.Background(), dsn, SyncNormal)
	if err != nil {
		return err
	}
	return d.Close()
}

// ExecUncatalogued runs one statement outside the broker and outside
// the statement catalog, in the store's dialect (nothing translates
// it) but for its parameters, written ? or ?NNN on either store
// (numbered): for tests that set up or read rows no broker method
// reaches. Their texts are the tests' own, so no catalog can hold them;
// the name says the bypass, and no code but tests calls it (db's
// TestUncataloguedIsForTestsOnly). WriteDB is the handle itself.
func (d *Store) ExecUncatalogued(ctx context.Context, query string, args ...any) (sql.Result, error) {
	text, args := numbered(query).bind(args)
	return d.db.ExecContext(ctx, text, args...)
}

// QueryRowUncatalogued is ExecUncatalogued for a query of one row.
func (d *Store) QueryRowUncatalogued(ctx context.Context, query string, args ...any) *sql.Row {
	text, args := numbered(query).bind(args)
	return d.db.QueryRowContext(ctx, text, args...)
}

// Path is the URL the store was opened on.
func (d *Store) Path() string { return d.path }

// WriteDB is the handle of the writes' pool, for tools that must go
// around the broker.
func (d *Store) WriteDB() *sql.DB { return d.db }

// Ping checks that the database answers a query.
func (d *Store) Ping(ctx context.Context) error { return unavailable(d.db.PingContext(ctx)) }

// Health checks that the database answers a query (Ping): no write of
// the PostgreSQL store marks it out of space (DiskFull).
func (d *Store) Health(ctx context.Context) error { return d.Ping(ctx) }

// DiskFull is false: the server's disk is the server's (a full one
// fails writes with broker.ErrNoSpace).
func (d *Store) DiskFull() bool { return false }

var _ broker.Store = (*Store)(nil)
