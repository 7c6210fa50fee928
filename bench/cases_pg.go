package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// P1, P2, P3: the PostgreSQL store. The server is pgtest's: a throwaway
// cluster of Debian's PostgreSQL started on the first case that needs
// it (fsync, synchronous_commit and full_page_writes off) and stopped
// when the run ends, or the server LAZARUS_TEST_POSTGRES names. Every
// measured run gets a database of its own, a copy of a migrated
// template. Lazarus runs in server children (serveChild) on the
// database's postgres:// URL, as on a SQLite file in H1.

// pgNote says what the PostgreSQL server's durability is, for the rows'
// notes.
func pgNote() string {
	if pgtest.DataDir() == "" {
		return "PostgreSQL: the server " + pgtest.EnvURL + " names, at its own settings"
	}
	return "PostgreSQL 15: a throwaway cluster on a Unix socket with fsync, synchronous_commit and full_page_writes off (not durable: measure durability on a server of " + pgtest.EnvURL + ")"
}

// pgDatabase makes a fresh database of Lazarus's schema on the server and
// returns its URL and a function that drops it.
func pgDatabase() (string, func() error, error) {
	u, drop, err := pgtest.NewDatabase("bench", db.Prepare)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	return u, drop, nil
}

// stopPostgres stops the throwaway cluster when a case started one.
func stopPostgres() {
	if err := pgtest.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: stop PostgreSQL:", err)
	}
}

// pgCPU is the CPU time (user and system) a PostgreSQL cluster's processes
// have used so far, split into the backends connected to one database and
// the rest: the postmaster, the children it has reaped (its cutime and
// cstime: a backend that exits is counted there), the auxiliary processes
// (checkpointer, WAL writer, autovacuum) and backends of other databases.
type pgCPU struct {
	backends, rest time.Duration
	// others counts the backends of other databases, live as it was
	// read: one that exits later moves all its CPU into the postmaster's
	// cutime, so a reading to measure from waits until there are none
	// (settledClusterCPU).
	others int
}

func (c pgCPU) sub(d pgCPU) pgCPU {
	return pgCPU{backends: c.backends - d.backends, rest: c.rest - d.rest}
}

// errNoClusterCPU says the server's processes are not ours to read: the
// server of LAZARUS_TEST_POSTGRES may be on another machine.
var errNoClusterCPU = errors.New("PostgreSQL's CPU is read from /proc of a throwaway cluster only (this is the server " + pgtest.EnvURL + " names)")

// clusterCPU reads the CPU of the throwaway cluster's processes from
// /proc: the postmaster's pid is the first line of postmaster.pid in its
// data directory, its children are the processes whose parent it is, and
// a backend's process title (its cmdline: "postgres: USER DATABASE …")
// names its database.
func clusterCPU(database string) (pgCPU, error) {
	dir := pgtest.DataDir()
	if dir == "" {
		return pgCPU{}, errNoClusterCPU
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return pgCPU{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	postmaster, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return pgCPU{}, fmt.Errorf("postmaster.pid: %w", err)
	}
	st, err := readProcStat(postmaster)
	if err != nil {
		return pgCPU{}, fmt.Errorf("the postmaster: %w", err)
	}
	c := pgCPU{rest: st.own + st.reaped}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return pgCPU{}, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.ppid != postmaster {
			continue // gone meanwhile, or not the cluster's
		}
		switch backendOf(pid) {
		case database:
			c.backends += st.own + st.reaped
		case "":
			c.rest += st.own + st.reaped
		default:
			c.rest += st.own + st.reaped
			c.others++
		}
	}
	return c, nil
}

