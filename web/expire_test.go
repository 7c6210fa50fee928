package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// expiringQueue files, in queue "orders" kept 48 h (deadLetterRetentionSeconds),
// dead letters of billing at t0, t0+10 h, t0+20 h and t0+30 h (o0..o3)
// and one of analytics at t0+40 h (a0); the clock is then t0+40 h.
func expiringQueue(t *testing.T, s *bundle) (ids map[string]string) {
	t.Helper()
	s.configure("orders", `{"deadLetterRetentionSeconds":172800}`)
	ids = map[string]string{}
	for _, tx := range []string{"o0", "o1", "o2", "o3"} {
		ids[tx] = s.fail("orders", "p", "billing", tx, `{"order":"`+tx+`"}`, "card declined").ID
		s.clock.Advance(10 * time.Hour)
	}
	ids["a0"] = s.fail("orders", "q", "analytics", "a0", `{"order":"a0"}`, "schema mismatch").ID
	return ids
}

// The list says how many expire within 24 h, its link lists exactly
// those, and each row says when it expires; a group's list counts the
// group's; the dead letter's page and the API's JSON say when it expires;
// a queue that keeps its dead letters says nothing of it.
func TestDeadLetterListSaysWhatExpires(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ids := expiringQueue(t, s)
	s.fail("kept", "", "billing", "k0", `{}`, "boom")
	b, _ := s.loggedIn(broker.RoleViewer)

	r := b.get("/queues/orders/dead-letters").want(http.StatusOK)
	if got := r.testid("expiring-count"); got != "2" {
		t.Fatalf("expiring count %q, want 2 (o0 and o1)\n%s", got, r.testid("expiring"))
	}
	banner := strings.Join(strings.Fields(r.testid("expiring")), " ")
	if !strings.Contains(banner, "expire 2 days after they failed (deadLetterRetentionSeconds)") || !strings.Contains(banner, "2 expire within 24 h") {
		t.Errorf("banner %q", banner)
	}
	link, ok := r.doc().Find(`[data-testid="expiring-link"]`).Attr("href")
	if !ok {
		t.Fatal("no link to what expires")
	}
	u, err := url.Parse(link)
	if err != nil || u.Path != "/queues/orders/dead-letters" || u.Query().Get("to") != "2026-11-02T04:00:00.000" || u.Query().Get("group") != "" {
		t.Fatalf("link %q", link)
	}
	// Every row says when it expires: o3 failed at t0+30 h, 48 h kept,
	// now t0+40 h: in 38 h.
	rows := r.doc().Find(`[data-testid="dl-row"]`)
	if rows.Length() != 5 {
		t.Fatalf("%d rows", rows.Length())
	}
	for i := range rows.Length() {
		row := rows.Eq(i)
		if row.Find(`[data-testid="dl-expires"]`).Length() != 1 {
			t.Errorf("row %s says nothing of its expiry", row.AttrOr("data-id", ""))
		}
	}
	if got := rows.Filter(`[data-id="` + ids["o3"] + `"]`).Find(`[data-testid="dl-expires"]`).Text(); got != "expires in 38 h" {
		t.Errorf("o3: %q, want expires in 38 h", got)
	}
	// The link lists exactly o1 and o0.
	l := b.get(link).want(http.StatusOK)
	var listed []string
	l.doc().Find(`[data-testid="dl-row"]`).Each(func(_ int, row *goquery.Selection) { listed = append(listed, row.AttrOr("data-id", "")) })
	if strings.Join(listed, ",") != ids["o1"]+","+ids["o0"] {
		t.Errorf("the link lists %v, want o1, o0", listed)
	}
	if got := strings.Join(strings.Fields(l.testid("matching")), " "); got != "2 dead letters match these filters." {
		t.Errorf("the link's count %q", got)
	}
	// A group's list counts the group's.
	if got := b.get("/queues/orders/dead-letters?group=analytics").want(http.StatusOK).testid("expiring-count"); got != "None" {
		t.Errorf("analytics: %q, want None", got)
	}
	g := b.get("/queues/orders/dead-letters?group=billing").want(http.StatusOK)
	if href, _ := g.doc().Find(`[data-testid="expiring-link"]`).Attr("href"); !strings.Contains(href, "group=billing") || g.testid("expiring-count") != "2" {
		t.Errorf("billing: %q %q", g.testid("expiring-count"), href)
	}
	// The dead letter's page.
	p := b.get("/queues/orders/dead-letters/" + ids["o0"] + "?group=billing").want(http.StatusOK)
	if got := strings.Join(strings.Fields(p.testid("fact-expires")), " "); !strings.HasPrefix(got, "2026-11-03 12:00:00.000 UTC (expires in 8 h): the queue keeps dead letters 2 days") {
		t.Errorf("page: %q", got)
	}
	// The API: expiresAt when the queue's dead letters expire.
	var list struct {
		Messages []struct {
			TransactionID string  `json:"transactionId"`
			ExpiresAt     *string `json:"expiresAt"`
		} `json:"messages"`
	}
	s.call("GET", "/api/v1/dlq?queue=orders&consumerGroup=billing", "").want(http.StatusOK).decode(&list)
	if len(list.Messages) != 4 || list.Messages[3].ExpiresAt == nil || *list.Messages[3].ExpiresAt != "2026-11-03T12:00:00.000Z" {
		t.Errorf("API list %+v", list.Messages)
	}
	// The NDJSON export carries it too.
	op, _ := s.loggedIn(broker.RoleOperator)
	ex := op.get("/queues/orders/dead-letters/export?format=ndjson&group=billing").want(http.StatusOK)
	if !strings.Contains(string(ex.body), `"expiresAt":"2026-11-03T12:00:00.000Z"`) {
		t.Errorf("export:\n%s", ex.body)
	}
	kept := s.call("GET", "/api/v1/dlq?queue=kept", "").want(http.StatusOK)
	if strings.Contains(string(kept.body), "expiresAt") {
		t.Errorf("a kept queue's dead letters carry expiresAt: %s", kept.body)
	}
	if k := b.get("/queues/kept/dead-letters").want(http.StatusOK); k.doc().Find(`[data-testid="expiring"], [data-testid="dl-expires"]`).Length() != 0 {
		t.Error("a kept queue's list speaks of expiry")
	}
}

