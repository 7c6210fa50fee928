package client

import (
	"context"
	"net/http"
)

// Identity is GET /api/v1/whoami's answer: who the client's token stands
// for, its role (viewer, operator or admin) and the queues it may see
// (Queues: "" is every queue; else names and patterns as in
// broker.ParseQueueScope).
type Identity struct {
	body
	Actor  string `json:"actor"`
	Role   string `json:"role"`
	Queues string `json:"queues"`
}

// WhoAmI asks the server who the client's token stands for. The MCP
// server asks it at a session's start, to offer the operator tools only
// to a token that may use them.
func (c *Client) WhoAmI(ctx context.Context) (*Identity, error) {
	var out Identity
	_, err := c.call(ctx, http.MethodGet, "/whoami", nil, nil, &out)
	return &out, err
}
