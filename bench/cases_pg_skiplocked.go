package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// P5: Lazarus on PostgreSQL against the plainest queue one can write on
// the same PostgreSQL, doing H1's work: a table of jobs, a push of ten
// in one INSERT, a pop of a hundred in one UPDATE … FOR UPDATE SKIP
// LOCKED, an ack of the batch in one DELETE, each statement its own
// transaction. Its CPU a message is its client's (this process: it does
// nothing else while the reference runs) and PostgreSQL's; Lazarus's is
// its server child's and PostgreSQL's, as in P1, the HTTP client
// (bench's) not counted. Both at the same durability (fsync on, each
// commit waiting for the disk), interleaved.
//
// The reference does less than Lazarus: no partitions and their order,
// no transactionId and its deduplication, no consumer groups, retries,
// dead letters, counts or news to other processes. Its consumers wait
// for work on a channel the producers of the same process kick, with a
// 50 ms poll beside it: the cheapest wake-up there is, cheaper than the
// LISTEN/NOTIFY a queue of several processes would need.

// skipLockedSchema is the reference's table.
const skipLockedSchema = `CREATE TABLE jobs (
	id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	payload BYTEA NOT NULL,
	leased_until TIMESTAMPTZ)`

// The reference's three statements.
const (
	skipLockedPush = `INSERT INTO jobs (payload) SELECT unnest($1::bytea[])`
	skipLockedPop  = `UPDATE jobs SET leased_until = now() + interval '30 seconds'
		WHERE id IN (SELECT id FROM jobs WHERE leased_until IS NULL OR leased_until < now()
			ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING id, payload`
	skipLockedAck = `DELETE FROM jobs WHERE id = ANY($1::bigint[])`
)