// An expired dead letter's page and API link say it expired, when, and by
// which rule; /metrics and the charts count what retention removed.
func TestExpiredDeadLetterSaysSoAndIsCounted(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	ids := expiringQueue(t, s)
	s.clock.Advance(24 * time.Hour) // t0+64 h: o0 and o1 are older than 48 h
	at := s.clock.Now()
	if _, err := s.broker.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	// Messages expired unread are helper R's sweep's to count; written
	// here as it writes them.
	q, err := s.broker.Queue(s.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var analytics int64
	for _, g := range q.Stats {
		if g.Group == "analytics" {
			analytics = g.GroupID
		}
	}
	if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		return tx.AddStats(s.ctx, q.ID, analytics, broker.Stats{Expired: 3}, at)
	}); err != nil {
		t.Fatal(err)
	}
	b, _ := s.loggedIn(broker.RoleViewer)

	r := b.get("/queues/orders/dead-letters/" + ids["o0"] + "?group=billing").want(http.StatusNotFound)
	fate := r.doc().Find(`[data-testid="fate"]`)
	text := strings.Join(strings.Fields(fate.Text()), " ")
	if fate.AttrOr("data-how", "") != "expired" || r.testid("fate-rule") != "deadLetterRetentionSeconds: 2 days" ||
		!strings.Contains(text, "Expired in billing") || !strings.Contains(text, "2026-11-04 04:00:00.000 UTC") ||
		!strings.Contains(text, "it had failed at 2026-11-01 12:00:00.000 UTC") || !strings.Contains(text, "cannot be restored") {
		t.Fatalf("fate %q", text)
	}
	if r.doc().Find(`[data-testid="restore"]`).Length() != 0 {
		t.Error("an expired dead letter offers Restore")
	}
	var gone struct {
		Error string `json:"error"`
		Gone  struct {
			How              string `json:"how"`
			ConsumerGroup    string `json:"consumerGroup"`
			At               string `json:"at"`
			By               string `json:"by"`
			Rule             string `json:"rule"`
			RetentionSeconds int64  `json:"retentionSeconds"`
			FailedAt         string `json:"failedAt"`
			RestorableUntil  *string
		} `json:"gone"`
	}
	s.call("GET", "/api/v1/dlq/"+ids["o1"], "").want(http.StatusNotFound).decode(&gone)
	if g := gone.Gone; g.How != "expired" || g.ConsumerGroup != "billing" || g.At != "2026-11-04T04:00:00.000Z" || g.By != broker.BrokerActor ||
		g.Rule != "deadLetterRetentionSeconds" || g.RetentionSeconds != 172800 || g.FailedAt != "2026-11-01T22:00:00.000Z" || g.RestorableUntil != nil ||
		gone.Error != "dead letter "+ids["o1"]+" expired at 2026-11-04T04:00:00Z (deadLetterRetentionSeconds: 2 days)" {
		t.Errorf("API gone %+v", gone)
	}
	// The audit, filtered by the action: the broker's entry.
	au := b.get("/audit?action=" + broker.AuditDeadLettersExpired).want(http.StatusOK)
	if got := strings.Join(strings.Fields(au.doc().Find("main").Text()), " "); !strings.Contains(got, "dead letters: 2 expired in orders / billing, older than 2 days (deadLetterRetentionSeconds)") {
		t.Errorf("audit page: %q", got)
	}
	if au.doc().Find(`option[value="`+broker.AuditDeadLettersExpired+`"]`).Length() != 1 {
		t.Error("the audit page offers no filter by dead letters expired")
	}
	// The list now: o2 and o3 expire within 24 h (a0, filed at t0+40 h, just after).
	if got := b.get("/queues/orders/dead-letters").want(http.StatusOK).testid("expiring-count"); got != "2" {
		t.Errorf("expiring after the run: %q, want 2", got)
	}

	fams := scrape(t, s, nil)
	if v, ok := metricValue(t, fams, "lazarus_dead_letters_expired_total", map[string]string{"queue": "orders", "group": "billing"}); !ok || v != 2 {
		t.Errorf("lazarus_dead_letters_expired_total billing = %v (%v), want 2", v, ok)
	}
	if v, ok := metricValue(t, fams, "lazarus_dead_letters_expired_total", map[string]string{"queue": "orders", "group": "analytics"}); !ok || v != 0 {
		t.Errorf("lazarus_dead_letters_expired_total analytics = %v (%v), want 0", v, ok)
	}
	if v, ok := metricValue(t, fams, "lazarus_messages_expired_total", map[string]string{"queue": "orders", "group": "analytics"}); !ok || v != 3 {
		t.Errorf("lazarus_messages_expired_total analytics = %v (%v), want 3", v, ok)
	}
	if f := fams["lazarus_dead_letters_expired_total"]; f == nil || f.GetType().String() != "COUNTER" {
		t.Errorf("lazarus_dead_letters_expired_total is not a counter: %v", f)
	}

	for _, c := range []struct{ path, a, m string }{
		{"/charts?range=1h", "orders / billing: dead letters expired (2)", "orders / analytics: messages expired unread (3)"},
		{"/charts?range=24h&queue=orders", "billing: dead letters expired (2)", "analytics: messages expired unread (3)"},
	} {
		ch := b.get(c.path).want(http.StatusOK).doc().Find(`[data-testid="chart-retention"]`)
		legend := strings.Join(strings.Fields(ch.Find(".legend").Text()), " ")
		if ch.Length() != 1 || !strings.Contains(legend, c.a) || !strings.Contains(legend, c.m) {
			t.Errorf("%s: retention chart legend %q", c.path, legend)
		}
	}
	// A range without removals says so.
	s.clock.Advance(3 * time.Hour)
	if got := b.get("/charts?range=1h").want(http.StatusOK).doc().Find(`[data-testid="chart-retention"] [data-testid="chart-empty"]`).Text(); got != "Retention removed nothing in this range." {
		t.Errorf("empty retention chart: %q", got)
	}
}
