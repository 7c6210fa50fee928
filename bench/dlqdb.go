package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// generatorVersion changes whenever what the generator writes changes, so
// that cached databases of an older generator are not used (3: error
// group states, and error group hours over 8 days).
const generatorVersion = 3

// dlqGroup is a consumer group of the generated database and its dead
// letters.
type dlqGroup struct {
	queue string
	group string
	count int
}

// The generated database: one big group, three smaller ones, two queues.
const (
	dlqQueue  = "orders"
	dlqGroup0 = "billing"
)

// dlqGroups are the groups and their dead letters: 1M + 300k, or 50k +
// 15k in quick mode (the pages' cost grows with the group while their
// pages are not yet keyset-only, and the quick run has a minute).
func dlqGroups(quick bool) []dlqGroup {
	scale := 1
	if quick {
		scale = 20
	}
	return []dlqGroup{
		{dlqQueue, dlqGroup0, 1_000_000 / scale},
		{dlqQueue, "shipping", 150_000 / scale},
		{dlqQueue, "analytics", 100_000 / scale},
		{"payments", "ledger", 50_000 / scale},
	}
}

// dlqFixture is the generated dashboard database, cached, and the working
// copies the cases use.
type dlqFixture struct {
	cache   string // the cached file: never opened for writing
	groups  []dlqGroup
	span    time.Duration
	built   time.Duration // 0 when it came from the cache
	ours    *ours         // a working copy under the broker
	srv     *server       // the web server of ours
	page    *http.Client  // logged in to the dashboard; nil when login failed
	pageErr error
	raw     *sql.DB // another working copy, for the raw references
	rawPath string
}

func (f *dlqFixture) inGroup() int { return f.groups[0].count }

func (f *dlqFixture) others() int {
	n := 0
	for _, g := range f.groups[1:] {
		n += g.count
	}
	return n
}

func (f *dlqFixture) describe() string {
	s := fmt.Sprintf("%dk dead letters in %s/%s + %dk in 3 others over 30 d", f.inGroup()/1000, dlqQueue, dlqGroup0, f.others()/1000)
	if f.built > 0 {
		s += fmt.Sprintf(", generated in %.1f s", f.built.Seconds())
	}
	return s
}

// dlqDB returns the dashboard fixture: the cached database (generated when
// missing), a working copy opened by db.Open under a broker with its web
// server and a logged-in dashboard client, and a second copy for the raw
// references.
func (e *env) dlqDB(ctx context.Context) (*dlqFixture, error) {
	if e.dlq != nil {
		return e.dlq, nil
	}
	f, err := e.dlqCache(ctx)
	if err != nil {
		return nil, err
	}
	oursPath := e.path("dlq-ours")
	if err := copyFile(f.cache, oursPath); err != nil {
		return nil, err
	}
	d, err := db.Open(ctx, oursPath, e.sync)
	if err != nil {
		return nil, err
	}
	f.ours = &ours{db: d, b: broker.New(broker.Config{Store: d}), path: oursPath}
	if err := searchSettled(ctx, d.WriteDB()); err != nil {
		return nil, err
	}
	if f.srv, err = startServer(f.ours); err != nil {
		return nil, err
	}
	f.page, f.pageErr = f.srv.dashboardClient(ctx, f.ours.b)
	f.rawPath = e.path("dlq-raw")
	if err := copyFile(f.cache, f.rawPath); err != nil {
		return nil, err
	}
	if f.raw, err = e.openRef(ctx, f.rawPath, e.sync); err != nil {
		return nil, err
	}
	e.dlq = f
	return f, nil
}

// dlqCache returns the dashboard fixture with its cached database only
// (generated when missing), no working copy made or opened: D7 makes
// copies of its own.
func (e *env) dlqCache(ctx context.Context) (*dlqFixture, error) {
	f := &dlqFixture{groups: dlqGroups(e.quick), span: 30 * 24 * time.Hour}
	key, err := schemaKey(ctx, e)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(e.cacheDir, 0o755); err != nil {
		return nil, err
	}
	f.cache = filepath.Join(e.cacheDir, fmt.Sprintf("dlq-%d-%d-g%d-%s.db", f.inGroup(), f.others(), generatorVersion, key))
	if _, err := os.Stat(f.cache); os.IsNotExist(err) {
		e.log.Info("generating the dashboard database", "path", f.cache)
		start := time.Now()
		if err := generateDLQ(ctx, f.cache, f.groups, f.span); err != nil {
			return nil, fmt.Errorf("generate %s: %w", f.cache, err)
		}
		f.built = time.Since(start)
	} else if err != nil {
		return nil, err
	}
	return f, nil
}

