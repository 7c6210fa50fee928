package web_test

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// access is who may call a route.
type access int

const (
	public   access = iota // anyone, without a session or a token
	viewer                 // a viewer and up
	operator               // an operator and up
	admin                  // admins only
)

// routeAccess is the least access of every route, pages and API alike. A
// route of the server without a row here fails TestEveryRouteChecksTheRole:
// add one when you add a route.
var routeAccess = map[string]access{
	"GET /health":                                             public,
	"GET /static/*":                                           public,
	"GET /login":                                              public,
	"POST /login":                                             public,
	"POST /logout":                                            public, // without a session it just leads to the login page
	"GET /login/sso":                                          public, // single sign-on's start (404 without it)
	"GET /login/sso/callback":                                 public, // the provider's answer: refused without this browser's login in progress
	"GET /":                                                   viewer,
	"GET /charts":                                             viewer,
	"GET /charts/queues":                                      viewer,
	"GET /metrics":                                            viewer, // with a bearer token, like the API
	"GET /search":                                             viewer,
	"GET /audit":                                              viewer,
	"GET /admin/users":                                        admin,
	"GET /admin/notify":                                       admin,
	"POST /admin/notify/channels":                             admin,
	"POST /admin/notify/channels/:id/delete":                  admin,
	"POST /admin/notify/channels/:id/test":                    admin,
	"POST /admin/notify/rules":                                admin,
	"POST /admin/notify/rules/:id/delete":                     admin,
	"GET /admin/notify/deliveries":                            admin,
	"GET /api/v1/notify/channels":                             admin,
	"POST /api/v1/notify/channels":                            admin,
	"DELETE /api/v1/notify/channels/:id":                      admin,
	"POST /api/v1/notify/channels/:id/test":                   admin,
	"GET /api/v1/notify/rules":                                admin,
	"POST /api/v1/notify/rules":                               admin,
	"DELETE /api/v1/notify/rules/:id":                         admin,
	"GET /api/v1/notify/deliveries":                           admin,
	"GET /admin/thresholds":                                   admin,
	"POST /admin/thresholds":                                  admin,
	"POST /admin/users":                                       admin,
	"POST /admin/users/:id/role":                              admin,
	"POST /admin/users/:id/queues":                            admin,
	"POST /admin/users/:id/delete":                            admin,
	"POST /admin/tokens":                                      admin,
	"POST /admin/users/:id/tokens/:token/revoke":              admin,
	"GET /queues/:queue":                                      viewer,
	"POST /queues/:queue/holds":                               operator,
	"POST /holds/:id/release":                                 operator,
	"GET /queues/:queue/dead-letters":                         viewer,
	"GET /queues/:queue/dead-letters/:id":                     viewer,
	"GET /queues/:queue/dead-letters/:id/payload":             viewer,
	"GET /queues/:queue/dead-letters/:id/error":               viewer,
	"POST /queues/:queue/dead-letters/:id/reveal":             viewer, // and the queue's maskRevealRole (mask_test.go)
	"GET /queues/:queue/dead-letters/confirm":                 operator,
	"GET /queues/:queue/dead-letters/export":                  operator,
	"POST /queues/:queue/dead-letters/replay":                 operator,
	"POST /queues/:queue/dead-letters/delete":                 operator,
	"POST /queues/:queue/dead-letters/:id/replay":             operator,
	"GET /queues/:queue/dead-letters/:id/edit":                operator,
	"POST /queues/:queue/dead-letters/:id/edit/preview":       operator,
	"POST /queues/:queue/dead-letters/:id/edit":               operator,
	"POST /queues/:queue/dead-letters/:id/delete":             operator,
	"POST /queues/:queue/dead-letters/:id/restore":            operator,
	"POST /api/v1/configure":                                  admin,
	"GET /api/v1/resources/queues":                            viewer,
	"GET /api/v1/resources/queues/:queue":                     viewer,
	"DELETE /api/v1/resources/queues/:queue":                  admin,
	"POST /api/v1/push":                                       operator,
	"GET /api/v1/pop/queue/:queue":                            operator,
	"GET /api/v1/pop/queue/:queue/partition/:partition":       operator,
	"GET /api/v1/pop":                                         operator,
	"POST /api/v1/traces":                                     operator,
	"POST /api/v1/ack":                                        operator,
	"POST /api/v1/ack/batch":                                  operator,
	"POST /api/v1/lease/:leaseId/extend":                      operator,
	"POST /api/v1/transaction":                                operator,
	"GET /api/v1/system/maintenance":                          viewer,
	"POST /api/v1/system/maintenance":                         operator,
	"GET /api/v1/system/maintenance/pop":                      viewer,
	"POST /api/v1/system/maintenance/pop":                     operator,
	"GET /api/v1/search":                                      viewer,
	"POST /api/v1/holds":                                      operator,
	"GET /api/v1/holds":                                       viewer,
	"DELETE /api/v1/holds/:id":                                operator,
	"GET /api/v1/dlq":                                         viewer,
	"GET /api/v1/dlq/:id":                                     viewer,
	"GET /api/v1/dlq/export":                                  operator,
	"POST /api/v1/dlq/:id/replay":                             operator,
	"DELETE /api/v1/dlq/:id":                                  operator,
	"POST /api/v1/dlq/replay":                                 operator,
	"POST /api/v1/dlq/delete":                                 operator,
	"POST /api/v1/messages/:partitionId/:transactionId/retry": operator,
	"GET /api/v1/messages/:partitionId/:transactionId":        viewer,
	"DELETE /api/v1/messages/:partitionId/:transactionId":     operator,
	"DELETE /api/v1/consumer-groups/:group":                   operator,
	"DELETE /api/v1/consumer-groups/:group/queues/:queue":     operator,
	"POST /api/v1/consumer-groups/:group/queues/:queue/seek":  operator,
	"POST /api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek": operator,
	"POST /api/v1/consumer-groups/:group/subscription":                             operator,
	"GET /api/v1/consumer-groups":                                                  viewer,
	"GET /api/v1/consumer-groups/lagging":                                          viewer,
	"GET /api/v1/consumer-groups/:group":                                           viewer,
	"POST /api/v1/stats/refresh":                                                   operator,
	"GET /api/v1/status/queues":                                                    viewer,
	"GET /api/v1/status/queues/:queue":                                             viewer,
	"GET /api/v1/messages":                                                         viewer,
	"GET /jobs":                                                                    viewer,
	"GET /jobs/:id":                                                                viewer,
	"GET /jobs/:id/progress":                                                       viewer,
	"GET /live/overview":                                                           viewer,
	"GET /live/queues/:queue":                                                      viewer,
	"GET /live/jobs/:id":                                                           viewer,
	"POST /jobs/:id/pause":                                                         operator,
	"POST /jobs/:id/resume":                                                        operator,
	"POST /jobs/:id/cancel":                                                        operator,
	"POST /jobs/:id/undo":                                                          operator,
	"GET /api/v1/jobs":                                                             viewer,
	"GET /api/v1/jobs/:id":                                                         viewer,
	"POST /api/v1/jobs/:id/pause":                                                  operator,
	"POST /api/v1/jobs/:id/resume":                                                 operator,
	"POST /api/v1/jobs/:id/cancel":                                                 operator,
	"POST /api/v1/jobs/:id/undo":                                                   operator,
	"GET /api/v1/whoami":                                                           viewer,
	"POST /mcp":                                                                    viewer, // a bearer token, like the API; the tools offered follow the role
	"GET /api/v1/error-groups":                                                     viewer,
	"GET /api/v1/error-groups/:fingerprint":                                        viewer,
	"POST /api/v1/error-groups/:fingerprint/state":                                 operator,
	"GET /error-groups":                                                            viewer,
	"GET /error-groups/:id":                                                        viewer,
	"POST /error-groups/:id/state":                                                 operator,
}

