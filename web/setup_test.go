package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
	"github.com/lazarus-dlq/lazarus/web"
)

// storeAt is where a test's store lives (pgtest.StoreAt): a SQLite file,
// or a PostgreSQL database with LAZARUS_TEST_STORE=postgres.
func storeAt(t testing.TB, name string) string {
	t.Helper()
	return pgtest.StoreAt(t, name, db.Prepare)
}

// clock is a clock the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// logBuffer collects the server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sleepLog records the waits the server asked for instead of waiting.
type sleepLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (l *sleepLog) sleep(_ context.Context, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits = append(l.waits, d)
}

// take returns the waits recorded since the last take.
func (l *sleepLog) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.waits
	l.waits = nil
	return w
}

// bundle is what a web test works with: a real HTTP server over a broker on
// a fresh SQLite file, with a hand-moved clock.
type bundle struct {
	t      *testing.T
	ctx    context.Context
	url    string
	server *web.Server
	broker *broker.Broker
	db     *db.DB
	clock  *clock
	logs   *logBuffer
	sleeps *sleepLog
	token  string // sent as a bearer token by call
}

// setup starts a server; edit may change its config before it starts. The
// API is open (Config.OpenAPI) unless edit says otherwise, so that API
// tests need no token; the dashboard always needs a login (see
// browser_test.go). Password hashes are cheap and failed logins do not
// wait: the waits asked for are in bundle.sleeps.
func setup(t *testing.T, edit ...func(*web.Config)) *bundle {
	t.Helper()
	s := setupStill(t, edit...)
	runCtx, stop := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.broker.RunJobs(runCtx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return s
}

// setupStill is setup without the job runner: jobs started stay where
// they are until the test runs them (broker.StepJob, RunJob).
func setupStill(t *testing.T, edit ...func(*web.Config)) *bundle {
	t.Helper()
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	return setupAt(t, storeAt(t, "l.db"), c, edit...)
}

// setupAt is setupStill over the store at at (one another server may
// have open too: two processes of one database), on the clock c.
func setupAt(t *testing.T, at string, c *clock, edit ...func(*web.Config)) *bundle {
	t.Helper()
	return setupOn(t, nil, at, c, edit...)
}

// setupOn is setupAt serving on ln (nil: a port of its own), for a test
// that must know the server's URL before it is made (a single sign-on's
// redirect URL).
func setupOn(t *testing.T, ln net.Listener, at string, c *clock, edit ...func(*web.Config)) *bundle {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, at, db.SyncNormal)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	b := broker.New(broker.Config{Store: d, Clock: c})
	t.Cleanup(b.Close)
	logs := &logBuffer{}
	sleeps := &sleepLog{}
	cfg := web.Config{
		Broker:        b,
		Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		HealthFunc:    d.Ping,
		TextIndexFunc: d.TextIndexFunc(),
		Clock:         c,
		OpenAPI:       true,
		BcryptCost:    bcrypt.MinCost,
		SleepFunc:     sleeps.sleep,
	}
	for _, e := range edit {
		e(&cfg)
	}
	ws := web.New(cfg)
	srv := httptest.NewUnstartedServer(ws.Handler())
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return &bundle{t: t, ctx: ctx, url: srv.URL, server: ws, broker: b, db: d, clock: c, logs: logs, sleeps: sleeps, token: cfg.AdminToken}
}

// execOn runs a statement of the test's own around the broker (a trigger
// that makes a write fail, say): sqlite on SQLite, pg on PostgreSQL,
// whose dialects differ there.
func (s *bundle) execOn(sqlite, pg string) {
	s.t.Helper()
	q := sqlite
	if s.db.Postgres() {
		q = pg
	}
	if _, err := s.db.WriteDB().ExecContext(s.ctx, q); err != nil {
		s.t.Fatal(err)
	}
}

// response is a finished HTTP exchange.
type response struct {
	t      *testing.T
	req    string
	status int
	header http.Header
	body   []byte
}

// request sends a request with the given headers; body "" sends none.
func (s *bundle) request(ctx context.Context, method, path, body string, header http.Header) response {
	s.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, r)
	if err != nil {
		s.t.Fatalf("new request: %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{t: s.t, req: method + " " + path, status: res.StatusCode, header: res.Header, body: b}
}

// call sends a request with the bundle's token, if any.
func (s *bundle) call(method, path, body string) response {
	s.t.Helper()
	h := http.Header{}
	if s.token != "" {
		h.Set("Authorization", "Bearer "+s.token)
	}
	return s.request(s.ctx, method, path, body, h)
}

// want fails the test unless the response has the status.
func (r response) want(status int) response {
	r.t.Helper()
	if r.status != status {
		r.t.Fatalf("%s: status %d, want %d; body %s", r.req, r.status, status, r.body)
	}
	return r
}

// decode decodes the body into v.
func (r response) decode(v any) {
	r.t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		r.t.Fatalf("%s: decode %s: %v", r.req, r.body, err)
	}
}

// wantError fails the test unless the response is the status and a JSON
// {"error": ...} whose text contains every one of parts.
func (r response) wantError(status int, parts ...string) string {
	r.t.Helper()
	r.want(status)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		r.t.Fatalf("%s: content type %q, want JSON", r.req, ct)
	}
	var e map[string]any
	r.decode(&e)
	msg, ok := e["error"].(string)
	if !ok || msg == "" {
		r.t.Fatalf("%s: body %s has no error text", r.req, r.body)
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			r.t.Fatalf("%s: error %q does not contain %q", r.req, msg, p)
		}
	}
	return msg
}

