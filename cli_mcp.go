package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

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
	err = s.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		// The agent closed the pipe, or the command was interrupted:
		// either is how a stdio server ends.
		return nil
	}
	return err
}

// nopWriteCloser is standard output as the transport's writer: closing
// the session does not close the process's output.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
