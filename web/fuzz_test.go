package web_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/web"
)

// The fuzz targets of the API's JSON decoders send whatever bytes the
// fuzzer makes through the real handler, in-process, to a server over a
// real SQLite file, and check what every answer must be:
//
//   - never a 5xx, never a panic (a panic would be a 500: recoverPanic);
//   - an error is {"error": "..."} JSON and nothing else;
//   - a refusal (4xx) commits nothing: the database's data_version, seen
//     from a connection of its own, does not move;
//   - after a success the database is consistent (fuzzApp.consistent), and
//     a push stored each payload byte for byte.
//
// The bodies may name live things through placeholders, replaced before
// each call with a fresh leased message and a fresh dead letter: $QUEUE,
// $PART (partitionId), $TX (transactionId), $LEASE, $GROUP, $DLQ (the dead
// letter's message id). Seeds are in testdata/fuzz/FuzzXxx; `go test` runs
// them, `go tool task fuzz` explores further.

// The server's limits under fuzzing: small, so that the fuzzer reaches
// the 413s.
const (
	fuzzMaxBody    = 64 << 10
	fuzzMaxPayload = 1 << 10
)

// fuzzApp is the server of a fuzz target.
type fuzzApp struct {
	handler http.Handler
	url     string // a real listener too, for what needs one (the login)
	broker  *broker.Broker
	// read is a connection of its own to the database file: its PRAGMA
	// data_version moves whenever another connection commits.
	read *sql.Conn
	n    int
}

// newFuzzApp starts a server for a fuzz target, with the queue fuzzd
// configured to file failures at once.
func newFuzzApp(f *testing.F) *fuzzApp {
	f.Helper()
	ctx := context.Background()
	// SQLite's: the fuzz targets tell a request that wrote nothing by
	// the file's data_version (read below).
	path := filepath.Join(f.TempDir(), "fuzz.db")
	d, err := db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		f.Fatalf("open db: %v", err)
	}
	f.Cleanup(func() { d.Close() })
	clk := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	b := broker.New(broker.Config{Store: d, Clock: clk})
	f.Cleanup(b.Close)
	ws := web.New(web.Config{
		Broker:          b,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		HealthFunc:      d.Ping,
		Clock:           clk,
		OpenAPI:         true,
		BcryptCost:      bcrypt.MinCost,
		SleepFunc:       func(context.Context, time.Duration) {},
		MaxBodyBytes:    fuzzMaxBody,
		MaxPayloadBytes: fuzzMaxPayload,
	})
	srv := httptest.NewServer(ws.Handler())
	f.Cleanup(srv.Close)
	rdb, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rdb.Close() })
	conn, err := rdb.Conn(ctx)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	a := &fuzzApp{handler: ws.Handler(), url: srv.URL, broker: b, read: conn}
	if _, err := b.Configure(ctx, "fuzzd", map[string]json.RawMessage{"retryLimit": []byte("0"), "retryDelay": []byte("0")}, "fuzz"); err != nil {
		f.Fatal(err)
	}
	return a
}

// live is what the placeholders of a body stand for.
type live struct {
	queue, part, tx, lease, group, dlq string
}

// lease pushes a message to a new partition of queue fuzz and leases it
// for the group g.
func (a *fuzzApp) lease(t testing.TB) live {
	t.Helper()
	ctx := context.Background()
	a.n++
	l := live{queue: "fuzz", tx: fmt.Sprintf("tx-%d", a.n), group: "g"}
	part := fmt.Sprintf("p-%d", a.n)
	res, err := a.broker.Push(ctx, []broker.PushItem{{Queue: l.queue, Partition: part, TransactionID: l.tx, Payload: []byte(`{"n":1}`)}})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	l.part = res[0].PartitionID
	p, err := a.broker.Pop(ctx, broker.PopRequest{Queue: l.queue, Partition: part, Group: l.group, Batch: 1})
	if err != nil || len(p.Messages) != 1 {
		t.Fatalf("pop: %v %+v", err, p)
	}
	l.lease = p.LeaseID
	return l
}

