package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/notify"
	"github.com/lazarus-dlq/lazarus/web"
)

// slackReceiver is a Slack incoming webhook of the test's own: it keeps
// the text of each message POSTed to it.
type slackReceiver struct {
	url string
	mu  sync.Mutex
	got []string
}

func newSlackReceiver(t *testing.T) *slackReceiver {
	r := &slackReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var m struct {
			Text string `json:"text"`
		}
		body, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, m.Text)
		r.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/services/T000/B000/SLACKPATHSECRET"
	return r
}

func (r *slackReceiver) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// setupNotify is setupStill with a Sender (package notify, allowed to
// reach the loopback) whose links start with https://lazarus.example.
func setupNotify(t *testing.T, edit ...func(*web.Config)) *bundle {
	t.Helper()
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	d, err := db.Open(ctx, storeAt(t, "l.db"), db.SyncNormal)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := broker.New(broker.Config{Store: d, Clock: c, Logger: log,
		Notify: notify.New(notify.Config{PublicURL: "https://lazarus.example", AllowPrivate: true, Logger: log})})
	t.Cleanup(b.Close)
	cfg := web.Config{Broker: b, Logger: log, HealthFunc: d.Ping, Clock: c, OpenAPI: true, BcryptCost: bcrypt.MinCost, SleepFunc: (&sleepLog{}).sleep}
	for _, e := range edit {
		e(&cfg)
	}
	srv := httptest.NewServer(web.New(cfg).Handler())
	t.Cleanup(srv.Close)
	return &bundle{t: t, ctx: ctx, url: srv.URL, broker: b, db: d, clock: c, logs: logs, sleeps: &sleepLog{}, token: cfg.AdminToken}
}