// caller is who makes a request in the table.
type caller struct {
	name   string
	role   broker.Role // "" for none
	forged bool        // a made-up session cookie or token
}

var callers = []caller{
	{name: "NoSession"},
	{name: "Forged", forged: true},
	{name: "Viewer", role: broker.RoleViewer},
	{name: "Operator", role: broker.RoleOperator},
	{name: "Admin", role: broker.RoleAdmin},
}

func (c caller) allowed(need access) bool {
	switch {
	case need == public:
		return true
	case c.role == "":
		return false
	case need == viewer:
		return c.role.Allows(broker.RoleViewer)
	case need == operator:
		return c.role.Allows(broker.RoleOperator)
	}
	return c.role.Allows(broker.RoleAdmin)
}

// samplePath fills a route's parameters with values that name nothing,
// so that allowed calls change nothing.
func samplePath(route string) string {
	parts := strings.Split(route, "/")
	for i, p := range parts {
		switch {
		case p == "*":
			parts[i] = "app.css"
		case p == ":queue":
			parts[i] = "q"
		case strings.HasPrefix(p, ":"):
			parts[i] = "999999"
		}
	}
	return strings.Join(parts, "/")
}

// TestEveryRouteChecksTheRole calls every route of the server as every
// kind of caller: nobody, a forged session or token, viewer, operator and
// admin. Below the route's role the dashboard sends visitors without a
// session to the login page (303) and answers others 403; the API answers
// 401 without a valid token and 403 below the role. Allowed calls may
// fail for other reasons (the sample names nothing), never for these.
func TestEveryRouteChecksTheRole(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.OpenAPI = false })
	users := map[broker.Role]broker.User{}
	tokens := map[broker.Role]string{}
	for _, role := range []broker.Role{broker.RoleViewer, broker.RoleOperator, broker.RoleAdmin} {
		users[role] = s.addUser("table-"+string(role), role)
		tokens[role] = s.apiToken(users[role], "table")
	}

	var routes []string
	for _, r := range s.server.Routes() {
		routes = append(routes, r.Method+" "+r.Path)
	}
	sort.Strings(routes)
	seen := map[string]bool{}
	for _, route := range routes {
		seen[route] = true
		if _, ok := routeAccess[route]; !ok {
			t.Errorf("route %s has no row in routeAccess: say who may call it", route)
		}
	}
	for route := range routeAccess {
		if !seen[route] {
			t.Errorf("routeAccess has %s, which the server does not serve", route)
		}
	}

	for _, route := range routes {
		need, ok := routeAccess[route]
		if !ok {
			continue
		}
		method, pattern, _ := strings.Cut(route, " ")
		path := samplePath(pattern)
		api := strings.HasPrefix(pattern, "/api/v1/") || pattern == "/metrics" || pattern == "/mcp"
		for _, c := range callers {
			// Logged in here, one at a time: the same user's logins at once
			// would be refused (login_limit.go).
			var session, csrf string
			if !api && !c.forged && c.role != "" {
				b := s.browser()
				u := users[c.role]
				b.login(u.Name, passwordOf(u.Name)).wantRedirect("/")
				session, csrf = b.cookie("lazarus_session"), b.cookie("lazarus_csrf")
			}
			t.Run(route+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				s := s.sub(t)
				var r response
				if api {
					h := http.Header{}
					switch {
					case c.forged:
						h.Set("Authorization", "Bearer "+broker.TokenPrefix+"forged")
					case c.role != "":
						h.Set("Authorization", "Bearer "+tokens[c.role])
					}
					r = s.request(s.ctx, method, path, "", h)
				} else {
					b := s.browser()
					switch {
					case c.forged:
						b.setCookie("lazarus_session", "MTczMzA5NjAwMHxmb3JnZWR8")
					case c.role != "":
						b.setCookie("lazarus_session", session)
						b.setCookie("lazarus_csrf", csrf)
					}
					switch {
					case method == http.MethodGet && strings.HasPrefix(pattern, "/live/"):
						// An event stream that is let in stays open: its
						// HEAD is answered as its GET (same status and
						// headers), and ends.
						r = b.do(http.MethodHead, path, nil, nil)
					case method == http.MethodGet:
						r = b.get(path)
					default:
						r = b.do(method, path, strings.NewReader(url.Values{"_csrf": {b.csrf()}}.Encode()),
							http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
					}
				}
				toLogin := r.status == http.StatusSeeOther && strings.HasPrefix(r.header.Get("Location"), "/login")
				switch {
				case need == public:
					if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden || r.status >= 500 {
						t.Fatalf("public route answered %d: %s", r.status, r.body)
					}
				case c.allowed(need):
					if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden || toLogin || r.status >= 500 {
						t.Fatalf("allowed caller answered %d (Location %q): %s", r.status, r.header.Get("Location"), r.body)
					}
				case api && c.role == "":
					r.wantError(http.StatusUnauthorized)
				case api:
					r.wantError(http.StatusForbidden)
				case c.role == "":
					if !toLogin {
						t.Fatalf("no session: %d (Location %q), want 303 to the login page", r.status, r.header.Get("Location"))
					}
					if method == http.MethodGet && r.header.Get("Location") != "/login?next="+url.QueryEscape(path) {
						t.Fatalf("Location %q does not lead back to %s", r.header.Get("Location"), path)
					}
				default:
					r.want(http.StatusForbidden)
				}
			})
		}
	}
}
