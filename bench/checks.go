package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/mattn/go-sqlite3"
	"maragu.dev/goqite"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// walStats describes a WAL file written from empty.
type walStats struct {
	bytes   int64
	frames  int
	commits int // frames that end a transaction
}

// readWAL reads the frame headers of a WAL file: the file header is 32
// bytes, then each frame is a 24-byte header and a page; a frame's second
// header word is non-zero when it commits a transaction.
func readWAL(path string) (walStats, error) {
	var s walStats
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return s, err
	}
	s.bytes = fi.Size()
	if s.bytes < 32 {
		return s, nil
	}
	var hdr [32]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return s, err
	}
	pageSize := int64(binary.BigEndian.Uint32(hdr[8:12]))
	if pageSize == 1 {
		pageSize = 65536
	}
	var fh [24]byte
	for off := int64(32); off+24+pageSize <= s.bytes; off += 24 + pageSize {
		if _, err := f.ReadAt(fh[:], off); err != nil {
			return s, err
		}
		if binary.BigEndian.Uint32(fh[8:12]) != binary.BigEndian.Uint32(hdr[16:20]) {
			break // a frame of an earlier generation of the file
		}
		s.frames++
		if binary.BigEndian.Uint32(fh[4:8]) != 0 {
			s.commits++
		}
	}
	return s, nil
}

// freshWAL empties the WAL of w's database and stops automatic
// checkpoints on w, so that the WAL then holds everything written (the
// subject's other writing connections must not checkpoint either).
func freshWAL(ctx context.Context, w *sql.DB) error {
	if _, err := w.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0"); err != nil {
		return err
	}
	var busy, logFrames, done int
	if err := w.QueryRowContext(ctx, "PRAGMA main.wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		return err
	}
	if busy != 0 {
		return fmt.Errorf("wal checkpoint: busy")
	}
	return nil
}

// walRun is what one lifecycle run wrote.
type walRun struct {
	n        int
	pageSize int
	wal      walStats
	st       phaseCounts
}

func (w walRun) perMsg(v float64) float64 { return v / float64(w.n) }

// pageSize is the database's page size (0 if it cannot be read).
func pageSize(ctx context.Context, d *sql.DB) int {
	var n int
	if d.QueryRowContext(ctx, "PRAGMA page_size").Scan(&n) != nil {
		return 0
	}
	return n
}

// F4: what a message costs in writes, deterministically: WAL pages,
// bytes, transactions, statements and fsyncs a message, at the same page
// size as goqite's (SQLite's default; the case fails if they differ).