func (f *dlqFixture) close() {
	if f.page != nil {
		f.page.CloseIdleConnections()
	}
	if f.srv != nil {
		f.srv.close()
	}
	if f.ours != nil {
		f.ours.close()
	}
	if f.raw != nil {
		f.raw.Close()
		removeDB(f.rawPath)
	}
}

// schemaKey names the schema db.Open makes: the number of migrations and
// a hash of the schema they leave.
func schemaKey(ctx context.Context, e *env) (string, error) {
	path := e.path("schema")
	defer removeDB(path)
	d, err := db.Open(ctx, path, e.sync)
	if err != nil {
		return "", err
	}
	defer d.Close()
	w := d.WriteDB()
	var migrations int
	if err := w.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations").Scan(&migrations); err != nil {
		return "", err
	}
	rows, err := w.QueryContext(ctx, "SELECT type, name, COALESCE(sql, '') FROM sqlite_schema ORDER BY type, name")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	h := sha256.New()
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", typ, name, text)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return fmt.Sprintf("m%d-%s", migrations, hex.EncodeToString(h.Sum(nil))[:12]), nil
}

// copyFile copies src to dst, and waits until the copy is on disk; and
// the search file beside a database of Lazarus's (<db>-search,
// db/sqlite/search.go) with it, in step with the copy, which would
// otherwise build it again as it opens (about a minute a million dead
// letters).
func copyFile(src, dst string) error {
	if err := copyOne(src, dst); err != nil {
		return err
	}
	if _, err := os.Stat(src + "-search"); err == nil {
		return copyOne(src+"-search", dst+"-search")
	}
	return nil
}

