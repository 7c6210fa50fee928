package mcpserver

import (
	"context"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lazarus-dlq/lazarus/client"
)

// The resources' URIs: a dead letter by its message's id, an error group
// by its queue, consumer group and fingerprint (the API reads one so).
// Each part is percent-encoded as a path segment (a fingerprint may hold
// spaces and slashes).
const (
	deadLetterPrefix = "lazarus://dead-letters/"
	errorGroupPrefix = "lazarus://error-groups/"
)

// DeadLetterURI is the URI an agent cites a dead letter by.
func DeadLetterURI(id string) string { return deadLetterPrefix + url.PathEscape(id) }

// ErrorGroupURI is the URI an agent cites an error group by.
func ErrorGroupURI(queue, group, fingerprint string) string {
	return errorGroupPrefix + url.PathEscape(queue) + "/" + url.PathEscape(group) + "/" + url.PathEscape(fingerprint)
}

// addResources adds the resource templates of dead letters and error
// groups: read, they are the API's JSON of the one named (as
// get_dead_letter and get_error_group answer it).
func addResources(s *mcp.Server, c *client.Client) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "dead-letter", Title: "A dead letter", MIMEType: "application/json",
		URITemplate: deadLetterPrefix + "{id}",
		Description: "A dead letter with its payload, error, history and replay count, by its message's id."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			uri := req.Params.URI
			parts, ok := segments(uri, deadLetterPrefix, 1)
			if !ok {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			r, err := c.DeadLetter(ctx, parts[0], "")
			return contents(uri, r.Raw, err)
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "error-group", Title: "An error group", MIMEType: "application/json",
		URITemplate: errorGroupPrefix + "{queue}/{consumerGroup}/{fingerprint}",
		Description: "An error group (one fingerprint's dead letters in a queue and consumer group) with its state and history."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			uri := req.Params.URI
			parts, ok := segments(uri, errorGroupPrefix, 3)
			if !ok {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			r, err := c.ErrorGroup(ctx, parts[2], parts[0], parts[1])
			return contents(uri, r.Raw, err)
		})
}

// segments cuts the n percent-encoded segments after prefix out of uri;
// false when there are not n, or one is empty or badly encoded.
func segments(uri, prefix string, n int) ([]string, bool) {
	rest, ok := strings.CutPrefix(uri, prefix)
	if !ok {
		return nil, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != n {
		return nil, false
	}
	for i, p := range parts {
		v, err := url.PathUnescape(p)
		if err != nil || v == "" {
			return nil, false
		}
		parts[i] = v
	}
	return parts, true
}

// contents is a resource's answer: the API's JSON, or, for what the API
// does not find (or the token may not see: out of its queues is as if
// absent), the protocol's "resource not found".
func contents(uri string, raw []byte, err error) (*mcp.ReadResourceResult, error) {
	if client.StatusOf(err) == 404 {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, explain(err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(raw)}}}, nil
}