func caseF4(ctx context.Context, e *env) ([]Row, error) {
	n := e.size(5_000, 500)
	o1, err := walOurs(ctx, e, n, 1)
	if err != nil {
		return nil, fmt.Errorf("ours: %w", err)
	}
	ob, err := walOurs(ctx, e, n, l4Batch)
	if err != nil {
		return nil, fmt.Errorf("ours batched: %w", err)
	}
	g1, err := walGoqite(ctx, e, n, 1)
	if err != nil {
		return nil, fmt.Errorf("goqite: %w", err)
	}
	gb, err := walGoqite(ctx, e, n, l4Batch)
	if err != nil {
		return nil, fmt.Errorf("goqite batched: %w", err)
	}
	r1, err := walRaw(ctx, e, n, 1)
	if err != nil {
		return nil, fmt.Errorf("raw: %w", err)
	}
	rb, err := walRaw(ctx, e, n, l4Batch)
	if err != nil {
		return nil, fmt.Errorf("raw batched: %w", err)
	}
	if o1.pageSize != g1.pageSize {
		return nil, fmt.Errorf("page sizes differ: ours %d, goqite %d", o1.pageSize, g1.pageSize)
	}
	per := func(measure, unit string, o, ref walRun, refName string, v func(walRun) float64) Row {
		r := Row{Case: "F4", Measure: measure, Unit: unit, RefName: refName, Reps: 1, Ours: ptr(o.perMsg(v(o))), Ref: ptr(ref.perMsg(v(ref)))}
		if v(ref) != 0 {
			r.Ratio = ptr(o.perMsg(v(o)) / ref.perMsg(v(ref)))
		}
		return r
	}
	pages := func(w walRun) float64 { return float64(w.wal.frames) }
	walBytes := func(w walRun) float64 { return float64(w.wal.bytes) }
	commits := func(w walRun) float64 { return float64(w.wal.commits) }
	// In WAL mode SQLite syncs the log at each commit at FULL, and only
	// when it checkpoints at NORMAL; the runs do not checkpoint.
	fsyncs := func(w walRun) float64 {
		if e.sync == db.SyncFull {
			return float64(w.wal.commits)
		}
		return 0
	}
	unbatched := per(fmt.Sprintf("WAL pages a message, lifecycle 1 at a time, page size %d (%d msgs)", o1.pageSize, n), "pages/msg", o1, g1, "goqite", pages)
	unbatched.Must, unbatched.Goal = atMost("ratio", 1.2, "≤ 1.2× goqite"), atMost("ratio", 0.6, "≤ 0.6× goqite")
	unbatched.Note = fmt.Sprintf("raw %.1f pages a message", r1.perMsg(pages(r1)))
	rows := []Row{unbatched,
		per("  WAL bytes a message, the same (info)", "B/msg", o1, g1, "goqite", walBytes),
		per("  transactions a message, the same", "tx/msg", o1, g1, "goqite", commits),
		per(fmt.Sprintf("  fsyncs a message at commit, the same (synchronous=%s)", e.sync), "fsync/msg", o1, g1, "goqite", fsyncs),
		per(fmt.Sprintf("  WAL pages a message, batched %d (info)", l4Batch), "pages/msg", ob, rb, "raw batched", pages),
		per(fmt.Sprintf("  WAL bytes a message, batched %d (info)", l4Batch), "B/msg", ob, rb, "raw batched", walBytes),
		per("  transactions a message, batched (info)", "tx/msg", ob, gb, "goqite batched", commits),
	}
	rows[3].Note = "SQLite in WAL mode syncs the log once a commit at FULL and only at checkpoints at NORMAL (checkpoints, every 1000 pages or so, not counted)"
	if traceAvailable {
		// raw runs one statement a step: 3 a message unbatched.
		st1 := Row{Case: "F4", Measure: "  SQL statements a message, 1 at a time", Unit: "stmt/msg", RefName: "raw", Ref: ptr(3), Reps: 1,
			Ours: ptr(o1.perMsg(float64(o1.st.statements))), Note: fmt.Sprintf("%d distinct statements", len(o1.st.distinct))}
		stb := Row{Case: "F4", Measure: "  SQL statements a message, batched", Unit: "stmt/msg", RefName: "raw", Ref: ptr(2 + 1.0/l4Batch), Reps: 1,
			Ours: ptr(ob.perMsg(float64(ob.st.statements)))}
		st1.Details = o1.st.distinct
		rows = append(rows, st1, stb)
	} else {
		rows = append(rows, Row{Case: "F4", Measure: "  SQL statements a message", Verdict: verdictSkipped, Note: "build with -tags sqlite_trace to count statements"})
	}
	return rows, nil
}

// walOurs runs n lifecycles (push, pop, ack) in steps of batch messages
// and reads what they wrote.
func walOurs(ctx context.Context, e *env, n, batch int) (walRun, error) {
	rec := startRecorder()
	defer rec.stop()
	// The writer's connection must not checkpoint: the log is to hold
	// everything the lifecycles wrote.
	o, err := e.openOursWith(ctx, "f4-ours", db.Options{Sync: e.sync, AutoCheckpoint: -1})
	if err != nil {
		return walRun{}, err
	}
	defer o.close()
	bs := bodies(0, batch)
	step := func() error {
		if err := o.push(ctx, benchQueue, "", bs...); err != nil {
			return err
		}
		if batch == 1 {
			res, err := o.b.Pop(ctx, broker.PopRequest{Queue: benchQueue, Batch: 1})
			if err != nil {
				return err
			}
			if len(res.Messages) != 1 {
				return errEmpty
			}
			m := res.Messages[0]
			_, err = o.b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted})
			return err
		}
		return o.consume(ctx, benchQueue, "", batch, batch)
	}
	if err := step(); err != nil { // the queue, its partition and the group exist from here on
		return walRun{}, err
	}
	if err := freshWAL(ctx, o.db.WriteDB()); err != nil {
		return walRun{}, err
	}
	rec.setPhase("lifecycle")
	for done := 0; done < n; done += batch {
		if err := step(); err != nil {
			return walRun{}, err
		}
	}
	rec.setPhase("")
	w, err := readWAL(o.path + "-wal")
	run := walRun{n: n, wal: w, pageSize: pageSize(ctx, o.db.WriteDB())}
	if rec != nil {
		run.st = rec.counts("lifecycle")
	}
	return run, err
}

