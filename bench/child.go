package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/gcfloor"
	"github.com/lazarus-dlq/lazarus/web"
)

// childEnv, when set, makes the bench binary a child of a case: it does
// the one piece of work the value names and exits, so that a process's
// CPU time (/proc) or instructions (callgrind) are that work's alone.
//
//	g2 <n> <random 0|1> <path>  n lifecycles on a stored database (G2)
//	lifecycle <subject> <n>     n lifecycles one at a time on a fresh database, ours, ours-fold (folding at every commit) or goqite (L1)
//	server <NORMAL|FULL> <path> the HTTP server on 127.0.0.1:0: its address on stdout, until stdin closes (H1; P1-P3 with a postgres:// URL for path)
const childEnv = "LAZARUS_BENCH_CHILD"

// runChild runs the child work named by spec (childEnv's value).
func runChild(spec string) error {
	f := strings.Fields(spec)
	if len(f) == 0 {
		return errors.New("empty child spec")
	}
	ctx := context.Background()
	switch {
	case f[0] == "g2" && len(f) == 4:
		n, err1 := strconv.Atoi(f[1])
		random, err2 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		d, err := db.Open(ctx, f[3], db.SyncNormal)
		if err != nil {
			return err
		}
		defer d.Close()
		o := &ours{db: d, b: broker.New(broker.Config{Store: d}), path: f[3]}
		defer o.b.Close()
		var r *rand.Rand
		if random != 0 {
			r = rand.New(rand.NewPCG(uint64(n), 9))
		}
		_, err = lifecyclesCPU(ctx, o, r, n)
		return err
	case f[0] == "lifecycle" && len(f) == 3:
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return err
		}
		e, err := newEnv(ctx, envConfig{quick: true, sync: db.SyncNormal, log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return err
		}
		defer e.close()
		switch f[1] {
		case "ours", "ours-fold":
			_, err = oursLifecycle1With(ctx, e, lifecycleOptions(f[1] == "ours-fold"), n)
		case "goqite":
			_, err = goqiteLifecycle1(ctx, e, n)
		default:
			err = fmt.Errorf("no lifecycle subject %q", f[1])
		}
		return err
	case f[0] == "server" && len(f) == 3:
		return serveChild(ctx, db.Sync(f[1]), f[2], os.Stdin, os.Stdout)
	}
	return fmt.Errorf("unknown child spec %q", spec)
}

// serveChild serves a broker on path (a SQLite file or a postgres:// URL)
// over HTTP on a free loopback port, as the lazarus binary would (web.New,
// the admin token, the store's Notifier when it has one), writes the
// address as a line to out and serves until in is closed.
func serveChild(ctx context.Context, sync db.Sync, path string, in io.Reader, out io.Writer) error {
	defer gcfloor.Start(gcfloor.Floor, os.Getenv)() // as main.go does
	d, err := db.Open(ctx, path, sync)
	if err != nil {
		return err
	}
	defer d.Close()
	bc := broker.Config{Store: d}
	if n := d.Notifier(); n != nil {
		bc.Notifier = n // PostgreSQL: a push on one child wakes a long poll on another (P2, P3)
	}
	b := broker.New(bc)
	defer b.Close()
	srv := web.New(web.Config{
		Broker:     b,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		HealthFunc: d.Ping,
		AdminToken: adminToken,
		BcryptCost: 4,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	if _, err := fmt.Fprintln(out, "http://"+ln.Addr().String()); err != nil {
		return err
	}
	io.Copy(io.Discard, in) // until the parent closes it
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	output *strings.Builder // stderr (callgrind's summary)
}

// childCmd is the bench binary as a child doing spec, under callgrind
// when callgrind is set (GOMAXPROCS=1, asyncpreemptoff, as PERF.md says).
func childCmd(ctx context.Context, spec string, callgrind bool) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if callgrind {
		vg, err := exec.LookPath("valgrind")
		if err != nil {
			return nil, errors.New("valgrind is not installed (Debian's valgrind package; go tool task bench:instr installs it)")
		}
		cmd = exec.CommandContext(ctx, vg, "--tool=callgrind", "--callgrind-out-file=/dev/null", self)
		// cpu.rdtscp=off: Go 1.26's runtime reads the clock with
		// RDTSCP where the processor has it, an instruction this
		// machine's valgrind (3.19) cannot run (SIGILL); without it
		// the runtime takes its fenced RDTSC, the same clock.
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off")
	} else {
		cmd = exec.CommandContext(ctx, self)
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, childEnv+"="+spec)
	return cmd, nil
}

// startChild starts a child that talks on stdin and stdout (the server).
func startChild(ctx context.Context, spec string, callgrind bool) (*child, error) {
	cmd, err := childCmd(ctx, spec, callgrind)
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, output: &strings.Builder{}}
	cmd.Stderr = c.output
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// stop closes the child's stdin and waits for it to exit.
func (c *child) stop() error {
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		return fmt.Errorf("child: %w: %s", err, lastLines([]byte(c.output.String()), 5))
	}
	return nil
}

// cpu is the child's CPU time so far, user and system, from
// /proc/<pid>/stat (utime and stime, in clock ticks of 1/100 s).
func (c *child) cpu() (time.Duration, error) {
	return procCPU(c.cmd.Process.Pid)
}

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime+stime from a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces, so the
// fields are counted from its closing parenthesis: utime and stime are
// fields 14 and 15, the 12th and 13th after it. USER_HZ is 100 on Linux.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %.60q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat line %.60q", stat)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

var collectedRE = regexp.MustCompile(`Collected : (\d+)`)

// collected is the instruction count callgrind writes when its program
// exits.
func collected(out string) (float64, error) {
	m := collectedRE.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("callgrind said no count: %s", lastLines([]byte(out), 5))
	}
	return strconv.ParseFloat(m[1], 64)
}

// callgrindRun runs a child doing spec under callgrind to its end and
// returns the instructions it ran.
func callgrindRun(ctx context.Context, spec string) (float64, error) {
	cmd, err := childCmd(ctx, spec, true)
	if err != nil {
		return 0, err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("callgrind: %w: %s", err, lastLines(out, 5))
	}
	return collected(string(out))
}

// perItem is what one item costs from the counts of two runs of n1 and
// n2 items: their difference cancels what any run costs whatever its
// size (start-up, opening, the first pages read).
func perItem(n1, n2 int, count func(n int) (float64, error)) (float64, error) {
	if n2 <= n1 {
		return 0, fmt.Errorf("run sizes %d and %d: the second must be larger", n1, n2)
	}
	a, err := count(n1)
	if err != nil {
		return 0, err
	}
	b, err := count(n2)
	if err != nil {
		return 0, err
	}
	return (b - a) / float64(n2-n1), nil
}

// lastLines is the end of a command's output, for an error.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " / ")
}
