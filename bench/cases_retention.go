package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// G1: storage under steady load with retention on. A producer pushes at a
// steady rate, a consumer pops and acknowledges everything, maintenance
// runs every few seconds, and completedRetentionSeconds is short: the
// file must stop growing (plateau), at no more than twice what one
// retention window's messages take.

// g1Config is the soak's shape.
type g1Config struct {
	dur, every, sample time.Duration
	retention          int // completedRetentionSeconds
	rate               int // messages a second
}

func (e *env) g1Config() g1Config {
	if e.quick {
		return g1Config{dur: 24 * time.Second, every: time.Second, sample: 500 * time.Millisecond, retention: 3, rate: 1000}
	}
	return g1Config{dur: time.Duration(float64(10*time.Minute) * e.scale), every: 5 * time.Second, sample: 5 * time.Second, retention: 60, rate: 1000}
}

// g1Sample is one point of the soak's curve.
type g1Sample struct {
	at                time.Duration
	file, wal, free   int64
	kept, pushed, got int64
}

func caseG1(ctx context.Context, e *env) ([]Row, error) {
	c := e.g1Config()
	o, err := e.openOurs(ctx, "g1", e.sync)
	if err != nil {
		return nil, err
	}
	defer o.close()
	if err := configure(ctx, o.b, benchQueue, map[string]any{"completedRetentionSeconds": c.retention}); err != nil {
		return nil, err
	}
	samples, err := soak(ctx, o, c)
	if err != nil {
		return nil, err
	}
	return g1Rows(c, samples), nil
}

// configure sets queue options given as JSON values.
func configure(ctx context.Context, b *broker.Broker, queue string, opts map[string]any) error {
	raw := map[string]json.RawMessage{}
	for k, v := range opts {
		j, err := json.Marshal(v)
		if err != nil {
			return err
		}
		raw[k] = j
	}
	_, err := b.Configure(ctx, queue, raw, "bench")
	return err
}

// soak runs the producer, the consumer and maintenance for c.dur and
// samples the file every c.sample.
func soak(ctx context.Context, o *ours, c g1Config) ([]g1Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, c.dur)
	defer cancel()
	var mu sync.Mutex
	var pushed, got int64
	var firstErr error
	fail := func(err error) {
		if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	start := time.Now()
	// Producer: a batch every 10 ms, at the rate asked.
	wg.Add(1)
	go func() {
		defer wg.Done()
		per := max(1, c.rate/100)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		i := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			bs := make([][]byte, per)
			for k := range bs {
				bs[k] = payload(i, time.Now().UnixNano())
				i++
			}
			if err := o.push(ctx, benchQueue, "", bs...); err != nil {
				fail(err)
				return
			}
			mu.Lock()
			pushed += int64(per)
			mu.Unlock()
		}
	}()
	// Consumer: pops and acknowledges everything.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			res, err := o.b.Pop(ctx, broker.PopRequest{Queue: benchQueue, Batch: 100})
			if err != nil {
				fail(err)
				return
			}
			if len(res.Messages) == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			if err := o.ackAll(ctx, "", res); err != nil {
				fail(err)
				return
			}
			mu.Lock()
			got += int64(len(res.Messages))
			mu.Unlock()
		}
	}()
	// Maintenance on its schedule, as serve runs it.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := o.b.Maintain(ctx); err != nil {
				fail(err)
				return
			}
		}
	}()
	var out []g1Sample
	take := func() error {
		s := g1Sample{at: time.Since(start)}
		st, err := os.Stat(o.path)
		if err != nil {
			return err
		}
		s.file = st.Size()
		if st, err := os.Stat(o.path + "-wal"); err == nil {
			s.wal = st.Size()
		}
		sp, err := o.b.Space(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		s.free = sp.FreeBytes()
		if err := o.db.WriteDB().QueryRowContext(context.WithoutCancel(ctx), "SELECT COUNT(*) FROM messages").Scan(&s.kept); err != nil {
			return err
		}
		mu.Lock()
		s.pushed, s.got = pushed, got
		mu.Unlock()
		out = append(out, s)
		return nil
	}
	if err := take(); err != nil {
		return nil, err
	}
	t := time.NewTicker(c.sample)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-t.C:
		}
		if err := take(); err != nil {
			fail(err)
			break
		}
	}
	t.Stop()
	wg.Wait()
	if firstErr != nil {
		return out, firstErr
	}
	return out, nil
}