// The API of channels, rules and the delivery log: the answers' shapes,
// the webhook's secret in POST's answer and never again (nor a Slack
// URL's path, nor in the log), bad input 400 with the broker's words and
// nothing made, the test notification sent to a real receiver and its
// row in the log, the filters and the keyset pages.
func TestNotifyAPI(t *testing.T) {
	t.Parallel()
	s := setupNotify(t)
	slack := newSlackReceiver(t)

	var hook struct {
		ID     int64   `json:"id"`
		URL    *string `json:"url"`
		Secret string  `json:"secret"`
	}
	s.call("POST", "/api/v1/notify/channels", `{"name":"hooks","kind":"webhook","url":"https://receiver.example/in?key=QUERYSECRET"}`).want(http.StatusCreated).decode(&hook)
	if !strings.HasPrefix(hook.Secret, "whsec_") || hook.URL == nil || *hook.URL != "https://receiver.example/…" {
		t.Fatalf("POST a webhook: %+v", hook)
	}
	made := s.call("POST", "/api/v1/notify/channels", `{"name":"ops","kind":"slack","url":"`+slack.url+`"}`).want(http.StatusCreated)
	var ops struct {
		ID int64 `json:"id"`
	}
	made.decode(&ops)
	if strings.Contains(string(made.body), "SLACKPATHSECRET") || strings.Contains(string(made.body), `"secret"`) {
		t.Fatalf("a Slack channel's answer shows its URL's path or a secret: %s", made.body)
	}
	s.call("POST", "/api/v1/notify/channels", `{"name":"mail","kind":"email","smtpHost":"smtp.example","smtpPort":587,"smtpUser":"u","smtpPassword":"SMTPPASSWORD","from":"l@example.com","to":["ops@example.com"]}`).want(http.StatusCreated)

	list := s.call("GET", "/api/v1/notify/channels", "").want(http.StatusOK)
	for _, secret := range []string{hook.Secret, "QUERYSECRET", "SLACKPATHSECRET", "SMTPPASSWORD"} {
		if strings.Contains(string(list.body), secret) {
			t.Fatalf("GET channels shows %q: %s", secret, list.body)
		}
	}
	if !strings.Contains(string(list.body), `"smtpHost":"smtp.example","smtpPort":587,"smtpUser":"u","from":"l@example.com","to":["ops@example.com"]`) {
		t.Fatalf("GET channels: %s", list.body)
	}

	// Bad input: 400 with the broker's words, nothing made.
	s.call("POST", "/api/v1/notify/channels", `{"name":"x","kind":"slack","url":"ftp://files.example/x"}`).wantError(http.StatusBadRequest, "http or https")
	s.call("POST", "/api/v1/notify/channels", `{"name":"ops","kind":"slack","url":"https://hooks.example/x"}`).wantError(http.StatusBadRequest, "exists already")
	s.call("POST", "/api/v1/notify/channels", `{"name":"x","kind":"pager"}`).wantError(http.StatusBadRequest, "kind")
	s.call("POST", "/api/v1/notify/channels", `{"name":"x","kind":"slack","url":"https://h.example","extra":1}`).wantError(http.StatusBadRequest, "extra")
	s.call("POST", "/api/v1/notify/rules", `{"channel":`+itoa(ops.ID)+`,"events":["error_group.nope"],"queue":"*"}`).wantError(http.StatusBadRequest, "error_group.nope")
	s.call("POST", "/api/v1/notify/rules", `{"channel":`+itoa(ops.ID)+`,"events":[],"queue":"*"}`).wantError(http.StatusBadRequest, "at least one event")
	s.call("POST", "/api/v1/notify/rules", `{"channel":`+itoa(ops.ID)+`,"events":["hold.started"],"queue":"a b"}`).wantError(http.StatusBadRequest, "pattern")
	s.call("POST", "/api/v1/notify/rules", `{"events":["hold.started"]}`).wantError(http.StatusBadRequest, "channel")
	s.call("POST", "/api/v1/notify/rules", `{"channel":999,"events":["hold.started"]}`).wantError(http.StatusNotFound, "channel 999")
	s.call("GET", "/api/v1/notify/deliveries?state=lost", "").wantError(http.StatusBadRequest, "state")
	s.call("GET", "/api/v1/notify/deliveries?limit=0", "").wantError(http.StatusBadRequest, "limit")
	s.call("GET", "/api/v1/notify/deliveries?channel=x", "").wantError(http.StatusBadRequest, "channel")
	s.call("DELETE", "/api/v1/notify/channels/abc", "").wantError(http.StatusBadRequest, "channel id")
	if n := strings.Count(string(s.call("GET", "/api/v1/notify/channels", "").body), `"id":`); n != 3 {
		t.Fatalf("channels after the refused ones: %d", n)
	}
	if r := s.call("GET", "/api/v1/notify/rules", "").want(http.StatusOK); string(r.body) != `{"rules":[]}`+"\n" {
		t.Fatalf("rules after the refused ones: %s", r.body)
	}

	rule := s.call("POST", "/api/v1/notify/rules", `{"channel":`+itoa(ops.ID)+`,"events":["error_group.new","hold.started"],"queue":"orders*","consumerGroup":"billing"}`).want(http.StatusCreated)
	wantRule := `{"id":1,"channel":` + itoa(ops.ID) + `,"events":["error_group.new","hold.started"],"queue":"orders*","consumerGroup":"billing","createdAt":"2026-11-01T12:00:00.000Z","createdBy":"anonymous"}` + "\n"
	if string(rule.body) != wantRule {
		t.Fatalf("POST a rule:\n%s\nwant\n%s", rule.body, wantRule)
	}
	if r := s.call("GET", "/api/v1/notify/rules", ""); string(r.body) != `{"rules":[`+strings.TrimSuffix(wantRule, "\n")+`]}`+"\n" {
		t.Fatalf("GET rules: %s", r.body)
	}

	test := s.call("POST", "/api/v1/notify/channels/"+itoa(ops.ID)+"/test", "").want(http.StatusAccepted)
	if !strings.Contains(string(test.body), `"event":"test"`) || !strings.Contains(string(test.body), `"state":"pending"`) {
		t.Fatalf("POST test: %s", test.body)
	}
	s.call("POST", "/api/v1/notify/channels/999/test", "").wantError(http.StatusNotFound)
	if _, err := s.broker.SendNotifications(s.ctx); err != nil {
		t.Fatal(err)
	}
	if got := slack.texts(); len(got) != 1 || !strings.Contains(got[0], `"ops"`) || !strings.Contains(got[0], "https://lazarus.example/") {
		t.Fatalf("the receiver got %q", got)
	}
	var log struct {
		Deliveries []struct {
			ID        int64   `json:"id"`
			Channel   int64   `json:"channel"`
			Event     string  `json:"event"`
			State     string  `json:"state"`
			Attempts  int     `json:"attempts"`
			SentAt    *string `json:"sentAt"`
			NextAt    *string `json:"nextAt"`
			Test      bool    `json:"test"`
			LastError *string `json:"lastError"`
		} `json:"deliveries"`
		Next *int64 `json:"next"`
	}
	s.call("GET", "/api/v1/notify/deliveries?state=sent", "").want(http.StatusOK).decode(&log)
	if len(log.Deliveries) != 1 || log.Next != nil {
		t.Fatalf("sent: %+v", log)
	}
	if d := log.Deliveries[0]; d.Channel != ops.ID || d.Event != "test" || !d.Test || d.Attempts != 1 || d.SentAt == nil || d.NextAt != nil || d.LastError != nil {
		t.Fatalf("the sent test: %+v", d)
	}
	if r := s.call("GET", "/api/v1/notify/deliveries?state=pending", ""); string(r.body) != `{"deliveries":[],"next":null}`+"\n" {
		t.Fatalf("pending: %s", r.body)
	}

	// Keyset pages, newest first, filtered by channel.
	for range 2 {
		s.call("POST", "/api/v1/notify/channels/"+itoa(hook.ID)+"/test", "").want(http.StatusAccepted)
	}
	s.call("GET", "/api/v1/notify/deliveries?channel="+itoa(hook.ID)+"&limit=1", "").want(http.StatusOK).decode(&log)
	if len(log.Deliveries) != 1 || log.Next == nil || log.Deliveries[0].ID != 3 || log.Deliveries[0].State != "pending" || log.Deliveries[0].NextAt == nil {
		t.Fatalf("first page: %+v", log)
	}
	log.Next, log.Deliveries = nil, nil
	s.call("GET", "/api/v1/notify/deliveries?channel="+itoa(hook.ID)+"&limit=1&before=3", "").want(http.StatusOK).decode(&log)
	if len(log.Deliveries) != 1 || log.Deliveries[0].ID != 2 || log.Next != nil {
		t.Fatalf("second page: %+v", log)
	}

	s.call("DELETE", "/api/v1/notify/rules/1", "").want(http.StatusOK)
	s.call("DELETE", "/api/v1/notify/rules/1", "").wantError(http.StatusNotFound)
	del := s.call("DELETE", "/api/v1/notify/channels/"+itoa(hook.ID), "").want(http.StatusOK)
	if !strings.Contains(string(del.body), `"rulesDeleted":0,"pendingDeleted":2`) || strings.Contains(string(del.body), hook.Secret) {
		t.Fatalf("DELETE a channel: %s", del.body)
	}
	s.call("DELETE", "/api/v1/notify/channels/"+itoa(hook.ID), "").wantError(http.StatusNotFound)

	for _, secret := range []string{hook.Secret, "QUERYSECRET", "SLACKPATHSECRET", "SMTPPASSWORD"} {
		if strings.Contains(s.logs.String(), secret) {
			t.Fatalf("the log has %q:\n%s", secret, s.logs.String())
		}
	}
}

