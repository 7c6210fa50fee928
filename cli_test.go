package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// The client commands run through run() against a real server (serve on
// 127.0.0.1:0 over a SQLite file), as a user runs them.

const cliToken = "cli-test-admin-token"

// cliServer is a server for the client commands' tests, and the
// environment that points them at it with the admin's token.
type cliServer struct {
	*server
	env map[string]string
}

func startCLIServer(t *testing.T) *cliServer {
	t.Helper()
	s := startServer(t, Config{AdminToken: cliToken})
	return &cliServer{server: s, env: map[string]string{"LAZARUS_SERVER": s.url, "LAZARUS_TOKEN": cliToken}}
}

// result is what a command did: its output, its error and exit status.
type result struct {
	stdout, stderr string
	err            error
	code           int
}

// lz runs `lazarus args...` with env (the server's, changed by edit)
// and standard input stdin.
func (s *cliServer) lz(stdin io.Reader, edit map[string]string, args ...string) result {
	s.t.Helper()
	env := map[string]string{}
	for k, v := range s.env {
		env[k] = v
	}
	for k, v := range edit {
		env[k] = v
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, args, envOf(env), stdin, &stdout, &stderr)
	r := result{stdout: stdout.String(), stderr: stderr.String(), err: err}
	if err != nil {
		r.code = exitCode(err)
	}
	return r
}

// ok runs a command that must succeed.
func (s *cliServer) ok(args ...string) result {
	s.t.Helper()
	r := s.lz(nil, nil, args...)
	if r.err != nil {
		s.t.Fatalf("lazarus %s: %v (exit %d)\n%s%s", strings.Join(args, " "), r.err, r.code, r.stdout, r.stderr)
	}
	return r
}

// fails runs a command that must fail with exit status code and an
// error that says want.
func (s *cliServer) fails(code int, want string, edit map[string]string, args ...string) result {
	s.t.Helper()
	r := s.lz(nil, edit, args...)
	if r.err == nil || r.code != code || !strings.Contains(r.err.Error(), want) {
		s.t.Fatalf("lazarus %s: %v (exit %d), want exit %d saying %q\n%s", strings.Join(args, " "), r.err, r.code, code, want, r.stdout)
	}
	return r
}

// api sends a request as the admin and fails the test on an answer that
// is not 2xx.
func (s *cliServer) api(method, path string, body any) []byte {
	s.t.Helper()
	resp, b := s.do(method, path, cliToken, body)
	if resp.StatusCode/100 != 2 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}

