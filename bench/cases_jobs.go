package main

// D5, D6 and D8: bulk replays are jobs (broker.StartJob), run a chunk a
// low-priority transaction by broker.RunJobs in the background, as the
// server runs them (serve starts RunJobs), and waited for with WaitJob.

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// backgroundJobs runs b.RunJobs until stop is called, as `lazarus serve`
// does; stop returns once RunJobs has.
func backgroundJobs(ctx context.Context, b *broker.Broker) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.RunJobs(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// newestQuery selects the n newest dead letters of the big group (those
// failed at or after the one at depth n-1: n, or a few more on a tie of
// its millisecond).
func newestQuery(ctx context.Context, b *broker.Broker, n int) (broker.DLQQuery, error) {
	cur, err := cursorAt(ctx, b, n-1)
	if err != nil {
		return broker.DLQQuery{}, err
	}
	q := groupQuery()
	q.From = cur.At
	return q, nil
}

// jobRun is one job as a variant ran it.
type jobRun struct {
	took time.Duration // StartJob called to the job done
	job  broker.Job
}

// perBulk is the run's time in ms scaled to bulk (a tie at the filter's
// first millisecond can add a dead letter or two).
func (r jobRun) perBulk(bulk int) float64 {
	return float64(r.took) / float64(time.Millisecond) * float64(bulk) / float64(max(r.job.Done, 1))
}

// runJob starts the job r and has it done, in the background by RunJobs
// (running: WaitJob waits for it) or in the caller (RunJob), and checks
// that it did at least want.
func runJob(ctx context.Context, b *broker.Broker, r broker.JobRequest, background bool, want int) (jobRun, error) {
	start := time.Now()
	j, err := b.StartJob(ctx, r)
	if err != nil {
		return jobRun{}, fmt.Errorf("start job: %w", err)
	}
	if background {
		j, err = b.WaitJob(ctx, j.ID)
	} else {
		j, err = b.RunJob(ctx, j.ID)
	}
	took := time.Since(start)
	switch {
	case err != nil:
		return jobRun{}, fmt.Errorf("job #%d: %w", j.ID, err)
	case j.State != broker.JobDone:
		return jobRun{}, fmt.Errorf("job #%d is %s (%s)", j.ID, j.State, j.Reason)
	case j.Done < int64(want):
		return jobRun{}, fmt.Errorf("job #%d did %d of %d", j.ID, j.Done, want)
	}
	return jobRun{took: took, job: j}, nil
}

// jobChunkOf is how many dead letters one chunk of a job by filter at
// pace takes in the fixture (each message has one dead letter there):
// the first chunk of a job over the newest n, run by StepJob, the rest
// then run to its end.
func jobChunkOf(ctx context.Context, b *broker.Broker, kind, pace string, n int) (int, error) {
	q, err := newestQuery(ctx, b, n)
	if err != nil {
		return 0, err
	}
	j, err := b.StartJob(ctx, broker.JobRequest{Kind: kind, Query: &q, Pace: pace, Actor: "bench"})
	if err != nil {
		return 0, err
	}
	if j, err = b.StepJob(ctx, j.ID); err != nil {
		return 0, err
	}
	chunk := int(j.Done)
	if _, err := b.RunJob(ctx, j.ID); err != nil {
		return 0, err
	}
	if chunk <= 0 {
		return 0, fmt.Errorf("the first chunk of a %s job did nothing", kind)
	}
	return chunk, nil
}

// D5: replay 10k by filter as a job vs raw set-based in the same chunk
// size. The job runs flat out (PaceFull: chunks bounded by their rows),
// so that both run in chunks of the same size; at the default pace a
// chunk is bounded by 2 ms of wall time (a policy for the producers
// beside it, D6 and D7), so its size follows the machine's load, and a
// row beside says what that costs.

func caseD5(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	b := f.ours.b
	bulk := e.bulk()
	qid, gid, err := rawIDs(ctx, f.raw)
	if err != nil {
		return nil, err
	}
	chunk, err := jobChunkOf(ctx, b, broker.JobReplay, broker.PaceFull, bulk)
	if err != nil {
		return nil, fmt.Errorf("the chunk of a replay job: %w", err)
	}
	delChunk, err := jobChunkOf(ctx, b, broker.JobDelete, broker.PaceFull, bulk)
	if err != nil {
		return nil, fmt.Errorf("the chunk of a delete job: %w", err)
	}
	// The raw copy loses the same dead letters.
	for _, n := range []int{chunk, delChunk} {
		if _, err := rawReplayChunked(ctx, f.raw, qid, gid, bulk, n, rawSameWrites); err != nil {
			return nil, err
		}
	}
	filterJob := func(name, kind, pace string, background bool) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			q, err := newestQuery(ctx, b, bulk)
			if err != nil {
				return 0, err
			}
			if background {
				defer backgroundJobs(ctx, b)()
			}
			r, err := runJob(ctx, b, broker.JobRequest{Kind: kind, Query: &q, Pace: pace, Actor: "bench"}, background, bulk)
			return r.perBulk(bulk), err
		}}
	}
	raw := func(name string, how rawWrites, n int) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			start := time.Now()
			done, err := rawReplayChunked(ctx, f.raw, qid, gid, bulk, n, how)
			if err == nil && done != int64(bulk) {
				err = fmt.Errorf("%s removed %d of %d", name, done, bulk)
			}
			return float64(time.Since(start)) / float64(time.Millisecond), err
		}}
	}
	s, err := interleave(ctx, e, e.reps,
		filterJob("job", broker.JobReplay, broker.PaceFull, true),
		raw("raw", rawSameWrites, chunk),
		filterJob("RunJob", broker.JobReplay, broker.PaceFull, false),
		filterJob("gentle job", broker.JobReplay, broker.PaceGentle, true),
		raw("raw minimal", rawMinimal, chunk),
		variant{"ReplayIDs", func(ctx context.Context, _ int) (float64, error) {
			ids, err := newestIDs(ctx, b, bulk)
			if err != nil {
				return 0, err
			}
			r, err := runJob(ctx, b, broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Actor: "bench"}, false, bulk)
			return r.perBulk(bulk), err
		}},
		filterJob("delete job", broker.JobDelete, broker.PaceFull, true),
		raw("raw delete", rawDelete, delChunk),
		variant{"job, small chunks", func(ctx context.Context, _ int) (float64, error) {
			q, err := newestQuery(ctx, b, bulk)
			if err != nil {
				return 0, err
			}
			r, err := runJob(ctx, b, broker.JobRequest{Kind: broker.JobReplay, Query: &q, Rate: smallChunkRate, Actor: "bench"}, false, bulk)
			return r.perBulk(bulk), err
		}},
		raw("raw, small chunks", rawSameWrites, smallChunkRate/10),
	)
	if err != nil {
		return nil, err
	}
	k := bulk / 1000
	job := compare(s, "D5", fmt.Sprintf("replay %dk by filter as a job flat out (StartJob, RunJobs in the background, WaitJob)", k), "ms", "job", "raw")
	job.RefName = "raw set-based"
	job.Must, job.Goal = atMost("ratio", 1.5, "≤ 1.5× raw set-based"), atMost("ratio", 1.2, "≤ 1.2×")
	job.Note = fmt.Sprintf("the newest %d of %s/%s; both in transactions of %d dead letters (the job's first chunk, measured), nothing else writing; "+
		"the job's time runs from StartJob (which counts what it will do) to WaitJob's return, as the server runs it; "+
		"raw: per chunk one temp table of the chunk's dead letters, then one statement for each table the job writes: the copies, their lineage (replays), "+
		"replay_outcomes, job_outcomes, both full-text indexes, dead_letters, error_groups, group_stats with oldest_at, stats_minute/quarter/hour, "+
		"partitions' counts, consumers' ready flags, the job's progress", bulk, dlqQueue, dlqGroup0, chunk)
	gentle := compare(s, "D5", "  the same job at the default pace (chunks bounded by 2 ms of wall time, info)", "ms", "gentle job", "raw")
	gentle.RefName = "raw set-based"
	gentle.Note = "what the default pace costs the job: its chunks shrink with the machine's load, each paying a chunk's fixed cost and the text index's merge steps (docs/performance.md, D7)"
	inCaller := compare(s, "D5", "  the same job run in the caller (RunJob: no runner between chunks, info)", "ms", "RunJob", "raw")
	inCaller.RefName = "raw set-based"
	minimal := compare(s, "D5", "  the job vs raw minimal (copies, DELETE, group_stats only: what lineage, outcomes, indexes and history cost, info)", "ms", "job", "raw minimal")
	minimal.RefName = "raw minimal"
	ids := compare(s, "D5", fmt.Sprintf("  replay the %dk newest by id, a job run in the caller (ReplayIDs, info)", k), "ms", "ReplayIDs", "raw")
	ids.RefName = "raw set-based"
	ids.Note = "the ids read before the clock starts"
	del := compare(s, "D5", fmt.Sprintf("  delete %dk by filter as a job (RunJobs) vs raw DELETE in the same chunks (info)", k), "ms", "delete job", "raw delete")
	del.RefName = "raw delete"
	del.Note = fmt.Sprintf("chunks of %d; raw: the full-text rows, DELETE, error_groups and group_stats; the job also keeps every deleted row for the restore window (removed_dead_letters)", delChunk)
	small := compare(s, "D5", fmt.Sprintf("  the job in chunks of %d (a job limited to %d msg/s run by RunJob, which does not pace) vs raw in chunks of %d (info)", smallChunkRate/10, smallChunkRate, smallChunkRate/10),
		"ms", "job, small chunks", "raw, small chunks")
	small.RefName = "raw set-based"
	small.Note = fmt.Sprintf("what chunks small enough for D6 cost: the job in chunks of %d vs in chunks of %d (RunJob both): %.2f×", smallChunkRate/10, chunk,
		median(ratios(s["job, small chunks"], s["RunJob"])))
	return []Row{job, gentle, inCaller, minimal, ids, del, small}, nil
}

