package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/gcfloor"
	"github.com/lazarus-dlq/lazarus/password"
	"github.com/lazarus-dlq/lazarus/web"
)

// adminToken is the bearer token the benchmark's API calls carry:
// web.Config.AdminToken (LAZARUS_ADMIN_TOKEN), an admin on the API.
const adminToken = "bench-admin-token-0123456789abcdef"

// server is the real echo server of ours on 127.0.0.1:0.
type server struct {
	http    *http.Server
	base    string
	client  *http.Client
	gcfloor func() // its stop
}

// startServer serves o over HTTP on a free loopback port, with the
// lazarus binary's floor under the collector (gcfloor: the process's,
// until close).
func startServer(o *ours) (*server, error) {
	srv := web.New(web.Config{
		Broker:     o.b,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		HealthFunc: o.db.Ping,
		AdminToken: adminToken,
		BcryptCost: 4, // the benchmark user's login is not what is measured
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{
		http:    &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second},
		base:    "http://" + ln.Addr().String(),
		gcfloor: gcfloor.Start(gcfloor.Floor, os.Getenv),
	}
	s.client = &http.Client{Transport: newTransport(), Timeout: 60 * time.Second}
	go s.http.Serve(ln)
	return s, nil
}

func newTransport() *http.Transport {
	return &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128, IdleConnTimeout: time.Minute}
}

// close stops the server. The clients' idle connections go first: the
// server would take a connection that never carried a request for an
// active one for five seconds.
func (s *server) close() {
	s.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.http.Shutdown(ctx) != nil {
		s.http.Close()
	}
	if s.gcfloor != nil {
		s.gcfloor()
	}
}

// api calls the JSON API as the admin token: body (when not nil) goes as
// JSON, the answer is decoded into out (when not nil). It returns the
// status.
func (s *server) api(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// The API's shapes, as the benchmark uses them.
type (
	apiPushItem struct {
		Queue     string          `json:"queue"`
		Partition string          `json:"partition,omitempty"`
		Payload   json.RawMessage `json:"payload"`
	}
	apiPop struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"messages"`
		LeaseID *string `json:"leaseId"`
	}
	// apiPopBodies is a pop's answer with the payloads.
	apiPopBodies struct {
		Messages []struct {
			TransactionID string          `json:"transactionId"`
			PartitionID   string          `json:"partitionId"`
			Payload       json.RawMessage `json:"data"`
		} `json:"messages"`
		LeaseID *string `json:"leaseId"`
	}
	apiAck struct {
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		LeaseID       string `json:"leaseId"`
		Status        string `json:"status"`
	}
	apiAckResult struct {
		Success bool    `json:"success"`
		Error   *string `json:"error"`
	}
)

// Dashboard sessions.

const (
	benchUser     = "bench"
	benchPassword = "bench-password-not-secret"
)

var csrfFieldRE = regexp.MustCompile(`name="_csrf"[^>]*value="([^"]+)"|value="([^"]+)"[^>]*name="_csrf"`)

// errNoLogin says the dashboard's pages could not be reached with a
// session: the cases that need them report it and go on.
var errNoLogin = errors.New("dashboard login not available")

// dashboardClient returns a client logged in to the dashboard as an admin
// user it creates (broker.CreateUser with a bcrypt hash), through the login
// form: GET /login for the CSRF token, then POST /login.
func (s *server) dashboardClient(ctx context.Context, b *broker.Broker) (*http.Client, error) {
	hash, err := password.Hash(benchPassword, 4)
	if err != nil {
		return nil, err
	}
	if _, err := b.UserByName(ctx, benchUser); errors.Is(err, broker.ErrNotFound) {
		if _, err := b.CreateUser(ctx, benchUser, broker.RoleAdmin, hash, "bench"); err != nil {
			return nil, fmt.Errorf("create user: %w", err)
		}
	} else if err != nil {
		return nil, err
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{
		Transport: newTransport(),
		Jar:       jar,
		Timeout:   60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // the redirect after the login would render the overview
		},
	}
	resp, err := c.Get(s.base + "/login")
	if err != nil {
		return nil, err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET /login: %s", errNoLogin, resp.Status)
	}
	m := csrfFieldRE.FindSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("%w: no _csrf field on the login page", errNoLogin)
	}
	token := string(m[1]) + string(m[2])
	form := url.Values{"name": {benchUser}, "password": {benchPassword}, "_csrf": {token}, "next": {"/"}}
	resp, err = c.PostForm(s.base+"/login", form)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("%w: POST /login: %s", errNoLogin, resp.Status)
	}
	return c, nil
}

// getPage fetches a dashboard page (fragment: as htmx asks) and returns
// how long it took and its status; only a failure to get an answer at all
// is an error.
func getPage(ctx context.Context, c *http.Client, u string, fragment bool) (time.Duration, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	if fragment {
		req.Header.Set("HX-Request", "true")
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start), resp.StatusCode, err
}