// g1Rows judges the curve: one retention window's data is what the file
// grew by in the first window (nothing was deleted yet); the plateau is
// the file's largest size in the second half of the run; the file
// plateaus when its largest size in the last quarter is within 5 % of
// that in the second quarter.
func g1Rows(c g1Config, s []g1Sample) []Row {
	n := len(s)
	if n < 8 {
		return []Row{{Case: "G1", Measure: "soak", Verdict: verdictError, Note: fmt.Sprintf("%d samples: too short a run", n)}}
	}
	base := s[0].file
	var window int64
	for _, p := range s {
		if p.at <= time.Duration(c.retention)*time.Second {
			window = p.file - base
		}
	}
	maxIn := func(from, to float64) (m int64) {
		for _, p := range s[int(from*float64(n)):int(to*float64(n))] {
			m = max(m, p.file)
		}
		return m
	}
	q2, q4, plateau := maxIn(0.25, 0.5), maxIn(0.75, 1), maxIn(0.5, 1)
	var maxWAL, maxKept int64
	for _, p := range s {
		maxWAL, maxKept = max(maxWAL, p.wal), max(maxKept, p.kept)
	}
	last := s[n-1]
	curve := Samples{}
	for _, p := range s {
		curve["t_s"] = append(curve["t_s"], roundTo(p.at.Seconds(), 1))
		curve["file_bytes"] = append(curve["file_bytes"], float64(p.file))
		curve["wal_bytes"] = append(curve["wal_bytes"], float64(p.wal))
		curve["free_bytes"] = append(curve["free_bytes"], float64(p.free))
		curve["kept_messages"] = append(curve["kept_messages"], float64(p.kept))
		curve["pushed"] = append(curve["pushed"], float64(p.pushed))
	}
	shape := fmt.Sprintf("%s at %d msg/s, completedRetentionSeconds=%d, maintenance every %s", c.dur, c.rate, c.retention, c.every)
	growth := Row{Case: "G1", Measure: "file size, largest in the last quarter vs the second quarter", Unit: "MiB", Reps: 1,
		Ours: ptr(float64(q4) / (1 << 20)), Ref: ptr(float64(q2) / (1 << 20)), RefName: "second quarter", Ratio: ptr(float64(q4) / float64(q2)),
		Must: atMost("ratio", 1.05, "file size plateaus (≤ 1.05×)"),
		Note: fmt.Sprintf("%s; %d pushed, %d acknowledged", shape, last.pushed, last.got)}
	bound := Row{Case: "G1", Measure: "plateau vs one retention window's data", Unit: "MiB", Reps: 1,
		Ours: ptr(float64(plateau-base) / (1 << 20)), Ref: ptr(float64(window) / (1 << 20)), RefName: "one window",
		Ratio: ptr(float64(plateau-base) / float64(max(window, 1))),
		Goal:  atMost("ratio", 2, "≤ 2× one retention window's data"),
		Note: fmt.Sprintf("plateau: the largest file in the second half above the empty one (%s); one window: what the file grew by in the first %d s; WAL at most %s; at most %d messages kept (%d s of pushes: %d); the curve is in samples",
			mib(base), c.retention, mib(maxWAL), maxKept, c.retention, c.retention*c.rate),
		Samples: curve}
	return []Row{growth, bound}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// G3: a producer's push p99 while a big retention sweep runs (PERF.md
// D6's bound: idle p99 + 10 ms). Each repetition settles sweepN messages,
// lets completedRetentionSeconds pass, and runs Maintain (its messages
// task deletes them, a chunk a transaction on the low-priority lane)
// while a producer pushes one message every producerInterval to another
// queue; the idle variant runs the producer as long with nothing else.

func caseG3(ctx context.Context, e *env) ([]Row, error) {
	sweepN := e.size(200_000, 20_000)
	o, err := e.openOurs(ctx, "g3", e.sync)
	if err != nil {
		return nil, err
	}
	defer o.close()
	const retention = 1
	if err := configure(ctx, o.b, benchQueue, map[string]any{"completedRetentionSeconds": retention}); err != nil {
		return nil, err
	}
	all := map[string][]time.Duration{}
	var took []float64
	var removed int64
	idleFor := time.Second
	s, err := interleave(ctx, e, e.reps,
		variant{"during the sweep", func(ctx context.Context, _ int) (float64, error) {
			if err := settleMessages(ctx, o, sweepN, retention); err != nil {
				return 0, err
			}
			p := startProducer(ctx, o, "producer", producerInterval)
			rep, err := o.b.Maintain(ctx)
			lat, perr := p.finish()
			if err == nil {
				err = perr
			}
			r := rep.Task(broker.TaskMessages)
			removed += r.Removed
			took = append(took, r.Took.Seconds()*1000)
			idleFor = max(rep.Took, 300*time.Millisecond)
			all["during"] = append(all["during"], lat...)
			if err == nil && r.Removed < int64(sweepN) {
				err = fmt.Errorf("the sweep removed %d messages of %d due", r.Removed, sweepN)
			}
			return percentile(lat, 0.99), err
		}},
		variant{"idle", func(ctx context.Context, _ int) (float64, error) {
			p := startProducer(ctx, o, "producer", producerInterval)
			time.Sleep(idleFor)
			lat, err := p.finish()
			all["idle"] = append(all["idle"], lat...)
			return percentile(lat, 0.99), err
		}},
	)
	if err != nil {
		return nil, err
	}
	r := compareDiff(s, "G3", fmt.Sprintf("producer push p99 while retention sweeps %dk messages vs idle", sweepN/1000), "ms", "during the sweep", "idle")
	r.RefName = "idle p99"
	r.Note = "info (PERF.md v2 has no target of its own: D6's is ≤ idle p99 + 10 ms); "
	r.Note += fmt.Sprintf("one push due every %s to another queue, its latency from when it was due; the sweep (Maintain's messages task) took %.0f ms (median) for %d messages a repetition; all repetitions' pushes pooled: p99 %.2f ms during (%d pushes), %.2f ms idle (%d)",
		producerInterval, median(took), removed/int64(max(1, len(took))), percentile(all["during"], 0.99), len(all["during"]), percentile(all["idle"], 0.99), len(all["idle"]))
	return []Row{r}, nil
}

// settleMessages pushes n messages to benchQueue and acknowledges them
// all, then runs maintenance once (the sweep notes what is settled) and
// waits for the retention to pass: the next Maintain finds them due.
func settleMessages(ctx context.Context, o *ours, n, retention int) error {
	bs := bodies(0, 1000)
	for done := 0; done < n; done += len(bs) {
		if err := o.push(ctx, benchQueue, "", bs[:min(len(bs), n-done)]...); err != nil {
			return err
		}
	}
	if err := o.consume(ctx, benchQueue, "", 1000, n); err != nil {
		return err
	}
	if _, err := o.b.Maintain(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(retention)*time.Second + 100*time.Millisecond):
	}
	return nil
}

