package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  string
		args []string
		env  map[string]string
		want Config
	}{
		{"Defaults", "serve", nil, nil,
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo}},
		{"Environment", "serve", nil,
			map[string]string{"LAZARUS_ADDR": ":9000", "LAZARUS_DB": "/tmp/l.db", "LAZARUS_SYNC": "normal", "LAZARUS_LOG_FORMAT": "json", "LAZARUS_LOG_LEVEL": "debug", "LAZARUS_ADMIN_TOKEN": "s3cret"},
			Config{Addr: ":9000", DBPath: "/tmp/l.db", Sync: db.SyncNormal, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "json", LogLevel: slog.LevelDebug, AdminToken: "s3cret"}},
		{"FlagsWinOverEnvironment", "serve", []string{"--addr", "127.0.0.1:0", "--db=/x.db", "--sync", "FULL", "--demo"},
			map[string]string{"LAZARUS_ADDR": ":9000", "LAZARUS_DB": "/tmp/l.db", "LAZARUS_SYNC": "normal"},
			Config{Addr: "127.0.0.1:0", DBPath: "/x.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, Demo: true, LogFormat: "text", LogLevel: slog.LevelInfo}},
		{"DemoHasADatabaseOfItsOwn", "demo", nil, nil,
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus-demo.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, Demo: true, DemoHistory: true, LogFormat: "text", LogLevel: slog.LevelInfo}},
		// LAZARUS_DB names the user's own database: lazarus demo never
		// sends its traffic there (review of issue 17, finding 5).
		{"DemoIgnoresLAZARUS_DB", "demo", nil, map[string]string{"LAZARUS_DB": "/real.db"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus-demo.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, Demo: true, DemoHistory: true, LogFormat: "text", LogLevel: slog.LevelInfo}},
		{"DemoTakesTheSameFlags", "demo", []string{"--db", "/d.db", "--sync", "normal"}, map[string]string{"LAZARUS_DB": "/real.db"},
			Config{Addr: "127.0.0.1:8080", DBPath: "/d.db", Sync: db.SyncNormal, BusyTimeout: db.DefaultBusyTimeout, Demo: true, DemoHistory: true, LogFormat: "text", LogLevel: slog.LevelInfo}},
		{"UsersAndCookies", "serve", nil,
			map[string]string{"LAZARUS_ADMIN_PASSWORD": "twelve chars", "LAZARUS_SECURE_COOKIES": "true", "LAZARUS_API_OPEN": "false"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo,
				AdminPassword: "twelve chars", SecureCookies: true}},
		{"BusyTimeout", "serve", []string{"--busy-timeout", "250ms"}, map[string]string{"LAZARUS_BUSY_TIMEOUT": "2s"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: 250 * time.Millisecond, LogFormat: "text", LogLevel: slog.LevelInfo}},
		{"BusyTimeoutFromEnvironment", "serve", nil, map[string]string{"LAZARUS_BUSY_TIMEOUT": "2s"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: 2 * time.Second, LogFormat: "text", LogLevel: slog.LevelInfo}},
		{"OpenAPI", "serve", nil, map[string]string{"LAZARUS_API_OPEN": "1"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, OpenAPI: true}},
		{"RestoreWindow", "serve", []string{"--restore-window", "2h"}, map[string]string{"LAZARUS_RESTORE_WINDOW": "72h"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, RestoreWindow: 2 * time.Hour}},
		{"RestoreWindowFromEnvironment", "serve", nil, map[string]string{"LAZARUS_RESTORE_WINDOW": "72h"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, RestoreWindow: 72 * time.Hour}},
		{"MaintenanceEvery", "serve", []string{"--maintenance-every", "10s"}, map[string]string{"LAZARUS_MAINTENANCE_EVERY": "5m"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, MaintenanceEvery: 10 * time.Second}},
		{"MaintenanceEveryFromEnvironment", "serve", nil, map[string]string{"LAZARUS_MAINTENANCE_EVERY": "1h"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, MaintenanceEvery: time.Hour}},
		{"AuditRetentionInDays", "serve", []string{"--audit-retention", "30d"}, map[string]string{"LAZARUS_AUDIT_RETENTION": "5d"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, AuditRetention: 30 * 24 * time.Hour}},
		{"AuditRetentionAsDurationFromEnvironment", "serve", nil, map[string]string{"LAZARUS_AUDIT_RETENTION": "36h"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, AuditRetention: 36 * time.Hour}},
		{"DBWait", "serve", []string{"--db-wait", "90s"}, map[string]string{"LAZARUS_DB_WAIT": "5m"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, DBWait: 90 * time.Second}},
		{"DBWaitFromEnvironment", "serve", nil, map[string]string{"LAZARUS_DB_WAIT": "5m"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, DBWait: 5 * time.Minute}},
		{"PublicURLAndNotifyAllowPrivate", "serve", []string{"--public-url", "https://lazarus.example.com/ops/", "--notify-allow-private"}, map[string]string{"LAZARUS_PUBLIC_URL": "https://other.example"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo,
				PublicURL: "https://lazarus.example.com/ops", NotifyAllowPrivate: true}},
		{"PublicURLFromEnvironment", "serve", nil, map[string]string{"LAZARUS_PUBLIC_URL": "http://10.0.0.5:8080"},
			Config{Addr: "127.0.0.1:8080", DBPath: "./lazarus.db", Sync: db.SyncFull, BusyTimeout: db.DefaultBusyTimeout, LogFormat: "text", LogLevel: slog.LevelInfo, PublicURL: "http://10.0.0.5:8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.want.DBWait == 0 {
				tt.want.DBWait = defaultDBWait
			}
			if tt.want.RestoreWindow == 0 {
				tt.want.RestoreWindow = broker.RestoreWindow // the default
			}
			if tt.want.MaintenanceEvery == 0 {
				tt.want.MaintenanceEvery = broker.DefaultMaintenanceEvery
			}
			if tt.want.AuditRetention == 0 {
				tt.want.AuditRetention = broker.DefaultAuditRetention
			}
			got, err := parseConfig(tt.cmd, tt.args, envOf(tt.env), io.Discard)
			if err != nil {
				t.Fatalf("parseConfig: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseConfigRefusesBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  string
		args []string
		env  map[string]string
		want string
	}{
		{"UnknownSync", "serve", []string{"--sync", "off"}, nil, "sync must be full or normal"},
		{"UnknownSyncFromEnvironment", "serve", nil, map[string]string{"LAZARUS_SYNC": "extra"}, "sync must be full or normal"},
		{"UnknownLogFormat", "serve", []string{"--log-format", "xml"}, nil, "log format"},
		{"UnknownLogLevel", "serve", []string{"--log-level", "loud"}, nil, "log level"},
		{"UnknownFlag", "serve", []string{"--port", "80"}, nil, "flag provided but not defined"},
		{"DemoFlagOnDemo", "demo", []string{"--demo"}, nil, "flag provided but not defined"},
		{"StrayArgument", "serve", []string{"now"}, nil, "unexpected argument"},
		{"EmptyAddr", "serve", []string{"--addr", ""}, nil, "must not be empty"},
		{"BusyTimeoutNotADuration", "serve", []string{"--busy-timeout", "5"}, nil, "busy timeout must be a duration"},
		{"BusyTimeoutTooLong", "serve", nil, map[string]string{"LAZARUS_BUSY_TIMEOUT": "1h"}, "busy timeout must be a duration from 1ms to 1m"},
		{"ShortAdminPassword", "serve", nil, map[string]string{"LAZARUS_ADMIN_PASSWORD": "admin"}, "LAZARUS_ADMIN_PASSWORD: the password must be at least 12"},
		{"CommonAdminPassword", "serve", nil, map[string]string{"LAZARUS_ADMIN_PASSWORD": "changeme1234"}, "LAZARUS_ADMIN_PASSWORD: the password is one of the most common passwords"},
		{"SecureCookiesNotABool", "serve", nil, map[string]string{"LAZARUS_SECURE_COOKIES": "yes please"}, "LAZARUS_SECURE_COOKIES must be true or false"},
		{"OpenAPINotABool", "serve", nil, map[string]string{"LAZARUS_API_OPEN": "maybe"}, "LAZARUS_API_OPEN must be true or false"},
		{"RestoreWindowNotADuration", "serve", []string{"--restore-window", "1 day"}, nil, "restore window must be a duration"},
		{"RestoreWindowTooShort", "serve", nil, map[string]string{"LAZARUS_RESTORE_WINDOW": "1s"}, "restore window must be a duration from 1m"},
		{"MaintenanceEveryTooShort", "serve", []string{"--maintenance-every", "500ms"}, nil, "maintenance interval must be a duration from 1s to 1h"},
		{"MaintenanceEveryTooLong", "serve", nil, map[string]string{"LAZARUS_MAINTENANCE_EVERY": "2h"}, "maintenance interval must be a duration from 1s to 1h"},
		{"MaintenanceEveryNotADuration", "serve", nil, map[string]string{"LAZARUS_MAINTENANCE_EVERY": "often"}, "maintenance interval must be a duration"},
		{"AuditRetentionTooShort", "serve", []string{"--audit-retention", "12h"}, nil, "audit retention must be 0 (for ever)"},
		{"AuditRetentionNoDays", "serve", nil, map[string]string{"LAZARUS_AUDIT_RETENTION": "0d"}, "audit retention must be"},
		{"AuditRetentionNotANumber", "serve", nil, map[string]string{"LAZARUS_AUDIT_RETENTION": "a year"}, "audit retention must be"},
		{"DBWaitTooLong", "serve", []string{"--db-wait", "2h"}, nil, "db wait must be a duration from 0 to 1h"},
		{"DBWaitNotADuration", "serve", nil, map[string]string{"LAZARUS_DB_WAIT": "60"}, "db wait must be a duration"},
		{"AuditRetentionNegative", "serve", []string{"--audit-retention", "-5d"}, nil, "audit retention must be"},
		{"PublicURLNotHTTP", "serve", []string{"--public-url", "ftp://lazarus.example.com"}, nil, "public url must be an http or https URL"},
		{"PublicURLWithoutHost", "serve", nil, map[string]string{"LAZARUS_PUBLIC_URL": "lazarus.example.com"}, "public url must be an http or https URL"},
		{"PublicURLWithAQuery", "serve", []string{"--public-url", "https://l.example/?a=1"}, nil, "public url must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig(tt.cmd, tt.args, envOf(tt.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// An audit retention of 0 keeps the audit for ever (the table above
// defaults a zero).
func TestParseConfigAuditKeptForEver(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--audit-retention", "0"}, nil} {
		env := map[string]string{}
		if args == nil {
			env["LAZARUS_AUDIT_RETENTION"] = "0"
		}
		got, err := parseConfig("serve", args, envOf(env), io.Discard)
		if err != nil || got.AuditRetention != 0 {
			t.Errorf("%v %v: retention %v, %v; want 0 (for ever)", args, env, got.AuditRetention, err)
		}
	}
}

func TestRunPrintsUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		var stdout bytes.Buffer
		if err := run(context.Background(), args, envOf(nil), nil, &stdout, io.Discard); err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if !strings.Contains(stdout.String(), "lazarus serve") || !strings.Contains(stdout.String(), "LAZARUS_DB") {
			t.Errorf("%v printed %q, want the usage", args, stdout.String())
		}
	}
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"serve", "--help"}, envOf(nil), nil, io.Discard, &stderr); err != nil {
		t.Errorf("serve --help: %v", err)
	}
	if !strings.Contains(stderr.String(), "-sync") {
		t.Errorf("serve --help printed %q, want the flags", stderr.String())
	}
	for _, args := range [][]string{nil, {"launch"}, {"serve", "--bogus"}, {"user"}, {"user", "remove"}, {"token", "create"}, {"user", "add", "x"}} {
		err := run(context.Background(), args, envOf(nil), nil, io.Discard, io.Discard)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%v: got %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
		}
	}
}

