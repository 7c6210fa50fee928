package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
	"github.com/lazarus-dlq/lazarus/web"
)

// BenchmarkH1 is PERF.md's H1 over a real listener: 4 producers push 10
// messages a call to 4 partitions, 2 consumers pop 100 with wait=true and
// acknowledge each batch in one call, with the admin bearer token, on a
// fresh database at FULL (LAZARUS_H1_SYNC=NORMAL for NORMAL). The server
// is this test binary in a process of its own (h1Child), so that its CPU
// time and allocations are the server's alone; an op is one message. It
// reports the server's CPU (getrusage: user+system), allocations and bytes
// allocated a message:
//
//	go test ./web -run '^$' -bench H1 -benchtime 20000x -count 5
//
// LAZARUS_TEST_STORE=postgres runs the server on PostgreSQL (a database
// of the throwaway cluster, or of LAZARUS_TEST_POSTGRES's server; the
// server's CPU is then the Lazarus process's alone: bench's P1 adds
// PostgreSQL's). LAZARUS_H1_PROFILE=<file> writes the server's CPU profile there,
// LAZARUS_H1_ALLOCS=<file> its allocations. bench/
// gives the official row (H1 in bench/cases_latency.go).
func BenchmarkH1(b *testing.B) {
	sync := db.SyncFull
	if os.Getenv("LAZARUS_H1_SYNC") == string(db.SyncNormal) {
		sync = db.SyncNormal
	}
	srv := startH1Child(b, sync)
	ctx := context.Background()
	if err := h1Load(ctx, srv, h1Producers*h1PushBatch); err != nil { // the queue, its partitions, the connections
		b.Fatal(err)
	}
	before, err := srv.stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := h1Load(ctx, srv, b.N); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	after, err := srv.stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(float64(after.CPU-before.CPU)/1e3/n, "server-µs/msg")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "server-allocs/msg")
	b.ReportMetric(float64(after.Bytes-before.Bytes)/n, "server-B/msg")
}

const (
	h1Producers = 4
	h1Consumers = 2
	h1PushBatch = 10
	h1PopBatch  = 100
	h1Token     = "h1-admin-token"
	// h1ChildEnv names the database file of a server child (TestMain).
	h1ChildEnv = "LAZARUS_WEB_H1_CHILD"
	// h1StatsPath is the child's own route for its counters.
	h1StatsPath = "/_h1/stats"
)