// G2: what a message costs with many stored. The stored messages are
// settled (every group's cursor past them) and kept (retention off), in
// the partition the lifecycles use, with random transaction ids as
// producers give them: each push checks its id against all of them (the
// partition's unique index). CPU of the process a message (utime+stime,
// /proc through getrusage), push+pop+ack one at a time with a random
// transactionId, interleaved between the big and the small database.

// g2Version changes whenever what the fixture holds changes.
const g2Version = 1

func caseG2(ctx context.Context, e *env) ([]Row, error) {
	big := e.size(10_000_000, 200_000)
	const small = 1000
	n, warm := e.size(20_000, 2000), e.size(5000, 500)
	bigDB, built, err := e.storedFixture(ctx, big)
	if err != nil {
		return nil, fmt.Errorf("fixture of %d: %w", big, err)
	}
	defer bigDB.close()
	smallDB, _, err := e.storedFixture(ctx, small)
	if err != nil {
		return nil, fmt.Errorf("fixture of %d: %w", small, err)
	}
	defer smallDB.close()
	r := rand.New(rand.NewPCG(7, 8))
	for _, o := range []*ours{bigDB, smallDB} {
		if _, err := lifecyclesCPU(ctx, o, r, warm); err != nil {
			return nil, err
		}
	}
	s, err := interleave(ctx, e, e.reps,
		variant{"big", func(ctx context.Context, _ int) (float64, error) { return lifecyclesCPU(ctx, bigDB, r, n) }},
		variant{"small", func(ctx context.Context, _ int) (float64, error) { return lifecyclesCPU(ctx, smallDB, r, n) }},
		variant{"big, broker's ids", func(ctx context.Context, _ int) (float64, error) { return lifecyclesCPU(ctx, bigDB, nil, n) }},
		variant{"small, broker's ids", func(ctx context.Context, _ int) (float64, error) { return lifecyclesCPU(ctx, smallDB, nil, n) }},
	)
	if err != nil {
		return nil, err
	}
	row := compare(s, "G2", fmt.Sprintf("CPU a message, %s stored vs %d (%d lifecycles a rep)", countWords(big), small, n), "µs/msg", "big", "small")
	row.Must, row.Goal = atMost("ratio", 1.2, "≤ 1.2×"), atMost("ratio", 1.05, "≤ 1.05×")
	row.Note = "push (random transactionId) + pop + ack one at a time; CPU of the process (utime+stime); callgrind not used: a run under valgrind on the big file takes too long"
	if built > 0 {
		row.Note += fmt.Sprintf("; fixture built in %.0f s", built.Seconds())
	}
	if st, err := os.Stat(bigDB.path); err == nil {
		row.Note += fmt.Sprintf("; big file %s", mib(st.Size()))
	}
	rows := []Row{row}
	if ir, err := g2Instructions(ctx, e, bigDB.path, smallDB.path); err != nil {
		rows = append(rows, Row{Case: "G2", Measure: "instructions a message (callgrind)", Verdict: verdictSkipped, Note: err.Error()})
	} else {
		rows = append(rows, ir...)
	}
	own := compare(s, "G2", "  the same with the broker's transactionIds (UUIDv7, in time order; info)", "µs/msg", "big, broker's ids", "small, broker's ids")
	own.Note = "no transactionId given: the broker's own grow with time, so each push's unique-index entry lands beside the last one"
	return append(rows, own), nil
}