// Only admins: an operator's token and an operator's session are
// refused on the API and the pages of notifications, and make nothing;
// an admin's forms need their CSRF token.
func TestNotifyIsForAdminsOnly(t *testing.T) {
	t.Parallel()
	s := setupNotify(t, func(c *web.Config) { c.OpenAPI = false })
	op := s.addUser("ops-person", broker.RoleOperator)
	tok := s.apiToken(op, "ci")
	as := http.Header{"Authorization": {"Bearer " + tok}}
	s.request(s.ctx, "GET", "/api/v1/notify/channels", "", as).wantError(http.StatusForbidden)
	s.request(s.ctx, "POST", "/api/v1/notify/channels", `{"name":"x","kind":"slack","url":"https://h.example/x"}`, as).wantError(http.StatusForbidden)
	s.request(s.ctx, "GET", "/api/v1/notify/deliveries", "", as).wantError(http.StatusForbidden)
	b, _ := s.loggedIn(broker.RoleOperator)
	if r := b.get("/admin/notify"); r.status != http.StatusForbidden {
		t.Fatalf("an operator's GET /admin/notify: %d", r.status)
	}
	if r := b.post("/admin/notify/channels", url.Values{"name": {"x"}, "kind": {"slack"}, "url": {"https://h.example/x"}}); r.status != http.StatusForbidden {
		t.Fatalf("an operator's POST of a channel: %d", r.status)
	}
	if chs, err := s.broker.Channels(s.ctx); err != nil || len(chs) != 0 {
		t.Fatalf("channels: %v %v", chs, err)
	}
	admin, _ := s.loggedIn(broker.RoleAdmin)
	// An admin's form without its CSRF token (another site's) is refused.
	for _, path := range []string{"/admin/notify/channels", "/admin/notify/rules", "/admin/notify/channels/1/test", "/admin/notify/channels/1/delete"} {
		if r := admin.postRaw(path, url.Values{"name": {"x"}, "kind": {"slack"}, "url": {"https://h.example/x"}}, nil); r.status != http.StatusForbidden {
			t.Fatalf("POST %s without a CSRF token: %d", path, r.status)
		}
	}
	if chs, err := s.broker.Channels(s.ctx); err != nil || len(chs) != 0 {
		t.Fatalf("channels after the forged forms: %v %v", chs, err)
	}
	if r := admin.get("/admin/notify").want(http.StatusOK); !strings.Contains(string(r.body), "No channels yet") {
		t.Fatalf("an admin's page: %s", r.body)
	}
	if r := admin.get("/admin/users").want(http.StatusOK); !strings.Contains(string(r.body), `href="/admin/notify"`) {
		t.Fatal("the users page does not link to notifications")
	}
}

