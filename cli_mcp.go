package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lazarus-dlq/lazarus/client"
	"github.com/lazarus-dlq/lazarus/mcpserver"
	"github.com/lazarus-dlq/lazarus/version"
)

// runMCP is `lazarus mcp`: the Model Context Protocol on standard input
// and output (docs/agents.md), for an agent that starts it as a
// subprocess. Its tools call the server at --server with LAZARUS_TOKEN
// through package client, so the server's roles, queue scopes and
// masking hold for the agent as for the token's other uses.
//
// The token's role is asked once, at the start (GET /api/v1/whoami): a
// viewer's agent is offered the read-only tools only. A token that is
// refused, or a server that cannot be reached, ends the command with the
// client commands' exit codes before any MCP is spoken: the agent's
// client shows the error rather than a server without tools.
func runMCP(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("mcp [--server URL]",
		"Serve the Model Context Protocol on standard input and output, for an agent (docs/agents.md).\n"+
			"Its tools call the server with the token in LAZARUS_TOKEN; an operator's or admin's token is\n"+
			"offered the operator tools too (replay, delete, hold, release, group state).", false, getenv, stderr)
	pos, err := parseRemote(fs, args[1:])
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("mcp takes no arguments, got %q", pos)}
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	who, err := r.c.WhoAmI(ctx)
	if client.StatusOf(err) == http.StatusNotFound {
		return exitError{code: exitNotFound, err: fmt.Errorf("%s has no GET /api/v1/whoami: it is older than this lazarus (upgrade the server)", r.c.Server())}
	}
	if err != nil {
		return r.explain(err)
	}
	fmt.Fprintf(stderr, "lazarus mcp: serving %s as %s (role %s) on standard input and output\n", r.c.Server(), who.Actor, who.Role)
	s := mcpserver.New(r.c, mcpserver.Who{Actor: who.Actor, Role: who.Role, Queues: who.Queues}, mcpserver.Options{Version: version.Get().Version})
	in := newAnsweredInput(ctx, stdin)
	err = s.Run(ctx, &mcp.IOTransport{Reader: in, Writer: in.output(stdout)})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		// The agent closed the pipe, or the command was interrupted:
		// either is how a stdio server ends.
		return nil
	}
	return err
}

// answeredInput is the server's standard input, which at its end waits
// until every request read from it has been answered. The SDK ends a
// session when its input ends, and a request still being handled then
// is never answered: a client that writes its requests and closes the
// pipe (printf ... | lazarus mcp, a script) would lose the answers. It
// counts the requests (messages with a method and an id) that pass in
// and the answers (an id and no method) that pass out, line by line as
// the stdio transport frames them.
type answeredInput struct {
	ctx     context.Context
	in      io.Reader
	partIn  []byte // the line being read, up to its end
	partOut []byte
	mu      sync.Mutex
	pending int
	settled chan struct{} // signalled when pending may have reached 0
}

func newAnsweredInput(ctx context.Context, in io.Reader) *answeredInput {
	return &answeredInput{ctx: ctx, in: in, settled: make(chan struct{}, 1)}
}

func (a *answeredInput) Read(p []byte) (int, error) {
	n, err := a.in.Read(p)
	a.mu.Lock()
	a.partIn = scanLines(append(a.partIn, p[:n]...), func(line []byte) { a.pending += countMessages(line, true) })
	a.mu.Unlock()
	if errors.Is(err, io.EOF) {
		for {
			a.mu.Lock()
			done := a.pending <= 0
			a.mu.Unlock()
			if done {
				break
			}
			select {
			case <-a.settled:
			case <-a.ctx.Done():
				return n, err
			}
		}
	}
	return n, err
}

func (a *answeredInput) Close() error { return nil }

// output is the server's standard output, counting the answers written.
func (a *answeredInput) output(w io.Writer) io.WriteCloser { return answerCounter{a, w} }

type answerCounter struct {
	a *answeredInput
	w io.Writer
}

func (c answerCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.a.mu.Lock()
	c.a.partOut = scanLines(append(c.a.partOut, p[:n]...), func(line []byte) { c.a.pending -= countMessages(line, false) })
	c.a.mu.Unlock()
	select {
	case c.a.settled <- struct{}{}:
	default:
	}
	return n, err
}

func (answerCounter) Close() error { return nil }

// scanLines calls f with each whole line of buf and returns what is left
// after the last line end.
func scanLines(buf []byte, f func([]byte)) []byte {
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return buf
		}
		f(buf[:i])
		buf = buf[i+1:]
	}
}

// countMessages counts the requests (requests true) or the answers in a
// line: one JSON-RPC message or a batch of them. A line that is not JSON
// counts for nothing (the SDK answers it with an error of its own, not
// counted: the wait is for requests, and an unreadable line is none).
func countMessages(line []byte, requests bool) int {
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var batch []message
	if err := json.Unmarshal(line, &batch); err != nil {
		var one message
		if json.Unmarshal(line, &one) != nil {
			return 0
		}
		batch = []message{one}
	}
	n := 0
	for _, m := range batch {
		hasID := len(m.ID) > 0 && string(m.ID) != "null"
		if hasID && (m.Method != "") == requests {
			n++
		}
	}
	return n
}
