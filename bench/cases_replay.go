package main

// D7: replay at scale. The whole big group of the dashboard's database
// (1M dead letters, 50k in quick mode) replayed by filter as one job run
// flat out (pace full) by RunJobs, as the server runs it; and a producer's
// pushes beside a job at its default pace against the same producer idle,
// interleaved. Each part works on a copy of its own of the cached
// database (D5 and D6 change the shared one).

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// d7Sample is how many dead letters the statement and WAL counts are
// taken over (a job over the group's newest, the WAL not checkpointed).
const d7Sample = 20_000

// openD7 opens a fresh copy of the cached dashboard database under a
// broker, with opts (its path and sync set here).
func openD7(ctx context.Context, e *env, f *dlqFixture, name string, opts db.Options) (*ours, error) {
	path := e.path(name)
	if err := copyFile(f.cache, path); err != nil {
		return nil, err
	}
	opts.Sync = e.sync
	d, err := db.OpenWith(ctx, path, opts)
	if err != nil {
		removeDB(path)
		return nil, err
	}
	return &ours{db: d, b: broker.New(broker.Config{Store: d}), path: path}, nil
}

// groupJob is a replay of every dead letter of the big group (at or
// below the bound StartJob takes), at pace.
func groupJob(pace string) broker.JobRequest {
	q := groupQuery()
	return broker.JobRequest{Kind: broker.JobReplay, Query: &q, Pace: pace, Actor: "bench"}
}

// d7Writes is what a job over the sample wrote and ran, a dead letter.
type d7Writes struct {
	statements, transactions, walPages, cpuMicros float64
}

// d7Sample replays the newest d7Sample dead letters of the group at pace
// (RunJobs in the background) on o, whose WAL is not checkpointed, and
// counts what it wrote a dead letter.
func d7SampleRun(ctx context.Context, o *ours, rec *recorder, pace string) (d7Writes, error) {
	q, err := newestQuery(ctx, o.b, d7Sample)
	if err != nil {
		return d7Writes{}, err
	}
	if err := freshWAL(ctx, o.db.WriteDB()); err != nil {
		return d7Writes{}, err
	}
	stop := backgroundJobs(ctx, o.b)
	phase := "d7 " + pace
	rec.setPhase(phase)
	c0 := cpuTime()
	r, err := runJob(ctx, o.b, broker.JobRequest{Kind: broker.JobReplay, Query: &q, Pace: pace, Actor: "bench"}, true, d7Sample)
	cpu := cpuTime() - c0
	rec.setPhase("")
	stop()
	if err != nil {
		return d7Writes{}, err
	}
	w, err := readWAL(o.path + "-wal")
	if err != nil {
		return d7Writes{}, err
	}
	n := float64(r.job.Done)
	out := d7Writes{walPages: float64(w.frames) / n, cpuMicros: float64(cpu) / float64(time.Microsecond) / n}
	if rec != nil {
		c := rec.counts(phase)
		out.statements, out.transactions = float64(c.statements)/n, float64(c.transactions)/n
	}
	return out, nil
}

