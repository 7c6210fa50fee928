package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// timeCalls calls fn up to k times, or until budget has passed (but at
// least three times), and returns how long each call took.
func timeCalls(ctx context.Context, k int, budget time.Duration, fn func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, k)
	deadline := time.Now().Add(budget)
	for i := 0; i < k && (i < 3 || time.Now().Before(deadline)); i++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		t := time.Now()
		if err := fn(); err != nil {
			return out, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// groupQuery selects the big group's dead letters.
func groupQuery() broker.DLQQuery {
	return broker.DLQQuery{Queue: dlqQueue, Group: dlqGroup0}
}

// cursorAt is the keyset position of the dead letter at depth (0 is the
// newest) of the big group, found by OFFSET through the broker.
func cursorAt(ctx context.Context, b *broker.Broker, depth int) (*broker.Cursor, error) {
	q := groupQuery()
	q.Limit, q.Offset = 1, depth
	p, err := b.DeadLetters(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(p.Items) != 1 {
		return nil, fmt.Errorf("no dead letter at depth %d", depth)
	}
	return &broker.Cursor{At: p.Items[0].FailedAt, ID: p.Items[0].ID}, nil
}

// newestIDs returns the message ids of the n newest dead letters of the
// big group, by keyset pages of 1000.
func newestIDs(ctx context.Context, b *broker.Broker, n int) ([]string, error) {
	ids := make([]string, 0, n)
	q := groupQuery()
	for len(ids) < n {
		q.Limit = min(1000, n-len(ids))
		p, err := b.DeadLetters(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, d := range p.Items {
			ids = append(ids, d.MessageID())
		}
		if p.Next == nil {
			break
		}
		q.After = p.Next
	}
	return ids, nil
}

// D1: keyset pages at every depth.

func caseD1(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	b := f.ours.b
	n := f.inGroup()
	mid, err := cursorAt(ctx, b, n/2-1)
	if err != nil {
		return nil, err
	}
	last, err := cursorAt(ctx, b, n-51) // the 50 after it are the last page
	if err != nil {
		return nil, err
	}
	k, budget := e.size(300, 50), e.dur(2*time.Second, 500*time.Millisecond)
	page := func(name string, cur *broker.Cursor) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			lat, err := timeCalls(ctx, k, budget, func() error {
				q := groupQuery()
				q.Limit, q.After = 50, cur
				p, err := b.DeadLetters(ctx, q)
				if err == nil && len(p.Items) != 50 {
					err = fmt.Errorf("a page of %d", len(p.Items))
				}
				return err
			})
			return percentile(lat, 0.5), err
		}}
	}
	s, err := interleave(ctx, e, e.reps, page("first", nil), page("middle", mid), page("last", last))
	if err != nil {
		return nil, err
	}
	r := compare(s, "D1", "page of 50 by keyset (DeadLetters After), last vs first, p50", "ms", "last", "first")
	r.RefName = "first page"
	r.Must, r.Goal = atMost("ratio", 1.1, "flat (≤ 1.1×)"), atMost("ratio", 1.05, "flat (≤ 1.05×)")
	r.Note = f.describe()
	m := compare(s, "D1", "  middle vs first", "ms", "middle", "first")
	m.RefName = "first page"
	// The same last page by OFFSET, for information: what keyset saves.
	off, err := timeCalls(ctx, 5, 5*time.Second, func() error {
		q := groupQuery()
		q.Limit, q.Offset = 50, n-50
		_, err := b.DeadLetters(ctx, q)
		return err
	})
	if err != nil {
		return nil, err
	}
	o := Row{Case: "D1", Measure: "  last page by OFFSET instead (info)", Unit: "ms", Ours: ptr(percentile(off, 0.5)), RefName: "first page", Ref: r.Ref, Reps: 1}
	if r.Ref != nil {
		o.Ratio = ptr(*o.Ours / *r.Ref)
	}
	return []Row{r, m, o}, nil
}

// D2: the dead-letter page over HTTP.

