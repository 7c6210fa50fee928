package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// Token is the admin token of the processes a campaign starts.
const Token = "faults-admin-token"

// Proc is one `lazarus serve` process of the campaign, on a fixed port
// (clients find it again after a restart), its PostgreSQL connections
// through its own proxy (nil on SQLite).
type Proc struct {
	Name      string
	URL       string
	Postgres  bool
	addr      string
	db        string // what --db is given: the proxy's URL, or a file
	bin       string
	dir       string
	clockFile string
	Proxy     *toxiproxy.Proxy
	logFile   *os.File

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	offset time.Duration
	// killing: the process's end is the harness's kill; selfExits: the
	// ends that were not (each a time and exit status).
	killing   bool
	selfExits []string
}

// SelfExits is each end of the process that was not the harness's kill
// (a start that failed, a crash): a process of the campaign ends only
// when it is killed.
func (p *Proc) SelfExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.selfExits...)
}

// Harness is the campaign's processes, their proxies and PostgreSQL.
type Harness struct {
	T       testing.TB
	Cluster *pgtest.Cluster
	PG      []*Proc // on PostgreSQL
	Lite    *Proc   // on SQLite
	Bin     string
	dir     string
	server  *toxiproxy.ApiServer
	tailed  *Proc // the process whose log Fatal printed
}

// BuildBinary builds lazarus with the faults tag (its clock can be
// stepped: clock_faults.go) into dir.
func BuildBinary(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "lazarus-faults")
	cmd := exec.Command("go", "build", "-tags", "faults", "-o", bin, ".")
	cmd.Dir = ".." // the module's root: package main
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags faults: %v\n%s", err, out)
	}
	statSources(t, "..")
	return bin
}

// statSources looks at every file the binary is built from, under the
// module's root. go test caches a package's result until a file its
// test looked at changes; the campaign runs a binary built of the whole
// module, which this package does not import, so without these looks a
// change to the broker or a store would leave an earlier run's result
// standing.
func statSources(t testing.TB, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".driver", ".cache", "screenshots", "bench":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".sql", ".js", ".css", ".templ", ".mod", ".sum", ".svg", ".ico", ".png":
			_, err := os.Stat(path)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the binary's sources: %v", err)
	}
}

