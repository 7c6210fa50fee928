// Package pgtest gives tests a PostgreSQL database of their own: on the
// server LAZARUS_TEST_POSTGRES names, or on a throwaway cluster this
// package starts (initdb into a temporary directory, listening on a Unix
// socket there only) from the PostgreSQL programs Debian's postgresql
// package installs. A test binary starts at most one cluster, shared by
// its tests; Main stops it when they are done, and a cluster whose test
// binary died first is stopped by the next one that starts a cluster
// (orphan.go).
//
// There is no skipping: a test that asks for PostgreSQL where none can be
// had fails, so that a run without PostgreSQL is never taken for green.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names a server to use instead of a throwaway cluster: a URL of
// a role that may create databases, e.g.
// postgres://lazarus:secret@127.0.0.1:5432/postgres.
const EnvURL = "LAZARUS_TEST_POSTGRES"

// EnvStore, set to "postgres", makes the tests that run on a store of
// the caller's choice (Store) run on PostgreSQL; unset or "sqlite", on
// SQLite. go tool task test runs them both ways.
const EnvStore = "LAZARUS_TEST_STORE"

// Postgres reports whether the tests run on PostgreSQL (EnvStore).
func Postgres() bool { return os.Getenv(EnvStore) == "postgres" }

var (
	mu        sync.Mutex
	server    string // the admin URL of the server, once known
	cluster   *throwaway
	serverErr error
	template  map[string]string // per prepare key: the template database's name
)

// Main runs a test binary's tests (call it from TestMain) and stops the
// throwaway cluster, if one was started, once they are done.
func Main(m *testing.M) int {
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: stop the cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Database creates a new, empty database for t and returns its URL; it is
// dropped when t ends. When prepare is given, the database is a copy of
// a template that prepare was run on once per test binary and key (the
// migrated schema, say): copying a template is much faster than
// migrating every database.
func Database(t testing.TB, key string, prepare func(url string) error) string {
	t.Helper()
	admin, err := adminURL()
	if err != nil {
		t.Fatalf("PostgreSQL for the tests: %v", err)
	}
	ctx := context.Background()
	tmpl := ""
	if prepare != nil {
		if tmpl, err = templateFor(ctx, admin, key, prepare); err != nil {
			t.Fatalf("PostgreSQL template %s: %v", key, err)
		}
	}
	name := "lz_" + randomHex(8)
	if err := createDatabase(ctx, admin, name, tmpl); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(context.Background(), admin, name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return withDatabase(admin, name)
}

// templateFor makes (once per key) the template database prepare sets up.
func templateFor(ctx context.Context, admin, key string, prepare func(string) error) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if name, ok := template[key]; ok {
		return name, nil
	}
	name := "lz_tmpl_" + randomHex(8)
	if err := createDatabase(ctx, admin, name, ""); err != nil {
		return "", err
	}
	if err := prepare(withDatabase(admin, name)); err != nil {
		_ = dropDatabase(ctx, admin, name)
		return "", err
	}
	if template == nil {
		template = map[string]string{}
	}
	template[key] = name
	return name, nil
}

// dropTemplates drops the template databases from a server of EnvURL,
// which outlives the test binary (a throwaway cluster goes as a whole).
func dropTemplates(ctx context.Context, admin string) {
	names := make([]string, 0, len(template))
	for _, n := range template {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		_ = dropDatabase(ctx, admin, n)
	}
	template = nil
}

func createDatabase(ctx context.Context, admin, name, tmpl string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	q := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if tmpl != "" {
		q += " TEMPLATE " + pgx.Identifier{tmpl}.Sanitize() + copyStrategy()
	}
	_, err = conn.Exec(ctx, q)
	return err
}

// copyStrategy is how CREATE DATABASE copies a template: on a throwaway
// cluster of PostgreSQL 15 or later, FILE_COPY (its checkpoints cost
// nothing with fsync off, and copying the files is about a third faster
// than WAL_LOG, the default, which writes every page of the copy to the
// WAL); on a server of EnvURL, the server's default.
func copyStrategy() string {
	mu.Lock()
	defer mu.Unlock()
	if cluster != nil && version(cluster.bin) >= 15 {
		return " STRATEGY FILE_COPY"
	}
	return ""
}

func dropDatabase(ctx context.Context, admin, name string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// withDatabase is the URL u with its database set to name.
func withDatabase(u, name string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Path = "/" + name
	return p.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// adminURL is the URL of a role that may create databases: EnvURL, or a
// throwaway cluster started on the first call.
func adminURL() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if server != "" || serverErr != nil {
		return server, serverErr
	}
	if u := os.Getenv(EnvURL); u != "" {
		server = u
		return server, nil
	}
	c, err := startCluster()
	if err != nil {
		serverErr = err
		return "", err
	}
	cluster, server = c, c.url
	return server, nil
}

// A throwaway cluster: its data directory and socket live in dir.
type throwaway struct {
	bin, dir, url string
	asPostgres    bool // run its programs as the postgres user (we are root)
}

// binDir finds the directory of initdb and pg_ctl: Debian keeps them in
// /usr/lib/postgresql/VERSION/bin (the newest is taken), else PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no initdb: install Debian's postgresql package (go tool task setup does), or set " + EnvURL + " to a server's URL")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func startCluster() (*throwaway, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	if _, err := stopOrphans(bin); err != nil {
		// Not this binary's to fail on: say so, and start anyway.
		fmt.Fprintln(os.Stderr, "pgtest:", err)
	}
	dir, err := os.MkdirTemp("", clusterPrefix)
	if err != nil {
		return nil, err
	}
	if err := writeOwner(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := &throwaway{bin: bin, dir: dir, asPostgres: os.Geteuid() == 0}
	if c.asPostgres {
		// initdb refuses to run as root: the cluster belongs to postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, the cluster needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	// A socket in dir only (no TCP port to collide on); durability off:
	// a test's database is thrown away with it, and a crash test kills
	// Lazarus, not PostgreSQL. The durability settings go in the
	// cluster's configuration file rather than on the command line,
	// which no ALTER SYSTEM overrides: bench turns fsync on for the
	// cases that measure a durable server (pgDurable).
	conf, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = conf.WriteString("\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
		err = errors.Join(err, conf.Close())
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("configure the throwaway cluster: %w", err)
	}
	opts := strings.Join([]string{
		"-c listen_addresses=''",
		"-c unix_socket_directories=" + dir,
		"-c max_connections=400",
		"-c shared_buffers=64MB",
	}, " ")
	if out, err := c.run("pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	c.url = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres", RawQuery: url.Values{"host": {dir}}.Encode()}).String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		_ = c.stop()
		return nil, fmt.Errorf("connect to the throwaway cluster: %w", err)
	}
	conn.Close(ctx)
	return c, nil
}