func caseD2(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	if f.page == nil {
		return []Row{{Case: "D2", Measure: "dead letters page over HTTP", Verdict: verdictError, Note: "could not run: " + f.pageErr.Error()}}, nil
	}
	u := f.srv.base + "/queues/" + dlqQueue + "/dead-letters?" + url.Values{"group": {dlqGroup0}}.Encode()
	// The support desk's search: one dead letter, halfway down, by its
	// transactionId.
	var txid string
	if err := f.raw.QueryRowContext(ctx, `SELECT transaction_id FROM dead_letters ORDER BY id LIMIT 1 OFFSET (SELECT COUNT(*) / 2 FROM dead_letters)`).Scan(&txid); err != nil {
		return nil, fmt.Errorf("a transactionId to find: %w", err)
	}
	byTx := f.srv.base + "/queues/" + dlqQueue + "/dead-letters?" + url.Values{"tx": {txid}}.Encode()
	k, budget := e.size(200, 40), e.dur(4*time.Second, 400*time.Millisecond)
	p50s := Samples{}
	all := map[string]*pageLoad{}
	run := func(name string, clients int, fragment bool) variant {
		all[name] = &pageLoad{}
		target := u
		switch name {
		case byTxName:
			target = byTx
		case queuePageName:
			target = f.srv.base + "/queues/" + dlqQueue
		}
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			l, err := loadPage(ctx, f.page, target, fragment, clients, k, budget)
			if err != nil {
				return 0, err
			}
			all[name].add(l)
			p50s[name] = append(p50s[name], l.p(0.5))
			return l.p(0.99), nil
		}}
	}
	s, err := interleave(ctx, e, e.reps, run("whole, 1 client", 1, false), run("fragment, 1 client", 1, true),
		run("whole, 8 clients", 8, false), run("fragment, 8 clients", 8, true), run(byTxName, 1, false), run(queuePageName, 1, false))
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, v := range []struct {
		name       string
		must, goal float64
	}{{"whole, 1 client", 5, 2}, {"fragment, 1 client", 5, 2}, {"whole, 8 clients", 25, 10}, {"fragment, 8 clients", 25, 10}} {
		r := single(s, "D2", "GET dead-letters?group= p99, "+v.name, "ms", v.name)
		r.Must, r.Goal = atMost("ours", v.must, fmt.Sprintf("p99 ≤ %.0f ms", v.must)), atMost("ours", v.goal, fmt.Sprintf("p99 ≤ %.0f ms", v.goal))
		r.Note = fmt.Sprintf("p50 %.2f ms, %d requests", median(p50s[v.name]), len(all[v.name].lat))
		if fs := all[v.name].failures(); fs != "" {
			r.Note += "; " + fs
		}
		rows = append(rows, r)
	}
	rows[0].Note += "; logged in as an admin user through POST /login (CSRF token from GET /login)"
	found := single(s, "D2", "  GET dead-letters?tx= p99 (found by transactionId, info)", "ms", byTxName)
	found.Note = fmt.Sprintf("p50 %.2f ms, %d requests; the page, its capped total and its top errors", median(p50s[byTxName]), len(all[byTxName].lat))
	queue := single(s, "D2", "  GET /queues/"+dlqQueue+" p99 (the queue page, info)", "ms", queuePageName)
	queue.Note = fmt.Sprintf("p50 %.2f ms, %d requests; its partitions' counts of messages and its groups' lag", median(p50s[queuePageName]), len(all[queuePageName].lat))
	return append(rows, found, queue), nil
}

// D2's variants that are not the dead-letters page of a group: one finds
// a dead letter by its transactionId, one is the queue's page.
const (
	byTxName      = "by transactionId, 1 client"
	queuePageName = "queue page, 1 client"
)

// pageLoad is what loadPage saw: every request's time, failed ones
// included (a page that times out is slow, not absent), and the failures.
type pageLoad struct {
	lat      []time.Duration
	failed   int
	statuses map[int]int
}

func (l pageLoad) p(q float64) float64 { return percentile(l.lat, q) }