func walGoqite(ctx context.Context, e *env, n, batch int) (walRun, error) {
	g, err := e.openGoqite(ctx, "f4-goqite", e.sync)
	if err != nil {
		return walRun{}, err
	}
	defer g.close()
	if err := freshWAL(ctx, g.db); err != nil {
		return walRun{}, err
	}
	bs := bodies(0, batch)
	for done := 0; done < n; done += batch {
		if batch == 1 {
			if err := g.q.Send(ctx, goqite.Message{Body: bs[0]}); err != nil {
				return walRun{}, err
			}
			m, err := g.q.Receive(ctx)
			if err != nil {
				return walRun{}, err
			}
			if m == nil {
				return walRun{}, errEmpty
			}
			if err := g.q.Delete(ctx, m.ID); err != nil {
				return walRun{}, err
			}
			continue
		}
		if err := g.sendBatch(ctx, bs); err != nil {
			return walRun{}, err
		}
		ids, err := g.receiveBatch(ctx, batch)
		if err != nil {
			return walRun{}, err
		}
		if err := g.deleteBatch(ctx, ids); err != nil {
			return walRun{}, err
		}
	}
	w, err := readWAL(g.path + "-wal")
	return walRun{n: n, wal: w, pageSize: pageSize(ctx, g.db)}, err
}

func walRaw(ctx context.Context, e *env, n, batch int) (walRun, error) {
	r, err := e.openRaw(ctx, "f4-raw", e.sync)
	if err != nil {
		return walRun{}, err
	}
	defer r.close()
	if err := freshWAL(ctx, r.db); err != nil {
		return walRun{}, err
	}
	bs := bodies(0, batch)
	for done := 0; done < n; done += batch {
		if batch == 1 {
			if err := r.push(ctx, bs[0]); err != nil {
				return walRun{}, err
			}
		} else if err := r.pushBatch(ctx, bs); err != nil {
			return walRun{}, err
		}
		ids, err := r.leaseN(ctx, batch)
		if err != nil {
			return walRun{}, err
		}
		if batch == 1 {
			if len(ids) != 1 {
				return walRun{}, errEmpty
			}
			if err := r.settle(ctx, ids[0]); err != nil {
				return walRun{}, err
			}
		} else if err := r.settleBatch(ctx, ids); err != nil {
			return walRun{}, err
		}
	}
	w, err := readWAL(r.path + "-wal")
	return walRun{n: n, wal: w, pageSize: pageSize(ctx, r.db)}, err
}

// Q: EXPLAIN QUERY PLAN of the statements the hot paths run.

// bigTables are the tables that grow with traffic or with time: a hot
// statement must not scan them whole nor aggregate over them. The stats
// buckets grow with queues × groups × minutes kept.
var bigTables = map[string]bool{
	"messages": true, "dead_letters": true, "consumers": true, "audit": true, "sessions": true,
	"stats_minute": true, "stats_quarter": true, "stats_hour": true,
}

// hotPhase is one step of the query-plan scenario.
type hotPhase struct {
	name string
	run  func(ctx context.Context) error
}