// deadLetter files a new dead letter in queue fuzzd and also leases a
// message: $DLQ names the dead letter.
func (a *fuzzApp) deadLetter(t testing.TB) live {
	t.Helper()
	ctx := context.Background()
	a.n++
	part := fmt.Sprintf("d-%d", a.n)
	res, err := a.broker.Push(ctx, []broker.PushItem{{Queue: "fuzzd", Partition: part, Payload: []byte(`{"d":1}`)}})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	p, err := a.broker.Pop(ctx, broker.PopRequest{Queue: "fuzzd", Partition: part, Group: "g", Batch: 1})
	if err != nil || len(p.Messages) != 1 {
		t.Fatalf("pop: %v %+v", err, p)
	}
	acked, err := a.broker.Ack(ctx, broker.Ack{TransactionID: res[0].TransactionID, PartitionID: res[0].PartitionID, LeaseID: p.LeaseID, Status: broker.AckFailed, Error: "boom", Group: "g"})
	if err != nil || !acked.DLQ {
		t.Fatalf("ack: %v %+v", err, acked)
	}
	l := a.lease(t)
	l.dlq = res[0].MessageID
	return l
}

// fill replaces the placeholders of b.
func (l live) fill(b []byte) []byte {
	return []byte(strings.NewReplacer("$QUEUE", l.queue, "$PART", l.part, "$TX", l.tx, "$LEASE", l.lease, "$GROUP", l.group, "$DLQ", l.dlq).Replace(string(b)))
}

// version is the database's data_version as the read connection sees it.
func (a *fuzzApp) version(t *testing.T) int64 {
	t.Helper()
	var v int64
	if err := a.read.QueryRowContext(context.Background(), "PRAGMA data_version").Scan(&v); err != nil {
		t.Fatalf("data_version: %v", err)
	}
	return v
}

// call sends a request to the handler and checks the answer; it returns
// the status and the body.
func (a *fuzzApp) call(t *testing.T, method, target string, body []byte) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, "/", bytes.NewReader(body))
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("target %q: %v", target, err)
	}
	req.URL, req.RequestURI = u, target
	req.Header.Set("Content-Type", "application/json")
	before := a.version(t)
	rec := httptest.NewRecorder()
	a.handler.ServeHTTP(rec, req)
	res := rec.Result()
	out := rec.Body.Bytes()
	if res.StatusCode >= 500 {
		t.Fatalf("%s %s: %d %s\nbody: %q", method, target, res.StatusCode, out, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: %d with content type %q", method, target, res.StatusCode, ct)
	}
	if res.StatusCode >= 400 {
		var e map[string]any
		if err := json.Unmarshal(out, &e); err != nil {
			t.Fatalf("%s %s: %d error body is not JSON: %q", method, target, res.StatusCode, out)
		}
		msg, ok := e["error"].(string)
		if !ok || msg == "" || len(e) != 1 {
			t.Fatalf("%s %s: %d error body is not {\"error\": \"...\"}: %s", method, target, res.StatusCode, out)
		}
		if after := a.version(t); after != before {
			t.Fatalf("%s %s: refused with %d (%s), yet the database changed", method, target, res.StatusCode, msg)
		}
		return res.StatusCode, out
	}
	if !json.Valid(out) {
		t.Fatalf("%s %s: %d body is not JSON: %q", method, target, res.StatusCode, out)
	}
	a.consistent(t)
	return res.StatusCode, out
}

// consistent fails the test when the database breaks one of the rules the
// broker keeps: counters match the dead letters they count, nothing points
// at a row that is not there.
func (a *fuzzApp) consistent(t *testing.T) {
	t.Helper()
	checks := []struct{ what, query string }{
		{"dead-letter depth that differs from the dead letters", `SELECT count(*) FROM group_stats gs
			WHERE depth != (SELECT count(*) FROM dead_letters d WHERE d.queue_id = gs.queue_id AND d.group_id = gs.group_id)`},
		{"dead letters without their counter", `SELECT count(*) FROM dead_letters d
			WHERE NOT EXISTS (SELECT 1 FROM group_stats gs WHERE gs.queue_id = d.queue_id AND gs.group_id = d.group_id)`},
		{"dead letters without their message", `SELECT count(*) FROM dead_letters d LEFT JOIN messages m ON m.seq = d.seq
			WHERE m.seq IS NULL OR m.partition_id != d.partition_id`},
		{"dead letters in a partition of another queue", `SELECT count(*) FROM dead_letters d JOIN partitions p ON p.id = d.partition_id
			WHERE p.queue_id != d.queue_id`},
		{"messages without their partition", `SELECT count(*) FROM messages m LEFT JOIN partitions p ON p.id = m.partition_id WHERE p.id IS NULL`},
		{"partitions without their queue", `SELECT count(*) FROM partitions p LEFT JOIN queues q ON q.id = p.queue_id WHERE q.id IS NULL`},
		{"consumers past the last message", `SELECT count(*) FROM consumers WHERE cursor > (SELECT coalesce(max(seq), 0) FROM messages)`},
		{"leases without an end", `SELECT count(*) FROM consumers WHERE lease_id IS NOT NULL AND lease_until = 0`},
	}
	for _, c := range checks {
		var n int
		if err := a.read.QueryRowContext(context.Background(), c.query).Scan(&n); err != nil {
			t.Fatalf("check %s: %v", c.what, err)
		}
		if n != 0 {
			t.Fatalf("inconsistent database: %d %s", n, c.what)
		}
	}
}

