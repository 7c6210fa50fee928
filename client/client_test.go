package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/client"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/web"
)

const adminToken = "client-test-admin-token"

// bundle is a real Lazarus server (web over a broker over a SQLite file,
// with its job runner) and a client of it.
type bundle struct {
	t      *testing.T
	url    string
	broker *broker.Broker
	admin  *client.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "l.db"), db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	b := broker.New(broker.Config{Store: d})
	t.Cleanup(b.Close)
	ws := web.New(web.Config{Broker: b, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), HealthFunc: d.Ping, AdminToken: adminToken, BcryptCost: bcrypt.MinCost})
	srv := httptest.NewServer(ws.Handler())
	t.Cleanup(srv.Close)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.RunJobs(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	c, err := client.New(srv.URL, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{t: t, url: srv.URL, broker: b, admin: c}
}

// post sends a raw API request as the admin and fails the test on an
// answer that is not 2xx.
func (s *bundle) post(method, path string, body any) []byte {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+"/api/v1"+path, r)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
	return out
}

// deadLetters files n dead letters in queue, consumer group group, each
// failed with errText.
func (s *bundle) deadLetters(queue, group, errText string, n int) {
	s.t.Helper()
	var items []map[string]any
	for i := range n {
		items = append(items, map[string]any{"queue": queue, "partition": "p", "payload": map[string]any{"n": i}, "transactionId": fmt.Sprintf("%s-%d", errText, i)})
	}
	s.post(http.MethodPost, "/push", map[string]any{"items": items})
	var popped struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
			LeaseID       string `json:"leaseId"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(s.post(http.MethodGet, fmt.Sprintf("/pop/queue/%s?batch=%d&consumerGroup=%s", queue, n, group), nil), &popped); err != nil || len(popped.Messages) != n {
		s.t.Fatalf("pop: %v %+v", err, popped)
	}
	var acks []map[string]any
	for _, m := range popped.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": errText})
	}
	s.post(http.MethodPost, "/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks})
}

// viewer makes a viewer's API token and a client with it.
func (s *bundle) viewer() *client.Client {
	s.t.Helper()
	ctx := context.Background()
	u, err := s.broker.CreateUser(ctx, "vera", broker.RoleViewer, "x", "test")
	if err != nil {
		s.t.Fatal(err)
	}
	secret, _, err := s.broker.CreateToken(ctx, u.ID, "ro", "test")
	if err != nil {
		s.t.Fatal(err)
	}
	c, err := client.New(s.url, secret)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

func TestNewRefusesABadServer(t *testing.T) {
	t.Parallel()
	for _, server := range []string{"localhost:8080", "ftp://x", "http://", "http://h/?a=1", "::"} {
		if _, err := client.New(server, ""); err == nil {
			t.Errorf("New(%q) accepted", server)
		}
	}
	c, err := client.New("", "")
	if err != nil || c.Server() != client.DefaultServer {
		t.Fatalf("New(\"\"): %v %v", c, err)
	}
	c, err = client.New("https://ops.example.com/lazarus/", "")
	if err != nil || c.Server() != "https://ops.example.com/lazarus" {
		t.Fatalf("a path prefix: %v %v", c, err)
	}
}

func TestDeadLettersListShowReplayDelete(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	s.deadLetters("orders", "billing", "card declined", 3)
	s.deadLetters("emails", "sender", "smtp down", 1)

	l, err := s.admin.DeadLetters(ctx, client.Filter{Queue: "orders"}, client.PageRequest{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 3 || len(l.Messages) != 2 || l.Messages[0].Queue != "orders" || l.Messages[0].ConsumerGroup != "billing" ||
		*l.Messages[0].ErrorMessage != "card declined" || l.Messages[0].FailedAt.IsZero() || l.Pagination.Limit != 2 {
		t.Fatalf("list: %+v", l)
	}
	var raw map[string]any
	if err := json.Unmarshal(l.Raw, &raw); err != nil || raw["total"] != float64(3) {
		t.Fatalf("Raw: %s", l.Raw)
	}
	if l, err = s.admin.DeadLetters(ctx, client.Filter{Error: "smtp"}, client.PageRequest{}); err != nil || l.Total != 1 || l.Messages[0].Queue != "emails" {
		t.Fatalf("error filter: %+v %v", l, err)
	}

	id := l.Messages[0].ID
	found, err := s.admin.Search(ctx, id, 0)
	if err != nil || len(found.Matches) != 1 || !found.Matches[0].DeadLetter || found.Matches[0].ID != id || *found.Matches[0].ConsumerGroup != "sender" {
		t.Fatalf("search: %+v %v", found, err)
	}
	st, err := s.admin.QueueStatus(ctx)
	if err != nil || len(st.Queues) != 2 {
		t.Fatalf("status: %+v %v", st, err)
	}
	for _, q := range st.Queues {
		if want := map[string]int64{"orders": 3, "emails": 1}[q.Name]; q.DeadLetters != want || q.Messages.Total != want {
			t.Errorf("status of %s: %+v", q.Name, q)
		}
	}
	d, err := s.admin.DeadLetter(ctx, id, "")
	if err != nil || d.ID != id || d.ConsumerGroup != "sender" || string(d.Data) != `{"n":0}` || d.Replays.MaxReplays == 0 {
		t.Fatalf("show: %+v %v", d, err)
	}
	r, err := s.admin.Replay(ctx, id, client.ReplayOptions{})
	if err != nil || r.Result != "moved" || r.DLQID != id || r.Queue != "emails" {
		t.Fatalf("replay: %+v %v", r, err)
	}
	// Replayed again: 404, saying what became of it.
	_, err = s.admin.Replay(ctx, id, client.ReplayOptions{})
	var ae *client.Error
	if client.StatusOf(err) != http.StatusNotFound || !errors.As(err, &ae) || !strings.Contains(string(ae.Body), `"gone"`) || ae.Message == "" {
		t.Fatalf("replay twice: %v", err)
	}
	if _, err := s.admin.DeadLetter(ctx, id, ""); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("show a replayed one: %v", err)
	}

	l, _ = s.admin.DeadLetters(ctx, client.Filter{Queue: "orders"}, client.PageRequest{})
	del, err := s.admin.Delete(ctx, l.Messages[0].ID, "billing")
	if err != nil || del.Deleted != 1 || strings.TrimSpace(string(del.Raw)) != `{"deleted":1}` {
		t.Fatalf("delete: %+v %v", del, err)
	}

	var buf bytes.Buffer
	if _, err := s.admin.Export(ctx, client.Filter{Queue: "orders"}, "ndjson", &buf); err != nil || strings.Count(buf.String(), "\n") != 2 {
		t.Fatalf("export: %v %q", err, buf.String())
	}
	if _, err := s.admin.Export(ctx, client.Filter{Queue: "orders"}, "xml", &buf); client.StatusOf(err) != http.StatusBadRequest {
		t.Fatalf("export as xml: %v", err)
	}
}

func TestBulkDryRunThenJob(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	s.deadLetters("orders", "billing", "card declined", 4)

	req := client.BulkRequest{Filter: &client.Filter{Queue: "orders"}}
	dry, err := s.admin.DryRun(ctx, client.BulkReplay, req)
	if err != nil || dry.Matching != 4 || dry.Messages != 4 || dry.Bound.FailedAt == "" || dry.Bound.ID == 0 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if l, _ := s.admin.DeadLetters(ctx, client.Filter{Queue: "orders"}, client.PageRequest{}); l.Total != 4 {
		t.Fatalf("a dry run changed something: %d left", l.Total)
	}
	// A dead letter filed after the dry run is above its bound: untouched.
	s.deadLetters("orders", "billing", "late", 1)
	req.Bound = &dry.Bound
	a, err := s.admin.StartBulk(ctx, client.BulkReplay, req)
	if err != nil || a.Job.ID == 0 || a.Job.Kind != "replay" || a.Job.Scope.Bound == nil || *a.Job.Scope.Bound != dry.Bound {
		t.Fatalf("start: %+v %v", a, err)
	}
	j, err := s.admin.WaitJob(ctx, a.Job.ID, 10*time.Millisecond, nil)
	if err != nil || j.Job.State != client.JobDone || j.Job.Done != 4 || j.Job.ArrivedSince == nil || *j.Job.ArrivedSince != 1 {
		t.Fatalf("job: %+v %v", j, err)
	}
	if l, _ := s.admin.DeadLetters(ctx, client.Filter{Queue: "orders"}, client.PageRequest{}); l.Total != 1 || *l.Messages[0].ErrorMessage != "late" {
		t.Fatalf("after the job: %+v", l)
	}
	jobs, err := s.admin.Jobs(ctx, client.JobFilter{Kind: "replay"})
	if err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != a.Job.ID {
		t.Fatalf("jobs: %+v %v", jobs, err)
	}
	if _, err := s.admin.Jobs(ctx, client.JobFilter{State: "sleeping"}); client.StatusOf(err) != http.StatusBadRequest {
		t.Fatalf("a bad state: %v", err)
	}
	if _, err := s.admin.Job(ctx, 999); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("no such job: %v", err)
	}
	if _, err := s.admin.CancelJob(ctx, a.Job.ID); client.StatusOf(err) != http.StatusConflict {
		t.Fatalf("cancel a finished job: %v", err)
	}

	// Without a queue and without all, the server refuses: 400.
	if _, err := s.admin.DryRun(ctx, client.BulkDelete, client.BulkRequest{Filter: &client.Filter{}}); client.StatusOf(err) != http.StatusBadRequest {
		t.Fatalf("no queue: %v", err)
	}
	dry, err = s.admin.DryRun(ctx, client.BulkDelete, client.BulkRequest{Filter: &client.Filter{}, All: true})
	if err != nil || dry.Matching != 1 {
		t.Fatalf("all: %+v %v", dry, err)
	}
}

func TestErrorGroupsAndHolds(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	s.deadLetters("orders", "billing", "GET /v1/cards/42: timeout", 2)

	gs, err := s.admin.ErrorGroups(ctx, client.ErrorGroupFilter{Queue: "orders"})
	if err != nil || len(gs.ErrorGroups) != 1 || gs.ErrorGroups[0].State != client.StateOpen || gs.ErrorGroups[0].DeadLetters != 2 {
		t.Fatalf("groups: %+v %v", gs, err)
	}
	fp := gs.ErrorGroups[0].Fingerprint
	if !strings.Contains(fp, "/") {
		t.Fatalf("the fingerprint %q has no slash: the test of its escaping tests nothing", fp)
	}
	g, err := s.admin.ErrorGroup(ctx, fp, "orders", "")
	if err != nil || g.Fingerprint != fp || g.ConsumerGroup != "billing" {
		t.Fatalf("group: %+v %v", g, err)
	}
	owner := "ana"
	after, err := s.admin.SetErrorGroupState(ctx, fp, client.StateChange{Queue: "orders", State: client.StateAcknowledged, Owner: &owner})
	if err != nil || len(after.ErrorGroups) != 1 || after.ErrorGroups[0].State != client.StateAcknowledged || *after.ErrorGroups[0].Owner != "ana" {
		t.Fatalf("set: %+v %v", after, err)
	}
	if _, err := s.admin.SetErrorGroupState(ctx, fp, client.StateChange{Queue: "orders", State: "closed"}); client.StatusOf(err) != http.StatusBadRequest {
		t.Fatalf("a bad state: %v", err)
	}
	if _, err := s.admin.ErrorGroup(ctx, "no such", "orders", ""); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("no such group: %v", err)
	}

	h, err := s.admin.Hold(ctx, client.HoldRequest{Queue: "orders", ConsumerGroup: "billing", Reason: "card API down"})
	if err != nil || h.ID == 0 || h.Existing || *h.ConsumerGroup != "billing" || h.By == "" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	if again, err := s.admin.Hold(ctx, client.HoldRequest{Queue: "orders", ConsumerGroup: "billing", Reason: "again"}); err != nil || !again.Existing || again.ID != h.ID {
		t.Fatalf("hold again: %+v %v", again, err)
	}
	hs, err := s.admin.Holds(ctx, "orders", "")
	if err != nil || len(hs.Holds) != 1 || hs.Holds[0].Reason != "card API down" {
		t.Fatalf("holds: %+v %v", hs, err)
	}

	// A viewer reads, and is refused a write: 403 with the API's text.
	v := s.viewer()
	if hs, err := v.Holds(ctx, "", ""); err != nil || len(hs.Holds) != 1 {
		t.Fatalf("viewer reads holds: %+v %v", hs, err)
	}
	_, err = v.Release(ctx, h.ID)
	if client.StatusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("viewer releases: %v", err)
	}
	r, err := s.admin.Release(ctx, h.ID)
	if err != nil || !r.Released || r.Hold.ID != h.ID {
		t.Fatalf("release: %+v %v", r, err)
	}
	if _, err := s.admin.Release(ctx, h.ID); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("release twice: %v", err)
	}
	bad, _ := client.New(s.url, "wrong")
	if _, err := bad.Holds(ctx, "", ""); client.StatusOf(err) != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %v", err)
	}
}
