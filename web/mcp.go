package web

import (
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lazarus-dlq/lazarus/client"
	"github.com/lazarus-dlq/lazarus/mcpserver"
)

// whoamiJSON is GET /api/v1/whoami's answer: who the token is, its role
// and the queues it may see ("" is every queue).
type whoamiJSON struct {
	Actor  string `json:"actor"`
	Role   Role   `json:"role"`
	Queues string `json:"queues"`
}

// whoami tells a caller who its token stands for: `lazarus mcp` asks it
// to offer the operator tools only to a token that may use them.
func (s *Server) whoami(c echo.Context) error {
	p, _ := principalFrom(c.Request().Context())
	return writeJSON(c, http.StatusOK, whoamiJSON{Actor: p.Actor, Role: p.Role, Queues: p.Queues.String()})
}

// mcpHandler serves the Model Context Protocol at /mcp as streamable
// HTTP, behind the API's bearer tokens (authenticate runs before it).
//
// Each request builds its MCP server for the request's principal (the
// operator tools only for an operator or admin), and the tools call the
// API in process: a request made by package client goes through the
// server's own handler, with the Authorization header of the /mcp
// request. That is the simplest way that is correct: the API's
// authentication, roles, queue scopes and masking run for the agent's
// calls exactly as for anyone's, and the server need not know its own
// address (a listener on 0.0.0.0, TLS in front, a path prefix in a proxy)
// to reach itself.
//
// The handler is stateless (no Mcp-Session-Id): every request is
// authenticated on its own, so a session can never outlive its token's
// revocation or be carried on by another token, and nothing is kept
// between requests (several replicas behind a balancer serve it alike).
// The tools need no session: they ask the agent nothing back.
func (s *Server) mcpHandler() echo.HandlerFunc {
	server := func(r *http.Request) *mcp.Server {
		p, _ := principalFrom(r.Context())
		token := ""
		if scheme, t, ok := strings.Cut(r.Header.Get(echo.HeaderAuthorization), " "); ok && strings.EqualFold(scheme, "Bearer") {
			token = strings.TrimSpace(t)
		}
		hc := &http.Client{Transport: inProcess{h: s.handler, remoteAddr: r.RemoteAddr}}
		// The base URL only names the requests: they never leave the
		// process.
		c, err := client.New("http://lazarus.internal", token, client.WithHTTPClient(hc))
		if err != nil {
			return nil
		}
		return mcpserver.New(c, mcpserver.Who{Actor: p.Actor, Role: string(p.Role), Queues: p.Queues.String()},
			mcpserver.Options{Version: s.build.Version})
	}
	// The SDK refuses a request that reaches a loopback address with
	// another host name (a page whose name was rebound to 127.0.0.1).
	// That protects a server nobody authenticates to; it would also
	// refuse every request a reverse proxy on the same machine passes on
	// (Host: lazarus.example.com to 127.0.0.1:8080). A request with a
	// bearer token needs no such protection, since a rebound page has no
	// token: only the open API's requests without one (anonymous, local
	// development) keep it.
	withToken := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, DisableLocalhostProtection: true})
	anonymous := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return func(c echo.Context) error {
		if c.Request().Header.Get(echo.HeaderAuthorization) != "" {
			withToken.ServeHTTP(c.Response(), c.Request())
		} else {
			anonymous.ServeHTTP(c.Response(), c.Request())
		}
		return nil
	}
}

// inProcess is an http.RoundTripper that serves a request with the
// server's own handler instead of sending it: the MCP tools' API calls.
// The request keeps the /mcp request's remote address, so that what the
// API logs or limits by address sees the agent's.
type inProcess struct {
	h          http.Handler
	remoteAddr string
}

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.RemoteAddr = t.remoteAddr
	r.RequestURI = r.URL.RequestURI()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	// The API's JSON answers are small (a page of dead letters at most):
	// recording one whole is simpler than streaming it, and the tools
	// read it whole anyway.
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}