// storedPayload is the payload stored for a transactionId in a partition.
func (a *fuzzApp) storedPayload(t *testing.T, partitionID, txid string) []byte {
	t.Helper()
	var p []byte
	err := a.read.QueryRowContext(context.Background(), `SELECT m.payload FROM messages m JOIN partitions p ON p.id = m.partition_id
		WHERE p.uuid = ? AND m.transaction_id = ?`, partitionID, txid).Scan(&p)
	if err != nil {
		t.Fatalf("stored payload of %s in %s: %v", txid, partitionID, err)
	}
	return p
}

// sentItem is a pushed item as the client sent it.
type sentItem struct {
	Queue, Partition, TransactionID string
	Payload                         json.RawMessage
}

// checkPushed checks a push's results against what was sent: one result
// per item, in order, each payload stored byte for byte.
func (a *fuzzApp) checkPushed(t *testing.T, sent []sentItem, out []pushed) {
	t.Helper()
	if len(out) != len(sent) {
		t.Fatalf("%d results for %d items", len(out), len(sent))
	}
	for i, it := range sent {
		r := out[i]
		part := it.Partition
		if part == "" {
			part = broker.DefaultPartition
		}
		if r.Queue != it.Queue || r.Partition != part || (it.TransactionID != "" && r.TransactionID != it.TransactionID) {
			t.Fatalf("item %d %+v: result %+v", i, it, r)
		}
		if r.Status == broker.StatusQueued {
			got := a.storedPayload(t, r.PartitionID, r.TransactionID)
			if !bytes.Equal(got, it.Payload) {
				t.Fatalf("item %d: stored %q, sent %q", i, got, it.Payload)
			}
			if !utf8.Valid(got) || !json.Valid(got) || len(got) > fuzzMaxPayload {
				t.Fatalf("item %d: stored a payload the API must refuse: %q", i, got)
			}
		}
	}
}

func FuzzPush(f *testing.F) {
	a := newFuzzApp(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		status, out := a.call(t, "POST", "/api/v1/push", body)
		if status != http.StatusCreated {
			return
		}
		var req struct{ Items []sentItem }
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("201 for a body that does not decode: %v", err)
		}
		var res []pushed
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		a.checkPushed(t, req.Items, res)
	})
}

func FuzzAck(f *testing.F) {
	a := newFuzzApp(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		l := a.lease(t)
		a.call(t, "POST", "/api/v1/ack", l.fill(body))
	})
}

func FuzzAckBatch(f *testing.F) {
	a := newFuzzApp(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		l := a.lease(t)
		status, out := a.call(t, "POST", "/api/v1/ack/batch", l.fill(body))
		if status != http.StatusOK {
			return
		}
		// One result per acknowledgement, even for those refused.
		var req struct{ Acknowledgments []json.RawMessage }
		var res []json.RawMessage
		if json.Unmarshal(l.fill(body), &req) != nil || json.Unmarshal(out, &res) != nil || len(res) != len(req.Acknowledgments) {
			t.Fatalf("%d results for %d acknowledgements: %s", len(res), len(req.Acknowledgments), out)
		}
	})
}

func FuzzTransaction(f *testing.F) {
	a := newFuzzApp(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		l := a.lease(t)
		body = l.fill(body)
		status, out := a.call(t, "POST", "/api/v1/transaction", body)
		if status != http.StatusOK {
			return
		}
		var req struct {
			Operations []struct {
				Type  string
				Items []sentItem
			}
		}
		var res struct {
			Success bool
			Results []struct {
				Type     string
				Messages []pushed
			}
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("200 for a body that does not decode: %v", err)
		}
		if err := json.Unmarshal(out, &res); err != nil || !res.Success || len(res.Results) != len(req.Operations) {
			t.Fatalf("answer %s to %d operations", out, len(req.Operations))
		}
		for i, op := range req.Operations {
			if op.Type == "push" {
				a.checkPushed(t, op.Items, res.Results[i].Messages)
			}
		}
	})
}