// skipLockedRun pushes, pops and acks n messages through the reference
// on a fresh database with H1's workers and returns its rate and CPU a
// message: the client's (this process) and the cluster's.
func skipLockedRun(ctx context.Context, n int) (pgRunStat, error) {
	u, drop, err := pgtest.NewDatabase("bench-skiplocked", nil)
	if err != nil {
		return pgRunStat{}, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer drop()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return pgRunStat{}, err
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on" // as Lazarus at FULL
	cfg.MaxConns = hProducers + hConsumers
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return pgRunStat{}, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, skipLockedSchema); err != nil {
		return pgRunStat{}, err
	}
	// Every connection open and every statement prepared before the run.
	if err := parallel(hProducers+hConsumers, func(int) error {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		for _, s := range []string{skipLockedPush, skipLockedPop, skipLockedAck} {
			if _, err := c.Conn().Prepare(ctx, s, s); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return pgRunStat{}, err
	}
	name := databaseName(u)
	pg0, err := settledClusterCPU(name)
	if err != nil {
		return pgRunStat{}, err
	}
	sw := startStopwatch()
	took, err := skipLockedLoad(ctx, pool, n)
	if err != nil {
		return pgRunStat{}, err
	}
	client := cpuTime() - sw.cpu
	pg1, err := clusterCPU(name)
	if err != nil {
		return pgRunStat{}, err
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }
	d := pg1.sub(pg0)
	return pgRunStat{rate: rate(n, took), lazarus: per(client), backends: per(d.backends), rest: per(d.rest)}, nil
}

// skipLockedLoad is httpLoad's work on the reference: hProducers
// producers pushing hPushBatch a statement, hConsumers consumers
// popping hPopBatch and acking them in one statement, until n are
// acked; it returns the time that took.
func skipLockedLoad(ctx context.Context, pool *pgxpool.Pool, n int) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kick := make(chan struct{}, 1)
	var acked atomic.Int64
	start := time.Now()
	var took time.Duration
	err := parallel(hProducers+hConsumers, func(w int) error {
		if w < hProducers {
			batch := make([][]byte, 0, hPushBatch)
			left := share(n, hProducers, w)
			for i := 0; left > 0; i++ {
				batch = batch[:0]
				for range min(hPushBatch, left) {
					batch = append(batch, payload(i, 0))
				}
				if _, err := pool.Exec(ctx, skipLockedPush, batch); err != nil {
					return err
				}
				left -= len(batch)
				select {
				case kick <- struct{}{}:
				default:
				}
			}
			return nil
		}
		ids := make([]int64, 0, hPopBatch)
		for acked.Load() < int64(n) {
			ids = ids[:0]
			rows, err := pool.Query(ctx, skipLockedPop, hPopBatch)
			if err != nil {
				if errors.Is(ctx.Err(), context.Canceled) {
					return nil
				}
				return err
			}
			for rows.Next() {
				var id int64
				var body []byte
				if err := rows.Scan(&id, &body); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Err(); err != nil {
				if errors.Is(ctx.Err(), context.Canceled) {
					return nil
				}
				return err
			}
			if len(ids) == 0 {
				select {
				case <-kick:
				case <-time.After(50 * time.Millisecond):
				case <-ctx.Done():
					return nil
				}
				continue
			}
			if _, err := pool.Exec(ctx, skipLockedAck, ids); err != nil {
				return err
			}
			if acked.Add(int64(len(ids))) >= int64(n) {
				took = time.Since(start)
				cancel() // the other consumer may be waiting
			}
		}
		return nil
	})
	return took, err
}

func caseP5(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(60_000, 10_000)
	load0 := loadAverage()
	split := Samples{}
	set := false
	defer pgDurable(false) // the other cases' default
	run := func(name string, fn func(ctx context.Context) (pgRunStat, error)) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			var err error
			if set, err = pgDurable(true); err != nil {
				return 0, err
			}
			st, err := fn(ctx)
			if err != nil {
				return 0, err
			}
			split[name+" process"] = append(split[name+" process"], st.lazarus)
			split[name+" PostgreSQL"] = append(split[name+" PostgreSQL"], st.backends+st.rest)
			split[name+" rate"] = append(split[name+" rate"], st.rate)
			return st.total(), nil
		}}
	}
	const ours, ref = "Lazarus", "SKIP LOCKED"
	cpu, err := interleave(ctx, e, e.reps,
		run(ours, func(ctx context.Context) (pgRunStat, error) { return pgHTTPRun(ctx, e, 1, n) }),
		run(ref, func(ctx context.Context) (pgRunStat, error) { return skipLockedRun(ctx, n) }))
	if err != nil {
		return nil, err
	}
	p5 := compare(cpu, "P5", fmt.Sprintf("PostgreSQL: Lazarus vs a plain FOR UPDATE SKIP LOCKED queue, CPU a message, H1's work (%d msgs)", n), "µs/msg", ours, ref)
	p5.Must, p5.Goal = atMost("ratio", 1.5, "≤ 1.5×"), atMost("ratio", 1.2, "≤ 1.2×")
	p5.Note = fmt.Sprintf("Lazarus: its server child's CPU (HTTP, the bench's client not counted) + the cluster's; the reference: its client's (this process) + the cluster's (utime+stime, /proc and getrusage, 10 ms ticks); %d producers pushing %d a statement, %d consumers popping %d, batch ack; the reference is one table, one statement each (no partitions, dedup, groups, retries, dead letters, counts or cross-process news); load average %s → %s on %d cores; %s",
		hProducers, hPushBatch, hConsumers, hPopBatch, loadText(load0), loadText(loadAverage()), runtime.NumCPU(), pgDurableNote(true, set))
	proc := compare(split, "P5", "  of which the process: Lazarus's server vs the reference's client (info)", "µs/msg", ours+" process", ref+" process")
	pg := compare(split, "P5", "  of which PostgreSQL's processes (info)", "µs/msg", ours+" PostgreSQL", ref+" PostgreSQL")
	thr := compare(split, "P5", "  throughput (info)", "msg/s", ours+" rate", ref+" rate")
	thr.Note = "absolute: judge it with the load beside it; the client runs on the same 2 cores"
	return []Row{p5, proc, pg, thr}, nil
}