// TestMain runs the tests, or, in a child started by BenchmarkH1, the
// server alone.
func TestMain(m *testing.M) {
	if path := os.Getenv(h1ChildEnv); path != "" {
		if err := h1Child(path, db.Sync(os.Getenv("LAZARUS_H1_SYNC")), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "h1 child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(pgtest.Main(m)) // m.Run, and the throwaway PostgreSQL stopped after it
}

// h1Stats is a server child's counters since it started.
type h1Stats struct {
	CPU     int64  // user+system, ns
	Mallocs uint64 // heap objects allocated
	Bytes   uint64 // bytes allocated
}

// h1Child serves a broker on path as lazarus serve would (web.New, an
// admin token), and its counters at h1StatsPath, on a free loopback port;
// it writes the address as a line to out and serves until in closes.
func h1Child(path string, sync db.Sync, in io.Reader, out io.Writer) error {
	ctx := context.Background()
	if sync == "" {
		sync = db.SyncFull
	}
	d, err := db.Open(ctx, path, sync)
	if err != nil {
		return err
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	defer b.Close()
	srv := web.New(web.Config{
		Broker:     b,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		HealthFunc: d.Ping,
		AdminToken: h1Token,
		BcryptCost: 4,
	})
	api := srv.Handler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != h1StatsPath {
			api.ServeHTTP(w, r)
			return
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		json.NewEncoder(w).Encode(h1Stats{CPU: ru.Utime.Nano() + ru.Stime.Nano(), Mallocs: ms.Mallocs, Bytes: ms.TotalAlloc})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	if _, err := fmt.Fprintln(out, "http://"+ln.Addr().String()); err != nil {
		return err
	}
	if prof := os.Getenv("LAZARUS_H1_PROFILE"); prof != "" { // a CPU profile of the child's whole life
		f, err := os.Create(prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	io.Copy(io.Discard, in)                                 // until the parent closes it
	if prof := os.Getenv("LAZARUS_H1_ALLOCS"); prof != "" { // where the child allocated
		f, err := os.Create(prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

// h1Server is a client of a server child.
type h1Server struct {
	base   string
	client *http.Client
}

// startH1Child starts this test binary as a server child on a fresh
// database and stops it when the benchmark ends.
func startH1Child(b *testing.B, sync db.Sync) *h1Server {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	store := filepath.Join(b.TempDir(), "h1.db")
	if pgtest.Postgres() { // LAZARUS_TEST_STORE=postgres: a database of its own
		store = pgtest.Database(b, "web-h1", db.Prepare)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), h1ChildEnv+"="+store, "LAZARUS_H1_SYNC="+string(sync))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	srv := &h1Server{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}}
	b.Cleanup(func() {
		srv.client.CloseIdleConnections()
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("server child: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("server child: %v", err)
	}
	srv.base = strings.TrimSpace(line)
	return srv
}

func (s *h1Server) stats(ctx context.Context) (h1Stats, error) {
	var st h1Stats
	_, err := s.call(ctx, http.MethodGet, h1StatsPath, nil, &st)
	return st, err
}

// call sends body (JSON bytes, or nil) and decodes the answer into out.
func (s *h1Server) call(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h1Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// h1Payload is a payload of about 140 bytes, as bench/'s.
func h1Payload(i int) json.RawMessage {
	p := fmt.Sprintf(`{"i":%d,"t":0,"customer":"c-%d","amount":%d,"currency":"EUR","note":"`, i, i%977, i%10000*7)
	return json.RawMessage(p + strings.Repeat("x", max(0, 125-len(p))) + `"}`)
}

// h1Load runs n messages through the server: pushed by h1Producers, popped
// and acknowledged by h1Consumers.
func h1Load(ctx context.Context, srv *h1Server, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type item struct {
		Queue     string          `json:"queue"`
		Partition string          `json:"partition"`
		Payload   json.RawMessage `json:"payload"`
	}
	type ack struct {
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		LeaseID       string `json:"leaseId"`
		Status        string `json:"status"`
	}
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, h1Producers+h1Consumers)
	for w := range h1Producers {
		wg.Go(func() {
			left := n/h1Producers + btoi(w < n%h1Producers)
			for i := 0; left > 0; i++ {
				items := make([]item, min(h1PushBatch, left))
				for j := range items {
					items[j] = item{Queue: "h1", Partition: "p" + strconv.Itoa(w), Payload: h1Payload(i*h1PushBatch + j)}
				}
				body, _ := json.Marshal(map[string]any{"items": items})
				if _, err := srv.call(ctx, http.MethodPost, "/api/v1/push", body, nil); err != nil {
					errs[w] = err
					cancel()
					return
				}
				left -= len(items)
			}
		})
	}
	for w := range h1Consumers {
		wg.Go(func() {
			for acked.Load() < int64(n) {
				var pop struct {
					Messages []struct {
						TransactionID string `json:"transactionId"`
						PartitionID   string `json:"partitionId"`
					} `json:"messages"`
					LeaseID *string `json:"leaseId"`
				}
				status, err := srv.call(ctx, http.MethodGet, "/api/v1/pop/queue/h1?batch="+strconv.Itoa(h1PopBatch)+"&wait=true&timeout=200", nil, &pop)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errs[h1Producers+w] = err
					cancel()
					return
				}
				if status == http.StatusNoContent || pop.LeaseID == nil {
					continue
				}
				acks := make([]ack, len(pop.Messages))
				for i, m := range pop.Messages {
					acks[i] = ack{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: *pop.LeaseID, Status: broker.AckCompleted}
				}
				body, _ := json.Marshal(map[string]any{"acknowledgments": acks})
				var res []struct {
					Success bool    `json:"success"`
					Error   *string `json:"error"`
				}
				if _, err := srv.call(ctx, http.MethodPost, "/api/v1/ack/batch", body, &res); err != nil {
					errs[h1Producers+w] = err
					cancel()
					return
				}
				for _, r := range res {
					if !r.Success {
						errs[h1Producers+w] = fmt.Errorf("ack refused: %v", *r.Error)
						cancel()
						return
					}
				}
				if acked.Add(int64(len(acks))) >= int64(n) {
					cancel() // the other consumer may be in a long poll
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if got := acked.Load(); got != int64(n) {
		return fmt.Errorf("acknowledged %d of %d", got, n)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