func FuzzConfigure(f *testing.F) {
	a := newFuzzApp(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		status, out := a.call(t, "POST", "/api/v1/configure", body)
		if status != http.StatusOK {
			return
		}
		// What was configured is what the queue now has.
		var res struct {
			Queue   string
			Options json.RawMessage
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		q, err := a.broker.Queue(context.Background(), res.Queue)
		if err != nil {
			t.Fatalf("configured queue %q: %v", res.Queue, err)
		}
		want, _ := json.Marshal(q.Options)
		var got, exp map[string]any
		if json.Unmarshal(res.Options, &got) != nil || json.Unmarshal(want, &exp) != nil || fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("answered options %s, stored %s", res.Options, want)
		}
	})
}

func FuzzLeaseExtend(f *testing.F) {
	a := newFuzzApp(f)
	f.Fuzz(func(t *testing.T, lease string, body []byte) {
		l := a.lease(t)
		lease = string(l.fill([]byte(lease)))
		a.call(t, "POST", "/api/v1/lease/"+url.PathEscape(lease)+"/extend", l.fill(body))
	})
}

func FuzzDLQBulk(f *testing.F) {
	a := newFuzzApp(f)
	f.Fuzz(func(t *testing.T, remove bool, body []byte) {
		l := a.deadLetter(t)
		route := "/api/v1/dlq/replay"
		if remove {
			route = "/api/v1/dlq/delete"
		}
		status, out := a.call(t, "POST", route, l.fill(body))
		if status != http.StatusOK {
			return
		}
		var res bulkResult
		if err := json.Unmarshal(out, &res); err != nil || res.Done < 0 || res.Skipped < 0 || res.Failed != 0 {
			t.Fatalf("answer %s", out)
		}
	})
}

func FuzzDLQQuery(f *testing.F) {
	a := newFuzzApp(f)
	a.deadLetter(f)
	f.Fuzz(func(t *testing.T, query string) {
		status, out := a.call(t, "GET", "/api/v1/dlq?"+escapeQuery(query), nil)
		if status != http.StatusOK {
			return
		}
		var l dlqList
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatal(err)
		}
		if l.Pagination.Limit < 1 || l.Pagination.Limit > broker.MaxPageSize || len(l.Messages) > l.Pagination.Limit || l.Pagination.Offset < 0 {
			t.Fatalf("page %+v of %d", l.Pagination, len(l.Messages))
		}
	})
}

// escapeQuery makes a fuzzed query a valid URL query: the bytes a URL
// may not hold are %-escaped, the rest (& = % +) is kept, bad escapes too.
func escapeQuery(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c <= ' ' || c >= 0x7f || c == '#' || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' || c == '`' || c == '{' || c == '|' || c == '}' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// FuzzDeadLettersPage sends fuzzed filters to the dashboard's list (and
// to the confirmation of a bulk action, which reads the same filter) as a
// logged-in operator: never a 5xx, and always an HTML page.
func FuzzDeadLettersPage(f *testing.F) {
	a := newFuzzApp(f)
	a.deadLetter(f)
	cookies := a.login(f)
	f.Fuzz(func(t *testing.T, query string, confirm bool) {
		target := "/queues/fuzzd/dead-letters?" + escapeQuery(query)
		if confirm {
			target = "/queues/fuzzd/dead-letters/confirm?" + escapeQuery(query)
		}
		req := httptest.NewRequest("GET", "/", nil)
		u, err := url.Parse(target)
		if err != nil {
			t.Fatalf("target %q: %v", target, err)
		}
		req.URL, req.RequestURI = u, target
		for _, c := range cookies {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		a.handler.ServeHTTP(rec, req)
		if rec.Code >= 500 || (rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest && rec.Code != http.StatusNotFound) {
			t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("GET %s: %d with content type %q", target, rec.Code, ct)
		}
	})
}

// login logs an operator in over the real listener and returns the
// session's cookies.
func (a *fuzzApp) login(f *testing.F) []*http.Cookie {
	f.Helper()
	ctx := context.Background()
	h, err := bcrypt.GenerateFromPassword([]byte(passwordOf("fuzzer")), bcrypt.MinCost)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := a.broker.CreateUser(ctx, "fuzzer", broker.RoleOperator, string(h), "fuzz"); err != nil {
		f.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(a.url + "/login")
	if err != nil {
		f.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(a.url)
	var csrf string
	for _, c := range jar.Cookies(u) {
		if c.Name == "lazarus_csrf" {
			csrf = c.Value
		}
	}
	res, err = client.PostForm(a.url+"/login", url.Values{"name": {"fuzzer"}, "password": {passwordOf("fuzzer")}, "_csrf": {csrf}})
	if err != nil {
		f.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		f.Fatalf("login: %d", res.StatusCode)
	}
	return jar.Cookies(u)
}
