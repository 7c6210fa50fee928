package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// D10: what the /error-groups page reads (issue 32, error groups you
// own), at the dashboard database's 1M + 300k dead letters with 10,000
// error groups: the list of 100 with their 24 h and 7 d funnels (no
// filter, a state, a queue), one group's page (funnels, trend and
// history) and the count of open groups per queue (the navigation's
// badge), p99 and p50, and the process's CPU a call, interleaved like
// S2. Beside them, the load-independent figures: the statements a call
// runs and their plans (with -tags sqlite_trace), and the rows of
// error_group_states a plan reads.
//
// The fixture's error groups are a few dozen (its error texts mask to
// few fingerprints), so the case tops error_group_states up to
// d10Groups in its working copy, spread over the fixture's four
// consumer groups: distinct fingerprints, mostly open (some regressed),
// some acknowledged, resolved or ignored, each with the history of its
// changes, filed over the last 30 days, and those filed in the last week
// with hours in error_group_hours (1 to 168 of them, ending at their
// last filing) for the funnels to sum. The groups not resolved hold dead
// letters (an error_groups row with a sample error; their dead letters
// themselves are not generated: no read of the page touches them).
// The later cases (D5, D6) replay and delete the fixture's own dead
// letters, whose groups these rows leave alone.

// d10Groups is how many error groups D10's database has.
const d10Groups = 10_000

// d10 targets: the list and a group's page are page reads (D2's page is
// ≤ 5 ms whole over HTTP: the broker's read must fit in it; the goal is
// S2's, the panel of error groups); the badge is a count on a page (D3).
const (
	d10PageMust, d10PageGoal   = 5.0, 1.0
	d10CountMust, d10CountGoal = 1.0, 0.2
)