// The pages: a webhook's secret is on the page the creation leads to,
// once, with "you will not see it again", and not on the next load; bad
// input says the broker's words and makes nothing; a rule from the
// checkboxes; a test sent and its row in the log, newest first, with
// its state; a failing channel's row says why and when it is tried next;
// text from the channel's name is escaped.
func TestNotifyPages(t *testing.T) {
	t.Parallel()
	s := setupNotify(t)
	slack := newSlackReceiver(t)
	b, _ := s.loggedIn(broker.RoleAdmin)

	b.post("/admin/notify/channels", url.Values{"kind": {"webhook"}, "name": {"hooks"}, "url": {"https://receiver.example/in"}}).wantRedirect("/admin/notify")
	page := string(b.get("/admin/notify").want(http.StatusOK).body)
	chs, err := s.broker.Channels(s.ctx)
	if err != nil || len(chs) != 1 {
		t.Fatalf("channels: %v %v", chs, err)
	}
	i := strings.Index(page, `data-testid="new-secret-value">whsec_`)
	if i < 0 || !strings.Contains(page, "you will not see it again") {
		t.Fatalf("the secret is not shown after the creation:\n%s", page)
	}
	secret := page[i+len(`data-testid="new-secret-value">`):]
	secret = secret[:strings.Index(secret, "<")]
	if again := string(b.get("/admin/notify").want(http.StatusOK).body); strings.Contains(again, secret) || strings.Contains(again, "new-secret") {
		t.Fatal("the secret is shown again on the next load")
	}

	b.post("/admin/notify/channels", url.Values{"kind": {"slack"}, "name": {"<b>ops</b>"}, "url": {"javascript:alert(1)"}}).wantRedirect("/admin/notify")
	if p := string(b.get("/admin/notify").body); !strings.Contains(p, "http or https") {
		t.Fatalf("bad URL: no error said:\n%s", p)
	}
	b.post("/admin/notify/channels", url.Values{"kind": {"email"}, "name": {"m"}, "smtpHost": {"smtp.example"}, "smtpPort": {"port"}, "from": {"a@example.com"}, "to": {"b@example.com"}}).wantRedirect("/admin/notify")
	if p := string(b.get("/admin/notify").body); !strings.Contains(p, "SMTP port must be a number") {
		t.Fatalf("bad port: no error said")
	}
	if chs, _ := s.broker.Channels(s.ctx); len(chs) != 1 {
		t.Fatalf("bad input made a channel: %v", chs)
	}
	b.post("/admin/notify/channels", url.Values{"kind": {"slack"}, "name": {"<b>ops</b>"}, "url": {slack.url}}).wantRedirect("/admin/notify")
	b.post("/admin/notify/channels", url.Values{"kind": {"email"}, "name": {"mail"}, "smtpHost": {"smtp.example"}, "smtpPort": {"587"},
		"smtpPassword": {"SMTPPASSWORD"}, "from": {"a@example.com"}, "to": {"b@example.com, c@example.com"}}).wantRedirect("/admin/notify")
	page = string(b.get("/admin/notify").body)
	if strings.Contains(page, "<b>ops</b>") || !strings.Contains(page, "&lt;b&gt;ops&lt;/b&gt;") {
		t.Fatal("a channel's name is not escaped")
	}
	if strings.Contains(page, "SLACKPATHSECRET") || strings.Contains(page, "SMTPPASSWORD") || strings.Contains(page, secret) {
		t.Fatal("the page shows a secret")
	}
	if !strings.Contains(page, "smtp.example:587 → b@example.com, c@example.com") {
		t.Fatal("the email channel's receivers are not shown")
	}
	for _, e := range broker.NotifyEvents {
		if !strings.Contains(page, `<input type="checkbox" name="events" value="`+e+`"`) {
			t.Fatalf("the rule form has no checkbox for %s", e)
		}
	}
	chs, _ = s.broker.Channels(s.ctx)
	slackID := itoa(chs[1].ID)

	b.post("/admin/notify/rules", url.Values{"channel": {slackID}, "events": {"error_group.new", "job.paused"}, "queue": {"orders*"}, "consumerGroup": {""}}).wantRedirect("/admin/notify")
	rules, err := s.broker.Rules(s.ctx)
	if err != nil || len(rules) != 1 || strings.Join(rules[0].Events, ",") != "error_group.new,job.paused" || rules[0].Queue != "orders*" || rules[0].Group != "" {
		t.Fatalf("rules: %+v %v", rules, err)
	}
	b.post("/admin/notify/rules", url.Values{"channel": {slackID}, "queue": {"*"}}).wantRedirect("/admin/notify")
	if p := string(b.get("/admin/notify").body); !strings.Contains(p, "A rule needs at least one event") {
		t.Fatal("a rule without events: no error said")
	}

	b.post("/admin/notify/channels/"+slackID+"/test", nil).wantRedirect("/admin/notify/deliveries?channel=" + slackID)
	b.post("/admin/notify/channels/"+itoa(chs[0].ID)+"/test", nil).want(http.StatusSeeOther) // receiver.example: refused, tried again
	log := string(b.get("/admin/notify/deliveries").want(http.StatusOK).body)
	if strings.Count(log, `data-state="pending"`) != 2 || !strings.Contains(log, "Test notification #2 written") {
		t.Fatalf("the log before the sending:\n%s", log)
	}
	if _, err := s.broker.SendNotifications(s.ctx); err != nil {
		t.Fatal(err)
	}
	if got := slack.texts(); len(got) != 1 {
		t.Fatalf("the receiver got %q", got)
	}
	log = string(b.get("/admin/notify/deliveries").body)
	sent, pending := strings.Index(log, `data-testid="delivery-1"`), strings.Index(log, `data-testid="delivery-2"`)
	if sent < 0 || pending < 0 || pending > sent {
		t.Fatalf("the log is not newest first:\n%s", log)
	}
	if !strings.Contains(log[sent:], `data-state="sent"`) || !strings.Contains(log[pending:sent], `data-state="pending"`) ||
		!strings.Contains(log[pending:sent], "next try in") || !strings.Contains(log[pending:sent], `data-testid="delivery-error"`) {
		t.Fatalf("the rows:\n%s", log[pending:])
	}
	only := string(b.get("/admin/notify/deliveries?state=sent").body)
	if !strings.Contains(only, `data-testid="delivery-1"`) || strings.Contains(only, `data-testid="delivery-2"`) {
		t.Fatal("the state filter")
	}
	b.get("/admin/notify/deliveries?state=lost").want(http.StatusBadRequest)

	b.post("/admin/notify/channels/"+slackID+"/delete", nil).wantRedirect("/admin/notify")
	if p := string(b.get("/admin/notify").body); !strings.Contains(p, "deleted, with its 1 rule and 0 notifications not sent yet") {
		t.Fatalf("the delete's flash:\n%s", p)
	}
	if strings.Contains(s.logs.String(), secret) || strings.Contains(s.logs.String(), "SLACKPATHSECRET") || strings.Contains(s.logs.String(), "SMTPPASSWORD") {
		t.Fatal("the log has a secret")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
