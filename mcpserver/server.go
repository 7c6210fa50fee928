// Package mcpserver is Lazarus's Model Context Protocol server: the tools
// and resources an agent triages dead letters with. `lazarus mcp` serves
// it on standard input and output, and the server at /mcp as streamable
// HTTP (web/mcp.go).
//
// Every tool calls the JSON API through package client with the token of
// the agent's session, so that what the API enforces for that token (its
// role, its queues, the masking of payloads) holds for the agent as it
// does for any other caller: nothing here decides who may see or change
// what. What is decided here is what is offered: the operator tools are
// listed only to a token whose role is operator or admin (a viewer's
// agent is never shown a tool it may not use), and a bulk write by filter
// takes the bound of a dry run, so that an agent has seen (and can show)
// how many dead letters it will touch before it touches them.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lazarus-dlq/lazarus/client"
)

// Roles the server tells apart, as the API names them.
const (
	roleOperator = "operator"
	roleAdmin    = "admin"
)

// Who is the principal an MCP session acts for: the API's answer to GET
// /api/v1/whoami (client.Identity) for the command, the request's
// principal for the server's /mcp.
type Who struct {
	Actor string
	Role  string
	// Queues is the queues the principal may see; "" is every queue.
	Queues string
}

// operator reports whether the principal may replay, delete, hold and
// release: the operator tools are offered only then.
func (w Who) operator() bool { return w.Role == roleOperator || w.Role == roleAdmin }

// Options are New's settings beyond the client and the principal.
type Options struct {
	// Version is the server's version, told to the agent's client.
	Version string
	// JobWait bounds how long a bulk tool waits for its job to end
	// before it answers with the job as it is (default 30 seconds, under a
	// reverse proxy's usual read timeout of 60); the
	// agent follows it with get_job.
	JobWait time.Duration
	// JobPoll is how often a job is read while waited for (default
	// 250ms).
	JobPoll time.Duration
}

// schemas keeps the tools' input schemas, derived once from their Go
// types: /mcp builds a server for each request.
var schemas = mcp.NewSchemaCache()

// New returns an MCP server whose tools call the API with c on behalf of
// who: the read-only tools for any role, the operator tools too for an
// operator or admin.
func New(c *client.Client, who Who, o Options) *mcp.Server {
	if o.JobWait <= 0 {
		o.JobWait = 30 * time.Second
	}
	if o.JobPoll <= 0 {
		o.JobPoll = 250 * time.Millisecond
	}
	scope := "every queue"
	if who.Queues != "" {
		scope = "the queues " + who.Queues
	}
	instructions := fmt.Sprintf("Lazarus keeps the dead letters of a message broker: messages a consumer group gave up on. "+
		"This session acts as %s (role %s) and sees %s. ", who.Actor, who.Role, scope)
	if who.operator() {
		instructions += "To replay or delete dead letters by filter, call dry_run first: it counts what the filter matches and " +
			"answers a bound; show the count to the user, then pass the bound unchanged to replay_dead_letters or " +
			"delete_dead_letters, which refuse to run without one. "
	} else {
		instructions += "The role is viewer: the tools read and change nothing. "
	}
	instructions += "Cite a dead letter as lazarus://dead-letters/{id} and an error group as " +
		"lazarus://error-groups/{queue}/{consumerGroup}/{fingerprint}; both can be read as resources."
	s := mcp.NewServer(&mcp.Implementation{Name: "lazarus", Title: "Lazarus", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		SchemaCache:  schemas,
		// What is listed and read differs by token (the tools by role,
		// the resources by queue scope and masking): no shared cache
		// may keep an answer for another caller.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs, c.CacheScope = 0, "private" },
	})
	t := tools{c: c, o: o}
	t.addReadOnly(s)
	if who.operator() {
		t.addOperator(s)
	}
	addResources(s, c)
	return s
}

// tools holds what the tools' handlers share.
type tools struct {
	c *client.Client
	o Options
}

// answer turns an API call's result into a tool's: the API's JSON as
// the server sent it, as the structured output (and, as the SDK does, its
// text), so that an agent reads the shapes docs/api.md describes, as a
// script does; or the API's error as a tool error whose text the agent
// reads (a 403 says the role it needs, a 404 what became of a dead
// letter).
func answer(v json.RawMessage, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, explain(err)
	}
	return nil, v, nil
}

// linked is answer with a link to the resource read (its URI, which the
// agent cites), after the API's JSON as text.
func linked(v json.RawMessage, err error, link *mcp.ResourceLink) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, explain(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(v)}, link}}, v, nil
}

// explain words an API error for an agent.
func explain(err error) error {
	var e *client.Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusForbidden:
			return fmt.Errorf("refused by the server: %s (HTTP 403)", e.Message)
		case http.StatusNotFound:
			if len(e.Body) > 0 {
				return fmt.Errorf("not found (HTTP 404): %s", e.Body)
			}
		case http.StatusConflict:
			return fmt.Errorf("refused by the server's rules (HTTP 409): %s", e.Body)
		}
	}
	return err
}

// ptr returns a pointer to v (the annotations' optional hints).
func ptr[T any](v T) *T { return &v }

// readOnly is the annotation of a tool that changes nothing.
func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, OpenWorldHint: ptr(false)}
}

// writes is the annotation of a tool that changes the broker: destructive
// when what it does cannot be taken back by another tool (a delete).
func writes(title string, destructive, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, DestructiveHint: ptr(destructive), IdempotentHint: idempotent, OpenWorldHint: ptr(false)}
}