// g2Instructions counts the instructions a message of the lifecycle on
// the big and the small database with callgrind (GOMAXPROCS=1,
// asyncpreemptoff, as PERF.md says): runs of two sizes, whose difference
// cancels the start (opening, the first pages read).
func g2Instructions(ctx context.Context, e *env, big, small string) ([]Row, error) {
	n1, n2 := e.size(1000, 200), e.size(3000, 600)
	perMsg := func(path string, random int) (float64, error) {
		return perItem(n1, n2, func(n int) (float64, error) {
			return callgrindRun(ctx, fmt.Sprintf("g2 %d %d %s", n, random, path))
		})
	}
	var rows []Row
	for _, random := range []int{1, 0} {
		b, err := perMsg(big, random)
		if err != nil {
			return nil, err
		}
		s, err := perMsg(small, random)
		if err != nil {
			return nil, err
		}
		r := Row{Case: "G2", Unit: "instr/msg", Reps: 1, RefName: "small", Ours: ptr(b), Ref: ptr(s), Ratio: ptr(b / s),
			Note: fmt.Sprintf("callgrind, GOMAXPROCS=1, runs of %d and %d lifecycles (their difference); user-space instructions: the pages read from the OS's cache cost system time, not counted here", n1, n2)}
		if random == 1 {
			r.Measure = "instructions a message (callgrind), random transactionIds"
			r.Must, r.Goal = atMost("ratio", 1.2, "≤ 1.2×"), atMost("ratio", 1.05, "≤ 1.05×")
		} else {
			r.Measure = "  the same, the broker's transactionIds (info)"
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func countWords(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lifecyclesCPU runs n lifecycles (push with a random transactionId, or
// none when r is nil, pop, ack, one at a time) and returns the CPU time a
// message in µs.
func lifecyclesCPU(ctx context.Context, o *ours, r *rand.Rand, n int) (float64, error) {
	body := payload(0, 0)
	c0 := cpuTime()
	for range n {
		var id string
		if r != nil {
			id = fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
		}
		if _, err := o.b.Push(ctx, []broker.PushItem{{Queue: benchQueue, Payload: body, TransactionID: id}}); err != nil {
			return 0, err
		}
		res, err := o.b.Pop(ctx, broker.PopRequest{Queue: benchQueue, Batch: 1})
		if err != nil {
			return 0, err
		}
		if len(res.Messages) != 1 {
			return 0, errEmpty
		}
		m := res.Messages[0]
		if _, err := o.b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}); err != nil {
			return 0, err
		}
	}
	return float64((cpuTime() - c0).Microseconds()) / float64(n), nil
}

// storedFixture returns a working copy of a database holding n settled
// messages of benchQueue, opened under a broker; the file is generated
// when missing and cached under the cache directory, keyed by n and the
// schema.
func (e *env) storedFixture(ctx context.Context, n int) (*ours, time.Duration, error) {
	key, err := schemaKey(ctx, e)
	if err != nil {
		return nil, 0, err
	}
	if err := os.MkdirAll(e.cacheDir, 0o755); err != nil {
		return nil, 0, err
	}
	cache := filepath.Join(e.cacheDir, fmt.Sprintf("stored-%d-g%d-%s.db", n, g2Version, key))
	var built time.Duration
	if _, err := os.Stat(cache); os.IsNotExist(err) {
		e.log.Info("generating the stored messages database", "path", cache, "messages", n)
		start := time.Now()
		if err := generateStored(ctx, cache, n); err != nil {
			return nil, 0, fmt.Errorf("generate %s: %w", cache, err)
		}
		built = time.Since(start)
		e.log.Info("generated", "path", cache, "took", built)
	} else if err != nil {
		return nil, 0, err
	}
	path := e.path(fmt.Sprintf("stored-%d", n))
	if err := copyFile(cache, path); err != nil {
		return nil, 0, err
	}
	d, err := db.Open(ctx, path, e.sync)
	if err != nil {
		return nil, 0, err
	}
	return &ours{db: d, b: broker.New(broker.Config{Store: d}), path: path}, built, nil
}

// storedChunk is how many messages one transaction of the generator
// inserts.
const storedChunk = 100_000

// generateStored writes a database with n messages in benchQueue's
// partition, every one settled by its group: the broker makes the queue,
// partition and group (one message pushed and acknowledged), then the
// messages go straight into the schema, storedChunk a transaction, with
// the kept counts and the group's cursor brought past them.
func generateStored(ctx context.Context, path string, n int) error {
	tmp := path + ".tmp"
	removeFiles(tmp)
	defer removeFiles(tmp)
	d, err := db.Open(ctx, tmp, db.SyncNormal)
	if err != nil {
		return err
	}
	o := &ours{db: d, b: broker.New(broker.Config{Store: d}), path: tmp}
	// Kept for ever: nothing of the fixture goes while it is measured.
	if err := configure(ctx, o.b, benchQueue, map[string]any{"completedRetentionSeconds": 0}); err != nil {
		d.Close()
		return err
	}
	if err := o.push(ctx, benchQueue, "", payload(0, 0)); err != nil {
		d.Close()
		return err
	}
	if err := o.consume(ctx, benchQueue, "", 1, 1); err != nil {
		d.Close()
		return err
	}
	o.b.Close()
	if err := d.Close(); err != nil {
		return err
	}
	w, err := sql.Open("sqlite3", "file:"+tmp+"?_journal_mode=WAL")
	if err != nil {
		return err
	}
	defer w.Close()
	conn, err := w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, p := range []string{"PRAGMA synchronous=OFF", "PRAGMA cache_size=-1048576"} {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			return err
		}
	}
	var part int64
	if err := conn.QueryRowContext(ctx, `SELECT partition_id FROM messages`).Scan(&part); err != nil {
		return err
	}
	body := payload(1, 0)
	now := time.Now().UnixMilli()
	for done := 0; done < n; done += storedChunk {
		k := min(storedChunk, n-done)
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?1)
			INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at)
			SELECT ?2, lower(hex(randomblob(16))), ?3, '', ?4 FROM c`, k, part, body, now); err != nil {
			tx.Rollback()
			return fmt.Errorf("insert: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	// The counts kept for the pages (migration 0010) and the group's
	// cursor: past every message, as if each was acknowledged.
	for _, q := range []string{
		`UPDATE partitions SET messages = messages + ?2, counted_seq = (SELECT MAX(seq) FROM messages) WHERE id = ?1`,
		`UPDATE consumers SET cursor = (SELECT MAX(seq) FROM messages), passed = passed + ?2, passed_seq = (SELECT MAX(seq) FROM messages) WHERE partition_id = ?1`,
	} {
		if _, err := conn.ExecContext(ctx, q, part, n); err != nil {
			return err
		}
	}
	var busy, logPages, ckpt int
	if err := conn.QueryRowContext(ctx, "PRAGMA main.wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &ckpt); err != nil {
		return err
	}
	conn.Close()
	if err := w.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return nil
}

// G4: what auto_vacuum=INCREMENTAL costs the lifecycle (the pointer-map
// pages SQLite keeps to move pages), against a database without it
// (db.Options.KeepAutoVacuum): WAL pages a message, deterministic, and
// CPU a message, interleaved.

func caseG4(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(20_000, 2000)
	open := func(keep bool, autoCheckpoint int) (*ours, error) {
		return e.openOursWith(ctx, "g4", db.Options{Sync: e.sync, KeepAutoVacuum: keep, AutoCheckpoint: autoCheckpoint})
	}
	cpu := func(keep bool) func(ctx context.Context, _ int) (float64, error) {
		return func(ctx context.Context, _ int) (float64, error) {
			o, err := open(keep, 0)
			if err != nil {
				return 0, err
			}
			defer o.close()
			return lifecyclesCPU(ctx, o, nil, n)
		}
	}
	s, err := interleave(ctx, e, e.reps, variant{"incremental", cpu(false)}, variant{"none", cpu(true)})
	if err != nil {
		return nil, err
	}
	c := compare(s, "G4", fmt.Sprintf("CPU a message, lifecycle 1 at a time, auto_vacuum=INCREMENTAL vs NONE (%d msgs)", n), "µs/msg", "incremental", "none")
	c.Note = "info: what the choice of auto_vacuum costs"
	pages := map[bool]float64{}
	for _, keep := range []bool{false, true} {
		o, err := open(keep, -1) // the log keeps every page written
		if err != nil {
			return nil, err
		}
		if _, err := lifecyclesCPU(ctx, o, nil, 1); err != nil { // the queue, partition and group exist from here on
			o.close()
			return nil, err
		}
		if err := freshWAL(ctx, o.db.WriteDB()); err != nil {
			o.close()
			return nil, err
		}
		if _, err := lifecyclesCPU(ctx, o, nil, n); err != nil {
			o.close()
			return nil, err
		}
		w, err := readWAL(o.path + "-wal")
		o.close()
		if err != nil {
			return nil, err
		}
		pages[keep] = float64(w.frames) / float64(n)
	}
	wal := Row{Case: "G4", Measure: "  WAL pages a message, the same", Unit: "pages/msg", Reps: 1, RefName: "none",
		Ours: ptr(pages[false]), Ref: ptr(pages[true]), Ratio: ptr(pages[false] / pages[true])}
	return []Row{c, wal}, nil
}