// freePort is a TCP port of 127.0.0.1 free now.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start starts PostgreSQL, n processes on it (each behind a proxy) and
// one on SQLite, and waits until each answers.
func Start(t testing.TB, n int) *Harness {
	t.Helper()
	// The run's directory (the binary, each process's log, the SQLite
	// file) is kept when the test fails, for what the tails printed do
	// not show; removed when it passes.
	dir, err := os.MkdirTemp("", "lazarus-faults-")
	if err != nil {
		t.Fatal(err)
	}
	h := &Harness{T: t, dir: dir}
	t.Cleanup(func() {
		if t.Failed() {
			h.LogTails(logTail)
			t.Logf("the run's directory is kept: %s (each process's log is NAME.log)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	began := time.Now()
	h.Bin = BuildBinary(t, dir)
	t.Logf("built the binary in %s", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	h.Cluster = pgtest.OwnCluster(t)
	t.Logf("started PostgreSQL in %s", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	dsn, err := h.Cluster.CreateDatabase("lazarus_faults")
	if err != nil {
		t.Fatal(err)
	}
	h.server = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	for i := range n {
		name := fmt.Sprintf("P%d", i+1)
		proxy := toxiproxy.NewProxy(h.server, name, "127.0.0.1:0", h.Cluster.Addr())
		if err := proxy.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxy.Stop)
		u := strings.Replace(dsn, h.Cluster.Addr(), proxy.Listen, 1)
		h.PG = append(h.PG, h.newProc(name, u, proxy))
	}
	h.Lite = h.newProc("S1", filepath.Join(dir, "lite.db"), nil)
	for _, p := range h.All() {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
	}
	for _, p := range h.All() {
		if err := p.WaitUp(2 * time.Minute); err != nil {
			h.Fatal(p, err)
		}
	}
	t.Logf("started the processes in %s", time.Since(began).Round(time.Millisecond))
	return h
}

// logTail is how many lines of a process's log a failure prints.
const logTail = 60

// Fatal prints the tail of p's log (the process that failed) and fails
// the test with err.
func (h *Harness) Fatal(p *Proc, err error) {
	h.T.Helper()
	h.tailed = p
	h.T.Logf("the last %d lines of %s's log (%s):\n%s", logTail, p.Name, p.logFile.Name(), strings.Join(p.Tail(logTail), "\n"))
	h.T.Fatal(err)
}

// LogTails prints the last n lines of each process's log (but the one
// Fatal printed).
func (h *Harness) LogTails(n int) {
	for _, p := range h.All() {
		if p == nil || p.logFile == nil || p == h.tailed {
			continue // the harness failed before it was made, or Fatal printed it
		}
		h.T.Logf("the last %d lines of %s's log (%s):\n%s", n, p.Name, p.logFile.Name(), strings.Join(p.Tail(n), "\n"))
	}
}

// Tail is the last n lines of the process's log (stdout and stderr,
// every run of it: a restart appends), each cut at 600 bytes.
func (p *Proc) Tail(n int) []string {
	b, err := os.ReadFile(p.logFile.Name())
	if err != nil {
		return []string{err.Error()}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	for i, l := range lines {
		lines[i] = l[:min(len(l), 600)]
	}
	return lines
}

func (h *Harness) newProc(name, db string, proxy *toxiproxy.Proxy) *Proc {
	addr := freePort(h.T)
	p := &Proc{Name: name, URL: "http://" + addr, Postgres: proxy != nil, addr: addr, db: db, bin: h.Bin,
		dir: h.dir, clockFile: filepath.Join(h.dir, name+".clock"), Proxy: proxy}
	if err := os.WriteFile(p.clockFile, []byte("0\n"), 0o644); err != nil {
		h.T.Fatal(err)
	}
	f, err := os.Create(filepath.Join(h.dir, name+".log"))
	if err != nil {
		h.T.Fatal(err)
	}
	p.logFile = f
	return p
}

// Path is a file's path in the run's directory (kept when the test
// fails).
func (h *Harness) Path(name string) string { return filepath.Join(h.dir, name) }

// All is every process, PostgreSQL's first.
func (h *Harness) All() []*Proc { return append(append([]*Proc(nil), h.PG...), h.Lite) }

// Start starts the process (again). It does not wait until it answers.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, "serve", "--addr", p.addr, "--db", p.db, "--log-format", "json",
		"--db-wait", "10m", "--maintenance-every", "2s")
	cmd.Env = append(os.Environ(), "LAZARUS_ADMIN_TOKEN="+Token, "LAZARUS_FAULTS_CLOCK_FILE="+p.clockFile,
		"LAZARUS_ADMIN_PASSWORD=faults-admin-password")
	cmd.Stdout = p.logFile
	cmd.Stderr = p.logFile
	// A line of the harness's own marks each start and end in the log.
	fmt.Fprintf(p.logFile, "--- harness: %s starts %s\n", time.Now().UTC().Format(time.RFC3339Nano), p.Name)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		if !p.killing {
			// Not the nemesis's kill -9: the process ended by itself.
			p.selfExits = append(p.selfExits, fmt.Sprintf("%s %s", time.Now().UTC().Format("15:04:05.000"), cmd.ProcessState))
		}
		p.mu.Unlock()
		close(exited)
	}()
	p.cmd, p.exited, p.paused, p.killing = cmd, exited, false, false
	return nil
}

// WaitUp polls /health until the process answers 200.
func (p *Proc) WaitUp(within time.Duration) error {
	deadline := time.Now().Add(within)
	last := "no answer"
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			resp.Body.Close()
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // polling for the process to come up
	}
	p.mu.Lock()
	state := "running"
	if p.cmd == nil {
		state = "never started"
	} else {
		select {
		case <-p.exited:
			state = "exited: " + p.cmd.ProcessState.String()
		default:
			if p.paused {
				state = "paused"
			}
		}
	}
	p.mu.Unlock()
	return fmt.Errorf("%s did not answer /health within %s (its last answer: %s; process %s; log %s)", p.Name, within, last, state, p.logFile.Name())
}

// Kill ends the process with SIGKILL and waits for its end.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.killing = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	fmt.Fprintf(p.logFile, "--- harness: %s killed %s (pid %d)\n", time.Now().UTC().Format(time.RFC3339Nano), p.Name, cmd.Process.Pid)
}

// Pause stops the process (SIGSTOP), as a paused VM.
func (p *Proc) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		p.paused = true
	}
}

// Resume continues a paused process (SIGCONT).
func (p *Proc) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
}

// StepClock sets the process's clock offset (its broker's clock, a
// faults build's: clock_faults.go) and tells it to read it.
func (p *Proc) StepClock(d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.WriteFile(p.clockFile, []byte(strconv.FormatInt(d.Milliseconds(), 10)+"\n"), 0o644); err != nil {
		return err
	}
	p.offset = d
	if p.cmd != nil {
		return p.cmd.Process.Signal(syscall.SIGUSR1)
	}
	return nil
}

// Offset is the process's clock offset now.
func (p *Proc) Offset() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offset
}

func (p *Proc) stop() {
	p.Resume()
	p.Kill()
	p.logFile.Close()
}

// Leading reports whether the process says it leads (lazarus_leading 1
// on /metrics); false when it does not answer.
func (p *Proc) Leading() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "lazarus_leading ") {
			return strings.TrimSpace(strings.TrimPrefix(sc.Text(), "lazarus_leading ")) == "1"
		}
	}
	return false
}

// Leader is the PostgreSQL process that leads now, or nil.
func (h *Harness) Leader() *Proc {
	for _, p := range h.PG {
		p.mu.Lock()
		paused := p.paused
		p.mu.Unlock()
		if !paused && p.Leading() {
			return p
		}
	}
	return nil
}

// ErrorLines is up to n lines of the processes' logs at level ERROR
// (after a run: the causes of its 500s).
func (h *Harness) ErrorLines(n int) []string {
	var out []string
	for _, p := range h.All() {
		b, err := os.ReadFile(p.logFile.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) && len(out) < n {
				out = append(out, p.Name+": "+line[:min(len(line), 600)])
			}
		}
	}
	return out
}
