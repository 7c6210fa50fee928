package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// The fixture of the scope table: a queue the scoped principals are
// kept out of (or let into), with one of each thing a route can name.
const (
	scopedQueue  = "scoped-orders"
	scopedMarker = "scoped-marker" // in the fixture's payloads and error texts
	absentQueue  = "no-such-queue"
)

// scopeFixture is what the table's paths name.
type scopeFixture struct {
	deadLetter  string // a dead letter's message id
	job         int64
	hold        int64
	errorGroup  int64
	fingerprint string
	partitionID string
	txid        string
	leaseID     string
}

// scopeBodies are the bodies of the routes that name a queue in their
// body, %[1]s the queue; the others are sent none.
var scopeBodies = map[string]string{
	"POST /api/v1/push":                            `{"items":[{"queue":%[1]q,"payload":{"n":1}}]}`,
	"POST /api/v1/configure":                       `{"queue":%[1]q,"options":{"retryLimit":0}}`,
	"POST /api/v1/holds":                           `{"queue":%[1]q,"reason":"scope table"}`,
	"POST /api/v1/dlq/replay":                      `{"filter":{"queue":%[1]q},"dryRun":true}`,
	"POST /api/v1/dlq/delete":                      `{"filter":{"queue":%[1]q},"dryRun":true}`,
	"POST /api/v1/transaction":                     `{"operations":[{"type":"push","items":[{"queue":%[1]q,"payload":{"n":1}}]}]}`,
	"POST /api/v1/error-groups/:fingerprint/state": `{"queue":%[1]q,"state":"acknowledged"}`,
}

// scopeQueries are the queries of lists that find nothing without one:
// the fixture's transaction id searched, its queue's name begun.
var scopeQueries = map[string]string{
	"GET /search":            "?q=tx-scope-1",
	"GET /api/v1/search":     "?q=tx-scope-1",
	"GET /charts/queues":     "?queue=scoped",
	"GET /api/v1/dlq":        "?error=" + scopedMarker,
	"GET /api/v1/dlq/export": "?error=" + scopedMarker,
}

// scopeExempt are routes the table does not call scoped, and why.
var scopeExempt = map[string]string{
	"GET /health": "public", "GET /static/*": "public", "GET /login": "public", "POST /login": "public", "POST /logout": "ends the session the table uses",
	"POST /api/v1/system/maintenance": "changes every queue's deliveries: not a queue's", "POST /api/v1/system/maintenance/pop": "likewise",
	"POST /api/v1/stats/refresh": "changes nothing",
	"POST /api/v1/traces":        "names a message by lease, like an ack", "POST /api/v1/ack": "needs a lease of a pop the scope refuses",
	"POST /api/v1/ack/batch": "likewise", "POST /api/v1/lease/:leaseId/extend": "likewise",
}

// scopeRefused are routes that act on every queue at once: refused to a
// principal limited to some queues, with this status.
var scopeRefused = map[string]int{
	"GET /api/v1/pop":                                  http.StatusBadRequest, // pops by labels pick among every queue
	"DELETE /api/v1/consumer-groups/:group":            http.StatusBadRequest, // the group of every queue
	"POST /api/v1/consumer-groups/:group/subscription": http.StatusBadRequest, // likewise
	"POST /admin/thresholds":                           http.StatusForbidden,  // every queue's thresholds
	// Users and tokens: an admin limited to some queues could give
	// others, or themself, the queues they do not see.
	"POST /admin/users":                          http.StatusForbidden,
	"POST /admin/users/:id/role":                 http.StatusForbidden,
	"POST /admin/users/:id/queues":               http.StatusForbidden,
	"POST /admin/users/:id/delete":               http.StatusForbidden,
	"POST /admin/tokens":                         http.StatusForbidden,
	"POST /admin/users/:id/tokens/:token/revoke": http.StatusForbidden,
	// Notifications: their rules and deliveries are every queue's.
	"GET /admin/notify":                      http.StatusForbidden,
	"POST /admin/notify/channels":            http.StatusForbidden,
	"POST /admin/notify/channels/:id/delete": http.StatusForbidden,
	"POST /admin/notify/channels/:id/test":   http.StatusForbidden,
	"POST /admin/notify/rules":               http.StatusForbidden,
	"POST /admin/notify/rules/:id/delete":    http.StatusForbidden,
	"GET /admin/notify/deliveries":           http.StatusForbidden,
	"GET /api/v1/notify/channels":            http.StatusForbidden,
	"POST /api/v1/notify/channels":           http.StatusForbidden,
	"DELETE /api/v1/notify/channels/:id":     http.StatusForbidden,
	"POST /api/v1/notify/channels/:id/test":  http.StatusForbidden,
	"GET /api/v1/notify/rules":               http.StatusForbidden,
	"POST /api/v1/notify/rules":              http.StatusForbidden,
	"DELETE /api/v1/notify/rules/:id":        http.StatusForbidden,
	"GET /api/v1/notify/deliveries":          http.StatusForbidden,
}