// copyOne is copyFile of one file.
func copyOne(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(out, in, make([]byte, 4<<20)); err != nil {
		out.Close()
		return err
	}
	// On disk before anything is timed: else the kernel writes the copy
	// back during the cases, and its writeback stalls their writes.
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// errorTexts are the dead letters' errors: a first line (some with a
// varying part, so that the top errors have a long tail) and a trace.
var errorTexts = []struct {
	weight int
	line   func(r *rand.Rand) string
}{
	{30, func(*rand.Rand) string { return "TimeoutError: upstream payments-api did not answer within 30s" }},
	{20, func(*rand.Rand) string { return `ValidationError: field "amount" must be positive` }},
	{15, func(r *rand.Rand) string {
		return fmt.Sprintf("ConnectionRefused: dial tcp 10.0.3.%d:5432: connect: connection refused", r.IntN(8)+10)
	}},
	{10, func(*rand.Rand) string { return "KeyError: 'customer_id'" }},
	{8, func(r *rand.Rand) string {
		return fmt.Sprintf("HTTP 503 from https://inventory.internal/reserve (attempt %d)", r.IntN(4)+1)
	}},
	{7, func(r *rand.Rand) string {
		return fmt.Sprintf("DuplicateKey: order %d already exists", r.IntN(1_000_000))
	}},
	{5, func(*rand.Rand) string {
		return "json: cannot unmarshal string into Go struct field Order.total of type float64"
	}},
	{3, func(*rand.Rand) string {
		return "PermissionDenied: token for service billing-worker lacks scope orders:write"
	}},
	{2, func(r *rand.Rand) string {
		return fmt.Sprintf("panic: runtime error: index out of range [%d] with length 3", r.IntN(9)+3)
	}},
}

// cardBrands and tags are the payloads' card.brand and tags values, some
// more frequent than others (as drawn, amex is one payload in eight).
var (
	cardBrands = []string{"visa", "visa", "visa", "mastercard", "mastercard", "amex", "discover", "jcb"}
	tags       = []string{"web", "web", "mobile", "vip", "b2b"}
)

func errorText(r *rand.Rand) string {
	total := 0
	for _, t := range errorTexts {
		total += t.weight
	}
	k := r.IntN(total)
	for _, t := range errorTexts {
		if k < t.weight {
			return t.line(r) + "\n    at worker.handle (worker/handle.go:" + strconv.Itoa(40+r.IntN(200)) + ")\n    at worker.loop (worker/loop.go:88)"
		}
		k -= t.weight
	}
	panic("unreachable")
}

// generateDLQ writes the dashboard database at path: db.Open makes the
// schema, then rows go straight into its tables in large transactions:
// queues, partitions, groups, subscriptions, consumers (caught up), one
// message per dead letter, the dead letters themselves spread evenly over
// span up to now, group_stats and the minute and hour buckets the charts
// read.
func generateDLQ(ctx context.Context, path string, groups []dlqGroup, span time.Duration) error {
	tmp := path + ".tmp"
	removeFiles(tmp)
	d, err := db.Open(ctx, tmp, db.SyncNormal)
	if err != nil {
		return err
	}
	defer removeFiles(tmp)
	defer d.Close()
	w := d.WriteDB()
	for _, p := range []string{"PRAGMA synchronous=OFF", "PRAGMA cache_size=-262144"} {
		if _, err := w.ExecContext(ctx, p); err != nil {
			return err
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	end := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	start := end.Add(-span)

	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if tx != nil {
			tx.Rollback()
		}
	}()
	exec := func(q string, args ...any) (sql.Result, error) { return tx.ExecContext(ctx, q, args...) }

	// Queues with their partitions, groups and subscriptions.
	queueIDs := map[string]int64{}
	parts := map[string][]int64{}
	groupIDs := map[string]int64{}
	type qg struct{ q, g int64 }
	var subs []qg
	created := start.Add(-24 * time.Hour)
	for _, g := range groups {
		qid, ok := queueIDs[g.queue]
		if !ok {
			o := broker.DefaultOptions()
			res, err := exec(`INSERT INTO queues (name, lease_time, retry_limit, retry_delay, dead_letter_queue, dlq_after_max_retries, created_at) VALUES (?, ?, ?, ?, 1, 1, ?)`,
				g.queue, o.LeaseTime, o.RetryLimit, o.RetryDelay, created.UnixMilli())
			if err != nil {
				return fmt.Errorf("queues: %w", err)
			}
			qid, _ = res.LastInsertId()
			queueIDs[g.queue] = qid
			n := 16
			if g.queue != dlqQueue {
				n = 4
			}
			for i := range n {
				res, err := exec(`INSERT INTO partitions (queue_id, name, uuid, created_at) VALUES (?, ?, ?, ?)`, qid, fmt.Sprintf("p%02d", i), broker.NewUUID(created), created.UnixMilli())
				if err != nil {
					return fmt.Errorf("partitions: %w", err)
				}
				pid, _ := res.LastInsertId()
				parts[g.queue] = append(parts[g.queue], pid)
			}
		}
		res, err := exec(`INSERT INTO groups (name) VALUES (?)`, g.group)
		if err != nil {
			return fmt.Errorf("groups: %w", err)
		}
		gid, _ := res.LastInsertId()
		groupIDs[g.group] = gid
		if _, err := exec(`INSERT INTO subscriptions (queue_id, group_id, subscribed_at) VALUES (?, ?, ?)`, qid, gid, created.UnixMilli()); err != nil {
			return fmt.Errorf("subscriptions: %w", err)
		}
		subs = append(subs, qg{qid, gid})
	}

	// Messages and dead letters, oldest first, in multi-row INSERTs.
	total := 0
	left := make([]int, len(groups))
	for i, g := range groups {
		left[i] = g.count
		total += g.count
	}
	const perStmt = 100
	msgStmt, err := tx.PrepareContext(ctx, `INSERT INTO messages (seq, partition_id, transaction_id, payload, trace_id, created_at) VALUES `+placeholders(6, perStmt))
	if err != nil {
		return err
	}
	dlStmt, err := tx.PrepareContext(ctx, `INSERT INTO dead_letters (id, seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id) VALUES `+placeholders(9, perStmt))
	if err != nil {
		return err
	}
	type bucketKey struct {
		q, g int64
		at   int64 // minute, or hour (negative) before the last 48 h
	}
	buckets := map[bucketKey]int64{}
	var bucketOrder []bucketKey
	oldest := map[qg]int64{}
	counts := map[qg]int64{}
	minuteCut := end.Add(-broker.MinuteRetention).Truncate(time.Hour)
	step := span / time.Duration(total)
	msgArgs := make([]any, 0, 6*perStmt)
	dlArgs := make([]any, 0, 9*perStmt)
	var trace [16]byte
	for k := 0; k < total; k++ {
		// Each group in proportion to what it has left: exact totals, mixed order.
		x, gi := r.IntN(total-k), 0
		for x >= left[gi] {
			x -= left[gi]
			gi++
		}
		left[gi]--
		g := groups[gi]
		qid, gid := queueIDs[g.queue], groupIDs[g.group]
		pid := parts[g.queue][r.IntN(len(parts[g.queue]))]
		failed := start.Add(time.Duration(k)*step + time.Duration(r.Int64N(int64(step))))
		pushed := failed.Add(-time.Duration(3+r.IntN(20)) * time.Second)
		seq := int64(k + 1)
		for i := range trace {
			trace[i] = byte(r.Uint32())
		}
		body := fmt.Sprintf(`{"orderId":"o-%d","customer":"c-%05d","amount":%d.%02d,"currency":"EUR","card":{"brand":%q,"last4":"%04d"},"tags":[%q],"items":[{"sku":"SKU-%04d","qty":%d}],"source":"checkout-web"}`,
			seq, r.IntN(50_000), r.IntN(900)+10, r.IntN(100), cardBrands[r.IntN(len(cardBrands))], r.IntN(10_000), tags[r.IntN(len(tags))], r.IntN(5000), r.IntN(5)+1)
		txid := broker.NewUUID(pushed)
		msgArgs = append(msgArgs, seq, pid, txid, []byte(body), hex.EncodeToString(trace[:]), pushed.UnixMilli())
		dlArgs = append(dlArgs, seq, seq, qid, pid, gid, errorText(r), 3, failed.UnixMilli(), txid)
		if len(msgArgs) == cap(msgArgs) {
			if _, err := msgStmt.ExecContext(ctx, msgArgs...); err != nil {
				return fmt.Errorf("messages: %w", err)
			}
			if _, err := dlStmt.ExecContext(ctx, dlArgs...); err != nil {
				return fmt.Errorf("dead letters: %w", err)
			}
			msgArgs, dlArgs = msgArgs[:0], dlArgs[:0]
		}
		key := qg{qid, gid}
		if _, ok := oldest[key]; !ok {
			oldest[key] = failed.UnixMilli()
		}
		counts[key]++
		bk := bucketKey{qid, gid, failed.Unix() / 60}
		if failed.Before(minuteCut) {
			bk.at = -(failed.Unix() / 3600)
		}
		if _, ok := buckets[bk]; !ok {
			bucketOrder = append(bucketOrder, bk)
		}
		buckets[bk]++
		if k%50_000 == 49_999 { // commit in large transactions
			if err := tx.Commit(); err != nil {
				return err
			}
			if tx, err = w.BeginTx(ctx, nil); err != nil {
				return err
			}
			exec = func(q string, args ...any) (sql.Result, error) { return tx.ExecContext(ctx, q, args...) }
			msgStmt, dlStmt = tx.StmtContext(ctx, msgStmt), tx.StmtContext(ctx, dlStmt)
		}
	}
	for len(msgArgs) > 0 { // the rest, a row at a time
		if _, err := exec(`INSERT INTO messages (seq, partition_id, transaction_id, payload, trace_id, created_at) VALUES (?, ?, ?, ?, ?, ?)`, msgArgs[:6]...); err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		if _, err := exec(`INSERT INTO dead_letters (id, seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, dlArgs[:9]...); err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		msgArgs, dlArgs = msgArgs[6:], dlArgs[9:]
	}

	// Every group has read everything: caught-up consumers.
	for _, s := range subs {
		if _, err := exec(`INSERT INTO consumers (partition_id, group_id, queue_id, cursor, leased_at)
			SELECT p.id, ?, p.queue_id, COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = p.id), 0), ?
			FROM partitions p WHERE p.queue_id = ?`, s.g, end.UnixMilli(), s.q); err != nil {
			return fmt.Errorf("consumers: %w", err)
		}
	}
	// The counts the writer keeps for the queue page (migration 0010):
	// each partition's messages, and each consumer's up to its cursor.
	for _, stmt := range []string{
		`UPDATE partitions SET
			messages = (SELECT COUNT(*) FROM messages m WHERE m.partition_id = partitions.id),
			counted_seq = COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = partitions.id), 0)`,
		`UPDATE consumers SET passed = (SELECT p.messages FROM partitions p WHERE p.id = consumers.partition_id), passed_seq = cursor`,
	} {
		if _, err := exec(stmt); err != nil {
			return fmt.Errorf("counts: %w", err)
		}
	}
	// Maintained counters: each dead letter failed four times (three
	// retries); twenty messages completed for each one that failed.
	for _, s := range subs {
		n := counts[qg{s.q, s.g}]
		if _, err := exec(`INSERT INTO group_stats (queue_id, group_id, depth, dead_lettered, failed, completed, oldest_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			s.q, s.g, n, n, 4*n, 20*n, oldest[qg{s.q, s.g}]); err != nil {
			return fmt.Errorf("group_stats: %w", err)
		}
	}
	depth := map[qg]int64{}
	for _, bk := range bucketOrder {
		key := qg{bk.q, bk.g}
		n := buckets[bk]
		depth[key] += n
		table, at := "stats_minute (queue_id, group_id, minute", bk.at
		if bk.at < 0 {
			table, at = "stats_hour (queue_id, group_id, hour", -bk.at
		}
		if _, err := exec(`INSERT INTO `+table+`, dead_lettered, failed, completed, depth, oldest_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			bk.q, bk.g, at, n, 4*n, 20*n, depth[key], oldest[key]); err != nil {
			return fmt.Errorf("buckets: %w", err)
		}
	}
	// The quarter-hour and hour buckets of those minutes, as the broker
	// keeps them (depth and oldest_at of each one's last minute).
	for _, up := range []struct{ table, unit, minutes string }{{"stats_quarter", "quarter", "15"}, {"stats_hour", "hour", "60"}} {
		if _, err := exec(`INSERT INTO ` + up.table + ` (queue_id, group_id, ` + up.unit + `, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed, depth, oldest_at)
			SELECT queue_id, group_id, u, dl, rp, de, dr, co, fa, rc, rf, depth, oldest_at FROM (
				SELECT queue_id, group_id, minute / ` + up.minutes + ` AS u, SUM(dead_lettered) AS dl, SUM(replayed) AS rp, SUM(deleted) AS de, SUM(dropped) AS dr,
					SUM(completed) AS co, SUM(failed) AS fa, SUM(replay_completed) AS rc, SUM(replay_failed) AS rf, MAX(minute) AS last, depth, oldest_at
				FROM stats_minute GROUP BY queue_id, group_id, minute / ` + up.minutes + `)`); err != nil {
			return fmt.Errorf("%s: %w", up.table, err)
		}
	}
	if err := fillErrorGroups(exec); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	tx = nil
	// The search's full-text indexes (migration 0015), as filing keeps them.
	if err := d.RebuildTextIndex(ctx); err != nil {
		return err
	}
	if _, err := w.ExecContext(ctx, "PRAGMA main.wal_checkpoint(TRUNCATE)"); err != nil {
		return err
	}
	if err := d.Close(); err != nil {
		return err
	}
	// The search file goes with the database: in step with it, the
	// copies of the fixture need not build it again.
	if err := os.Rename(tmp+"-search", path+"-search"); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// placeholders makes "(?, …), (?, …)" for rows of cols values.
func placeholders(cols, rows int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ")
}

func removeFiles(path string) {
	for _, s := range []string{"", "-wal", "-shm", "-search", "-search-wal", "-search-shm"} {
		os.Remove(path + s)
	}
}
