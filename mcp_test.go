package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lazarus-dlq/lazarus/mcpserver"
)

// The MCP server through the SDK's own client, as an agent's client
// talks to it: `lazarus mcp` as a subprocess over stdio (the built
// binary), and /mcp of a real server over streamable HTTP; both against
// a real server over a SQLite file.

// readOnlyTools are the tools any role is offered; operatorTools, those
// only an operator or admin is.
var (
	readOnlyTools = []string{"get_dead_letter", "get_error_group", "get_job", "list_dead_letters", "list_error_groups",
		"list_holds", "list_jobs", "search", "status"}
	operatorTools = []string{"delete_dead_letter", "delete_dead_letters", "dry_run", "hold", "release_hold",
		"replay_dead_letter", "replay_dead_letters", "set_error_group_state"}
)

// roleToken makes a user of role and an API token for it with the
// account commands, and returns the token.
func (s *cliServer) roleToken(name, role string) string {
	s.t.Helper()
	env := envOf(map[string]string{"LAZARUS_DB": s.db})
	if err := run(context.Background(), []string{"user", "add", name, "--role", role, "--password-stdin"}, env, strings.NewReader("a long enough password\n"), io.Discard, io.Discard); err != nil {
		s.t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "create", "--user", name, "--name", "agent"}, env, nil, &out, io.Discard); err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}

// bearer sends every request with a bearer token, as an agent's client
// configured with the /mcp URL and a token does.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// agent is an MCP client session with one token.
type agent struct {
	t  *testing.T
	cs *mcp.ClientSession
}

// connect opens a session over transport name ("stdio" or "http") with
// token.
func (s *cliServer) connect(t *testing.T, name, token string) *agent {
	t.Helper()
	var tr mcp.Transport
	switch name {
	case "stdio":
		cmd := exec.Command(binary(t), "mcp", "--server", s.url)
		cmd.Env = append(os.Environ(), "LAZARUS_TOKEN="+token, "LAZARUS_SERVER=")
		tr = &mcp.CommandTransport{Command: cmd}
	case "http":
		tr = &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp", HTTPClient: &http.Client{Transport: bearer(token)}, MaxRetries: -1}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect over %s: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return &agent{t: t, cs: cs}
}

// tools lists the tools offered, by name.
func (a *agent) tools() map[string]*mcp.Tool {
	a.t.Helper()
	res, err := a.cs.ListTools(context.Background(), nil)
	if err != nil {
		a.t.Fatal(err)
	}
	m := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		m[tool.Name] = tool
	}
	return m
}

// call calls a tool and returns its result's text and whether it is a
// tool error.
func (a *agent) call(name string, args any) (string, bool) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		a.t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

// ok calls a tool that must succeed and decodes its JSON into out.
func (a *agent) ok(name string, args, out any) {
	a.t.Helper()
	text, isErr := a.call(name, args)
	if isErr {
		a.t.Fatalf("%s: tool error: %s", name, text)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			a.t.Fatalf("%s: %v\n%s", name, err, text)
		}
	}
}