func caseD10(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	added, err := addErrorGroups(ctx, f.ours.db.WriteDB(), d10Groups)
	if err != nil {
		return nil, fmt.Errorf("D10: %w", err)
	}
	b := f.ours.b
	// The fixture's own groups must have states (generator 3): else the
	// biggest group, TimeoutError of the big consumer group, is not
	// listed among its queue's.
	big, err := b.ErrorGroups(ctx, dlqQueue, dlqGroup0, "", 1)
	if err != nil {
		return nil, err
	}
	if len(big) == 0 {
		return nil, fmt.Errorf("D10: %s/%s has no error groups", dlqQueue, dlqGroup0)
	}
	bigGroup, _, err := b.ErrorGroupByKey(ctx, dlqQueue, dlqGroup0, big[0].Fingerprint)
	if err != nil {
		return nil, fmt.Errorf("D10: the biggest error group has no state (a cached database from before generator 3? delete bench/.cache): %w", err)
	}
	if bigGroup.Life.Filed != big[0].DeadLetters {
		return nil, fmt.Errorf("D10: the biggest error group filed %d, holds %d: want them equal (the fixture's backfill)", bigGroup.Life.Filed, big[0].DeadLetters)
	}
	var total, acked, inPayments int
	var synthetic int64
	if err := f.ours.db.WriteDB().QueryRowContext(ctx, `SELECT COUNT(*), SUM(state = 'acknowledged'),
			SUM(queue_id = (SELECT id FROM queues WHERE name = 'payments')), MAX(CASE WHEN state = 'resolved' THEN id END)
		FROM error_group_states`).Scan(&total, &acked, &inPayments, &synthetic); err != nil {
		return nil, err
	}

	k, budget := e.size(1000, 100), e.dur(2*time.Second, 300*time.Millisecond)
	// listed keeps the ids each read returned last, whose hours the
	// notes count.
	listed := map[string][]int64{}
	list := func(key string, fl broker.ErrorGroupFilter, want int) func(context.Context, *broker.Broker) error {
		return func(ctx context.Context, b *broker.Broker) error {
			gs, err := b.ErrorGroupList(ctx, fl)
			if err == nil && len(gs) != want {
				err = fmt.Errorf("%+v: %d groups, want %d", fl, len(gs), want)
			}
			ids := make([]int64, len(gs))
			for i, g := range gs {
				ids[i] = g.ID
			}
			listed[key] = ids
			return err
		}
	}
	one := func(key string, id int64) func(context.Context, *broker.Broker) error {
		return func(ctx context.Context, b *broker.Broker) error {
			_, _, err := b.ErrorGroup(ctx, id)
			listed[key] = []int64{id}
			return err
		}
	}
	reads := []d10Read{
		{"the list: 100 groups, no filter, with their 24 h and 7 d funnels", "list", d10PageMust, d10PageGoal,
			list("list", broker.ErrorGroupFilter{Limit: broker.MaxErrorGroups}, broker.MaxErrorGroups)},
		{"the page's list: 100 groups, no filter, 24 h funnels only (DayOnly)", "list, day", d10PageMust, d10PageGoal,
			list("list, day", broker.ErrorGroupFilter{Limit: broker.MaxErrorGroups, DayOnly: true}, broker.MaxErrorGroups)},
		{fmt.Sprintf("the list filtered by a state (acknowledged: %d of them)", acked), "list, state", d10PageMust, d10PageGoal,
			list("list, state", broker.ErrorGroupFilter{State: broker.GroupAcknowledged, Limit: broker.MaxErrorGroups}, min(acked, broker.MaxErrorGroups))},
		{fmt.Sprintf("the list filtered by a queue (payments: %d of them)", inPayments), "list, queue", d10PageMust, d10PageGoal,
			list("list, queue", broker.ErrorGroupFilter{Queue: "payments", Limit: broker.MaxErrorGroups}, min(inPayments, broker.MaxErrorGroups))},
		{"a group's page: the biggest group (funnels, 24 h trend, history)", "group", d10PageMust, d10PageGoal, one("group", bigGroup.ID)},
		{"a group's page: a resolved group with history", "group, resolved", d10PageMust, d10PageGoal, one("group, resolved", synthetic)},
		{"the badge: open groups per queue (ErrorGroupCounts)", "counts", d10CountMust, d10CountGoal, func(ctx context.Context, b *broker.Broker) error {
			_, err := b.ErrorGroupCounts(ctx)
			return err
		}},
	}
	p50s, cpu := Samples{}, Samples{}
	var vs []variant
	for _, r := range reads {
		vs = append(vs, variant{r.short, func(ctx context.Context, _ int) (float64, error) {
			c0 := cpuTime()
			lat, err := timeCalls(ctx, k, budget, func() error { return r.fn(ctx, b) })
			cpu[r.short] = append(cpu[r.short], float64(cpuTime()-c0)/float64(time.Millisecond)/float64(max(1, len(lat))))
			p50s[r.short] = append(p50s[r.short], percentile(lat, 0.5))
			return percentile(lat, 0.99), err
		}})
	}
	smp, err := interleave(ctx, e, e.reps, vs...)
	if err != nil {
		return nil, err
	}
	plans, err := d10Plans(ctx, e, f.ours.path, f.ours.db.WriteDB(), reads)
	if err != nil {
		return nil, fmt.Errorf("D10 plans: %w", err)
	}
	var rows []Row
	for i, r := range reads {
		row := single(smp, "D10", "error groups page, p99: "+r.name, "ms", r.short)
		if i > 0 {
			row.Measure = "  " + row.Measure
		}
		row.Must = atMost("ours", r.must, fmt.Sprintf("≤ %g ms", r.must))
		row.Goal = atMost("ours", r.goal, fmt.Sprintf("≤ %g ms", r.goal))
		row.Note = fmt.Sprintf("p50 %.3f ms, CPU %.3f ms a call", median(p50s[r.short]), median(cpu[r.short]))
		if ids, ok := listed[r.short]; ok {
			n, read, err := weekHours(ctx, f.ours.db.WriteDB(), ids)
			if err != nil {
				return nil, err
			}
			if i == 0 && n == 0 {
				return nil, fmt.Errorf("D10: the list's groups have no hours in the last 7 days")
			}
			row.Note += fmt.Sprintf("; %d groups with %d hour rows in their 7 d funnels, which read %d rows of hours and days", len(ids), n, read)
		}
		if p, ok := plans[r.short]; ok {
			row.Note += "; " + p.note
			row.Details = p.details
		}
		if i == 0 {
			row.Note += fmt.Sprintf("; %d error groups (%d added to the fixture's), %s", total, added, f.describe())
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// d10Read is one of the page's reads, timed against its targets.
type d10Read struct {
	name, short string
	must, goal  float64
	fn          func(context.Context, *broker.Broker) error
}

// d10Plan is what one read runs: its statements and their plans.
type d10Plan struct {
	note    string
	details []string
}

// d10Plans runs each read once on a second db.Open of the working copy
// opened while a recorder is active (the broker's own connections were
// opened before, and report to none), and explains the statements each
// ran on w's database. A plan that scans error_group_states or sorts
// its rows reads the table whole: the note says how many rows that is.
func d10Plans(ctx context.Context, e *env, path string, w *sql.DB, reads []d10Read) (map[string]d10Plan, error) {
	out := map[string]d10Plan{}
	if !traceAvailable {
		for _, r := range reads {
			out[r.short] = d10Plan{note: "statements: build with -tags sqlite_trace"}
		}
		return out, nil
	}
	rec := startRecorder()
	defer rec.stop()
	d, err := db.Open(ctx, path, e.sync)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	for _, r := range reads {
		rec.setPhase(r.short)
		err := r.fn(ctx, b)
		rec.setPhase("")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.short, err)
		}
	}
	var states int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM error_group_states`).Scan(&states); err != nil {
		return nil, err
	}
	conn, err := w.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	for _, r := range reads {
		c := rec.counts(r.short)
		var pl d10Plan
		whole, sorts := false, false
		for _, q := range c.distinct {
			if !planned(q) {
				continue
			}
			plan, err := explain(ctx, conn, q)
			if err != nil {
				return nil, fmt.Errorf("explain %q: %w", q, err)
			}
			pl.details = append(pl.details, oneLine(q)+"\n    "+strings.Join(plan, "\n    "))
			for _, l := range plan {
				l = strings.TrimSpace(l)
				whole = whole || l == "SCAN s" || strings.HasPrefix(l, "SCAN error_group_states") || strings.HasPrefix(l, "SCAN s USING")
				sorts = sorts || (strings.Contains(l, "TEMP B-TREE") && strings.Contains(l, "ORDER BY"))
			}
		}
		pl.note = fmt.Sprintf("%d statements a call", c.statements)
		switch {
		case whole && sorts:
			pl.note += fmt.Sprintf(", reading all %d rows of error_group_states and sorting them", states)
		case whole:
			pl.note += fmt.Sprintf(", reading all %d rows of error_group_states", states)
		case sorts:
			pl.note += ", sorting with a temp B-tree"
		default:
			pl.note += ", along indexes, no sort"
		}
		out[r.short] = pl
	}
	return out, nil
}

// weekHours counts the rows of error_group_hours in the 7 d funnels of
// the groups ids (at most 168 a group), and the rows ErrorGroupWindows
// reads for them on SQLite (migration 0042): their hours of the last
// 24, their days from the day boundary nearest the week's start and
// their hours between that boundary and the start (WindowsSQL).
func weekHours(ctx context.Context, w *sql.DB, ids []int64) (hours, read int, err error) {
	js, err := json.Marshal(ids)
	if err != nil {
		return 0, 0, err
	}
	h := time.Now().Unix() / 3600
	week, day := h-7*24+1, h-23
	edge := (week + 12) / 24 * 24
	err = w.QueryRowContext(ctx, `WITH k AS (SELECT queue_id, group_id, fingerprint FROM error_group_states WHERE id IN (SELECT value FROM json_each(?1)))
		SELECT (SELECT COUNT(*) FROM k JOIN error_group_hours h USING (queue_id, group_id, fingerprint) WHERE h.hour >= ?2),
			(SELECT COUNT(*) FROM k JOIN error_group_hours h USING (queue_id, group_id, fingerprint) WHERE h.hour >= ?3)
			+ (SELECT COUNT(*) FROM k JOIN error_group_days d USING (queue_id, group_id, fingerprint) WHERE d.day >= ?4 / 24)
			+ (SELECT COUNT(*) FROM k JOIN error_group_hours h USING (queue_id, group_id, fingerprint) WHERE h.hour >= MIN(?2, ?4) AND h.hour < MAX(?2, ?4))`,
		string(js), week, day, edge).Scan(&hours, &read)
	return hours, read, err
}

// addErrorGroups tops error_group_states up to n groups with synthetic
// ones (see D10), in one transaction on w, and returns how many it
// added. The hours are counted from now, the fixture's own from when it
// was generated.
func addErrorGroups(ctx context.Context, w *sql.DB, n int) (int, error) {
	var have int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM error_group_states`).Scan(&have); err != nil {
		return 0, err
	}
	if have >= n {
		return 0, nil
	}
	type pair struct{ q, g int64 }
	var pairs []pair
	rows, err := w.QueryContext(ctx, `SELECT queue_id, group_id FROM subscriptions ORDER BY queue_id, group_id`)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var p pair
		if err := rows.Scan(&p.q, &p.g); err != nil {
			rows.Close()
			return 0, err
		}
		pairs = append(pairs, p)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if len(pairs) == 0 {
		return 0, fmt.Errorf("the fixture has no subscriptions")
	}
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	state, err := tx.PrepareContext(ctx, `INSERT INTO error_group_states (queue_id, group_id, fingerprint, state, regressed, owner, note, version,
			until_filed, changed_at, changed_by, filed, replayed, succeeded, since_replayed, since_succeeded, first_filed_at, last_filed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, err
	}
	group, err := tx.PrepareContext(ctx, `INSERT INTO error_groups (queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at, sample_error)
		VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, err
	}
	hour, err := tx.PrepareContext(ctx, `INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed, replayed, succeeded)
		VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, err
	}
	history, err := tx.PrepareContext(ctx, `INSERT INTO error_group_history (state_id, at, actor, from_state, to_state, why) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, err
	}
	// r draws the groups, rh their hours (whose number depends on the
	// time of the run): the same groups every run.
	r, rh := rand.New(rand.NewPCG(32, 10)), rand.New(rand.NewPCG(32, 11))
	now := time.Now().UTC()
	nowHour := now.Unix() / 3600
	const month = 30 * 24 * time.Hour
	for i := range n - have {
		p := pairs[i%len(pairs)]
		fp := fmt.Sprintf("SyntheticError%05d: upstream service-%d answered <n> for <id>", i, i%97)
		last := now.Add(-time.Duration(r.Int64N(int64(month))))
		first := last.Add(-time.Duration(r.Int64N(int64(month))))
		filed := int64(1 + r.IntN(500))
		var st broker.ErrorGroupState
		regressed, owner, note, version, untilFiled := 0, "", "", "", int64(0)
		var replayed, succeeded int64
		switch x := r.IntN(100); {
		case x < 70:
			st = broker.GroupOpen
			if x < 4 {
				regressed = 1
			}
		case x < 80:
			st, owner = broker.GroupAcknowledged, "alice"
		case x < 92:
			st, note, version = broker.GroupResolved, "fixed by retrying with backoff", "v2.4.1"
			replayed = filed
			succeeded = replayed - int64(r.IntN(2))
		default:
			st, untilFiled = broker.GroupIgnored, filed+100
		}
		changedAt, changedBy := int64(0), ""
		if st != broker.GroupOpen || regressed == 1 {
			changedAt, changedBy = last.Add(-time.Hour).UnixMilli(), owner
			if changedBy == "" {
				changedBy = "bob"
			}
		}
		res, err := state.ExecContext(ctx, p.q, p.g, fp, string(st), regressed, owner, note, version, untilFiled, changedAt, changedBy,
			filed, replayed, succeeded, replayed, succeeded, first.UnixMilli(), last.UnixMilli())
		if err != nil {
			return 0, fmt.Errorf("error_group_states: %w", err)
		}
		id, _ := res.LastInsertId()
		if st != broker.GroupResolved {
			sample := strings.Replace(fp, "<n>", "503", 1)
			sample = strings.Replace(sample, "<id>", fmt.Sprintf("order %d", r.IntN(1_000_000)), 1) +
				"\n    at worker.handle (worker/handle.go:120)\n    at worker.loop (worker/loop.go:88)\n    at runtime.goexit (runtime/asm_amd64.s:1700)"
			if _, err := group.ExecContext(ctx, p.q, p.g, fp, filed, first.UnixMilli(), last.UnixMilli(), sample); err != nil {
				return 0, fmt.Errorf("error_groups: %w", err)
			}
		}
		if lastHour := last.Unix() / 3600; lastHour > nowHour-7*24 {
			hours := 1 + rh.Int64N(7*24)
			for h := lastHour; h > lastHour-hours && h > nowHour-8*24; h-- {
				var rp, sc int64
				if st == broker.GroupResolved {
					rp, sc = 1, 1
				}
				if _, err := hour.ExecContext(ctx, p.q, p.g, fp, h, 1+rh.IntN(20), rp, sc); err != nil {
					return 0, fmt.Errorf("error_group_hours: %w", err)
				}
			}
		}
		if changedAt != 0 {
			changes := [][2]broker.ErrorGroupState{{broker.GroupOpen, st}}
			if regressed == 1 {
				changes = [][2]broker.ErrorGroupState{{broker.GroupOpen, broker.GroupResolved}, {broker.GroupResolved, broker.GroupOpen}}
			}
			for j, c := range changes {
				if _, err := history.ExecContext(ctx, id, changedAt-int64(len(changes)-1-j)*3_600_000, changedBy, string(c[0]), string(c[1]), "bench"); err != nil {
					return 0, fmt.Errorf("error_group_history: %w", err)
				}
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return n - have, nil
}
