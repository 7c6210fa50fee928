package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// A push whose COMMIT went to PostgreSQL but whose answer never came
// back (the connection cut right after it) is answered 503 with
// Retry-After, saying the outcome is unknown and that the same push may
// be sent again; sent again, it leaves exactly one message.
func TestAPushWhoseCommitWasCutIsAnswered503AndSafeToSendAgain(t *testing.T) {
	t.Parallel()
	cutter := pgtest.CutCommits(t, pgtest.Database(t, "lazarus", db.Prepare))
	s := startServer(t, Config{DBPath: cutter.URL, AdminToken: "s3cret-token", AdminPassword: "correct horse battery"})
	push := map[string]any{"items": []map[string]any{{"queue": "q", "partition": "p", "transactionId": "t-1", "payload": map[string]any{"n": 1}}}}

	cutter.Arm("INSERT INTO messages")
	resp, body := s.do(http.MethodPost, "/api/v1/push", "", push)
	if cutter.Cuts() != 1 {
		t.Fatalf("the relay cut %d connections, want 1 (push: %d %s)", cutter.Cuts(), resp.StatusCode, body)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("push whose commit was cut: %d, Retry-After %q, %s; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	var e struct{ Error string }
	if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e.Error, "outcome is unknown") || !strings.Contains(e.Error, "same transactionIds is safe") {
		t.Fatalf("error %q (%v): want it to say the outcome is unknown and a push sent again is safe", e.Error, err)
	}

	if resp, body := s.do(http.MethodPost, "/api/v1/push", "", push); resp.StatusCode != http.StatusCreated {
		t.Fatalf("the same push sent again: %d %s", resp.StatusCode, body)
	}
	resp, body = s.do(http.MethodGet, "/api/v1/pop/queue/q?batch=10", "", nil)
	var pop struct {
		Messages []struct{ TransactionID string }
	}
	if err := json.Unmarshal(body, &pop); err != nil || len(pop.Messages) != 1 || pop.Messages[0].TransactionID != "t-1" {
		t.Fatalf("pop: %d %s, want t-1 once", resp.StatusCode, body)
	}
}

// A push whose connection to PostgreSQL broke in the middle of its
// transaction, before its COMMIT (PostgreSQL crashed, the network cut
// it, the server ended a paused process's session), runs again on
// another connection (the server rolled the first back): answered 201,
// one message. When every try breaks, it is answered 503 saying nothing
// was changed, never 500; sent again, it leaves exactly one message.
// The fault campaign (faults/) found these 500s when PostgreSQL crashed
// under load. A push to a partition its process knows is one round
// trip, its BEGIN with its COMMIT (the test above); one that makes its
// partition sends that insert, with its BEGIN, before: cut there.
func TestAPushWhoseConnectionBrokeBeforeItsCommitRunsAgainOrIsAnswered503(t *testing.T) {
	t.Parallel()
	cutter := pgtest.CutCommits(t, pgtest.Database(t, "lazarus", db.Prepare))
	s := startServer(t, Config{DBPath: cutter.URL, AdminToken: "s3cret-token", AdminPassword: "correct horse battery"})
	push := map[string]any{"items": []map[string]any{{"queue": "q", "partition": "p", "transactionId": "t-1", "payload": map[string]any{"n": 1}}}}
	// The queue first, so that the cut push's first round trip is the
	// insert of its partition.
	if resp, body := s.do(http.MethodPost, "/api/v1/configure", "", map[string]any{"queue": "q", "options": map[string]any{}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("configure: %d %s", resp.StatusCode, body)
	}

	cutter.ArmBefore("INSERT INTO partitions")
	resp, body := s.do(http.MethodPost, "/api/v1/push", "", push)
	if cutter.Cuts() != 1 || resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"queued"`) {
		t.Fatalf("push cut once before its commit: %d cuts, %d %s; want it run again on another connection: 201 queued", cutter.Cuts(), resp.StatusCode, body)
	}
	resp, body = s.do(http.MethodGet, "/api/v1/pop/queue/q?batch=10&autoAck=true", "", nil)
	var once struct {
		Messages []struct{ TransactionID string }
	}
	if err := json.Unmarshal(body, &once); err != nil || len(once.Messages) != 1 || once.Messages[0].TransactionID != "t-1" {
		t.Fatalf("pop after the push run again: %d %s, want t-1 once", resp.StatusCode, body)
	}

	push = map[string]any{"items": []map[string]any{{"queue": "q", "partition": "p2", "transactionId": "t-2", "payload": map[string]any{"n": 2}}}}
	cutter.ArmBeforeTimes("INSERT INTO partitions", 3) // the try and the two tries again (lostRetries)
	resp, body = s.do(http.MethodPost, "/api/v1/push", "", push)
	if cutter.Cuts() != 4 {
		t.Fatalf("the relay cut %d connections, want 4 (push: %d %s)", cutter.Cuts(), resp.StatusCode, body)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("push whose connection broke before its commit: %d, Retry-After %q, %s; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	var e struct{ Error string }
	if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e.Error, "nothing was changed") {
		t.Fatalf("error %q (%v): want it to say nothing was changed", e.Error, err)
	}

	if resp, body := s.do(http.MethodPost, "/api/v1/push", "", push); resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"queued"`) {
		t.Fatalf("the same push sent again: %d %s, want 201 queued (the cut one made nothing)", resp.StatusCode, body)
	}
	resp, body = s.do(http.MethodGet, "/api/v1/pop/queue/q?batch=10", "", nil)
	var pop struct {
		Messages []struct{ TransactionID string }
	}
	if err := json.Unmarshal(body, &pop); err != nil || len(pop.Messages) != 1 || pop.Messages[0].TransactionID != "t-2" {
		t.Fatalf("pop: %d %s, want t-2 once", resp.StatusCode, body)
	}
}

// A server whose connection to PostgreSQL breaks while it starts (the
// server crashed or restarted, the network cut it), after its schema is
// up to date and before it listens, waits for the database as it does
// at Open (--db-wait) rather than ending: the fault campaign (faults/)
// found a process restarted while PostgreSQL crashed ending with "admin
// user: unavailable".
func TestAServerWhoseDatabaseGoesAwayWhileItStartsWaitsForIt(t *testing.T) {
	t.Parallel()
	cutter := pgtest.CutCommits(t, pgtest.Database(t, "lazarus", db.Prepare))
	cutter.ArmBeforeTimes("FROM users WHERE name", 2) // ensureAdmin's read of the admin
	s := startServer(t, Config{DBPath: cutter.URL, DBWait: time.Minute, AdminToken: "s3cret-token", AdminPassword: "correct horse battery"})
	if cutter.Cuts() != 2 {
		t.Fatalf("the relay cut %d connections, want 2", cutter.Cuts())
	}
	if resp, body := s.do(http.MethodGet, "/health", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(s.logs.String(), "the database went away during the start") {
		t.Fatalf("no try again logged:\n%s", s.logs)
	}
}