func caseQueryPlans(ctx context.Context, e *env) ([]Row, error) {
	if !traceAvailable {
		return []Row{{Case: "Q", Measure: "EXPLAIN QUERY PLAN of the hot queries", Verdict: verdictSkipped, Note: "build with -tags sqlite_trace: the plans are of the statements the broker really runs"}}, nil
	}
	rec := startRecorder()
	defer rec.stop()
	o, err := e.openOurs(ctx, "q-ours", e.sync)
	if err != nil {
		return nil, err
	}
	defer o.close()
	b := o.b
	const queue, group = "orders", "billing"
	// Setup, outside any phase: a queue whose failures go straight to the
	// dead letters, four partitions, two groups, some dead letters.
	if _, err := b.Configure(ctx, queue, map[string]json.RawMessage{"retryLimit": json.RawMessage("0")}, "bench"); err != nil {
		return nil, err
	}
	if err := o.fill(ctx, queue, 400, func(i int) string { return fmt.Sprintf("p%d", i%4) }); err != nil {
		return nil, err
	}
	fail := func(g string) error {
		res, err := b.Pop(ctx, broker.PopRequest{Queue: queue, Group: g, Batch: 10})
		if err != nil {
			return err
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckFailed, Error: "TimeoutError: upstream\n  at handler"}
		}
		_, err = b.AckBatch(ctx, g, acks)
		return err
	}
	// An ordered partition files the first failure of a batch and gives
	// the rest of it back (they wait behind it): a dead letter a round.
	for range 8 {
		if err := fail(group); err != nil {
			return nil, err
		}
		if err := fail("shipping"); err != nil {
			return nil, err
		}
	}
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: queue, Group: group, Limit: 5})
	if err != nil {
		return nil, err
	}
	if page.Next == nil {
		return nil, fmt.Errorf("setup: too few dead letters for a second page")
	}
	cursor := page.Next
	one := func(g string, status string) error {
		res, err := b.Pop(ctx, broker.PopRequest{Queue: queue, Group: g, Batch: 1})
		if err != nil || len(res.Messages) == 0 {
			return err
		}
		m := res.Messages[0]
		_, err = b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: status, Group: g, Error: "ValueError: bad input"})
		return err
	}
	phases := []hotPhase{
		{"push", func(ctx context.Context) error {
			if err := o.push(ctx, queue, "p1", payload(1, 0)); err != nil {
				return err
			}
			return o.push(ctx, queue, "p2", bodies(0, 10)...)
		}},
		{"pop (any partition, one partition)", func(ctx context.Context) error {
			if _, err := b.Pop(ctx, broker.PopRequest{Queue: queue, Group: "analytics", Batch: 10}); err != nil {
				return err
			}
			_, err := b.Pop(ctx, broker.PopRequest{Queue: queue, Partition: "p3", Group: "analytics", Batch: 10})
			return err
		}},
		{"ack completed (one, batch)", func(ctx context.Context) error {
			if err := one("ledger", broker.AckCompleted); err != nil {
				return err
			}
			return o.consume(ctx, queue, "ledger", 10, 10)
		}},
		{"ack failed → dead letter", func(ctx context.Context) error { return one(group, broker.AckFailed) }},
		{"dead letters page of a group (first, keyset)", func(ctx context.Context) error {
			if _, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: queue, Group: group, Limit: 50}); err != nil {
				return err
			}
			_, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: queue, Group: group, Limit: 50, After: cursor})
			return err
		}},
		{"dead letters page of a queue (first, keyset)", func(ctx context.Context) error {
			if _, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: queue, Limit: 50}); err != nil {
				return err
			}
			_, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: queue, Limit: 50, After: cursor})
			return err
		}},
		{"dead letters page, all queues (first, keyset)", func(ctx context.Context) error {
			if _, err := b.DeadLetters(ctx, broker.DLQQuery{Limit: 50}); err != nil {
				return err
			}
			_, err := b.DeadLetters(ctx, broker.DLQQuery{Limit: 50, After: cursor})
			return err
		}},
		{"dead letters page total (as the page asks)", func(ctx context.Context) error {
			_, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: queue, Group: group, Limit: 50, WithTotal: true})
			return err
		}},
		{"stats (Briefs, Brief)", func(ctx context.Context) error {
			if _, err := b.Briefs(ctx); err != nil {
				return err
			}
			_, err := b.Brief(ctx, queue)
			return err
		}},
		{"error groups of a group", func(ctx context.Context) error {
			_, err := b.ErrorGroups(ctx, queue, group, "", 10)
			return err
		}},
	}
	// The pages themselves, through the real server: whatever they ask.
	srv, err := startServer(o)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	client, loginErr := srv.dashboardClient(ctx, b)
	if loginErr == nil {
		defer client.CloseIdleConnections()
		for _, pg := range []struct{ name, path string }{
			{"page: overview /", "/"},
			{"page: dead letters of a group", "/queues/" + queue + "/dead-letters?group=" + group},
			{"page: dead letters found by transactionId", "/queues/" + queue + "/dead-letters?tx=" + url.QueryEscape(page.Items[0].TransactionID)},
			{"page: charts, 24 h", "/charts?range=24h"},
		} {
			phases = append(phases, hotPhase{pg.name, func(ctx context.Context) error {
				_, status, err := getPage(ctx, client, srv.base+pg.path, false)
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("GET %s: %d", pg.path, status)
				}
				return err
			}})
		}
	}
	for _, p := range phases {
		rec.setPhase(p.name)
		err := p.run(ctx)
		rec.setPhase("")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	conn, err := o.db.WriteDB().Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var rows []Row
	for _, p := range phases {
		c := rec.counts(p.name)
		row := Row{Case: "Q", Measure: "plan: " + p.name, Verdict: verdictPass}
		var problems, accepted []string
		for _, q := range c.distinct {
			if !planned(q) {
				continue
			}
			plan, err := explain(ctx, conn, q)
			if err != nil {
				return nil, fmt.Errorf("explain %q: %w", q, err)
			}
			row.Details = append(row.Details, oneLine(q)+"\n    "+strings.Join(plan, "\n    "))
			if issues := planIssues(q, plan); len(issues) > 0 {
				if why := acceptedPlan(q, issues); why != "" {
					accepted = append(accepted, strings.Join(issues, ", ")+" accepted ("+why+") in: "+shorten(oneLine(q), 60))
					continue
				}
				problems = append(problems, strings.Join(issues, ", ")+" in: "+shorten(oneLine(q), 110))
			}
		}
		switch {
		case len(problems) > 0:
			row.Verdict = verdictFail
			row.Note = strings.Join(problems, "; ")
		case len(accepted) > 0:
			row.Note = fmt.Sprintf("%d statements; %s", len(row.Details), strings.Join(accepted, "; "))
		default:
			row.Note = fmt.Sprintf("%d statements, none scans, sorts or counts a big table", len(row.Details))
		}
		rows = append(rows, row)
	}
	if loginErr != nil {
		rows = append(rows, Row{Case: "Q", Measure: "plan: the dashboard pages", Verdict: verdictError, Note: "could not log in: " + loginErr.Error()})
	}
	return rows, nil
}