// settledClusterCPU is clusterCPU once no backend of another database is
// left (the previous run's, the one that created this run's database),
// or after 5 s with them.
func settledClusterCPU(database string) (pgCPU, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := clusterCPU(database)
		if err != nil || c.others == 0 || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procStat is what clusterCPU reads of /proc/<pid>/stat.
type procStat struct {
	ppid   int
	own    time.Duration // utime+stime
	reaped time.Duration // cutime+cstime: of the children it has waited for
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads a /proc/<pid>/stat line: after the command name in
// parentheses (which may hold spaces), the fields are state, ppid, …, and
// utime, stime, cutime and cstime the 12th to 15th, in clock ticks of
// 1/100 s (USER_HZ on Linux).
func parseProcStat(stat string) (procStat, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("no command name in %.60q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("short stat line %.60q", stat)
	}
	var n [5]int64
	for k, field := range []string{f[1], f[11], f[12], f[13], f[14]} {
		v, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("stat line %.60q: %w", stat, err)
		}
		n[k] = v
	}
	tick := 10 * time.Millisecond
	return procStat{ppid: int(n[0]), own: time.Duration(n[1]+n[2]) * tick, reaped: time.Duration(n[3]+n[4]) * tick}, nil
}

// backendOf is the database a PostgreSQL backend serves, from its process
// title ("postgres: USER DATABASE [local] idle"), or "" for a process of
// another kind ("postgres: walwriter").
func backendOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(strings.ReplaceAll(string(b), "\x00", " "))
	if len(f) < 4 || f[0] != "postgres:" {
		return ""
	}
	return f[2]
}

// databaseName is the database a postgres:// URL names.
func databaseName(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(p.Path, "/")
}

// P1: H1's load (push 10, pop 100 with a long poll, batch ack, FULL)
// through a server child on SQLite and one on PostgreSQL, interleaved,
// PostgreSQL with its fsync on (as any server that keeps what it
// commits) and, beside it, off (pgtest's default, the figure the docs
// gave before). The server's CPU on PostgreSQL is the Lazarus child's
// plus the cluster's processes', read before and after the run.

// pgRunStat is one run on PostgreSQL: its rate and CPU a message (µs) of
// the Lazarus processes, the backends of the run's database and the
// cluster's other processes.
type pgRunStat struct {
	rate                    float64
	lazarus, backends, rest float64
	// commits and rollbacks are the database's transactions a message
	// (pg_stat_database, read once the children's backends have exited
	// and so reported theirs; the warm-up's few included).
	commits, rollbacks float64
}

func (s pgRunStat) total() float64 { return s.lazarus + s.backends + s.rest }