// scopePath fills a route's parameters with the fixture's (queue) or
// with names of nothing (absent).
func scopePath(route string, f scopeFixture, queue string) string {
	parts := strings.Split(route, "/")
	for i, p := range parts {
		switch {
		case p == ":queue":
			parts[i] = queue
		case p == ":partitionId":
			parts[i] = f.partitionID
		case p == ":transactionId":
			parts[i] = f.txid
		case p == ":leaseId":
			parts[i] = f.leaseID
		case p == ":group":
			parts[i] = "scope-group"
		case p == ":partition":
			parts[i] = "Default"
		case p == ":fingerprint":
			parts[i] = url.PathEscape(f.fingerprint)
		case p == ":id":
			prefix := strings.Join(parts[:i], "/")
			switch {
			case strings.HasSuffix(prefix, "/dead-letters"), strings.HasSuffix(prefix, "/dlq"):
				parts[i] = f.deadLetter
			case strings.HasSuffix(prefix, "/jobs"):
				parts[i] = strconv.FormatInt(f.job, 10)
			case strings.HasSuffix(prefix, "/holds"):
				parts[i] = strconv.FormatInt(f.hold, 10)
			case strings.HasSuffix(prefix, "/error-groups"):
				parts[i] = strconv.FormatInt(f.errorGroup, 10)
			default:
				parts[i] = "999999"
			}
		}
	}
	p := strings.Join(parts, "/")
	if strings.HasPrefix(route, "GET /api/v1/error-groups/:fingerprint") {
		p += "?queue=" + queue
	}
	return p
}

// absentPath is a route's path naming nothing: the answer a principal
// gets for what is not there.
func absentPath(route string) string {
	p := samplePath(route)
	p = strings.ReplaceAll(p, "/q/", "/"+absentQueue+"/")
	if strings.HasSuffix(p, "/q") {
		p = strings.TrimSuffix(p, "/q") + "/" + absentQueue
	}
	if strings.Contains(route, ":fingerprint") && strings.HasPrefix(route, "GET ") {
		p += "?queue=" + absentQueue
	}
	return p
}

// scopedAdmin makes an admin limited to scope, with a token and a
// logged-in browser.
func (s *bundle) scopedAdmin(name, scope string) (token string, b *browser) {
	s.t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(passwordOf(name)), bcrypt.MinCost)
	if err != nil {
		s.t.Fatal(err)
	}
	sc := broker.MustParseQueueScope(scope)
	u, err := s.broker.CreateUserWith(s.ctx, broker.UserParams{Name: name, Role: broker.RoleAdmin, PasswordHash: string(h), Queues: &sc}, "test")
	if err != nil {
		s.t.Fatal(err)
	}
	token = s.apiToken(u, "scope-table")
	b = s.browser()
	b.login(u.Name, passwordOf(u.Name)).wantRedirect("/")
	return token, b
}