// server is a serve running for a test on 127.0.0.1:0 with a temp database.
type server struct {
	t      *testing.T
	url    string
	db     string
	token  string // the admin token: sent by do when its token is ""
	stderr *syncBuffer
	logs   *syncBuffer // what serve logs (text)
	stop   context.CancelFunc
	done   chan error
}

// syncBuffer is a buffer that a server writes while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer serves cfg on a free port with a temp database (cfg.DBPath
// when set); cheap password hashes.
func startServer(t *testing.T, cfg Config) *server {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	if cfg.DBPath == "" {
		cfg.DBPath = filepath.Join(t.TempDir(), "lazarus.db")
	}
	if cfg.Sync == "" {
		cfg.Sync = db.SyncNormal
	}
	cfg.bcryptCost = bcrypt.MinCost
	ctx, stop := context.WithCancel(context.Background())
	s := &server{t: t, db: cfg.DBPath, token: cfg.AdminToken, stderr: &syncBuffer{}, logs: &syncBuffer{}, stop: stop, done: make(chan error, 1)}
	addr := make(chan net.Addr, 1)
	go func() {
		s.done <- serve(ctx, cfg, slog.New(slog.NewTextHandler(s.logs, nil)), s.stderr, func(a net.Addr) { addr <- a })
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a.String()
	case err := <-s.done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not listen within 10s")
	}
	t.Cleanup(func() { s.shutdown() })
	return s
}