// The API's shapes, as a client reads them.

type pushed struct {
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	TransactionID string `json:"transaction_id"`
	PartitionID   string `json:"partition_id"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
}

type message struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Queue         string          `json:"queue"`
	LeaseID       *string         `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     string          `json:"createdAt"`
	RetryCount    int             `json:"retryCount"`
	TraceID       *string         `json:"traceId"`
}

type popped struct {
	Messages       []message `json:"messages"`
	LeaseID        *string   `json:"leaseId"`
	LeaseExpiresAt *string   `json:"leaseExpiresAt"`
}

type deadLetter struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  string          `json:"errorMessage"`
	RetryCount    int             `json:"retryCount"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     string          `json:"createdAt"`
	FailedAt      string          `json:"failedAt"`
	TraceID       *string         `json:"traceId"`
	IsReplay      bool            `json:"isReplay"`
}

type dlqList struct {
	Messages   []deadLetter `json:"messages"`
	Total      int64        `json:"total"`
	Pagination struct {
		Limit  int `json:"limit"`
		Offset int `json:"offset"`
	} `json:"pagination"`
}

type bulkResult struct {
	Done    int `json:"done"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
}

// Fixtures.

// configure sets queue options given as a JSON object.
func (s *bundle) configure(queue, options string) {
	s.t.Helper()
	s.call("POST", "/api/v1/configure", fmt.Sprintf(`{"queue":%q,"options":%s}`, queue, options)).want(http.StatusOK)
}

// push pushes one payload with a transactionId ("" lets the server make
// one) to a queue's partition ("" is Default).
func (s *bundle) push(queue, partition, txid, payload string) pushed {
	s.t.Helper()
	item := fmt.Sprintf(`{"queue":%q,"payload":%s`, queue, payload)
	if partition != "" {
		item += fmt.Sprintf(`,"partition":%q`, partition)
	}
	if txid != "" {
		item += fmt.Sprintf(`,"transactionId":%q`, txid)
	}
	var out []pushed
	s.call("POST", "/api/v1/push", `{"items":[`+item+`}]}`).want(http.StatusCreated).decode(&out)
	if len(out) != 1 {
		s.t.Fatalf("push: %d results", len(out))
	}
	return out[0]
}

// pop pops with the query ("" for none) and wants messages.
func (s *bundle) pop(queue, query string) popped {
	s.t.Helper()
	var p popped
	s.call("GET", "/api/v1/pop/queue/"+queue+"?"+query, "").want(http.StatusOK).decode(&p)
	if len(p.Messages) == 0 {
		s.t.Fatalf("pop %s: no messages", queue)
	}
	return p
}

// ack acks a popped message with its own lease.
func (s *bundle) ack(m message, status, errText string) response {
	s.t.Helper()
	body, _ := json.Marshal(map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
		"status": status, "error": errText, "consumerGroup": m.ConsumerGroup})
	return s.call("POST", "/api/v1/ack", string(body))
}

// deadLetters lists dead letters with the query.
func (s *bundle) deadLetters(query string) dlqList {
	s.t.Helper()
	var l dlqList
	s.call("GET", "/api/v1/dlq?"+query, "").want(http.StatusOK).decode(&l)
	return l
}

// fail pushes a payload to a partition ("" is Default) of queue,
// configured with retryLimit 0, and fails it for group ("" is queue mode)
// with errText: one dead letter.
func (s *bundle) fail(queue, partition, group, txid, payload, errText string) deadLetter {
	s.t.Helper()
	if partition == "" {
		partition = "Default"
	}
	s.configure(queue, `{"retryLimit":0,"retryDelay":0}`)
	s.push(queue, partition, txid, payload)
	var p popped
	s.call("GET", "/api/v1/pop/queue/"+queue+"/partition/"+partition+"?consumerGroup="+url.QueryEscape(group), "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != txid {
		s.t.Fatalf("fail %s: popped %+v", txid, p.Messages)
	}
	var res map[string]any
	s.ack(p.Messages[0], "failed", errText).want(http.StatusOK).decode(&res)
	if res["dlq"] != true {
		s.t.Fatalf("ack failed: not filed: %v", res)
	}
	q := url.Values{"queue": {queue}, "transactionId": {txid}, "consumerGroup": {p.Messages[0].ConsumerGroup}}
	l := s.deadLetters(q.Encode())
	if len(l.Messages) != 1 {
		s.t.Fatalf("dead letter of %s: got %d", txid, len(l.Messages))
	}
	return l.Messages[0]
}

// onlyReader hides a reader's length, so that a request sends its body
// chunked, without a Content-Length.
type onlyReader struct{ io.Reader }

// requestChunked posts body chunked, with the bundle's token.
func (s *bundle) requestChunked(path, body string, header http.Header) response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.ctx, "POST", s.url+path, onlyReader{strings.NewReader(body)})
	if err != nil {
		s.t.Fatalf("new request: %v", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("POST %s: read body: %v", path, err)
	}
	return response{t: s.t, req: "POST " + path + " (chunked)", status: res.StatusCode, header: res.Header, body: b}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// sub is the bundle for a subtest: failures go to t.
func (s *bundle) sub(t *testing.T) *bundle {
	c := *s
	c.t = t
	return &c
}