// TestEveryRouteKeepsOutOfScopeQueuesAbsent calls every route as an admin
// limited to queues that exclude the fixture's queue ("other-*"), as one
// limited to queues that include it ("scoped-*") and as an admin of every
// queue. Out of scope is as if absent: a route that names the queue or a
// thing of it answers 404 (or what it answers for a name of nothing) and
// a list does not show it, its payloads or its errors; in scope, a route
// answers as it does to the unlimited admin.
func TestEveryRouteKeepsOutOfScopeQueuesAbsent(t *testing.T) {
	s := setup(t, func(c *web.Config) { c.OpenAPI = false })
	root := s.addUser("scope-root", broker.RoleAdmin)
	s.token = s.apiToken(root, "fixture")
	rootBrowser := s.browser()
	rootBrowser.login(root.Name, passwordOf(root.Name)).wantRedirect("/")

	// The fixture: a dead letter (its error group), a job, a message
	// popped (its lease) and, last, a hold (it holds pops).
	var f scopeFixture
	dl := s.fail(scopedQueue, "", "scope-group", "tx-scope-1", `{"card":"`+scopedMarker+`"}`, "boom "+scopedMarker)
	f.deadLetter = dl.ID
	other := s.fail(scopedQueue, "", "scope-group", "tx-scope-2", `{"n":2}`, "boom "+scopedMarker)
	var job struct {
		Job struct {
			ID int64 `json:"id"`
		} `json:"job"`
	}
	s.call("POST", "/api/v1/dlq/delete", fmt.Sprintf(`{"ids":[%q],"wait":true}`, other.ID)).want(http.StatusOK).decode(&job)
	f.job = job.Job.ID
	var groups struct {
		Groups []struct {
			ID          int64  `json:"id"`
			Fingerprint string `json:"fingerprint"`
		} `json:"errorGroups"`
	}
	s.call("GET", "/api/v1/error-groups?queue="+scopedQueue, "").want(http.StatusOK).decode(&groups)
	if len(groups.Groups) == 0 {
		t.Fatalf("no error group")
	}
	f.errorGroup, f.fingerprint = groups.Groups[0].ID, groups.Groups[0].Fingerprint
	p := s.push(scopedQueue, "", "tx-scope-3", `{"m":"`+scopedMarker+`"}`)
	f.partitionID, f.txid = p.PartitionID, p.TransactionID
	popped := s.pop(scopedQueue, "consumerGroup=scope-popper")
	f.leaseID = *popped.Messages[0].LeaseID
	var hold struct {
		ID int64 `json:"id"`
	}
	s.call("POST", "/api/v1/holds", fmt.Sprintf(`{"queue":%q,"reason":"fixture"}`, scopedQueue)).want(http.StatusCreated).decode(&hold)
	f.hold = hold.ID
	s.fail("other-billing", "", "", "tx-other", `{"n":3}`, "other boom")

	outToken, outBrowser := s.scopedAdmin("scope-out", "other-*")
	inToken, inBrowser := s.scopedAdmin("scope-in", "scoped-*, other-*")

	var routes []string
	for _, r := range s.server.Routes() {
		routes = append(routes, r.Method+" "+r.Path)
	}
	sort.Strings(routes)
	for _, route := range routes {
		if _, ok := scopeExempt[route]; ok {
			continue
		}
		method, pattern, _ := strings.Cut(route, " ")
		api := strings.HasPrefix(pattern, "/api/v1/") || pattern == "/metrics"
		call := func(t *testing.T, token string, b *browser, path, queue string) response {
			var body string
			if tmpl, ok := scopeBodies[route]; ok {
				body = fmt.Sprintf(tmpl, queue)
			}
			if api {
				h := http.Header{"Authorization": {"Bearer " + token}}
				if body != "" {
					h.Set("Content-Type", "application/json")
				}
				return s.sub(t).request(s.ctx, method, path, body, h)
			}
			b = &browser{s: s.sub(t), client: b.client}
			switch {
			case method == http.MethodGet && strings.HasPrefix(pattern, "/live/"):
				return b.do(http.MethodHead, path, nil, nil)
			case method == http.MethodGet:
				return b.get(path)
			}
			return b.do(method, path, strings.NewReader(url.Values{"_csrf": {b.csrf()}}.Encode()),
				http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
		}
		t.Run(route, func(t *testing.T) {
			fixturePath := scopePath(pattern, f, scopedQueue) + scopeQueries[route]
			names := strings.Contains(pattern, ":") || scopeBodies[route] != ""
			out := call(t, outToken, outBrowser, fixturePath, scopedQueue)
			if want, ok := scopeRefused[route]; ok {
				if out.status != want {
					t.Fatalf("limited to some queues: %d, want %d: %.300s", out.status, want, out.body)
				}
				return
			}
			if names {
				absent := call(t, s.token, rootBrowser, absentPath(pattern), absentQueue)
				if out.status != http.StatusNotFound && out.status != absent.status {
					t.Fatalf("out of scope: %d, want 404 or %d (a name of nothing): %.300s", out.status, absent.status, out.body)
				}
			}
			// A 404 may echo the name asked for, as it does for a name of
			// nothing; nothing else of the fixture shows.
			if (out.status != http.StatusNotFound && strings.Contains(string(out.body), scopedQueue)) || strings.Contains(string(out.body), scopedMarker) {
				i := max(strings.Index(string(out.body), scopedQueue), strings.Index(string(out.body), scopedMarker))
				t.Fatalf("out of scope: %d shows the fixture's queue: …%.400s", out.status, out.body[max(i-300, 0):])
			}
			if method != http.MethodGet {
				return // changes: the unlimited admin's answer would change the fixture
			}
			in := call(t, inToken, inBrowser, fixturePath, scopedQueue)
			all := call(t, s.token, rootBrowser, fixturePath, scopedQueue)
			if in.status != all.status {
				t.Fatalf("in scope: %d, the unlimited admin %d: %.300s", in.status, all.status, in.body)
			}
			if strings.Contains(string(all.body), scopedQueue) != strings.Contains(string(in.body), scopedQueue) {
				t.Fatalf("in scope: the fixture's queue shown %v, to the unlimited admin %v", strings.Contains(string(in.body), scopedQueue), strings.Contains(string(all.body), scopedQueue))
			}
		})
	}
}