// planned reports whether a statement has a plan worth reading: one that
// reads a table.
func planned(q string) bool {
	u := strings.ToUpper(strings.TrimSpace(q))
	for _, p := range []string{"SELECT", "UPDATE", "DELETE", "WITH", "INSERT"} {
		if strings.HasPrefix(u, p) {
			return !strings.HasPrefix(u, "INSERT") || strings.Contains(u, "SELECT") || strings.Contains(u, "ON CONFLICT")
		}
	}
	return false
}

// explain returns the EXPLAIN QUERY PLAN lines of q, its parameters bound
// to NULL (without statistics, SQLite's plan does not depend on them).
func explain(ctx context.Context, conn *sql.Conn, q string) ([]string, error) {
	var params int
	err := conn.Raw(func(dc any) error {
		sc, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("not a go-sqlite3 connection: %T", dc)
		}
		st, err := sc.Prepare(q)
		if err != nil {
			return err
		}
		defer st.Close()
		params = st.NumInput()
		return nil
	})
	if err != nil {
		return nil, err
	}
	rows, err := conn.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, make([]any, params)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	depth := map[int]int{}
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			return nil, err
		}
		depth[id] = depth[parent] + 1
		out = append(out, strings.Repeat("  ", depth[id]-1)+detail)
	}
	return out, rows.Err()
}

var (
	tableRefRE = regexp.MustCompile(`(?i)\b(?:from|join|update|into)\s+([a-z_][a-z0-9_]*)(?:\s+(?:as\s+)?([a-z_][a-z0-9_]*))?`)
	aggRE      = regexp.MustCompile(`(?i)\bcount\s*\(|\bgroup\s+by\b|\bsum\s*\(`)
	limitRE    = regexp.MustCompile(`(?i)\blimit\b`)
	// boundedRE finds a subquery with a LIMIT (and no parentheses inside)
	// used as a table, and its alias if it has one.
	boundedRE = regexp.MustCompile(`(?is)\(\s*(select\b[^()]*\blimit\b[^()]*)\)\s*(?:as\s+)?([a-z_][a-z0-9_]*)?`)
	sqlWords  = map[string]bool{"where": true, "on": true, "join": true, "left": true, "inner": true, "cross": true, "natural": true, "group": true, "order": true, "limit": true, "set": true, "using": true, "values": true, "select": true, "default": true, "as": true, "returning": true}
)

