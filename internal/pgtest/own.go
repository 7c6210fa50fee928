package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a throwaway cluster of one test's own, which the test may
// crash and start again (the fault campaign, package faults): the
// shared cluster of Database serves every test of a binary, and must
// not go down under them. It listens on a TCP port of 127.0.0.1 (a
// proxy between it and its clients needs one) and on a Unix socket in
// its directory.
//
// It commits synchronously (synchronous_commit on): a commit is written
// to the operating system before its answer, so a crash of PostgreSQL's
// processes (Crash) loses nothing committed, as on a real server. fsync
// stays off: the operating system outlives those processes here, and
// what it holds is not lost by their crash.
type Cluster struct {
	c    *throwaway
	port int
	opts string
	mu   sync.Mutex
	up   bool
}

// OwnCluster starts a cluster for t, stopped and removed when t ends.
func OwnCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := startOwn()
	if err != nil {
		t.Fatalf("PostgreSQL cluster of the test's own: %v", err)
	}
	t.Cleanup(func() {
		if err := c.c.stop(); err != nil {
			t.Logf("stop the cluster: %v", err)
		}
	})
	return c
}

func startOwn() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	if _, err := stopOrphans(bin); err != nil {
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
	// A free port, taken again by the cluster: another program could
	// take it in between, and the start then fails and says so.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := strings.Join([]string{
		"-c listen_addresses=127.0.0.1",
		"-c port=" + strconv.Itoa(port),
		"-c unix_socket_directories=" + dir,
		"-c fsync=off",
		"-c synchronous_commit=on",
		"-c full_page_writes=off",
		"-c max_connections=400",
		"-c shared_buffers=64MB",
	}, " ")
	own := &Cluster{c: c, port: port, opts: opts}
	if err := own.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c.url = own.URL()
	return own, nil
}

// URL is the admin URL of the cluster's postgres database over TCP.
func (c *Cluster) URL() string { return c.DatabaseURL("postgres") }

// DatabaseURL is the URL of database name over TCP.
func (c *Cluster) DatabaseURL(name string) string {
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Host: c.Addr(), Path: "/" + name, RawQuery: "sslmode=disable"}).String()
}

// Addr is the cluster's TCP address, host:port.
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)) }

// CreateDatabase creates an empty database and returns its URL.
func (c *Cluster) CreateDatabase(name string) (string, error) {
	if err := createDatabase(context.Background(), c.URL(), name, ""); err != nil {
		return "", err
	}
	return c.DatabaseURL(name), nil
}

// Crash stops the cluster as a crash would: pg_ctl stop -m immediate,
// every server process ended at once, no checkpoint; the next Start
// recovers from the WAL.
func (c *Cluster) Crash() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.c.run("pg_ctl", "stop", "-w", "-t", "60", "-m", "immediate", "-D", filepath.Join(c.c.dir, "data"))
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v: %s", err, out)
	}
	c.up = false
	return nil
}

// Start starts the cluster (again, after Crash) on the same data
// directory and port, and waits until it takes connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := filepath.Join(c.c.dir, "data")
	if out, err := c.c.run("pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(c.c.dir, "log"), "-o", c.opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.c.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		return fmt.Errorf("connect to the cluster: %w", err)
	}
	conn.Close(ctx)
	c.up = true
	return nil
}

// Up reports whether the cluster runs (started, not crashed since).
func (c *Cluster) Up() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up
}