// run runs one of the cluster's programs, as postgres when we are root.
func (c *throwaway) run(prog string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, prog)
	var cmd *exec.Cmd
	if c.asPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

func (c *throwaway) stop() error {
	data := filepath.Join(c.dir, "data")
	out, err := c.run("pg_ctl", "stop", "-w", "-t", "60", "-m", "immediate", "-D", data)
	if rerr := os.RemoveAll(c.dir); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// Server returns the admin URL of the server LAZARUS_TEST_POSTGRES names,
// or of a throwaway cluster started on the first call, for a program
// that is not a test (bench); Stop stops that cluster. The throwaway
// cluster runs with fsync off: measure durability costs on a server of
// LAZARUS_TEST_POSTGRES.
func Server() (string, error) { return adminURL() }

// NewDatabase creates a new database on Server's server (a copy of the
// template prepare made, as Database) and returns its URL and a function
// that drops it.
func NewDatabase(key string, prepare func(url string) error) (string, func() error, error) {
	admin, err := adminURL()
	if err != nil {
		return "", nil, err
	}
	ctx := context.Background()
	tmpl := ""
	if prepare != nil {
		if tmpl, err = templateFor(ctx, admin, key, prepare); err != nil {
			return "", nil, err
		}
	}
	name := "lz_" + randomHex(8)
	if err := createDatabase(ctx, admin, name, tmpl); err != nil {
		return "", nil, err
	}
	return withDatabase(admin, name), func() error { return dropDatabase(context.Background(), admin, name) }, nil
}

// Stop stops the throwaway cluster, if one was started (and drops the
// templates made on a server of LAZARUS_TEST_POSTGRES).
func Stop() error {
	mu.Lock()
	defer mu.Unlock()
	if server != "" && cluster == nil {
		dropTemplates(context.Background(), server)
	}
	if cluster == nil {
		return nil
	}
	err := cluster.stop()
	cluster, server = nil, ""
	return err
}

// DataDir is the throwaway cluster's data directory ("" when the server
// is LAZARUS_TEST_POSTGRES's): its processes' CPU can be read from
// /proc by the postmaster.pid there.
func DataDir() string {
	mu.Lock()
	defer mu.Unlock()
	if cluster == nil {
		return ""
	}
	return filepath.Join(cluster.dir, "data")
}

// StoreAt is where a test's store lives: a new SQLite file of that name
// in a temporary directory or, when the tests run on PostgreSQL
// (EnvStore), a new database that is a copy of what prepare made (the
// migrated schema: db.Prepare).
func StoreAt(t testing.TB, name string, prepare func(url string) error) string {
	t.Helper()
	if Postgres() {
		return Database(t, "lazarus", prepare)
	}
	return filepath.Join(t.TempDir(), name)
}