func names(m map[string]*mcp.Tool) []string {
	var ns []string
	for n := range m {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

func TestMCP(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	viewer := s.viewerToken()
	operator := s.roleToken("olga", "operator")

	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			queue := "orders-" + transport
			ids := s.deadLetters(queue, "billing", "card declined", 3)

			t.Run("AViewerIsOfferedTheReadOnlyToolsOnly", func(t *testing.T) {
				a := s.connect(t, transport, viewer)
				tools := a.tools()
				if got := names(tools); !slices.Equal(got, readOnlyTools) {
					t.Fatalf("a viewer is offered %v, want %v", got, readOnlyTools)
				}
				for _, tool := range tools {
					if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
						t.Errorf("%s is not annotated read-only: %+v", tool.Name, tool.Annotations)
					}
				}
				if !strings.Contains(a.cs.InitializeResult().Instructions, "role viewer") {
					t.Errorf("instructions: %q", a.cs.InitializeResult().Instructions)
				}
				// A write tool called by name anyway is no tool of this
				// session's, and nothing is deleted.
				if text, isErr := a.callOrError("delete_dead_letter", map[string]any{"id": ids[0]}); !isErr {
					t.Fatalf("a viewer's delete_dead_letter was not refused: %s", text)
				}
				if n := s.total("queue=" + queue); n != 3 {
					t.Fatalf("%d dead letters after a viewer's delete, want 3", n)
				}
			})

			t.Run("AnOperatorIsOfferedTheOperatorToolsAnnotated", func(t *testing.T) {
				tools := s.connect(t, transport, operator).tools()
				want := slices.Sorted(slices.Values(append(slices.Clone(readOnlyTools), operatorTools...)))
				if got := names(tools); !slices.Equal(got, want) {
					t.Fatalf("an operator is offered %v, want %v", got, want)
				}
				for _, name := range operatorTools {
					an := tools[name].Annotations
					destructive := an != nil && !an.ReadOnlyHint && (an.DestructiveHint == nil || *an.DestructiveHint)
					switch {
					case name == "dry_run":
						if an == nil || !an.ReadOnlyHint {
							t.Errorf("dry_run changes nothing, and is not annotated read-only: %+v", an)
						}
					case strings.HasPrefix(name, "delete_"):
						if !destructive {
							t.Errorf("%s is not annotated destructive: %+v", name, an)
						}
					default:
						if an == nil || an.ReadOnlyHint || destructive {
							t.Errorf("%s is annotated read-only or destructive: %+v", name, an)
						}
					}
				}
				for _, name := range []string{"replay_dead_letters", "delete_dead_letters"} {
					if d := tools[name].Description; !strings.Contains(d, "REQUIRES the bound of a dry run") || !strings.Contains(d, "dry_run") {
						t.Errorf("%s's description does not say it needs a dry run's bound: %q", name, d)
					}
				}
			})

			t.Run("ReadsDeadLettersAndResources", func(t *testing.T) {
				a := s.connect(t, transport, viewer)
				var list struct {
					Total    int `json:"total"`
					Messages []struct {
						ID            string `json:"id"`
						Fingerprint   string `json:"fingerprint"`
						ConsumerGroup string `json:"consumerGroup"`
						ErrorMessage  string `json:"errorMessage"`
					} `json:"messages"`
				}
				a.ok("list_dead_letters", map[string]any{"queue": queue, "error": "declined", "limit": 2}, &list)
				if list.Total != 3 || len(list.Messages) != 2 || list.Messages[0].ErrorMessage != "card declined" {
					t.Fatalf("list_dead_letters: %+v", list)
				}
				var one struct {
					ID    string `json:"id"`
					Queue string `json:"queue"`
				}
				a.ok("get_dead_letter", map[string]any{"id": ids[1]}, &one)
				if one.ID != ids[1] || one.Queue != queue {
					t.Fatalf("get_dead_letter: %+v", one)
				}
				// Its answer links the resource to cite.
				called, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_dead_letter", Arguments: map[string]any{"id": ids[1]}})
				if err != nil || len(called.Content) != 2 {
					t.Fatalf("get_dead_letter: %v %+v", err, called)
				}
				if link, ok := called.Content[1].(*mcp.ResourceLink); !ok || link.URI != "lazarus://dead-letters/"+ids[1] {
					t.Fatalf("get_dead_letter's link: %#v", called.Content[1])
				}
				var found struct {
					Matches []struct {
						ID string `json:"id"`
					} `json:"matches"`
				}
				a.ok("search", map[string]any{"query": ids[2]}, &found)
				if len(found.Matches) == 0 || found.Matches[0].ID != ids[2] {
					t.Fatalf("search: %+v", found)
				}
				var status struct {
					Queues []struct {
						Name        string `json:"name"`
						DeadLetters int    `json:"deadLetters"`
					} `json:"queues"`
				}
				a.ok("status", map[string]any{}, &status)
				if !slices.ContainsFunc(status.Queues, func(q struct {
					Name        string `json:"name"`
					DeadLetters int    `json:"deadLetters"`
				}) bool {
					return q.Name == queue && q.DeadLetters == 3
				}) {
					t.Fatalf("status: %+v", status)
				}

				templates, err := a.cs.ListResourceTemplates(context.Background(), nil)
				if err != nil || len(templates.ResourceTemplates) != 2 {
					t.Fatalf("resource templates: %v %+v", err, templates)
				}
				uri := "lazarus://dead-letters/" + ids[0]
				res, err := a.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
				if err != nil || len(res.Contents) != 1 || res.Contents[0].URI != uri || !strings.Contains(res.Contents[0].Text, `"id":"`+ids[0]+`"`) {
					t.Fatalf("read %s: %v %+v", uri, err, res)
				}
				m := list.Messages[0]
				// Its parts percent-encoded: a fingerprint has spaces.
				uri = mcpserver.ErrorGroupURI(queue, m.ConsumerGroup, m.Fingerprint)
				if !strings.Contains(uri, "card%20declined") {
					t.Fatalf("uri %s", uri)
				}
				res, err = a.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
				if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"fingerprint":"`+m.Fingerprint+`"`) {
					t.Fatalf("read %s: %v %+v", uri, err, res)
				}
				if _, err := a.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "lazarus://dead-letters/no-such-id"}); err == nil ||
					!strings.Contains(err.Error(), "not found") {
					t.Fatalf("a dead letter that is not there: %v", err)
				}
			})

			t.Run("ABulkWriteNeedsTheBoundOfADryRun", func(t *testing.T) {
				a := s.connect(t, transport, operator)
				filter := map[string]any{"queue": queue, "consumerGroup": "billing"}
				text, isErr := a.call("delete_dead_letters", map[string]any{"filter": filter})
				if !isErr || !strings.Contains(text, "Call dry_run") {
					t.Fatalf("a bulk delete without a bound: error %v, %s", isErr, text)
				}
				if n := s.total("queue=" + queue); n != 3 {
					t.Fatalf("%d dead letters after a refused bulk delete, want 3", n)
				}
				var dry struct {
					Matching int             `json:"matching"`
					Bound    json.RawMessage `json:"bound"`
				}
				a.ok("dry_run", map[string]any{"action": "delete", "filter": filter}, &dry)
				if dry.Matching != 3 || len(dry.Bound) == 0 {
					t.Fatalf("dry_run: %+v", dry)
				}
				// Filed after the dry run: out of its bound, left alone.
				late := s.deadLetters(queue, "billing", "card declined late", 1)
				var job struct {
					Job struct {
						State string `json:"state"`
						Kind  string `json:"kind"`
						Done  int    `json:"done"`
						Actor string `json:"actor"`
					} `json:"job"`
				}
				a.ok("delete_dead_letters", map[string]any{"filter": filter, "bound": dry.Bound}, &job)
				if job.Job.State != "done" || job.Job.Kind != "delete" || job.Job.Done != 3 || !strings.HasSuffix(job.Job.Actor, "@olga") {
					t.Fatalf("delete_dead_letters: %+v", job)
				}
				var left struct {
					Messages []struct {
						ID string `json:"id"`
					} `json:"messages"`
				}
				a.ok("list_dead_letters", map[string]any{"queue": queue}, &left)
				if len(left.Messages) != 1 || left.Messages[0].ID != late[0] {
					t.Fatalf("left after the bulk delete: %+v, want only %s", left, late[0])
				}
			})

			t.Run("OperatorWrites", func(t *testing.T) {
				a := s.connect(t, transport, operator)
				queue := "payments-" + transport
				ids := s.deadLetters(queue, "ledger", "timeout", 3)
				filter := map[string]any{"queue": queue}
				var dry struct {
					Matching int             `json:"matching"`
					Bound    json.RawMessage `json:"bound"`
				}
				a.ok("dry_run", map[string]any{"action": "replay", "filter": filter}, &dry)
				if dry.Matching != 3 {
					t.Fatalf("dry_run: %+v", dry)
				}
				if text, isErr := a.call("replay_dead_letters", map[string]any{"filter": filter}); !isErr || !strings.Contains(text, "Call dry_run") {
					t.Fatalf("a bulk replay without a bound: error %v, %s", isErr, text)
				}
				var job struct {
					Job struct {
						State   string `json:"state"`
						Results struct {
							Moved int `json:"moved"`
						} `json:"results"`
					} `json:"job"`
				}
				a.ok("replay_dead_letters", map[string]any{"filter": filter, "bound": dry.Bound}, &job)
				if job.Job.State != "done" || job.Job.Results.Moved != 3 || s.total("queue="+queue) != 0 {
					t.Fatalf("replay_dead_letters: %+v, %d dead letters left", job, s.total("queue="+queue))
				}

				more := s.deadLetters(queue, "ledger", "timeout again", 1)
				var deleted struct {
					Deleted int `json:"deleted"`
				}
				a.ok("delete_dead_letter", map[string]any{"id": more[0]}, &deleted)
				if deleted.Deleted != 1 || s.total("queue="+queue) != 0 {
					t.Fatalf("delete_dead_letter: %+v", deleted)
				}
				// One that is gone says so, as a tool error.
				if text, isErr := a.call("replay_dead_letter", map[string]any{"id": ids[0]}); !isErr || !strings.Contains(text, "gone") {
					t.Fatalf("replay of a replayed dead letter: error %v, %s", isErr, text)
				}

				var hold struct {
					ID    int64  `json:"id"`
					Queue string `json:"queue"`
				}
				a.ok("hold", map[string]any{"queue": queue, "reason": "an agent's triage"}, &hold)
				var holds struct {
					Holds []struct {
						ID int64 `json:"id"`
					} `json:"holds"`
				}
				a.ok("list_holds", map[string]any{"queue": queue}, &holds)
				if hold.Queue != queue || len(holds.Holds) != 1 || holds.Holds[0].ID != hold.ID {
					t.Fatalf("hold %+v, holds %+v", hold, holds)
				}
				a.ok("release_hold", map[string]any{"id": hold.ID}, nil)
				a.ok("list_holds", map[string]any{"queue": queue}, &holds)
				if len(holds.Holds) != 0 {
					t.Fatalf("holds after release: %+v", holds)
				}
			})
		})
	}
}

// callOrError calls a tool that may be refused by the protocol (an
// unknown tool) or as a tool error; either is an error here.
func (a *agent) callOrError(name string, args any) (string, bool) {
	res, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error(), true
	}
	if res.IsError {
		return "tool error", true
	}
	return "", false
}

func TestMCPTokens(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	s.fails(exitRefused, "LAZARUS_TOKEN", map[string]string{"LAZARUS_TOKEN": "not-a-token"}, "mcp")
	s.fails(2, "no arguments", nil, "mcp", "extra")
	var who map[string]string
	resp, body := s.do(http.MethodGet, "/api/v1/whoami", s.viewerToken(), nil)
	if err := json.Unmarshal(body, &who); resp.StatusCode != http.StatusOK || err != nil ||
		who["actor"] != "token:ro@vera" || who["role"] != "viewer" || who["queues"] != "" || len(who) != 3 {
		t.Fatalf("whoami: %d %s", resp.StatusCode, body)
	}
	// Through a reverse proxy on the same machine (another Host, to a
	// loopback address), a request with a token is served.
	req, err := http.NewRequest(http.MethodPost, s.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "lazarus.example.com"
	req.Header.Set("Authorization", "Bearer "+cliToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	proxied, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(proxied.Body)
	proxied.Body.Close()
	if proxied.StatusCode != http.StatusOK || !strings.Contains(string(b), `"delete_dead_letters"`) {
		t.Fatalf("/mcp behind a proxy: %d %s", proxied.StatusCode, b)
	}
	// /mcp is behind the same tokens as the API.
	for _, token := range []string{"-", "not-a-token"} {
		resp, body := s.do(http.MethodPost, "/mcp", token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("/mcp with token %q: %d %s", token, resp.StatusCode, body)
		}
	}
}

// A client that writes its requests and closes the pipe (a script,
// printf ... | lazarus mcp) gets every answer before the command ends.
func TestMCPCommandAnswersEveryRequestBeforeItsInputEnds(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	s.deadLetters("orders", "billing", "card declined", 2)
	cmd := exec.Command(binary(t), "mcp", "--server", s.url)
	cmd.Env = append(os.Environ(), "LAZARUS_TOKEN="+cliToken)
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_dead_letters","arguments":{"queue":"orders"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"status","arguments":{}}}`,
	}, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lazarus mcp: %v\n%s", err, stderr.String())
	}
	answered := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("not JSON-RPC: %s", line)
		}
		answered[string(msg.ID)] = line
	}
	if len(answered) != 4 || !strings.Contains(answered["3"], `"total":2`) {
		t.Fatalf("answers %v\n%s", answered, out)
	}
	if !strings.Contains(stderr.String(), "as token:admin (role admin)") {
		t.Fatalf("stderr: %s", stderr.String())
	}
}