// acceptedPlans are hot statements whose plans planIssues flags for one
// issue only, accepted because they read a bounded part of a big table:
// the statement's whole text on one line, the one issue accepted, and
// the reason (and the case that measures it). Any other issue of the
// statement, or the same issue of another statement, still fails.
var acceptedPlans = map[string]struct{ issue, why string }{
	// The overview's one statement for every queue (issue 30): it sums
	// the quarters of the last two days of each group (D9 measures it at
	// 5,000 queues).
	"SELECT q.id, q.name, q.created_at, COALESCE(s.depth, 0), COALESCE(s.depth_then, 0), COALESCE(s.oldest, 0), COALESCE(s.replayed, 0), COALESCE(w.dl, 0), COALESCE(w.co, 0), COALESCE(w.fa, 0), COALESCE(w.rc, 0), COALESCE(w.rf, 0), COALESCE(w.dl0, 0), COALESCE(w.co0, 0), COALESCE(w.fa0, 0), COALESCE(w.rc0, 0), COALESCE(w.rf0, 0) FROM queues q LEFT JOIN (SELECT g.queue_id, SUM(g.depth) AS depth, SUM(g.replayed) AS replayed, MIN(CASE WHEN g.depth > 0 AND g.oldest_at > 0 THEN g.oldest_at END) AS oldest, SUM(COALESCE((SELECT b.depth FROM stats_quarter b WHERE b.queue_id = g.queue_id AND b.group_id = g.group_id AND b.quarter < ?1 ORDER BY b.quarter DESC LIMIT 1), (SELECT h.depth FROM stats_hour h WHERE h.queue_id = g.queue_id AND h.group_id = g.group_id AND h.hour < ?4 ORDER BY h.hour DESC LIMIT 1), CASE WHEN EXISTS (SELECT 1 FROM stats_quarter n WHERE n.queue_id = g.queue_id AND n.group_id = g.group_id AND n.quarter >= ?1) THEN 0 ELSE g.depth END)) AS depth_then FROM group_stats g GROUP BY g.queue_id) s ON s.queue_id = q.id LEFT JOIN (SELECT queue_id, SUM(CASE WHEN quarter >= ?1 THEN dead_lettered ELSE 0 END) AS dl, SUM(CASE WHEN quarter >= ?1 THEN completed ELSE 0 END) AS co, SUM(CASE WHEN quarter >= ?1 THEN failed ELSE 0 END) AS fa, SUM(CASE WHEN quarter >= ?1 THEN replay_completed ELSE 0 END) AS rc, SUM(CASE WHEN quarter >= ?1 THEN replay_failed ELSE 0 END) AS rf, SUM(CASE WHEN quarter < ?1 THEN dead_lettered ELSE 0 END) AS dl0, SUM(CASE WHEN quarter < ?1 THEN completed ELSE 0 END) AS co0, SUM(CASE WHEN quarter < ?1 THEN failed ELSE 0 END) AS fa0, SUM(CASE WHEN quarter < ?1 THEN replay_completed ELSE 0 END) AS rc0, SUM(CASE WHEN quarter < ?1 THEN replay_failed ELSE 0 END) AS rf0 FROM stats_quarter WHERE quarter >= ?2 AND quarter < ?3 GROUP BY queue_id) w ON w.queue_id = q.id ORDER BY q.name": {
		"aggregate (COUNT/GROUP BY/SUM) over a big table", "two days of quarters a group, D9"},
	// The dead letters of one message, one a group at most, sorted by
	// id: found by the seq's index.
	"SELECT d.id, d.seq, d.queue_id, q.name, d.partition_id, p.name, p.uuid, d.group_id, g.name, d.error, d.retry_count, d.failed_at, d.transaction_id, COALESCE(m.payload, d.payload), d.trace_id, COALESCE(m.created_at, d.pushed_at), d.error_bytes, d.fingerprint, d.consumer_version FROM dead_letters d LEFT JOIN messages m ON m.seq = d.seq JOIN queues q ON q.id = d.queue_id JOIN partitions p ON p.id = d.partition_id JOIN groups g ON g.id = d.group_id WHERE d.seq = ? ORDER BY d.id": {
		"USE TEMP B-TREE FOR ORDER BY over a big table", "one message's dead letters, a group's at most"},
}