// pgDurable sets the throwaway cluster's fsync and full_page_writes on
// (durable, as a server that keeps what it commits) or off (pgtest's
// default), reloads its configuration, and returns once a new
// connection sees it. Lazarus at FULL sets synchronous_commit on in its
// own connections whatever the server's default. A server of
// pgtest.EnvURL is left at its own settings (false: not set).
func pgDurable(on bool) (bool, error) {
	admin, err := pgtest.Server()
	if err != nil {
		return false, err
	}
	if pgtest.DataDir() == "" {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	v := "off"
	if on {
		v = "on"
	}
	for _, s := range []string{"fsync", "full_page_writes"} {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+s+" = "+v); err != nil {
			return false, err
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return false, err
	}
	for {
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return false, err
		}
		var got string
		err = c.QueryRow(ctx, "SHOW fsync").Scan(&got)
		c.Close(ctx)
		if err != nil || got == v {
			return err == nil, err
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("fsync still %s after the reload", got)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// pgDurableNote says what P1–P5's runs had: fsync and
// full_page_writes on or off, synchronous_commit on in Lazarus's
// connections (FULL) and the reference's.
func pgDurableNote(on, set bool) string {
	if !set {
		return pgNote()
	}
	v := "off (not durable)"
	if on {
		v = "on (durable: each commit waits for its WAL flush to the disk)"
	}
	return "PostgreSQL 15: a throwaway cluster on a Unix socket on this machine's disk (ext4 on a virtual disk), fsync and full_page_writes " + v + ", synchronous_commit on in the clients' connections"
}

func caseP1(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(60_000, 10_000) // as H1's: the CPU is read in ticks of 10 ms
	load0 := loadAverage()
	split, rates := Samples{}, Samples{}
	set := false
	defer pgDurable(false) // the other cases' default
	sqlite := variant{"SQLite", func(ctx context.Context, _ int) (float64, error) {
		st, err := httpRun(ctx, e, db.SyncFull, n)
		if err != nil {
			return 0, err
		}
		rates["SQLite"] = append(rates["SQLite"], st.rate)
		return st.cpu, nil
	}}
	pg := func(name string, durable bool) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			var err error
			if set, err = pgDurable(durable); err != nil {
				return 0, err
			}
			st, err := pgHTTPRun(ctx, e, 1, n)
			if err != nil {
				return 0, err
			}
			rates[name] = append(rates[name], st.rate)
			split[name+" Lazarus"] = append(split[name+" Lazarus"], st.lazarus)
			split[name+" backends"] = append(split[name+" backends"], st.backends)
			split[name+" rest"] = append(split[name+" rest"], st.rest)
			return st.total(), nil
		}}
	}
	const on, off = "PostgreSQL fsync on", "PostgreSQL fsync off"
	cpu, err := interleave(ctx, e, e.reps, sqlite, pg(on, true), pg(off, false))
	if err != nil {
		return nil, err
	}
	load := fmt.Sprintf("load average %s → %s on %d cores, the client on the same machine; ", loadText(load0), loadText(loadAverage()), runtime.NumCPU())
	p1 := compare(cpu, "P1", fmt.Sprintf("PostgreSQL store (fsync on) vs SQLite: server CPU a message, H1's HTTP load at FULL (%d msgs)", n), "µs/msg", on, "SQLite")
	p1.Must, p1.Goal = atMost("ratio", 2, "≤ 2×"), atMost("ratio", 1.5, "≤ 1.5×")
	p1.Note = "the server's CPU (utime+stime, /proc, 10 ms ticks) over the run: on SQLite the Lazarus child's, on PostgreSQL the child's plus every process of the cluster's (backends, auxiliary processes, the postmaster's reaped children); " +
		fmt.Sprintf("%d producers pushing %d a call, %d consumers popping %d with wait=true, batch ack; ", hProducers, hPushBatch, hConsumers, hPopBatch) + load + pgDurableNote(true, set) + "; SQLite at FULL (an fsync a commit) on the same disk"
	offRow := compare(cpu, "P1", "  the same, PostgreSQL with fsync and full_page_writes off (info)", "µs/msg", off, "SQLite")
	offRow.Note = "interleaved with the row above; " + pgDurableNote(false, set)
	laz := single(split, "P1", "  of which the Lazarus process, fsync on (info)", "µs/msg", on+" Lazarus")
	laz.RefName, laz.Ref = "SQLite's", p1.Ref
	laz.Ratio = ptr(median(ratios(split[on+" Lazarus"], cpu["SQLite"])))
	back := single(split, "P1", "  of which PostgreSQL's backends of the database, fsync on (info)", "µs/msg", on+" backends")
	rest := single(split, "P1", "  of which PostgreSQL's other processes, fsync on (info)", "µs/msg", on+" rest")
	rest.Note = "the postmaster, the backends it reaped during the run, checkpointer, WAL writer, autovacuum"
	thr := compare(rates, "P1", "  throughput, PostgreSQL (fsync on) vs SQLite (info)", "msg/s", on, "SQLite")
	thr.Note = "absolute: judge it with the load beside it (" + strings.TrimSuffix(load, "; ") + ")"
	return []Row{p1, offRow, laz, back, rest, thr}, nil
}

// pgHTTPRun starts k server children on a fresh PostgreSQL database, runs
// n messages of H1's load through them (the clients spread round-robin
// over the children) and returns the rate and the CPU a message of the
// children and of the cluster.
func pgHTTPRun(ctx context.Context, e *env, k, n int) (pgRunStat, error) {
	return pgHTTPRunWith(ctx, e, k, n, false)
}

