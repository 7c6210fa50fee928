package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/password"
)

// H1 is judged on the shipped server (PERF.md v3): `lazarus serve`
// built from this checkout, with its background work (broker.Run: the
// counts folded on a timer, maintenance), not on the bench's own server
// child, which runs web.New alone and ran about 13 % fewer instructions
// a message (98k vs 111k on 2026-12-02).

// lazarusBinary builds the lazarus binary of the checkout bench belongs
// to (the module its go.mod replaces with ../) into the run's temporary
// directory, once: go build as `go tool task build` does, without the
// bench's sqlite_trace tag.
func (e *env) lazarusBinary(ctx context.Context) (string, error) {
	e.binOnce.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			e.binErr = err
			return
		}
		bin := filepath.Join(e.tmp, "lazarus")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			e.binErr = fmt.Errorf("go build the lazarus binary in %s: %w: %s", root, err, lastLines(out, 5))
			return
		}
		e.bin = bin
	})
	return e.bin, e.binErr
}

// serveUser is a user the database gets before `lazarus serve` opens it:
// a database with a user makes serve create no admin (whose bcrypt hash
// at the default cost would be most of a short run under callgrind).
const serveUser = "bench-serve"

// prepareServeDB makes the database at path (SQLite) with a user in it.
func prepareServeDB(ctx context.Context, path string) error {
	d, err := db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		return err
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	defer b.Close()
	hash, err := password.Hash(benchPassword, 4)
	if err != nil {
		return err
	}
	_, err = b.CreateUser(ctx, serveUser, broker.RoleAdmin, hash, "bench")
	return err
}

// listenWatch is the stderr of `lazarus serve` (JSON logs, then
// callgrind's summary): it keeps everything and hands over the address
// of the "listening" line once.
type listenWatch struct {
	mu   sync.Mutex
	all  bytes.Buffer
	line []byte
	addr chan string
}

func (w *listenWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	for _, c := range p {
		if c != '\n' {
			w.line = append(w.line, c)
			continue
		}
		var l struct{ Msg, Addr string }
		if json.Unmarshal(w.line, &l) == nil && l.Msg == "listening" && l.Addr != "" {
			select {
			case w.addr <- l.Addr:
			default:
			}
		}
		w.line = w.line[:0]
	}
	return len(p), nil
}

func (w *listenWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// serveProc is a running `lazarus serve`.
type serveProc struct {
	cmd    *exec.Cmd
	stderr *listenWatch
	done   chan struct{} // closed once it exited, err its Wait's
	err    error
}

// startServe runs `lazarus serve` on the SQLite file path (prepared by
// prepareServeDB) at sync, on a free loopback port, with the bench's
// admin token, under callgrind when callgrind is set (GOMAXPROCS=1,
// asyncpreemptoff, as PERF.md says; out: callgrind's file, /dev/null when
// empty), and returns a client of it once it listens.
func startServe(ctx context.Context, e *env, sync db.Sync, path string, callgrind bool, out string) (*serveProc, *server, error) {
	bin, err := e.lazarusBinary(ctx)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", path, "--sync", strings.ToLower(string(sync)),
		"--log-format", "json", "--log-level", "info", "--public-url", "http://127.0.0.1"}
	var cmd *exec.Cmd
	env := append(os.Environ(), "LAZARUS_ADMIN_TOKEN="+adminToken)
	if callgrind {
		vg, err := exec.LookPath("valgrind")
		if err != nil {
			return nil, nil, errors.New("valgrind is not installed (Debian's valgrind package; go tool task bench:instr installs it)")
		}
		if out == "" {
			out = "/dev/null"
		}
		cmd = exec.CommandContext(ctx, vg, append([]string{"--tool=callgrind", "--callgrind-out-file=" + out, bin}, args...)...)
		// cpu.rdtscp=off: Valgrind 3.19 cannot run RDTSCP, which the
		// runtime's cputicks uses (a contended lock spins on it), and the
		// server died of SIGILL under it.
		env = append(env, "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off")
	} else {
		cmd = exec.CommandContext(ctx, bin, args...)
	}
	cmd.Env = env
	w := &listenWatch{addr: make(chan string, 1)}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	p := &serveProc{cmd: cmd, stderr: w, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case addr := <-w.addr:
		return p, &server{base: "http://" + addr, client: &http.Client{Transport: newTransport(), Timeout: 60 * time.Second}}, nil
	case <-p.done:
	case <-time.After(5 * time.Minute):
	case <-ctx.Done():
	}
	p.cmd.Process.Kill()
	<-p.done
	return nil, nil, fmt.Errorf("lazarus serve did not listen: %s", lastLines([]byte(w.String()), 5))
}

// stop ends serve as a signal does (SIGTERM: its graceful shutdown) and
// waits for it.
func (p *serveProc) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	<-p.done
	if p.err != nil {
		return fmt.Errorf("lazarus serve: %w: %s", p.err, lastLines([]byte(p.stderr.String()), 5))
	}
	return nil
}

func (p *serveProc) cpu() (time.Duration, error) { return procCPU(p.cmd.Process.Pid) }

// kill ends serve at once (SIGKILL) and waits for it.
func (p *serveProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// dump has callgrind write the counts of serve so far (callgrind_control
// --dump) to out.1 and returns its total of instructions.
func (p *serveProc) dump(ctx context.Context, out string) (float64, error) {
	dumped := out + ".1"
	os.Remove(dumped)
	cmd := exec.CommandContext(ctx, "callgrind_control", "--dump", strconv.Itoa(p.cmd.Process.Pid))
	if b, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind_control: %w: %s", err, lastLines(b, 3))
	}
	// The dump is written by the server's own thread: wait for its
	// totals line, its last.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile(dumped)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "totals: "); ok {
				return strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
	}
	return 0, fmt.Errorf("callgrind wrote no summary to %s", dumped)
}