func caseD7(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqCache(ctx)
	if err != nil {
		return nil, err
	}
	var rows []Row

	// What a dead letter costs in statements and WAL pages, flat out and
	// at the default pace: the newest d7Sample, the WAL kept whole.
	rec := startRecorder()
	o, err := openD7(ctx, e, f, "d7-sample", db.Options{AutoCheckpoint: -1})
	if err != nil {
		rec.stop()
		return nil, err
	}
	full, err := d7SampleRun(ctx, o, rec, broker.PaceFull)
	var gentle d7Writes
	if err == nil {
		gentle, err = d7SampleRun(ctx, o, rec, broker.PaceGentle)
	}
	rec.stop()
	o.close()
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}

	// The whole group flat out.
	o, err = openD7(ctx, e, f, "d7-whole", db.Options{})
	if err != nil {
		return nil, err
	}
	n := f.inGroup()
	load0 := loadAverage()
	stop := backgroundJobs(ctx, o.b)
	c0 := cpuTime()
	r, err := runJob(ctx, o.b, groupJob(broker.PaceFull), true, n)
	cpu := cpuTime() - c0
	stop()
	load1 := loadAverage()
	var chunks []jobChunk
	if err == nil {
		chunks, err = jobChunks(ctx, o.db.WriteDB(), r.job.ID)
	}
	o.close()
	if err != nil {
		return nil, fmt.Errorf("the whole group: %w", err)
	}
	var sizes []time.Duration // a chunk's dead letters, as durations for percentile
	for _, c := range chunks {
		sizes = append(sizes, time.Duration(c.n)*time.Millisecond)
	}
	whole := Row{Case: "D7", Measure: fmt.Sprintf("replay %s dead letters by filter as one job, flat out (pace full, RunJobs): seconds", countWords(n)), Unit: "s", Reps: 1}
	whole.Ours = ptr(r.took.Seconds())
	whole.Samples = Samples{"job": {roundSig(r.took.Seconds(), 4)}}
	whole.Must, whole.Goal = atMost("ours", 60, "≤ 60 s"), atMost("ours", 30, "≤ 30 s")
	whole.Note = fmt.Sprintf("%s/%s of the dashboard's database (%s), a copy of its own; %d done, %d skipped; CPU of the process %.1f s (%.1f µs a dead letter); "+
		"%d chunks, dead letters a chunk p50 %.0f, max %.0f; flat-out sample of the newest %d (WAL kept whole): %.3g statements, %.3g transactions, %.2f WAL pages, %.1f µs CPU a dead letter; "+
		"load average %s before, %s after",
		dlqQueue, dlqGroup0, f.describe(), r.job.Done, r.job.Skipped, cpu.Seconds(), float64(cpu)/float64(time.Microsecond)/float64(max(r.job.Done, 1)),
		len(chunks), percentile(sizes, 0.5), percentile(sizes, 1), d7Sample, full.statements, full.transactions, full.walPages, full.cpuMicros,
		loadText(load0), loadText(load1))
	rows = append(rows, whole)
	info := Row{Case: "D7", Measure: fmt.Sprintf("  the newest %d at the default pace: statements, WAL pages and CPU a dead letter (info)", d7Sample), Unit: "statements", Reps: 1,
		Verdict: verdictInfo}
	info.Ours = ptr(gentle.statements)
	info.Note = fmt.Sprintf("%.2f statements, %.3f transactions, %.2f WAL pages, %.1f µs CPU a dead letter (flat out: %.3g, %.3g, %.2f, %.1f)",
		gentle.statements, gentle.transactions, gentle.walPages, gentle.cpuMicros, full.statements, full.transactions, full.walPages, full.cpuMicros)
	rows = append(rows, info)

	// A producer beside a job at its default pace vs idle, interleaved:
	// the job runs for window, then is cancelled. The job runs as the
	// server runs it; the text indexes follow in the search file, by the
	// store's indexer (db/sqlite/search.go).
	o, err = openD7(ctx, e, f, "d7-pace", db.Options{})
	if err != nil {
		return nil, err
	}
	defer o.close()
	window := e.dur(4*time.Second, time.Second)
	all := map[string][]time.Duration{}
	rates := map[string][]float64{}
	cpus := map[string][]float64{}
	var gaps []time.Duration
	beside := func(name string, o *ours) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			stop := backgroundJobs(ctx, o.b)
			defer stop()
			c0 := cpuTime()
			p := startProducer(ctx, o, "producer", producerInterval)
			start := time.Now()
			j, err := o.b.StartJob(ctx, groupJob(broker.PaceGentle))
			if err != nil {
				p.finish()
				return 0, err
			}
			time.Sleep(window)
			if _, err := o.b.CancelJob(ctx, j.ID, "bench"); err != nil {
				p.finish()
				return 0, err
			}
			lat, perr := p.finish()
			took := time.Since(start)
			if j, err = o.b.WaitJob(ctx, j.ID); err != nil {
				return 0, err
			}
			cpu := cpuTime() - c0
			if perr != nil {
				return 0, perr
			}
			rates[name] = append(rates[name], float64(j.Done)/took.Seconds())
			cpus[name] = append(cpus[name], float64(cpu)/float64(time.Microsecond)/float64(max(j.Done, 1)))
			chunks, err := jobChunks(ctx, o.db.WriteDB(), j.ID)
			if err != nil {
				return 0, err
			}
			if name == "beside the job" {
				for i := 1; i < len(chunks); i++ {
					gaps = append(gaps, chunks[i].at.Sub(chunks[i-1].at))
				}
			}
			all[name] = append(all[name], lat...)
			return percentile(lat, 0.99), nil
		}}
	}
	s, err := interleave(ctx, e, e.reps,
		beside("beside the job", o),
		variant{"idle", func(ctx context.Context, _ int) (float64, error) {
			// The search file's indexer applies the job's removals after
			// the job's window: idle is once it has.
			if err := searchCaughtUp(ctx, o.db.WriteDB()); err != nil {
				return 0, err
			}
			p := startProducer(ctx, o, "producer", producerInterval)
			time.Sleep(window)
			lat, err := p.finish()
			all["idle"] = append(all["idle"], lat...)
			return percentile(lat, 0.99), err
		}},
	)
	if err != nil {
		return rows, fmt.Errorf("beside the job: %w", err)
	}
	p := compareDiff(s, "D7", "a producer's push p99 beside a replay job at its default pace vs idle (interleaved)", "ms", "beside the job", "idle")
	p.RefName = "idle p99"
	p.Must, p.Goal = atMost("difference", 10, "≤ idle p99 + 10 ms"), atMost("difference", 3, "≤ idle p99 + 3 ms")
	p.Note = fmt.Sprintf("one push due every %s to another queue, its latency from when it was due; the job (the big group, by filter, default pace, RunJobs; the text indexes brought up to date in the search file by the store's indexer) runs %s and is cancelled; "+
		"all repetitions' pushes pooled: p99 %.2f ms beside (%d pushes), %.2f ms idle (%d); the job's pace beside the producer: %.0f dead letters/s (median), CPU of the process %.0f µs a dead letter (median, the producer's and the indexer's included); "+
		"from a chunk's start to the next's (replays.at, ms): p50 %.0f, p99 %.0f, max %.0f; load average %s",
		producerInterval, window, percentile(all["beside the job"], 0.99), len(all["beside the job"]), percentile(all["idle"], 0.99), len(all["idle"]), median(rates["beside the job"]), median(cpus["beside the job"]),
		percentile(gaps, 0.5), percentile(gaps, 0.99), percentile(gaps, 1), loadText(loadAverage()))
	rows = append(rows, p)
	return rows, nil
}