// pgHTTPRunWith is pgHTTPRun, with the database's transactions counted
// when xacts is set (P2).
func pgHTTPRunWith(ctx context.Context, e *env, k, n int, xacts bool) (pgRunStat, error) {
	u, drop, err := pgDatabase()
	if err != nil {
		return pgRunStat{}, err
	}
	defer drop()
	name := databaseName(u)
	children := make([]*child, 0, k)
	srvs := make([]*server, 0, k)
	stopAll := func() error {
		var errs []error
		for i, c := range children {
			srvs[i].client.CloseIdleConnections()
			errs = append(errs, c.stop())
		}
		children = nil
		return errors.Join(errs...)
	}
	defer stopAll()
	for range k {
		c, srv, err := startServerChild(ctx, db.SyncFull, u, false)
		if err != nil {
			return pgRunStat{}, err
		}
		children, srvs = append(children, c), append(srvs, srv)
		if err := httpWarm(ctx, srv); err != nil {
			return pgRunStat{}, err
		}
	}
	childrenCPU := func() (time.Duration, error) {
		var sum time.Duration
		for _, c := range children {
			t, err := c.cpu()
			if err != nil {
				return 0, err
			}
			sum += t
		}
		return sum, nil
	}
	lz0, err1 := childrenCPU()
	pg0, err2 := settledClusterCPU(name)
	if err := errors.Join(err1, err2); err != nil {
		return pgRunStat{}, err
	}
	var took time.Duration
	if k == 1 {
		took, err = httpLoad(ctx, srvs[0], benchQueue, n)
	} else {
		took, err = httpLoadOver(ctx, srvs, benchQueue, n)
	}
	if err != nil {
		return pgRunStat{}, err
	}
	lz1, err1 := childrenCPU()
	pg1, err2 := clusterCPU(name)
	if err := errors.Join(err1, err2, stopAll()); err != nil {
		return pgRunStat{}, err
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }
	d := pg1.sub(pg0)
	st := pgRunStat{rate: rate(n, took), lazarus: per(lz1 - lz0), backends: per(d.backends), rest: per(d.rest)}
	if xacts {
		commits, rollbacks, err := databaseXacts(ctx, name)
		if err != nil {
			return pgRunStat{}, err
		}
		st.commits, st.rollbacks = float64(commits)/float64(n), float64(rollbacks)/float64(n)
	}
	return st, nil
}

// databaseXacts returns the transactions committed and rolled back in a
// database so far, once no backend is connected to it (a backend
// reports its counts to pg_stat_database when it exits, or a while after
// its transactions; it leaves pg_stat_activity just before it reports
// them at its exit, so the counts are read until two readings 50 ms
// apart agree). An autovacuum worker's transactions count too.
func databaseXacts(ctx context.Context, database string) (commits, rollbacks int64, err error) {
	admin, err := pgtest.Server()
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(ctx)
	for {
		var live int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, database).Scan(&live); err != nil {
			return 0, 0, err
		}
		if live == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("%d backends still connected to %s", live, database)
		case <-time.After(10 * time.Millisecond):
		}
	}
	read := func() (c, r int64, err error) {
		// A new snapshot of the statistics, not the one this session
		// cached.
		if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			return 0, 0, err
		}
		err = conn.QueryRow(ctx, `SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1`, database).Scan(&c, &r)
		return c, r, err
	}
	if commits, rollbacks, err = read(); err != nil {
		return 0, 0, err
	}
	for {
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("the transaction counts of %s did not settle", database)
		case <-time.After(50 * time.Millisecond):
		}
		c, r, err := read()
		if err != nil {
			return 0, 0, err
		}
		if c == commits && r == rollbacks {
			return commits, rollbacks, nil
		}
		commits, rollbacks = c, r
	}
}

// httpLoadOver is httpLoad with its clients spread over several servers
// of one database: client w (the producers first, then the consumers)
// talks to srvs[w%len(srvs)], so that with 3 servers and H1's 4
// producers and 2 consumers each server has two clients, and a consumer
// pops what producers on other servers pushed.
func httpLoadOver(ctx context.Context, srvs []*server, queue string, n int) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var acked, end atomic.Int64
	start := time.Now()
	err := parallel(hProducers+hConsumers, func(w int) error {
		srv := srvs[w%len(srvs)]
		if w < hProducers {
			items := make([]apiPushItem, 0, hPushBatch)
			part := fmt.Sprintf("p%d", w)
			left := share(n, hProducers, w)
			for i := 0; left > 0; i++ {
				items = items[:0]
				for range min(hPushBatch, left) {
					items = append(items, apiPushItem{Queue: queue, Partition: part, Payload: payload(i, 0)})
				}
				if _, err := srv.api(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": items}, nil); err != nil {
					if acked.Load() >= int64(n) && errors.Is(ctx.Err(), context.Canceled) {
						return nil // the consumers acknowledged the last push before its answer was read
					}
					return err
				}
				left -= len(items)
			}
			return nil
		}
		for acked.Load() < int64(n) {
			var pop apiPop
			status, err := srv.api(ctx, http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s?batch=%d&wait=true&timeout=200", queue, hPopBatch), nil, &pop)
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			if err != nil {
				return err
			}
			if status == http.StatusNoContent || len(pop.Messages) == 0 || pop.LeaseID == nil {
				continue
			}
			acks := make([]apiAck, len(pop.Messages))
			for i, m := range pop.Messages {
				acks[i] = apiAck{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: *pop.LeaseID, Status: broker.AckCompleted}
			}
			var res []apiAckResult
			if _, err := srv.api(ctx, http.MethodPost, "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, &res); err != nil {
				return err
			}
			for _, r := range res {
				if !r.Success {
					return fmt.Errorf("ack refused: %v", r.Error)
				}
			}
			if acked.Add(int64(len(acks))) >= int64(n) {
				end.CompareAndSwap(0, int64(time.Since(start)))
				cancel() // the other consumer may be in a long poll
			}
		}
		return nil
	})
	return time.Duration(end.Load()), err
}