// acceptedPlan is the reason a statement's flagged issues are accepted
// ("": they are not): the statement is one of acceptedPlans and its one
// issue the one accepted.
func acceptedPlan(q string, issues []string) string {
	a, ok := acceptedPlans[oneLine(q)]
	if !ok || len(issues) != 1 || issues[0] != a.issue {
		return ""
	}
	return a.why
}

// planIssues finds what a hot statement must not do in its plan: scan a
// big table whole, sort rows of a big table with a temporary B-tree for
// ORDER BY, or count or group over a big table. A scan of a big table
// along an index is allowed when a LIMIT stops it; sorting what only small
// tables (queues, partitions, groups) give is too. So is counting,
// grouping or sorting the rows of a subquery that has a LIMIT of its own
// (a capped total, the top errors of the newest N), as long as that
// subquery reads its big table along an index without sorting or
// aggregating it.
func planIssues(q string, plan []string) []string {
	// Names in a plan are aliases; one alias may stand for several tables
	// in a compound query.
	tables := map[string][]string{}
	addName := func(name, table string) {
		for _, t := range tables[name] {
			if t == table {
				return
			}
		}
		tables[name] = append(tables[name], table)
	}
	for _, m := range tableRefRE.FindAllStringSubmatch(q, -1) {
		t := strings.ToLower(m[1])
		addName(t, t)
		if a := strings.ToLower(m[2]); a != "" && !sqlWords[a] {
			addName(a, t)
		}
	}
	// The LIMITed subqueries read as tables: their aliases ("" for one
	// without: "(subquery-N)" in the plan) and their text.
	bounded := map[string]bool{}
	var boundedSQL []string
	for _, m := range boundedRE.FindAllStringSubmatch(q, -1) {
		bounded[strings.ToLower(m[2])] = true
		boundedSQL = append(boundedSQL, m[1])
	}
	isBounded := func(name string) bool {
		return bounded[name] || (bounded[""] && strings.HasPrefix(name, "(subquery-"))
	}
	var issues []string
	big, sorts := false, false
	inside := -1 // indent of the CO-ROUTINE of a LIMITed subquery the plan is in
	bigInside, sortsInside := false, false
	for _, line := range plan {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		l := strings.TrimSpace(line)
		if inside >= 0 && indent <= inside {
			inside = -1
		}
		switch {
		case strings.HasPrefix(l, "CO-ROUTINE "):
			if isBounded(strings.ToLower(strings.Fields(l)[1])) {
				inside = indent
			}
		case strings.HasPrefix(l, "SCAN ") || strings.HasPrefix(l, "SEARCH "):
			f := strings.Fields(l)
			name := strings.ToLower(f[1])
			if inside < 0 && isBounded(name) {
				continue // the rows a LIMITed subquery gave
			}
			ts := tables[name]
			if len(ts) == 0 {
				ts = []string{name}
			}
			isBig := false
			for _, t := range ts {
				isBig = isBig || bigTables[t]
			}
			if !isBig {
				continue
			}
			t := strings.Join(ts, " or ")
			if inside >= 0 {
				bigInside = true
			} else {
				big = true
			}
			if strings.HasPrefix(l, "SCAN ") {
				if strings.Contains(l, " USING ") && limitRE.MatchString(q) && (inside >= 0 || !aggRE.MatchString(q)) {
					continue // along an index, up to the LIMIT
				}
				if !slices.Contains(issues, "SCAN of "+t) {
					issues = append(issues, "SCAN of "+t)
				}
			}
		case strings.Contains(l, "TEMP B-TREE") && strings.Contains(l, "ORDER BY"):
			if inside >= 0 {
				sortsInside = true
			} else {
				sorts = true
			}
		}
	}
	if (big && sorts) || (bigInside && sortsInside) { // sorting the rows of small tables (a queue's groups) is harmless
		issues = append(issues, "USE TEMP B-TREE FOR ORDER BY over a big table")
	}
	if (big && aggRE.MatchString(q)) || (bigInside && aggRE.MatchString(strings.Join(boundedSQL, " "))) {
		issues = append(issues, "aggregate (COUNT/GROUP BY/SUM) over a big table")
	}
	return issues
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
