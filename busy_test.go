package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/db"
)

// lockDatabase takes the write lock of the SQLite file at path from a
// connection of its own, as another process would (a backup, the sqlite3
// shell), until the returned function is called.
func lockDatabase(t *testing.T, path string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("BEGIN IMMEDIATE: %v", err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Errorf("ROLLBACK: %v", err)
		}
		conn.Close()
		other.Close()
	}
	t.Cleanup(release)
	return release
}

// While another process holds the database's write lock, whatever must
// write answers 503 with Retry-After within about the busy timeout, on the
// API (JSON) and on the dashboard (an error page, or the flash for htmx),
// and changes nothing; whatever only reads keeps working.
func TestBusyDatabaseAnswers503AndReadsGoOn(t *testing.T) {
	t.Parallel()
	const busy = 2 * time.Second
	s := startServer(t, Config{Sync: db.SyncFull, BusyTimeout: busy, AdminToken: "s3cret-token", AdminPassword: "correct horse battery"})

	// A dead letter to replay, and a logged-in dashboard user.
	push := map[string]any{"items": []map[string]any{{"queue": "q", "transactionId": "t-1", "payload": map[string]any{"n": 1}}}}
	if resp, body := s.do(http.MethodPost, "/api/v1/push", "", push); resp.StatusCode != http.StatusCreated {
		t.Fatalf("push: %d %s", resp.StatusCode, body)
	}
	resp, body := s.do(http.MethodGet, "/api/v1/pop/queue/q?consumerGroup=g", "", nil)
	var popped struct {
		Messages []struct{ ID, TransactionID, PartitionID, LeaseID string }
	}
	if err := json.Unmarshal(body, &popped); err != nil || resp.StatusCode != http.StatusOK || len(popped.Messages) != 1 {
		t.Fatalf("pop: %d %s", resp.StatusCode, body)
	}
	m := popped.Messages[0]
	ack := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": "boom", "consumerGroup": "g"}
	if resp, body := s.do(http.MethodPost, "/api/v1/ack", "", ack); resp.StatusCode != http.StatusOK {
		t.Fatalf("ack: %d %s", resp.StatusCode, body)
	}
	browser := loginDashboard(t, s.url, "admin", "correct horse battery")

	release := lockDatabase(t, s.db)
	writes := []struct {
		name, method, path string
		body               any
	}{
		{"Push", http.MethodPost, "/api/v1/push", push},
		{"Pop", http.MethodGet, "/api/v1/pop/queue/q?consumerGroup=other", nil},
		{"Replay", http.MethodPost, "/api/v1/dlq/" + m.ID + "/replay", nil},
		{"BulkReplay", http.MethodPost, "/api/v1/dlq/replay", map[string]any{"filter": map[string]any{"queue": "q"}}},
		{"Configure", http.MethodPost, "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"retryLimit": 1}}},
	}
	for _, w := range writes {
		start := time.Now()
		resp, body := s.do(w.method, w.path, "", w.body)
		took := time.Since(start)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s while locked: %d (Retry-After %q) %s, want 503 with Retry-After: 1", w.name, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		var e struct{ Error string }
		if json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, "busy") {
			t.Errorf("%s while locked: body %s, want a JSON error saying the database is busy", w.name, body)
		}
		if took > busy*3/2 { // a second wait would be 2*busy; the margin is for a loaded machine
			t.Errorf("%s while locked answered after %s, want about the busy timeout %s", w.name, took, busy)
		}
	}

	reads := []string{"/health", "/api/v1/dlq?queue=q", "/api/v1/resources/queues", "/api/v1/resources/queues/q", "/api/v1/dlq/" + m.ID}
	for _, path := range reads {
		start := time.Now()
		if resp, body := s.do(http.MethodGet, path, "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s while locked: %d %s, want 200", path, resp.StatusCode, body)
		}
		if took := time.Since(start); took >= busy {
			t.Errorf("GET %s while locked took %s: it waited for the lock", path, took)
		}
	}
	for _, path := range []string{"/", "/queues/q", "/queues/q/dead-letters", "/queues/q/dead-letters/" + m.ID + "?group=g", "/audit"} {
		if resp, body := browser.do(http.MethodGet, path, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("page %s while locked: %d %.300s, want 200", path, resp.StatusCode, body)
		}
	}
	replayPage := "/queues/q/dead-letters/" + m.ID + "/replay"
	resp, body = browser.do(http.MethodPost, replayPage, url.Values{}, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "The database is busy") {
		t.Errorf("dashboard replay while locked: %d (Retry-After %q) %.500s, want the 503 page", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	resp, body = browser.do(http.MethodPost, replayPage, url.Values{}, map[string]string{"HX-Request": "true"})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("HX-Retarget") != "#flash" || !strings.Contains(string(body), "The database is busy") {
		t.Errorf("htmx replay while locked: %d (HX-Retarget %q) %.500s, want the 503 flash", resp.StatusCode, resp.Header.Get("HX-Retarget"), body)
	}

	// Once the lock is gone: nothing of the refused requests happened, and
	// the same requests go through.
	release()
	resp, body = s.do(http.MethodGet, "/api/v1/resources/queues/q", "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"retryLimit":3`) {
		t.Errorf("queue after the lock: %d %s, want the options unchanged", resp.StatusCode, body)
	}
	if resp, body := s.do(http.MethodGet, "/api/v1/dlq?queue=q", "", nil); !strings.Contains(string(body), `"total":1`) {
		t.Errorf("dead letters after the lock: %d %s, want the one still there", resp.StatusCode, body)
	}
	if resp, body := s.do(http.MethodPost, "/api/v1/dlq/"+m.ID+"/replay", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("replay after the lock: %d %s", resp.StatusCode, body)
	}
	if resp, body := s.do(http.MethodPost, "/api/v1/push", "", push); resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"duplicate"`) {
		t.Errorf("push after the lock: %d %s, want 201 duplicate (the refused push stored nothing new)", resp.StatusCode, body)
	}
}

// dashboardClient is a dashboard client with a cookie jar.
type dashboardClient struct {
	t      *testing.T
	base   string
	client *http.Client
}

// loginDashboard signs in to the dashboard as a browser would (a same-origin form
// post) and returns the logged-in client.
func loginDashboard(t *testing.T, base, name, password string) *dashboardClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &dashboardClient{t: t, base: base, client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	resp, body := b.do(http.MethodPost, "/login", url.Values{"name": {name}, "password": {password}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d %.300s", resp.StatusCode, body)
	}
	return b
}

// do sends a same-origin request (a form when form is not nil).
func (b *dashboardClient) do(method, path string, form url.Values, header map[string]string) (*http.Response, []byte) {
	b.t.Helper()
	var r io.Reader
	if form != nil {
		r = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, r)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp, body
}