// P2: the same load through 3 server children on one PostgreSQL database
// vs through 1, interleaved: throughput, and the CPU a message of all the
// processes beside it. The store serialises writers across processes
// (one advisory lock a write transaction), so more processes share one
// writer; on 2 cores they also share the CPU with PostgreSQL and the
// client.

const p2Processes = 3

func caseP2(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(60_000, 10_000)
	load0 := loadAverage()
	set, restore, err := durableCluster("P2")
	if err != nil {
		return nil, err
	}
	defer restore()
	cpu, xacts := Samples{}, Samples{}
	run := func(name string, k int) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			st, err := pgHTTPRunWith(ctx, e, k, n, true)
			if err != nil {
				return 0, err
			}
			cpu[name] = append(cpu[name], st.total())
			xacts[name+" commits"] = append(xacts[name+" commits"], st.commits)
			xacts[name+" rollbacks"] = append(xacts[name+" rollbacks"], st.rollbacks)
			xacts[name+" Lazarus"] = append(xacts[name+" Lazarus"], st.lazarus)
			return st.rate, nil
		}}
	}
	many, one := fmt.Sprintf("%d processes", p2Processes), "1 process"
	s, err := interleave(ctx, e, e.reps, run(many, p2Processes), run(one, 1))
	if err != nil {
		return nil, err
	}
	p2 := compare(s, "P2", fmt.Sprintf("PostgreSQL, %d server processes on one database vs 1: throughput (%d msgs)", p2Processes, n), "msg/s", many, one)
	p2.Must, p2.Goal = atLeast("ratio", 0.8, "≥ 0.8×"), atLeast("ratio", 1.2, "≥ 1.2×")
	p2.Note = fmt.Sprintf("H1's load (%d producers, %d consumers) spread round-robin over the processes; load average %s → %s on %d cores, the client on the same machine; pushes, leases and acks of the processes run at once under row locks, other writes one at a time (docs/postgres.md); %s",
		hProducers, hConsumers, loadText(load0), loadText(loadAverage()), runtime.NumCPU(), pgDurableNote(true, set))
	c := compare(cpu, "P2", "  CPU a message, Lazarus processes + PostgreSQL (info)", "µs/msg", many, one)
	c.Note = "utime+stime of the server children and the cluster's processes (/proc) over the run"
	laz := compare(xacts, "P2", "  of which the Lazarus processes (info)", "µs/msg", many+" Lazarus", one+" Lazarus")
	com := compare(xacts, "P2", "  transactions committed a message (info)", "xacts/msg", many+" commits", one+" commits")
	com.Note = "pg_stat_database's xact_commit of the run's database, the warm-up's few (and any autovacuum worker's) included; beside other processes it counts one a notification each listening process takes in (PostgreSQL reads its notification queue in a transaction of its own): on 2026-12-04, 1,595 write transactions and 1,243 notifications taken in by 3 processes made most of 3 processes' 6,570 a 10,000 messages, against 288 write transactions for 1 process"
	rb := single(xacts, "P2", "  transactions rolled back a message (info)", "xacts/msg", many+" rollbacks")
	rb.RefName, rb.Ref = one, ptr(median(xacts[one+" rollbacks"])) // often none: no ratio
	return []Row{p2, c, laz, com, rb}, nil
}

// P3: two server children on one database; a consumer long-polls B, and
// once B's /metrics shows the pop waiting, a producer pushes one message
// on A: the time from sending the push to B's answer, p50 and p99.

