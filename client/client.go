// Package client is a typed Go client of Lazarus's JSON API (/api/v1):
// dead letters and their bulk replay and delete, jobs, error groups and
// holds. The command line's `lazarus dlq|jobs|groups|hold|release` and the
// MCP server use it; any Go program may.
//
// Every method takes a context first and returns the API's answer decoded
// into a typed value whose Raw field keeps the body as the server sent
// it (for callers that print the API's own JSON). A non-2xx answer is an
// *Error with the HTTP status and the API's error text.
//
// The package imports only the standard library: it is the API's wire
// format, not the server's code, so a program that talks to Lazarus does
// not pull in echo, SQLite or the broker.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultServer is the server a client talks to when none is named: a
// `lazarus serve` on this machine with its default address.
const DefaultServer = "http://localhost:8080"

// DefaultAnswerTimeout is how long a client waits for the server to
// begin its answer (WithHTTPClient sets another).
const DefaultAnswerTimeout = 2 * time.Minute

// maxErrorBody is how much of an error answer is read: the API's errors
// are short JSON objects, and a proxy's HTML page is cut.
const maxErrorBody = 64 << 10

// Client talks to one Lazarus server with one bearer token. It is safe
// for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// Option changes a Client made by New.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc (its
// timeouts, transport, TLS settings) instead of a client of its own.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// New returns a client of the server at server (a base URL such as
// https://lazarus.example.com or http://127.0.0.1:8080, with or without
// a path prefix before /api/v1) sending token as its bearer token ("":
// none, for a server whose API is open).
func New(server, token string, opts ...Option) (*Client, error) {
	if server == "" {
		server = DefaultServer
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("server %q: want an http:// or https:// URL with a host", server)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("server %q: a query or fragment has no place in the server's URL", server)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	// No timeout on the whole exchange: an export streams for as long as
	// it has dead letters. A server that does not answer at all is given
	// up on; the caller's context ends the rest.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = DefaultAnswerTimeout
	c := &Client{base: u, token: token, http: &http.Client{Transport: tr}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Server is the base URL the client talks to.
func (c *Client) Server() string { return c.base.String() }

// Error is an answer of the API that is not a success: its HTTP status,
// the API's error text ({"error": "..."}, or the status's text when the
// body has none) and the body as sent (some errors say more: a replay's
// 404 says what became of the dead letter, a refused resolve's 409 its
// evidence).
type Error struct {
	Status  int
	Message string
	Body    json.RawMessage
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// StatusOf is the HTTP status of an *Error in err's chain; 0 when the
// error is not an answer of the API (the server could not be reached).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// do sends a request to path (under /api/v1) with query and, when body is
// not nil, body as JSON; a 2xx answer's body is returned, anything else
// is an *Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any) ([]byte, int, error) {
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return b, resp.StatusCode, nil
}

// send sends a request and returns the response of a 2xx answer, whose
// body the caller closes; anything else is read into an *Error.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	// path's segments are escaped already (seg): the URL is put together
	// as text, so that an escaped slash in a fingerprint stays escaped.
	target := c.base.String() + "/api/v1" + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode, Body: b}
	var msg struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &msg) == nil && msg.Error != "" {
		e.Message = msg.Error
	} else {
		e.Message = strings.ToLower(http.StatusText(resp.StatusCode))
		if e.Message == "" {
			e.Message = "status " + strconv.Itoa(resp.StatusCode)
		}
	}
	return nil, e
}

// call sends a request and decodes a 2xx answer into out, keeping the
// body in out's Raw.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	b, status, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return status, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return status, fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	if r, ok := out.(rawSetter); ok {
		r.setRaw(b)
	}
	return status, nil
}

// rawSetter is an answer that keeps its body.
type rawSetter interface{ setRaw([]byte) }

// body keeps an answer's body as the server sent it, in Raw: what a
// caller prints as the API's own JSON (every answer type embeds it).
type body struct {
	Raw json.RawMessage `json:"-"`
}

func (r *body) setRaw(b []byte) { r.Raw = b }

// seg escapes one path segment (an id, a fingerprint with spaces and
// slashes).
func seg(s string) string { return url.PathEscape(s) }

// params is a query of the pairs key, value given, leaving out the keys
// whose value is "" (the API's default).
func params(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// setNumber sets key to n when n is above 0 (0: the API's default).
func setNumber(q url.Values, key string, n int) {
	if n > 0 {
		q.Set(key, strconv.Itoa(n))
	}
}
