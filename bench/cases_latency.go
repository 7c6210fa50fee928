package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// H1, H2: the batched lifecycle through the HTTP API (push 10, pop 100
// with a long poll, batch ack), the server the shipped one, `lazarus
// serve` built from the checkout (serve.go), in a process of its own so
// that its CPU time in /proc/<pid>/stat is the server's alone; at FULL,
// the server's default, and NORMAL beside it, interleaved. H2 is the same
// runs' throughput. With -instr, the server also runs under callgrind at
// two sizes for its instructions a message: H1's verdict (PERF.md v3).

const (
	hProducers = 4
	hConsumers = 2
	hPushBatch = 10
	hPopBatch  = 100
)

func caseH1(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(60_000, 10_000) // the server's CPU is read in ticks of 10 ms: 10k messages are 30 ticks or more
	cpu := Samples{}
	run := func(sync db.Sync) variant {
		return statVariant(string(sync), cpu, func(ctx context.Context) (runStat, error) { return serveRun(ctx, e, sync, n) })
	}
	s, err := interleave(ctx, e, e.reps, run(db.SyncFull), run(db.SyncNormal))
	if err != nil {
		return nil, err
	}
	shape := fmt.Sprintf("%d producers to %d partitions pushing %d a call, %d consumers popping %d with wait=true and acknowledging in one batch, admin bearer token; client in the bench process",
		hProducers, hProducers, hPushBatch, hConsumers, hPopBatch)
	h1 := single(cpu, "H1", fmt.Sprintf("HTTP push 10 / pop 100 / batch ack at FULL: server CPU a message (%d msgs)", n), "µs/msg", string(db.SyncFull))
	h1.Must, h1.Goal = atMost("ours", 45, "≤ 45 µs"), atMost("ours", 20, "≤ 20 µs")
	h1.Note = "the server's utime+stime (/proc/<pid>/stat, 10 ms ticks) over the run; " + shape
	h1n := compare(cpu, "H1", "  the same at NORMAL (info)", "µs/msg", string(db.SyncNormal), string(db.SyncFull))
	h2 := single(s, "H2", "the same, throughput at FULL", "msg/s", string(db.SyncFull))
	h2.Must, h2.Goal = atLeast("ours", 22_000, "≥ 22k msg/s"), atLeast("ours", 40_000, "≥ 40k msg/s")
	h2.Note = "an absolute figure: judge it with the load beside it (a quiet 2-vCPU machine, client on the same machine)"
	h2n := compare(s, "H2", "  the same at NORMAL (info)", "msg/s", string(db.SyncNormal), string(db.SyncFull))
	rows := []Row{h1, h1n, h2, h2n}
	if e.instr {
		n1, n2 := e.size(2_000, 500), e.size(6_000, 1_500)
		per, err := perItem(n1, n2, func(n int) (float64, error) { return serveInstructions(ctx, e, db.SyncFull, n) })
		if err != nil {
			rows = append(rows, Row{Case: "H1", Measure: "  server instructions a message (callgrind)", Verdict: verdictError, Note: err.Error()})
		} else {
			r := Row{Case: "H1", Measure: "server instructions a message at FULL, lazarus serve (callgrind)", Unit: "instr/msg", Ours: ptr(per), Reps: 1,
				Must: atMost("ours", 100_000, "≤ 100k"), Goal: atMost("ours", 60_000, "≤ 60k"),
				Note: fmt.Sprintf("the shipped binary (lazarus serve, its background work included) under callgrind (GOMAXPROCS=1, GODEBUG=asyncpreemptoff=1), runs of %d and %d messages (their difference cancels start-up); user-space instructions; H1's verdict (PERF.md v3)", n1, n2)}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// httpRun starts a server child on a fresh database and runs n messages
// through it; the CPU is the child's (P1's SQLite side, beside its
// PostgreSQL children).
func httpRun(ctx context.Context, e *env, sync db.Sync, n int) (runStat, error) {
	path := e.path("h1")
	defer removeDB(path)
	c, srv, err := startServerChild(ctx, sync, path, false)
	if err != nil {
		return runStat{}, err
	}
	defer c.stdin.Close()
	return loadRun(ctx, srv, c.cpu, c.stop, n)
}

// serveRun is httpRun on `lazarus serve` (H1).
func serveRun(ctx context.Context, e *env, sync db.Sync, n int) (runStat, error) {
	path := e.path("h1s")
	defer removeDB(path)
	if err := prepareServeDB(ctx, path); err != nil {
		return runStat{}, err
	}
	p, srv, err := startServe(ctx, e, sync, path, false, "")
	if err != nil {
		return runStat{}, err
	}
	return loadRun(ctx, srv, p.cpu, p.stop, n)
}

// loadRun warms srv, runs n messages through it and stops its process;
// the CPU is the process's over the n messages.
func loadRun(ctx context.Context, srv *server, cpu func() (time.Duration, error), stop func() error, n int) (runStat, error) {
	if err := httpWarm(ctx, srv); err != nil {
		stop()
		return runStat{}, err
	}
	cpu0, err := cpu()
	if err != nil {
		stop()
		return runStat{}, err
	}
	took, err := httpLoad(ctx, srv, benchQueue, n)
	cpu1, cerr := cpu()
	srv.client.CloseIdleConnections()
	if serr := stop(); err == nil {
		err = errors.Join(cerr, serr)
	}
	if err != nil {
		return runStat{}, err
	}
	return runStat{rate: rate(n, took), cpu: float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / float64(n)}, nil
}

// serveInstructions runs n messages through `lazarus serve` under
// callgrind and returns the instructions it ran up to the end of the
// load, from a dump callgrind_control asks for then: a signal to stop
// serve trips an assertion of Callgrind 3.19 (vgCallgrind_post_signal),
// which then writes no count, so serve is killed after the dump.
func serveInstructions(ctx context.Context, e *env, sync db.Sync, n int) (float64, error) {
	path := e.path("h1i")
	defer removeDB(path)
	if err := prepareServeDB(ctx, path); err != nil {
		return 0, err
	}
	out := filepath.Join(filepath.Dir(path), "callgrind.out")
	if e.callgrindOut != "" {
		out = fmt.Sprintf("%s.%d", e.callgrindOut, n)
	}
	p, srv, err := startServe(ctx, e, sync, path, true, out)
	if err != nil {
		return 0, err
	}
	defer p.kill()
	if err := httpWarm(ctx, srv); err != nil {
		return 0, err
	}
	if _, err := httpLoad(ctx, srv, benchQueue, n); err != nil {
		return 0, err
	}
	srv.client.CloseIdleConnections()
	return p.dump(ctx, out)
}

// startServerChild starts serveChild in a child process and returns a
// client of it.
func startServerChild(ctx context.Context, sync db.Sync, path string, callgrind bool) (*child, *server, error) {
	c, err := startChild(ctx, fmt.Sprintf("server %s %s", sync, path), callgrind)
	if err != nil {
		return nil, nil, err
	}
	line, err := c.stdout.ReadString('\n')
	if err != nil {
		c.stop()
		return nil, nil, fmt.Errorf("server child: %w: %s", err, lastLines([]byte(c.output.String()), 5))
	}
	return c, &server{base: strings.TrimSpace(line), client: &http.Client{Transport: newTransport(), Timeout: 60 * time.Second}}, nil
}

// httpWarm opens the clients' connections and warms the server before
// what is measured, on a queue of its own: the consumer whose long poll
// the warm-up's end cancels leaves a poll waiting in the server, which
// would lease (and never acknowledge) the first messages of the run if
// it were on the run's queue.
func httpWarm(ctx context.Context, srv *server) error {
	_, err := httpLoad(ctx, srv, "warm-up", hProducers*hPushBatch)
	return err
}

// httpLoad runs n messages through the API on queue: hProducers push hPushBatch a
// call to a partition each, hConsumers long-poll for hPopBatch and
// acknowledge each batch in one call. It returns the time until the
// last acknowledgement.
func httpLoad(ctx context.Context, srv *server, queue string, n int) (time.Duration, error) {
	return httpLoadOver(ctx, []*server{srv}, queue, n)
}

// H3: latency from push to delivery at a steady 1,000 messages a second
// over HTTP: a producer pushes one message a call, paced; a consumer
// long-polls (wait=true) and acknowledges each batch. The server runs in
// the bench process (web.New on 127.0.0.1:0).

const hRate = 1000 // messages a second

func caseH3(ctx context.Context, e *env) ([]Row, error) {
	d := e.dur(5*time.Second, 1*time.Second)
	p50s := Samples{}
	s, err := interleave(ctx, e, e.reps, variant{"ours", func(ctx context.Context, _ int) (float64, error) {
		lat, err := pacedHTTP(ctx, e, d)
		if err != nil {
			return 0, err
		}
		p50s["ours"] = append(p50s["ours"], percentile(lat, 0.50))
		return percentile(lat, 0.99), nil
	}})
	if err != nil {
		return nil, err
	}
	p99 := single(s, "H3", fmt.Sprintf("HTTP push→delivery p99 at 1k msg/s for %s, long-poll consumer", d), "ms", "ours")
	p99.Must, p99.Goal = atMost("ours", 5, "p99 ≤ 5 ms"), atMost("ours", 2, "p99 ≤ 2 ms")
	p99.Note = fmt.Sprintf("a push of one message a call, paced (each payload carries when it was due); GET pop batch 100 wait=true; batch ack; synchronous=%s", e.sync)
	p50 := single(p50s, "H3", "  push→delivery p50", "ms", "ours")
	p50.Must = atMost("ours", 1, "p50 ≤ 1 ms")
	return []Row{p99, p50}, nil
}

// pace calls push for message i at start + i/rate, for d, and returns
// how many it pushed. Each payload carries its intended time, so that a
// producer that falls behind shows in the latencies.
func pace(ctx context.Context, d time.Duration, push func(i int, body []byte) error) (int, error) {
	n := int(d.Seconds() * hRate)
	start := time.Now().Add(5 * time.Millisecond)
	for i := range n {
		at := start.Add(time.Duration(i) * time.Second / hRate)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if err := push(i, payload(i, at.UnixNano())); err != nil {
			return i, err
		}
	}
	return n, nil
}

// latencyOf is how long ago the payload's intended send time was.
func latencyOf(body []byte, now time.Time) (time.Duration, error) {
	_, t, ok := payloadFields(body)
	if !ok {
		return 0, fmt.Errorf("payload without a time: %.40s", body)
	}
	return now.Sub(time.Unix(0, t)), nil
}

func pacedHTTP(ctx context.Context, e *env, d time.Duration) ([]time.Duration, error) {
	o, err := e.openOurs(ctx, "h3", e.sync)
	if err != nil {
		return nil, err
	}
	defer o.close()
	srv, err := startServer(o)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	if _, err := srv.api(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": []apiPushItem{{Queue: benchQueue, Payload: payload(0, time.Now().UnixNano())}}}, nil); err != nil {
		return nil, err
	}
	want := int(d.Seconds()*hRate) + 1 // the first, pushed above
	lat := make([]time.Duration, 0, want)
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	got := 0
	err = parallel(2, func(w int) error {
		if w == 0 {
			_, err := pace(ctx, d, func(_ int, body []byte) error {
				_, err := srv.api(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": []apiPushItem{{Queue: benchQueue, Payload: body}}}, nil)
				return err
			})
			return err
		}
		for got < want {
			var pop apiPopBodies
			status, err := srv.api(ctx, http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s?batch=100&wait=true&timeout=1000", benchQueue), nil, &pop)
			if err != nil {
				return err
			}
			now := time.Now()
			if status == http.StatusNoContent || len(pop.Messages) == 0 || pop.LeaseID == nil {
				continue
			}
			acks := make([]apiAck, len(pop.Messages))
			for i, m := range pop.Messages {
				if got > 0 || i > 0 { // the first message only made the queue
					l, err := latencyOf(m.Payload, now)
					if err != nil {
						return err
					}
					lat = append(lat, l)
				}
				acks[i] = apiAck{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: *pop.LeaseID, Status: broker.AckCompleted}
			}
			got += len(pop.Messages)
			if _, err := srv.api(ctx, http.MethodPost, "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, nil); err != nil {
				return err
			}
		}
		return nil
	})
	return lat, err
}