// deadLetters files n dead letters in queue's partition named after
// consumer group group (so that another group's are other messages) for
// group, failed with errText, and returns their message ids.
func (s *cliServer) deadLetters(queue, group, errText string, n int) []string {
	s.t.Helper()
	var items []map[string]any
	for i := range n {
		items = append(items, map[string]any{"queue": queue, "partition": group, "payload": map[string]any{"n": i, "tier": "gold"},
			"transactionId": fmt.Sprintf("%s-%s-%d", group, errText, i)})
	}
	s.api(http.MethodPost, "/api/v1/push", map[string]any{"items": items})
	var popped struct {
		Messages []struct {
			ID            string `json:"id"`
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
			LeaseID       string `json:"leaseId"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(s.api(http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?batch=%d&consumerGroup=%s", queue, group, n, group), nil), &popped); err != nil || len(popped.Messages) != n {
		s.t.Fatalf("pop: %v %+v", err, popped)
	}
	var acks []map[string]any
	var ids []string
	for _, m := range popped.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": errText})
		ids = append(ids, m.ID)
	}
	s.api(http.MethodPost, "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks})
	return ids
}

// total is how many dead letters the list has with query.
func (s *cliServer) total(query string) int {
	s.t.Helper()
	var l struct {
		Total int `json:"total"`
	}
	if err := json.Unmarshal(s.api(http.MethodGet, "/api/v1/dlq?"+query, nil), &l); err != nil {
		s.t.Fatal(err)
	}
	return l.Total
}

// viewerToken makes a viewer and an API token for it with the account
// commands, and returns the token.
func (s *cliServer) viewerToken() string {
	s.t.Helper()
	env := envOf(map[string]string{"LAZARUS_DB": s.db})
	if err := run(context.Background(), []string{"user", "add", "vera", "--role", "viewer", "--password-stdin"}, env, strings.NewReader("a long enough password\n"), io.Discard, io.Discard); err != nil {
		s.t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "create", "--user", "vera", "--name", "ro"}, env, nil, &out, io.Discard); err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}

// keys are the sorted top-level field names of a JSON object.
func keys(t *testing.T, s string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, s)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestCLIDeadLetters(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	orders := s.deadLetters("orders", "billing", "card declined", 3)
	s.deadLetters("orders", "shipping", "address \x1b[31mred\x1b[0m", 1)
	emails := s.deadLetters("emails", "sender", "smtp down", 1)

	t.Run("ListTable", func(t *testing.T) {
		r := s.ok("dlq", "list", "--queue", "orders")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 6 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(r.stdout, "card declined") ||
			lines[5] != "4 shown of 4 dead letters" {
			t.Fatalf("table:\n%s", r.stdout)
		}
		// A stranger's error text cannot drive the terminal.
		if strings.Contains(r.stdout, "\x1b") || !strings.Contains(r.stdout, "address \uFFFD[31mred") {
			t.Fatalf("the escape sequence was printed: %q", r.stdout)
		}
	})
	t.Run("ListFiltersAndJSON", func(t *testing.T) {
		r := s.ok("dlq", "list", "--queue", "orders", "--consumer-group", "billing", "--error", "declined", "--field", "tier=gold", "--limit", "2", "--json")
		var l struct {
			Messages []struct {
				Queue, ConsumerGroup string
			}
			Total      int
			Pagination struct{ Limit int }
		}
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.Total != 3 || len(l.Messages) != 2 || l.Pagination.Limit != 2 ||
			l.Messages[0].ConsumerGroup != "billing" {
			t.Fatalf("%v %s", err, r.stdout)
		}
		if !strings.HasSuffix(r.stdout, "}\n") || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("dlq list --json is not one line: %q", r.stdout)
		}
		if got := keys(t, r.stdout); !slices.Equal(got, []string{"messages", "next", "pagination", "total"}) {
			t.Errorf("dlq list --json fields %v", got)
		}
		r = s.ok("dlq", "list", "--q", "smtp", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.Total != 1 || l.Messages[0].Queue != "emails" {
			t.Fatalf("--q: %v %s", err, r.stdout)
		}
	})
	t.Run("Show", func(t *testing.T) {
		r := s.ok("dlq", "show", emails[0])
		for _, want := range []string{"queue", "emails", "smtp down", `"tier": "gold"`, "replays"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("show lacks %q:\n%s", want, r.stdout)
			}
		}
		r = s.ok("dlq", "show", emails[0], "--json")
		if ks := keys(t, r.stdout); !slices.Contains(ks, "history") || !slices.Contains(ks, "others") || !slices.Contains(ks, "replays") {
			t.Errorf("show --json fields %v", ks)
		}
		s.fails(exitNotFound, "not found", nil, "dlq", "show", "00000000-0000-0000-0000-000000000000")
	})
	t.Run("Export", func(t *testing.T) {
		r := s.ok("dlq", "export", "--queue", "orders", "--consumer-group", "billing")
		if n := strings.Count(r.stdout, "\n"); n != 3 {
			t.Fatalf("export: %d lines\n%s", n, r.stdout)
		}
		out := filepath.Join(t.TempDir(), "x.csv")
		s.ok("dlq", "export", "--queue", "emails", "--format", "csv", "--output", out)
		b, err := os.ReadFile(out)
		if err != nil || !strings.Contains(string(b), "smtp down") {
			t.Fatalf("export to a file: %v %s", err, b)
		}
		s.fails(2, "format must be ndjson or csv", nil, "dlq", "export", "--format", "xml")
	})
	t.Run("ReplayOneThenAgain", func(t *testing.T) {
		r := s.ok("dlq", "replay", emails[0], "--json")
		var a struct{ Result, DlqID string }
		if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || a.Result != "moved" || a.DlqID != emails[0] {
			t.Fatalf("%v %s", err, r.stdout)
		}
		// A replay sent again says what became of the dead letter: exit 4.
		s.fails(exitNotFound, "replayed", nil, "dlq", "replay", emails[0])
	})
	t.Run("ReplayOwnElsewhere", func(t *testing.T) {
		r := s.ok("dlq", "replay", orders[1], "--mode", "own", "--consumer-group", "billing", "--to-queue", "orders-retry", "--json")
		var a struct {
			Result, Queue  string
			ConsumerGroups []string
		}
		if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || a.Result != "moved" || a.Queue != "orders-retry" || !slices.Equal(a.ConsumerGroups, []string{"billing"}) {
			t.Fatalf("%v %s", err, r.stdout)
		}
		s.fails(2, "", nil, "dlq", "replay", orders[2], "--mode", "sideways")
	})
	t.Run("DeleteOneOfAGroup", func(t *testing.T) {
		r := s.ok("dlq", "delete", orders[0], "--consumer-group", "billing")
		if !strings.Contains(r.stdout, "Deleted 1 dead letters") {
			t.Fatalf("%s", r.stdout)
		}
		if n := s.total("queue=orders&consumerGroup=billing"); n != 1 {
			t.Fatalf("%d left", n)
		}
	})
}

func TestCLIBulkAsksAndRunsTheDryRunsBound(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	s.deadLetters("orders", "billing", "card declined", 3)
	s.deadLetters("orders", "shipping", "no address", 2)
	s.deadLetters("emails", "sender", "smtp down", 2)

	t.Run("NoTerminalAndNoYesRefuses", func(t *testing.T) {
		r := s.lz(strings.NewReader("y\n"), nil, "dlq", "replay", "--queue", "orders")
		if r.code != exitNotConfirmed || !strings.Contains(r.err.Error(), "--yes") || !strings.Contains(r.stdout, "This will replay 5 dead letters (5 messages)") {
			t.Fatalf("%v (exit %d)\n%s", r.err, r.code, r.stdout)
		}
		if n := s.total("queue=orders"); n != 5 {
			t.Fatalf("refused, and %d left of 5", n)
		}
	})
	t.Run("SaysWhereBeforeAsking", func(t *testing.T) {
		r := s.lz(nil, nil, "dlq", "delete", "--all")
		for _, want := range []string{"This will delete 7 dead letters", "queue orders: 5 (consumer groups: billing 3, shipping 2)", "queue emails: 2 (consumer groups: sender 2)"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("AboveMax", func(t *testing.T) {
		s.fails(exitOverMax, "more than --max 2", nil, "dlq", "delete", "--queue", "orders", "--max", "2", "--yes")
		if n := s.total("queue=orders"); n != 5 {
			t.Fatalf("%d left of 5", n)
		}
	})
	t.Run("NoQueueNoAll", func(t *testing.T) {
		s.fails(2, "add --queue, or --all", nil, "dlq", "replay", "--error", "x", "--yes")
		s.fails(2, "ids, or a filter", nil, "dlq", "delete", "--yes")
	})
	t.Run("NothingMatches", func(t *testing.T) {
		r := s.ok("dlq", "replay", "--queue", "nowhere", "--yes")
		if !strings.Contains(r.stdout, "No dead letter matches") {
			t.Fatalf("%s", r.stdout)
		}
	})
	t.Run("YesRunsTheJobWithTheFilter", func(t *testing.T) {
		r := s.ok("dlq", "replay", "--queue", "orders", "--consumer-group", "shipping", "--yes", "--json")
		var out struct {
			DryRun struct {
				Matching int64
				Bound    struct{ FailedAt string }
			}
			Job struct {
				Job struct {
					State string
					Done  int64
					Kind  string
					Scope struct {
						Filter struct{ Queue, ConsumerGroup string }
						Bound  struct{ FailedAt string }
					}
				}
				Outcomes []any
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.DryRun.Matching != 2 || out.Job.Job.State != "done" || out.Job.Job.Done != 2 ||
			out.Job.Job.Scope.Filter.ConsumerGroup != "shipping" || out.Job.Job.Scope.Bound.FailedAt != out.DryRun.Bound.FailedAt {
			t.Fatalf("%v %s", err, r.stdout)
		}
		if ks := keys(t, r.stdout); !slices.Equal(ks, []string{"dryRun", "job"}) {
			t.Errorf("fields %v", ks)
		}
		if n := s.total("queue=orders"); n != 3 {
			t.Fatalf("%d left, want billing's 3", n)
		}
	})
	t.Run("AnsweredOnATerminal", func(t *testing.T) {
		// n: nothing changes.
		r, _ := s.onTerminal(t, context.Background(), "n\n", nil, "dlq", "delete", "--queue", "emails")
		if r.code != exitNotConfirmed || !strings.Contains(r.stderr, "Delete 2 dead letters? [y/N]") {
			t.Fatalf("%v (exit %d) %q", r.err, r.code, r.stderr)
		}
		if n := s.total("queue=emails"); n != 2 {
			t.Fatalf("answered n, and %d left of 2", n)
		}
		// Ctrl-C while it asks: nothing changes, at once.
		ctx, interrupt := context.WithCancel(context.Background())
		defer interrupt()
		r, _ = s.onTerminal(t, ctx, "", interrupt, "dlq", "delete", "--queue", "emails")
		if r.code != exitNotConfirmed || !strings.Contains(r.err.Error(), "interrupted") {
			t.Fatalf("interrupted: %v (exit %d)", r.err, r.code)
		}
		if n := s.total("queue=emails"); n != 2 {
			t.Fatalf("interrupted, and %d left of 2", n)
		}
		// y: the job runs, with a progress bar on the terminal, on what
		// the dry run counted: a dead letter filed while the question
		// waits is left alone.
		r, screen := s.onTerminal(t, context.Background(), "y\n", func() { s.deadLetters("emails", "late", "smtp down", 1) }, "dlq", "delete", "--queue", "emails")
		if r.err != nil || !strings.Contains(screen, "job 2: delete") || !strings.Contains(screen, "100%") || !strings.Contains(screen, "2 of 2 done") ||
			!strings.Contains(screen, "1 filed since the dry run, left alone") {
			t.Fatalf("%v (exit %d) %q", r.err, r.code, screen)
		}
		if n := s.total("queue=emails&consumerGroup=late"); n != 1 || s.total("queue=emails") != 1 {
			t.Fatalf("answered y: the late one is gone, or others are left")
		}
	})
}

// More dead letters than the summary reads: it says it read the newest.
func TestCLIBulkSummaryOfMany(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	s.deadLetters("orders", "billing", "card declined", describeSample+1)
	r := s.lz(nil, nil, "dlq", "delete", "--queue", "orders")
	want := fmt.Sprintf("This will delete %d dead letters", describeSample+1)
	if r.code != exitNotConfirmed || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "Where (among the newest 250):\n  queue orders: 250 (consumer groups: billing 250)\n") {
		t.Fatalf("%v (exit %d)\n%s", r.err, r.code, r.stdout)
	}
}

// onTerminal runs a command whose standard input and output are a
// terminal (a pseudo-terminal), typing answer once it asks (after
// calling meanwhile, when not nil), and returns what it did and what the
// terminal showed.
func (s *cliServer) onTerminal(t *testing.T, ctx context.Context, answer string, meanwhile func(), args ...string) (result, string) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		io.Copy(&screen, ptmx) // until the terminal is closed
	}()
	// The question goes to standard error: answer it once it is there.
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	go func() {
		defer wg.Done()
		buf := make([]byte, 4096)
		asked := false
		for {
			n, err := pr.Read(buf)
			stderr.Write(buf[:n])
			if !asked && strings.Contains(stderr.String(), "[y/N]") {
				asked = true
				if meanwhile != nil {
					meanwhile()
				}
				io.WriteString(ptmx, answer)
			}
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = run(ctx, args, envOf(s.env), tty, tty, pw)
	pw.Close()
	// A line ends a read of the answer that the command left behind
	// (interrupted, it does not wait for it), which holds the terminal's
	// side open; closing that side then ends the copy of the screen once
	// all that was written is read.
	io.WriteString(ptmx, "\n")
	tty.Close()
	wg.Wait()
	r := result{stderr: stderr.String(), err: err}
	if err != nil {
		r.code = exitCode(err)
	}
	return r, screen.String()
}

func TestCLIJobs(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	ids := s.deadLetters("orders", "billing", "card declined", 2)
	r := s.ok("dlq", "replay", ids[0], ids[1])
	if !strings.Contains(r.stdout, "Job 1 done: 2 of 2 done") {
		t.Fatalf("replay by ids: %s", r.stdout)
	}
	r = s.ok("jobs", "list", "--kind", "replay")
	if !strings.Contains(r.stdout, "replay") || !strings.Contains(r.stdout, "done") || strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("jobs list:\n%s", r.stdout)
	}
	if r = s.ok("jobs", "list", "--kind", "delete"); strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("jobs list --kind delete:\n%s", r.stdout)
	}
	r = s.ok("jobs", "list", "--json")
	if ks := keys(t, r.stdout); !slices.Equal(ks, []string{"jobs", "next"}) {
		t.Errorf("jobs list --json fields %v", ks)
	}
	r = s.ok("jobs", "show", "1")
	if !strings.Contains(r.stdout, "CONSUMER GROUP") || !strings.Contains(r.stdout, "billing") {
		t.Fatalf("jobs show:\n%s", r.stdout)
	}
	r = s.ok("jobs", "show", "1", "--json")
	if ks := keys(t, r.stdout); !slices.Equal(ks, []string{"failures", "job", "outcomes"}) {
		t.Errorf("jobs show --json fields %v", ks)
	}
	s.fails(exitConflict, "", nil, "jobs", "cancel", "1")
	s.fails(exitConflict, "", nil, "jobs", "pause", "1")
	s.fails(exitNotFound, "", nil, "jobs", "show", "99")
	s.fails(2, "positive whole number", nil, "jobs", "resume", "x")
	s.fails(2, "state must be", nil, "jobs", "list", "--state", "sleeping")
}

// A job that pauses before its end: exit 8, and the job can be resumed
// and cancelled from the command line.
func TestCLIJobPausedBeforeItsEnd(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	s.deadLetters("orders", "billing", "card declined", 3)
	done := make(chan result, 1)
	go func() { done <- s.lz(nil, nil, "dlq", "delete", "--queue", "orders", "--rate", "1", "--yes") }()
	// The job deletes one a second: pause it as soon as it is there.
	id := s.firstJob()
	if r := s.ok("jobs", "pause", id); !strings.Contains(r.stdout, "paused") {
		t.Fatalf("pause: %s", r.stdout)
	}
	r := <-done
	if r.code != exitUnfinished || !strings.Contains(r.err.Error(), "paused") {
		t.Fatalf("%v (exit %d)\n%s", r.err, r.code, r.stdout)
	}
	s.ok("jobs", "resume", id, "--json")
	if r := s.ok("jobs", "cancel", id); !strings.Contains(r.stdout, "cancelled") {
		t.Fatalf("cancel: %s", r.stdout)
	}
}

// Interrupted while it follows a job (Ctrl-C), the command stops
// following and says so; the job goes on in the server.
func TestCLIInterruptedLeavesTheJobRunning(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	s.deadLetters("orders", "billing", "card declined", 3)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	// Interrupt once the progress bar is drawn: the command follows the
	// job then.
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		var screen bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			screen.Write(buf[:n])
			if strings.Contains(screen.String(), "job 1: delete") {
				interrupt()
			}
			if err != nil {
				return
			}
		}
	}()
	err = run(ctx, []string{"dlq", "delete", "--queue", "orders", "--rate", "1", "--yes"}, envOf(s.env), nil, tty, io.Discard)
	tty.Close()
	<-copied
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "job 1 goes on in the server") {
		t.Fatalf("interrupted: %v", err)
	}
	if r := s.ok("jobs", "show", "1", "--json"); !strings.Contains(r.stdout, `"state":"running"`) {
		t.Fatalf("the job after the interrupt: %s", r.stdout)
	}
	s.ok("jobs", "cancel", "1")
}

// firstJob waits until the server has a job and returns its id.
func (s *cliServer) firstJob() string {
	s.t.Helper()
	for {
		var l struct {
			Jobs []struct{ ID int64 }
		}
		if err := json.Unmarshal(s.api(http.MethodGet, "/api/v1/jobs", nil), &l); err != nil {
			s.t.Fatal(err)
		}
		if len(l.Jobs) > 0 {
			return fmt.Sprint(l.Jobs[0].ID)
		}
	}
}

func TestCLIGroupsAndHolds(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	s.deadLetters("orders", "billing", "GET /v1/cards/42: timeout", 2)

	r := s.ok("groups", "list", "--queue", "orders", "--json")
	var l struct {
		ErrorGroups []struct{ Fingerprint, State string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.ErrorGroups) != 1 || l.ErrorGroups[0].State != "open" {
		t.Fatalf("%v %s", err, r.stdout)
	}
	fp := l.ErrorGroups[0].Fingerprint
	if r = s.ok("groups", "list", "--state", "resolved"); strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("the state filter:\n%s", r.stdout)
	}
	r = s.ok("groups", "set", fp, "acknowledged", "--queue", "orders", "--owner", "ana", "--note", "on it")
	if !strings.Contains(r.stdout, "acknowledged") || !strings.Contains(r.stdout, "ana") {
		t.Fatalf("groups set:\n%s", r.stdout)
	}
	r = s.ok("groups", "show", fp, "--queue", "orders")
	if !strings.Contains(r.stdout, "on it") || !strings.Contains(r.stdout, "open") || !strings.Contains(r.stdout, "acknowledged") {
		t.Fatalf("groups show:\n%s", r.stdout)
	}
	s.fails(2, "state must be", nil, "groups", "set", fp, "closed", "--queue", "orders")
	s.fails(2, "needs --queue", nil, "groups", "set", fp, "open")
	s.fails(exitNotFound, "", nil, "groups", "show", "no such", "--queue", "orders")

	r = s.ok("hold", "--queue", "orders", "--consumer-group", "billing", "--reason", "card API down", "--json")
	var h struct {
		ID       int64
		Existing bool
	}
	if err := json.Unmarshal([]byte(r.stdout), &h); err != nil || h.ID == 0 || h.Existing {
		t.Fatalf("%v %s", err, r.stdout)
	}
	if r = s.ok("hold", "--queue", "orders", "--consumer-group", "billing", "--reason", "again"); !strings.Contains(r.stdout, "Held already") {
		t.Fatalf("hold again: %s", r.stdout)
	}
	if r = s.ok("hold", "list"); !strings.Contains(r.stdout, "card API down") {
		t.Fatalf("hold list:\n%s", r.stdout)
	}
	id := fmt.Sprint(h.ID)

	// A viewer reads, and is refused every write: exit 3.
	viewer := map[string]string{"LAZARUS_TOKEN": s.viewerToken()}
	if r := s.lz(nil, viewer, "hold", "list", "--json"); r.err != nil || !strings.Contains(r.stdout, "card API down") {
		t.Fatalf("viewer lists holds: %v %s", r.err, r.stdout)
	}
	s.fails(exitRefused, "operator", viewer, "release", id)
	s.fails(exitRefused, "operator", viewer, "groups", "set", fp, "open", "--queue", "orders")
	s.fails(exitRefused, "operator", viewer, "dlq", "replay", "--queue", "orders", "--yes")
	s.fails(exitRefused, "LAZARUS_TOKEN", map[string]string{"LAZARUS_TOKEN": ""}, "hold", "list")

	r = s.ok("release", id, "--json")
	if ks := keys(t, r.stdout); !slices.Equal(ks, []string{"hold", "released"}) {
		t.Errorf("release --json fields %v", ks)
	}
	s.fails(exitNotFound, "", nil, "release", id)
}

func TestCLIUsageAndUnreachableServer(t *testing.T) {
	t.Parallel()
	s := &cliServer{server: &server{t: t}, env: map[string]string{"LAZARUS_TOKEN": "x"}}
	for _, args := range [][]string{{"dlq"}, {"dlq", "purge"}, {"jobs", "show"}, {"dlq", "list", "--bogus"}, {"hold", "--queue", "q"},
		{"dlq", "replay", "x", "--queue", "q"}, {"dlq", "list", "--server", "localhost:1"}, {"groups", "set", "fp"}} {
		s.fails(2, "", nil, args...)
	}
	// The arguments are checked before the server is asked, each refusal
	// saying what was wrong.
	for _, c := range []struct {
		want string
		args []string
	}{
		{`unexpected argument "orders": the filters are flags`, []string{"dlq", "list", "orders"}},
		{`unexpected argument "x": the filters are flags`, []string{"dlq", "export", "x"}},
		{`unexpected argument "q": name the queue with --queue`, []string{"hold", "q", "--reason", "r"}},
		{`unexpected argument "q"`, []string{"hold", "list", "q"}},
		{"give one dead letter id", []string{"dlq", "show"}},
		{"give one job id", []string{"jobs", "pause", "1", "2"}},
		{`a job id must be a positive whole number, got "abc"`, []string{"jobs", "show", "abc"}},
		{`a hold id must be a positive whole number, got "0"`, []string{"release", "0"}},
	} {
		s.fails(2, c.want, nil, c.args...)
	}
	// Nothing listens on port 1: a failure, exit 1, naming the server.
	s.fails(1, "http://127.0.0.1:1", nil, "dlq", "list", "--server", "http://127.0.0.1:1")
	if r := s.lz(nil, nil, "dlq", "list", "--help"); r.err != nil || !strings.Contains(r.stderr, "-consumer-group") {
		t.Fatalf("--help: %v %s", r.err, r.stderr)
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":               "plain",
		"a\tb\nc":             "a b c",
		"\x1b]0;pwned\x07":    "\uFFFD]0;pwned\uFFFD",
		"abc\u202Edef":        "abc\uFFFDdef",
		"\xff":                "\uFFFD",
		"long text to be cut": "long…",
	} {
		n := 0
		if strings.HasPrefix(in, "long") {
			n = 4
		}
		if got := clean(in, n); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
	if got := count(1234567); got != "1,234,567" {
		t.Errorf("count: %s", got)
	}
}