// failures describes the failed requests, or is empty.
func (l pageLoad) failures() string {
	if l.failed == 0 {
		return ""
	}
	var parts []string
	for st, n := range l.statuses {
		if st != http.StatusOK {
			parts = append(parts, fmt.Sprintf("%d× %d", n, st))
		}
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d of %d requests failed (%s)", l.failed, len(l.lat), strings.Join(parts, ", "))
}

func (l *pageLoad) add(o pageLoad) {
	l.lat = append(l.lat, o.lat...)
	l.failed += o.failed
	for st, n := range o.statuses {
		if l.statuses == nil {
			l.statuses = map[int]int{}
		}
		l.statuses[st] += n
	}
}

// loadPage fetches u from clients goroutines until k requests in all, or
// budget (but at least one request a client, and three in all).
func loadPage(ctx context.Context, c *http.Client, u string, fragment bool, clients, k int, budget time.Duration) (pageLoad, error) {
	var mu sync.Mutex
	l := pageLoad{statuses: map[int]int{}}
	var started atomic.Int64
	deadline := time.Now().Add(budget)
	err := parallel(clients, func(int) error {
		for {
			i := started.Add(1)
			if i > int64(k) || (i > int64(max(3, clients)) && time.Now().After(deadline)) {
				return nil
			}
			d, status, err := getPage(ctx, c, u, fragment)
			if err != nil {
				return err
			}
			mu.Lock()
			l.lat = append(l.lat, d)
			l.statuses[status]++
			if status != http.StatusOK {
				l.failed++
			}
			mu.Unlock()
		}
	})
	return l, err
}

// D3: depth per group from the maintained counters.

func caseD3(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	b := f.ours.b
	qid, gid, err := rawIDs(ctx, f.raw)
	if err != nil {
		return nil, err
	}
	s, err := interleave(ctx, e, e.reps,
		variant{"Briefs", func(ctx context.Context, _ int) (float64, error) {
			lat, err := timeCalls(ctx, e.size(300, 50), e.dur(2*time.Second, 300*time.Millisecond), func() error {
				bs, err := b.Briefs(ctx)
				if err == nil && len(bs) == 0 {
					err = fmt.Errorf("no queues")
				}
				return err
			})
			return percentile(lat, 0.5), err
		}},
		variant{"COUNT(*)", func(ctx context.Context, _ int) (float64, error) {
			lat, err := timeCalls(ctx, 10, e.dur(2*time.Second, 300*time.Millisecond), func() error {
				var n int64
				return f.raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM dead_letters WHERE queue_id = ? AND group_id = ?`, qid, gid).Scan(&n)
			})
			return percentile(lat, 0.5), err
		}},
	)
	if err != nil {
		return nil, err
	}
	r := compare(s, "D3", "depth per group and totals: Briefs vs COUNT(*) of the group, p50", "ms", "Briefs", "COUNT(*)")
	r.RefName = "raw COUNT(*)"
	r.Must, r.Goal = atMost("ours", 1, "≤ 1 ms"), atMost("ours", 0.2, "≤ 0.2 ms")
	r.Note = "Briefs: every queue with its partitions, groups and group_stats"
	return []Row{r}, nil
}

// rawIDs are the ids of the big group's queue and group in a raw copy.
func rawIDs(ctx context.Context, d *sql.DB) (qid, gid int64, err error) {
	if err = d.QueryRowContext(ctx, `SELECT id FROM queues WHERE name = ?`, dlqQueue).Scan(&qid); err != nil {
		return 0, 0, err
	}
	err = d.QueryRowContext(ctx, `SELECT id FROM groups WHERE name = ?`, dlqGroup0).Scan(&gid)
	return qid, gid, err
}

// D4: the charts' data.

func caseD4(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	b := f.ours.b
	p50s := Samples{}
	history := func(name string, span, step time.Duration) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			lat, err := timeCalls(ctx, e.size(200, 20), e.dur(2*time.Second, 300*time.Millisecond), func() error {
				end := time.Now().UTC().Truncate(step).Add(step)
				series, err := b.History(ctx, broker.HistoryQuery{From: end.Add(-span), To: end, Step: step})
				if err == nil && len(series) == 0 {
					err = fmt.Errorf("no series")
				}
				return err
			})
			p50s[name] = append(p50s[name], percentile(lat, 0.5))
			return percentile(lat, 0.99), err
		}}
	}
	vs := []variant{history("24 h", 24*time.Hour, 15*time.Minute), history("30 d", 30*24*time.Hour, 4*time.Hour)}
	if f.page != nil {
		vs = append(vs, variant{"page 30 d", func(ctx context.Context, _ int) (float64, error) {
			l, err := loadPage(ctx, f.page, f.srv.base+"/charts?range=30d", false, 1, e.size(100, 10), e.dur(2*time.Second, 300*time.Millisecond))
			if err == nil && l.failed > 0 {
				err = fmt.Errorf("/charts: %s", l.failures())
			}
			p50s["page 30 d"] = append(p50s["page 30 d"], l.p(0.5))
			return l.p(0.99), err
		}})
	}
	s, err := interleave(ctx, e, e.reps, vs...)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, name := range []string{"24 h", "30 d"} {
		r := single(s, "D4", "depth chart data (broker.History, every queue) p99, "+name, "ms", name)
		r.Must, r.Goal = atMost("ours", 10, "≤ 10 ms"), atMost("ours", 5, "≤ 5 ms")
		r.Note = fmt.Sprintf("p50 %.2f ms", median(p50s[name]))
		rows = append(rows, r)
	}
	if f.page != nil {
		r := single(s, "D4", "  whole /charts?range=30d page p99 (info)", "ms", "page 30 d")
		r.Note = fmt.Sprintf("p50 %.2f ms", median(p50s["page 30 d"]))
		rows = append(rows, r)
	}
	return rows, nil
}

// producer pushes one message every interval to its own queue of o, and
// records each push's latency from the time it was due: a push held up
// by a long write transaction counts, and so do the ones due behind it.
type producer struct {
	stop chan struct{}
	done chan struct{}
	lat  []time.Duration
	err  error
}

func startProducer(ctx context.Context, o *ours, queue string, interval time.Duration) *producer {
	p := &producer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		body := payload(0, 0)
		due := time.Now()
		for {
			if d := time.Until(due); d > 0 {
				select {
				case <-p.stop:
					return
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			select {
			case <-p.stop:
				return
			default:
			}
			if err := o.push(ctx, queue, "", body); err != nil {
				p.err = err
				return
			}
			p.lat = append(p.lat, time.Since(due))
			due = due.Add(interval)
		}
	}()
	return p
}

// finish stops the producer and returns its push latencies.
func (p *producer) finish() ([]time.Duration, error) {
	close(p.stop)
	<-p.done
	if p.err == nil && len(p.lat) == 0 {
		p.err = fmt.Errorf("the producer pushed nothing")
	}
	return p.lat, p.err
}

// producerInterval paces the producer that D5 watches.
const producerInterval = 2 * time.Millisecond

// bulk is how many dead letters a replay or a delete of D5 and D6 takes: the
// 10k of PERF.md, 1k in quick mode (its database is twenty times smaller).
func (e *env) bulk() int {
	if e.quick {
		return 1_000
	}
	return 10_000
}