// An agent's tools answer as the API does for its token: a token limited
// to some queues finds no other queue's dead letters, and a queue's masked
// fields come out as •••, over stdio and over HTTP alike (issue 34).
func TestMCPKeepsQueueScopesAndMasks(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	s.api(http.MethodPost, "/api/v1/configure", map[string]any{"queue": "orders-eu", "options": map[string]any{"maskPaths": []string{"$.tier"}}})
	mine := s.deadLetters("orders-eu", "billing", "card declined", 1)
	theirs := s.deadLetters("payments", "billing", "card declined", 1)
	env := envOf(map[string]string{"LAZARUS_DB": s.db})
	if err := run(context.Background(), []string{"user", "add", "sue", "--role", "viewer", "--queues", "orders*", "--password-stdin"}, env, strings.NewReader("a long enough password\n"), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "create", "--user", "sue", "--name", "agent"}, env, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out.String())

	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			a := s.connect(t, transport, token)
			var list struct {
				Total    int `json:"total"`
				Messages []struct {
					ID    string `json:"id"`
					Queue string `json:"queue"`
				} `json:"messages"`
			}
			a.ok("list_dead_letters", map[string]any{}, &list)
			if list.Total != 1 || len(list.Messages) != 1 || list.Messages[0].ID != mine[0] {
				t.Fatalf("list_dead_letters for orders*: %+v, want orders-eu's one", list)
			}
			if text, isErr := a.callOrError("get_dead_letter", map[string]any{"id": theirs[0]}); !isErr || strings.Contains(text, "payments") {
				t.Fatalf("get_dead_letter of payments' dead letter: error %v, %s", isErr, text)
			}
			text, isErr := a.call("get_dead_letter", map[string]any{"id": mine[0]})
			if isErr || !strings.Contains(text, `"tier":"•••"`) || strings.Contains(text, "gold") {
				t.Fatalf("get_dead_letter of orders-eu's: error %v, %s: want tier masked", isErr, text)
			}
			var status struct {
				Queues []struct {
					Name string `json:"name"`
				} `json:"queues"`
			}
			a.ok("status", map[string]any{}, &status)
			for _, q := range status.Queues {
				if q.Name == "payments" {
					t.Fatalf("status shows payments to a token of orders*: %+v", status)
				}
			}
		})
	}
}