// shutdown stops the server as SIGTERM does and waits for serve to return.
func (s *server) shutdown() error {
	s.t.Helper()
	s.stop()
	select {
	case err := <-s.done:
		s.done <- nil // later calls see a clean stop
		return err
	case <-time.After(15 * time.Second):
		s.t.Fatal("serve did not return within 15s of the stop signal")
		return nil
	}
}

func (s *server) do(method, path, token string, body any) (*http.Response, []byte) {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token == "" {
		token = s.token
	}
	if token != "-" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, b
}

func TestServeKeepsWhatWasPushedAndStopsGracefully(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{Sync: db.SyncFull, AdminToken: "s3cret-token"})

	if resp, body := s.do(http.MethodGet, "/health", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /health: %d %s", resp.StatusCode, body)
	}
	push := map[string]any{"items": []map[string]any{{"queue": "orders", "partition": "acme", "payload": map[string]any{"n": 1}, "transactionId": "t-1"}}}
	if resp, body := s.do(http.MethodPost, "/api/v1/push", "", push); resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/push: %d %s", resp.StatusCode, body)
	}

	// A long-poll on an empty queue is in flight when the stop comes: it
	// must be answered at once, not after its 5 minutes.
	type result struct {
		status int
		err    error
	}
	if resp, body := s.do(http.MethodPost, "/api/v1/configure", "", map[string]any{"queue": "empty", "options": map[string]any{}}); resp.StatusCode >= 300 {
		t.Fatalf("POST /api/v1/configure: %d %s", resp.StatusCode, body)
	}
	polled := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/api/v1/pop/queue/empty?wait=true&timeout=300000&consumerGroup=waiter", nil)
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- result{err: err}
			return
		}
		resp.Body.Close()
		polled <- result{status: resp.StatusCode}
	}()
	// The group shows in the queue once the pop has looked and is waiting.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var q struct {
			ConsumerGroups []json.RawMessage `json:"consumerGroups"`
		}
		resp, body := s.do(http.MethodGet, "/api/v1/resources/queues/empty", "", nil)
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &q) != nil {
			t.Fatalf("GET /api/v1/resources/queues/empty: %d %s", resp.StatusCode, body)
		}
		if len(q.ConsumerGroups) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long-poll did not start waiting in 15 s")
		}
	}

	start := time.Now()
	if err := s.shutdown(); err != nil {
		t.Fatalf("serve returned %v, want nil after a stop", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("shutdown took %s with a long-poll in flight, want it released at once", took)
	}
	select {
	case r := <-polled:
		if r.err != nil || r.status >= 500 {
			t.Errorf("the long-poll in flight got (%d, %v), want an answer", r.status, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the long-poll in flight was not answered")
	}
	if _, err := http.Get(s.url + "/health"); err == nil {
		t.Error("the server still accepts connections after shutdown")
	}

	// The database was closed cleanly and holds the push.
	d, err := db.Open(context.Background(), s.db, db.SyncFull)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer d.Close()
	q, err := broker.New(broker.Config{Store: d}).Queue(context.Background(), "orders")
	if err != nil {
		t.Fatalf("queue after restart: %v", err)
	}
	if len(q.Partitions) != 1 || q.Partitions[0].Name != "acme" {
		t.Errorf("partitions after restart: %+v", q.Partitions)
	}
}

func TestServePassesTheAdminToken(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{AdminToken: "s3cret-token"})
	if resp, body := s.do(http.MethodGet, "/api/v1/resources/queues", "-", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without token: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := s.do(http.MethodGet, "/api/v1/resources/queues", "wrong", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := s.do(http.MethodGet, "/api/v1/resources/queues", "s3cret-token", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("with the token: %d %s, want 200", resp.StatusCode, body)
	}
	if resp, body := s.do(http.MethodGet, "/health", "-", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /health without token: %d %s, want 200", resp.StatusCode, body)
	}
}

func TestServeDemoShowsDeadLettersWithinSeconds(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{Demo: true, AdminToken: "s3cret-token"})
	var page struct {
		Messages []struct {
			Queue, ConsumerGroup, ErrorMessage string
		} `json:"messages"`
		Total int `json:"total"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for page.Total == 0 && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		resp, body := s.do(http.MethodGet, "/api/v1/dlq", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/v1/dlq: %d %s", resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("GET /api/v1/dlq: %v in %s", err, body)
		}
	}
	if page.Total == 0 || len(page.Messages) == 0 || page.Messages[0].ErrorMessage == "" {
		t.Fatalf("no dead letter with an error after 20s of demo traffic: %+v", page)
	}
	if err := s.shutdown(); err != nil {
		t.Fatalf("serve with demo returned %v after a stop", err)
	}
}

// A first start that cannot listen (the port is taken) creates no admin:
// the next start creates it and shows its password, once.
func TestAFirstStartOnATakenPortKeepsTheFirstPassword(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	path := filepath.Join(t.TempDir(), "lazarus.db")
	cfg := Config{Addr: taken.Addr().String(), DBPath: path, Sync: db.SyncNormal, bcryptCost: bcrypt.MinCost}
	var stderr syncBuffer
	err = serve(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), &stderr, nil)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("serve on a taken port: %v, want a listen error", err)
	}
	if strings.Contains(stderr.String(), "password") {
		t.Fatalf("a start that could not listen showed a password:\n%s", stderr.String())
	}
	s := startServer(t, Config{DBPath: path})
	if !strings.Contains(s.stderr.String(), "FIRST START") {
		t.Errorf("the next start did not show the first password:\n%s", s.stderr.String())
	}
}