// searchCaughtUp returns once the search file's indexer has applied
// every row of the store's logs (db/sqlite/search.go), looking every
// 10 ms, for a minute at most.
func searchCaughtUp(ctx context.Context, d *sql.DB) error {
	return pollSearch(ctx, time.Minute, func() (bool, string, error) {
		var behind int64
		if err := d.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM main.sqlite_sequence WHERE name = 'text_index_added'), 0) - added_applied
			+ COALESCE((SELECT seq FROM main.sqlite_sequence WHERE name = 'text_index_removed'), 0) - removed_applied FROM search.search_state`).Scan(&behind); err != nil {
			return false, "", fmt.Errorf("the search file's progress: %w", err)
		}
		return behind <= 0, fmt.Sprintf("its indexer is still %d rows behind", behind), nil
	})
}

// searchSettled waits until the search file's indexer has caught up
// (searchCaughtUp) and has given its free pages back, down to fewer than
// the store keeps (1,024: db/sqlite's giveBackPages), for 5 minutes at
// most: the generated fixture's search file holds some 23,000 free
// pages, which a fresh copy gives back (incremental vacuum, about 3 s on
// 2 cores) while the first requests would run. A server opened on a
// database after a big replay or delete does the same work once; the
// cases measure the pages after.
func searchSettled(ctx context.Context, d *sql.DB) error {
	if err := searchCaughtUp(ctx, d); err != nil {
		return err
	}
	return pollSearch(ctx, 5*time.Minute, func() (bool, string, error) {
		var free int64
		if err := d.QueryRowContext(ctx, `PRAGMA search.freelist_count`).Scan(&free); err != nil {
			return false, "", fmt.Errorf("the search file's free pages: %w", err)
		}
		return free < 1024, fmt.Sprintf("it still holds %d free pages", free), nil
	})
}

// pollSearch calls check every 10 ms until it says done, for within at
// most; then it fails with what check last said of the search file.
func pollSearch(ctx context.Context, within time.Duration, check func() (done bool, state string, err error)) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(within)
	for {
		done, state, err := check()
		switch {
		case err != nil:
			return err
		case done:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("after %s, the search file: %s", within, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
