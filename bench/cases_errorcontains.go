package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// D8: "Error contains" at the big group (issue 30: a rare or absent text
// was a 500 after 15 s on the page, 16–27 s and 2–4 CPU-seconds in the
// API). Before: what the list ran for it, a substring test of every row
// of the group newest first for a page and a count of them all, on the
// raw copy (the same statements Where wrote for the filter: instr over
// lower(error)). After: the broker's list with its total (the API's
// work: a window of the newest broker.FieldScan a page, or the error
// texts' index for words the text bounds), and the dashboard page over
// HTTP. Time a call (p50) and the process's CPU a call, interleaved.

// d8Text are the texts: absent with no word the index can answer (a
// window), and a rare one whose number it bounds (the index).
const (
	d8Absent = "no-such-error-text"
	d8Rare   = "order 123456 already"
)

func caseD8(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	if f.page == nil {
		return []Row{{Case: "D8", Measure: "error contains", Verdict: verdictError, Note: "could not run: " + f.pageErr.Error()}}, nil
	}
	var qid, gid int64
	if err := f.raw.QueryRowContext(ctx, `SELECT q.id, g.id FROM queues q, groups g WHERE q.name = ? AND g.name = ?`, dlqQueue, dlqGroup0).Scan(&qid, &gid); err != nil {
		return nil, fmt.Errorf("the big group's ids: %w", err)
	}
	b := f.ours.b
	cpu := Samples{}
	statuses := map[int]int{}
	timed := func(name string, k int, call func() error) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			c0 := cpuTime()
			lat, err := timeCalls(ctx, k, e.dur(3*time.Second, time.Second), call)
			cpu[name] = append(cpu[name], float64(cpuTime()-c0)/float64(time.Millisecond)/float64(max(1, len(lat))))
			return percentile(lat, 0.5), err
		}}
	}
	before := func(text string) func() error {
		return func() error {
			const where = ` WHERE d.queue_id = ? AND d.group_id = ? AND instr(lower(d.error), lower(?)) > 0`
			rows, err := f.raw.QueryContext(ctx, `SELECT d.id FROM dead_letters d`+where+` ORDER BY d.failed_at DESC, d.id DESC LIMIT 51`, qid, gid, text)
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			if err := rows.Close(); err != nil {
				return err
			}
			var n int64
			return f.raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM dead_letters d`+where, qid, gid, text).Scan(&n)
		}
	}
	after := func(text string) func() error {
		return func() error {
			p, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: dlqQueue, Group: dlqGroup0, ErrorContains: text, Limit: 50, WithTotal: true})
			if err == nil && text == d8Absent && (len(p.Items) != 0 || p.Window == nil) {
				err = fmt.Errorf("%q: %d found, window %v; want none, in a window", text, len(p.Items), p.Window)
			}
			return err
		}
	}
	page := func(text string) func() error {
		u := f.srv.base + "/queues/" + dlqQueue + "/dead-letters?" + url.Values{"group": {dlqGroup0}, "error": {text}}.Encode()
		return func() error {
			_, status, err := getPage(ctx, f.page, u, true)
			statuses[status]++
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("GET %s: status %d", u, status)
			}
			return err
		}
	}
	vs := []variant{
		timed("before, absent", 1, before(d8Absent)),
		timed("after, absent", e.size(50, 20), after(d8Absent)),
		timed("after, absent, page", e.size(50, 20), page(d8Absent)),
		timed("before, rare", 1, before(d8Rare)),
		timed("after, rare", e.size(50, 20), after(d8Rare)),
	}
	s, err := interleave(ctx, e, e.reps, vs...)
	if err != nil {
		return nil, err
	}
	var rows []Row
	add := func(measure, oursName, refName string) {
		r := compare(s, "D8", measure, "ms", oursName, refName)
		r.Note = fmt.Sprintf("CPU a call %.1f ms vs %.1f ms before; %s", median(cpu[oursName]), median(cpu[refName]), f.describe())
		rows = append(rows, r)
	}
	add(fmt.Sprintf("error contains %q (absent, no word to look up), page of 50 with total: after (a window of %d) vs before (every row)", d8Absent, broker.FieldScan), "after, absent", "before, absent")
	add("  the dashboard page over HTTP (htmx fragment) vs before (info)", "after, absent, page", "before, absent")
	add(fmt.Sprintf("error contains %q (rare; 123456 is a word it bounds): after (the index) vs before (every row)", d8Rare), "after, rare", "before, rare")
	rows[1].Note += fmt.Sprintf("; statuses %v", statuses)
	return rows, nil
}