func caseP3(ctx context.Context, e *env) ([]Row, error) {
	rounds := e.size(200, 50)
	set, restore, err := durableCluster("P3")
	if err != nil {
		return nil, err
	}
	defer restore()
	u, drop, err := pgDatabase()
	if err != nil {
		return nil, err
	}
	defer drop()
	var srvs [2]*server
	for i := range srvs {
		c, srv, err := startServerChild(ctx, db.SyncFull, u, false)
		if err != nil {
			return nil, err
		}
		defer func() {
			srv.client.CloseIdleConnections()
			c.stop()
		}()
		srvs[i] = srv
	}
	a, b := srvs[0], srvs[1]
	// The queue made and both processes' connections warm.
	if _, err := wakeRound(ctx, a, b, 0); err != nil {
		return nil, fmt.Errorf("first round: %w", err)
	}
	p50s := Samples{}
	s, err := interleave(ctx, e, e.reps, variant{"ours", func(ctx context.Context, _ int) (float64, error) {
		lat := make([]time.Duration, 0, rounds)
		for i := range rounds {
			d, err := wakeRound(ctx, a, b, i)
			if err != nil {
				return 0, fmt.Errorf("round %d: %w", i+1, err)
			}
			lat = append(lat, d)
		}
		p50s["ours"] = append(p50s["ours"], percentile(lat, 0.50))
		return percentile(lat, 0.99), nil
	}})
	if err != nil {
		return nil, err
	}
	p99 := single(s, "P3", fmt.Sprintf("PostgreSQL: a push on process A wakes a long poll on process B, p99 of %d rounds", rounds), "ms", "ours")
	p99.Must, p99.Goal = atMost("ours", 50, "p99 ≤ 50 ms"), atMost("ours", 10, "p99 ≤ 10 ms")
	p99.Note = "from sending the push (one message, HTTP) on A to B's answer to GET pop wait=true, each round once B's lazarus_pops_waiting is 1; the news goes by LISTEN/NOTIFY; " + pgDurableNote(true, set)
	p50 := single(p50s, "P3", "  the same, p50 (info)", "ms", "ours")
	return []Row{p99, p50}, nil
}

// wakeRound long-polls b for one message, waits until b's pop is
// waiting, pushes one message on a and returns the time from sending the
// push to b's answer; then it acknowledges the message on b.
func wakeRound(ctx context.Context, a, b *server, i int) (time.Duration, error) {
	type answer struct {
		at     time.Time
		status int
		pop    apiPop
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		var r answer
		r.status, r.err = b.api(ctx, http.MethodGet, "/api/v1/pop/queue/"+benchQueue+"?batch=1&wait=true&timeout=10000", nil, &r.pop)
		r.at = time.Now()
		done <- r
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := popsWaiting(ctx, b)
		if err != nil {
			return 0, err
		}
		if n >= 1 {
			break
		}
		select {
		case r := <-done:
			return 0, fmt.Errorf("the pop on B answered before the push (status %d): %v", r.status, r.err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, errors.New("the pop on B never showed as waiting")
		}
	}
	sent := time.Now()
	if _, err := a.api(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": []apiPushItem{{Queue: benchQueue, Payload: payload(i, 0)}}}, nil); err != nil {
		return 0, err
	}
	r := <-done
	if r.err != nil {
		return 0, r.err
	}
	if r.status == http.StatusNoContent || len(r.pop.Messages) != 1 || r.pop.LeaseID == nil {
		return 0, fmt.Errorf("the long poll on B ended without the message (status %d)", r.status)
	}
	m := r.pop.Messages[0]
	var res []apiAckResult
	ack := apiAck{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: *r.pop.LeaseID, Status: broker.AckCompleted}
	if _, err := b.api(ctx, http.MethodPost, "/api/v1/ack/batch", map[string]any{"acknowledgments": []apiAck{ack}}, &res); err != nil {
		return 0, err
	}
	if len(res) != 1 || !res[0].Success {
		return 0, fmt.Errorf("ack refused: %+v", res)
	}
	return r.at.Sub(sent), nil
}

// popsWaiting reads the gauge lazarus_pops_waiting from srv's /metrics.
func popsWaiting(ctx context.Context, srv *server) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := srv.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "lazarus_pops_waiting "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no lazarus_pops_waiting in /metrics")
}