// smallChunkRate is the rate limit whose chunks (a tenth of it) D5 and D6
// measure beside the bulk chunk: the size a chunk would need for D6's
// must.
const smallChunkRate = 1000

// rawWrites is what a raw chunk writes.
type rawWrites int

const (
	rawSameWrites rawWrites = iota // every table a replay job's chunk writes
	rawMinimal                     // copies, DELETE, group_stats
	rawDelete                      // a delete: the full-text rows, DELETE, error_groups, group_stats
)

// rawReplayChunked replays (or deletes) the n newest dead letters of a
// group set-based, chunk at a time, each chunk one transaction of
// statements prepared once (as the broker's are), and returns how many it
// removed.
func rawReplayChunked(ctx context.Context, d *sql.DB, qid, gid int64, n, chunk int, how rawWrites) (int64, error) {
	now := time.Now().UnixMilli()
	var jobID int64
	if how == rawSameWrites {
		if err := d.QueryRowContext(ctx, `INSERT INTO jobs (kind, state, actor, created_at, updated_at, queue, scope, description, planned)
			VALUES ('replay', 'running', 'raw', ?1, ?1, ?2, '{}', 'raw', ?3) RETURNING id`, now, dlqQueue, n).Scan(&jobID); err != nil {
			return 0, fmt.Errorf("raw job: %w", err)
		}
	}
	// The reference has one connection: the temporary table and the
	// prepared statements are all on it.
	if _, err := d.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS raw_chunk (k INTEGER PRIMARY KEY, id INTEGER NOT NULL, seq INTEGER NOT NULL,
		partition_id INTEGER NOT NULL, fingerprint TEXT NOT NULL)`); err != nil {
		return 0, fmt.Errorf("raw chunk table: %w", err)
	}
	texts := rawStatements(how)
	stmts := make([]*sql.Stmt, len(texts))
	params := make([]int, len(texts))
	for i, q := range texts {
		st, err := d.PrepareContext(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("prepare %.60s: %w", q, err)
		}
		defer st.Close()
		stmts[i] = st
		for _, m := range paramRe.FindAllStringSubmatch(q, -1) {
			params[i] = max(params[i], int(m[1][0]-'0'))
		}
	}
	var done int64
	for done < int64(n) {
		var removed int64
		err := inTx(ctx, d, func(tx *sql.Tx) error {
			args := []any{qid, gid, min(chunk, n-int(done)), time.Now().UnixMilli(), jobID, 0}
			for i, st := range stmts {
				res, err := tx.StmtContext(ctx, st).ExecContext(ctx, args[:params[i]]...)
				if err != nil {
					return fmt.Errorf("%.60s: %w", texts[i], err)
				}
				if i == rawFill {
					if removed, err = res.RowsAffected(); err != nil || removed == 0 {
						return err
					}
					args[5] = removed
				}
			}
			return nil
		})
		if err != nil {
			return done, err
		}
		if removed == 0 {
			break
		}
		done += removed
	}
	return done, nil
}

// paramRe finds the numbered parameters of a raw statement.
var paramRe = regexp.MustCompile(`\?([1-6])`)

// rawFill is the index in rawStatements of the statement that fills the
// chunk's table (its rows are the chunk's size).
const rawFill = 1

// rawStatements are the statements of one raw chunk, in order; their
// parameters: ?1 the queue's id, ?2 the group's, ?3 the chunk's size, ?4
// now (ms), ?5 the raw job's id, ?6 the dead letters in the chunk.
func rawStatements(how rawWrites) []string {
	steps := []string{`DELETE FROM temp.raw_chunk`,
		`INSERT INTO temp.raw_chunk (id, seq, partition_id, fingerprint)
			SELECT id, seq, partition_id, fingerprint FROM dead_letters WHERE queue_id = ?1 AND group_id = ?2 ORDER BY failed_at DESC, id DESC LIMIT ?3`}
	if how != rawDelete {
		steps = append(steps, `INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at)
			SELECT m.partition_id, 'dlq:' || c.seq, m.payload, m.trace_id, ?4 FROM temp.raw_chunk c JOIN messages m ON m.seq = c.seq
			WHERE true ORDER BY c.k ON CONFLICT (partition_id, transaction_id) DO NOTHING`)
	}
	if how == rawSameWrites {
		steps = append(steps,
			`INSERT INTO replays (copy_seq, seq, group_id, job_id, actor, at)
				SELECT m.seq, c.seq, 0, ?5, 'raw', ?4 FROM temp.raw_chunk c JOIN messages m ON m.partition_id = c.partition_id AND m.transaction_id = 'dlq:' || c.seq`,
			`INSERT INTO replay_outcomes (copy_seq, group_id, job_id)
				SELECT m.seq, ?2, ?5 FROM temp.raw_chunk c JOIN messages m ON m.partition_id = c.partition_id AND m.transaction_id = 'dlq:' || c.seq
				WHERE true ON CONFLICT DO NOTHING`,
			`INSERT INTO job_outcomes (job_id, group_id, replayed) VALUES (?5, ?2, ?6)
				ON CONFLICT (job_id, group_id) DO UPDATE SET replayed = replayed + excluded.replayed`)
	}
	if how != rawMinimal {
		steps = append(steps,
			// What the store does for the text indexes since they live
			// in a file of their own (db/sqlite/search.go): a log row a
			// dead letter removed, for its indexer.
			`INSERT INTO text_index_removed (dead_letter_id, seq) SELECT id, seq FROM temp.raw_chunk`)
	}
	steps = append(steps, `DELETE FROM dead_letters WHERE id IN (SELECT id FROM temp.raw_chunk)`)
	if how != rawMinimal {
		steps = append(steps,
			`UPDATE error_groups SET dead_letters = dead_letters - (SELECT COUNT(*) FROM temp.raw_chunk c WHERE c.fingerprint = error_groups.fingerprint)
				WHERE queue_id = ?1 AND group_id = ?2 AND fingerprint IN (SELECT fingerprint FROM temp.raw_chunk)`,
			`DELETE FROM error_groups WHERE queue_id = ?1 AND group_id = ?2 AND fingerprint IN (SELECT fingerprint FROM temp.raw_chunk) AND dead_letters <= 0`)
	}
	column := "replayed"
	if how == rawDelete {
		column = "deleted"
	}
	if how == rawMinimal {
		return append(steps, `UPDATE group_stats SET depth = depth - ?6, replayed = replayed + ?6 WHERE queue_id = ?1 AND group_id = ?2`)
	}
	steps = append(steps, `UPDATE group_stats SET depth = depth - ?6, `+column+` = `+column+` + ?6,
		oldest_at = COALESCE((SELECT failed_at FROM dead_letters WHERE queue_id = ?1 AND group_id = ?2 ORDER BY failed_at, id LIMIT 1), 0)
		WHERE queue_id = ?1 AND group_id = ?2`)
	for _, t := range []struct{ table, unit, div string }{{"stats_minute", "minute", "60000"}, {"stats_quarter", "quarter", "900000"}, {"stats_hour", "hour", "3600000"}} {
		steps = append(steps, `INSERT INTO `+t.table+` (queue_id, group_id, `+t.unit+`, `+column+`, depth, oldest_at)
			SELECT ?1, ?2, ?4 / `+t.div+`, ?6, s.depth, s.oldest_at FROM group_stats s WHERE s.queue_id = ?1 AND s.group_id = ?2
			ON CONFLICT (queue_id, group_id, `+t.unit+`) DO UPDATE SET `+column+` = `+column+` + excluded.`+column+`, depth = excluded.depth, oldest_at = excluded.oldest_at`)
	}
	if how == rawSameWrites {
		steps = append(steps,
			`UPDATE partitions SET messages = messages + (SELECT COUNT(*) FROM temp.raw_chunk c WHERE c.partition_id = partitions.id),
				counted_seq = (SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = partitions.id)
				WHERE id IN (SELECT partition_id FROM temp.raw_chunk)`,
			`UPDATE consumers SET ready = 1 WHERE partition_id IN (SELECT partition_id FROM temp.raw_chunk) AND ready = 0`,
			`UPDATE jobs SET done = done + ?6, updated_at = ?4 WHERE id = ?5`)
	}
	return steps
}

// D6: a producer's push p99 while D5's job runs in the background.

func caseD6(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	b := f.ours.b
	bulk := e.bulk()
	var all = map[string][]time.Duration{}
	p50s := Samples{}
	var jobTimes []float64
	var gaps []time.Duration // from a chunk's start to the next's
	idleFor := e.dur(time.Second, 400*time.Millisecond)
	// A job under a rate limit runs in smaller chunks (a tenth of its rate
	// a chunk): 1,000 msg/s makes chunks of 100.
	const limitedRate = smallChunkRate
	limitedN := e.size(2000, 500)
	s, err := interleave(ctx, e, e.reps,
		variant{"during the job", func(ctx context.Context, _ int) (float64, error) {
			q, err := newestQuery(ctx, b, bulk)
			if err != nil {
				return 0, err
			}
			defer backgroundJobs(ctx, b)()
			p := startProducer(ctx, f.ours, "producer", producerInterval)
			r, err := runJob(ctx, b, broker.JobRequest{Kind: broker.JobReplay, Query: &q, Actor: "bench"}, true, bulk)
			lat, perr := p.finish()
			if err == nil {
				err = perr
			}
			all["during"] = append(all["during"], lat...)
			p50s["during"] = append(p50s["during"], percentile(lat, 0.5))
			jobTimes = append(jobTimes, r.perBulk(bulk))
			if err == nil {
				var chunks []jobChunk
				if chunks, err = jobChunks(ctx, f.ours.db.WriteDB(), r.job.ID); err != nil {
					return 0, err
				}
				for i := 1; i < len(chunks); i++ {
					gaps = append(gaps, chunks[i].at.Sub(chunks[i-1].at))
				}
			}
			// The idle producer runs as long as the job took.
			idleFor = max(r.took, 300*time.Millisecond)
			return percentile(lat, 0.99), err
		}},
		variant{"during a job in small chunks", func(ctx context.Context, _ int) (float64, error) {
			q, err := newestQuery(ctx, b, bulk)
			if err != nil {
				return 0, err
			}
			p := startProducer(ctx, f.ours, "producer", producerInterval)
			_, err = runJob(ctx, b, broker.JobRequest{Kind: broker.JobReplay, Query: &q, Rate: smallChunkRate, Actor: "bench"}, false, bulk)
			lat, perr := p.finish()
			if err == nil {
				err = perr
			}
			all["small"] = append(all["small"], lat...)
			return percentile(lat, 0.99), err
		}},
		variant{"during a rate-limited job", func(ctx context.Context, _ int) (float64, error) {
			q, err := newestQuery(ctx, b, limitedN)
			if err != nil {
				return 0, err
			}
			defer backgroundJobs(ctx, b)()
			p := startProducer(ctx, f.ours, "producer", producerInterval)
			_, err = runJob(ctx, b, broker.JobRequest{Kind: broker.JobReplay, Query: &q, Rate: limitedRate, Actor: "bench"}, true, limitedN)
			lat, perr := p.finish()
			if err == nil {
				err = perr
			}
			all["limited"] = append(all["limited"], lat...)
			return percentile(lat, 0.99), err
		}},
		variant{"idle", func(ctx context.Context, _ int) (float64, error) {
			// Once the search file's indexer has applied the jobs'
			// removals (searchCaughtUp, D7).
			if err := searchCaughtUp(ctx, f.ours.db.WriteDB()); err != nil {
				return 0, err
			}
			p := startProducer(ctx, f.ours, "producer", producerInterval)
			time.Sleep(idleFor)
			lat, err := p.finish()
			all["idle"] = append(all["idle"], lat...)
			p50s["idle"] = append(p50s["idle"], percentile(lat, 0.5))
			return percentile(lat, 0.99), err
		}},
	)
	if err != nil {
		return nil, err
	}
	r := compareDiff(s, "D6", fmt.Sprintf("producer push p99 while a %dk replay job runs (D5, RunJobs) vs idle", bulk/1000), "ms", "during the job", "idle")
	r.RefName = "idle p99"
	r.Must, r.Goal = atMost("difference", 10, "≤ idle p99 + 10 ms"), atMost("difference", 3, "≤ idle p99 + 3 ms")
	r.Note = fmt.Sprintf("one push due every %s to another queue, its latency from when it was due (a push held up holds up the ones due behind it); "+
		"p50 %.2f ms during, %.2f ms idle; all repetitions' pushes pooled: p99 %.2f ms during (%d pushes), %.2f ms idle (%d); the job took %.0f ms (median) with the producer; "+
		"from a chunk's start to the next's (the chunk, and the pushes let in between; replays.at, ms): p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		producerInterval, median(p50s["during"]), median(p50s["idle"]), percentile(all["during"], 0.99), len(all["during"]),
		percentile(all["idle"], 0.99), len(all["idle"]), median(jobTimes), percentile(gaps, 0.5), percentile(gaps, 0.99), percentile(gaps, 1))
	l := compareDiff(s, "D6", fmt.Sprintf("  the same during a job limited to %d msg/s (chunks of %d, info)", limitedRate, limitedRate/10), "ms", "during a rate-limited job", "idle")
	l.RefName = "idle p99"
	l.Note = fmt.Sprintf("%d dead letters; all repetitions' pushes pooled: p99 %.2f ms (%d pushes)", limitedN, percentile(all["limited"], 0.99), len(all["limited"]))
	sm := compareDiff(s, "D6", fmt.Sprintf("  the same during the %dk job in chunks of %d, not paced (RunJob, info)", bulk/1000, smallChunkRate/10), "ms", "during a job in small chunks", "idle")
	sm.RefName = "idle p99"
	sm.Note = fmt.Sprintf("a job limited to %d msg/s run by RunJob, which does not pace: D5's job in chunks of %d; all repetitions' pushes pooled: p99 %.2f ms (%d pushes)",
		smallChunkRate, smallChunkRate/10, percentile(all["small"], 0.99), len(all["small"]))
	return []Row{r, sm, l}, nil
}

// jobChunk is one chunk of a replay job: when its copies were made and
// how many.
type jobChunk struct {
	at time.Time
	n  int
}

// jobChunks reads a finished replay job's chunks from its copies'
// lineage (replays.at: the chunk's time, in ms).
func jobChunks(ctx context.Context, d *sql.DB, jobID int64) ([]jobChunk, error) {
	rows, err := d.QueryContext(ctx, `SELECT at, COUNT(*) FROM replays WHERE job_id = ? GROUP BY at ORDER BY at`, jobID)
	if err != nil {
		return nil, fmt.Errorf("job chunks: %w", err)
	}
	defer rows.Close()
	var out []jobChunk
	for rows.Next() {
		var at int64
		var c jobChunk
		if err := rows.Scan(&at, &c.n); err != nil {
			return nil, err
		}
		c.at = time.UnixMilli(at)
		out = append(out, c)
	}
	return out, rows.Err()
}
