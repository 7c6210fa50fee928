package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
)

var htmx = http.Header{"HX-Request": {"true"}}

// page loads a page whole and as an htmx fragment and checks both.
func page(t *testing.T, b *browser, path string) (whole, fragment response) {
	t.Helper()
	whole = b.get(path).want(http.StatusOK)
	fragment = b.do("GET", path, nil, htmx).want(http.StatusOK)
	if !strings.Contains(string(whole.body), "<html") {
		t.Fatalf("%s: whole page has no <html>", path)
	}
	if strings.Contains(string(fragment.body), "<html") || strings.Contains(string(fragment.body), `data-testid="whoami"`) {
		t.Fatalf("%s: the htmx fragment carries the layout", path)
	}
	if !strings.Contains(strings.Join(whole.header.Values("Vary"), ","), "HX-Request") {
		t.Fatalf("%s: no Vary: HX-Request", path)
	}
	restore := b.do("GET", path, nil, http.Header{"HX-Request": {"true"}, "HX-History-Restore-Request": {"true"}}).want(http.StatusOK)
	if !strings.Contains(string(restore.body), "<html") {
		t.Fatalf("%s: a history restore must get the whole page", path)
	}
	return whole, fragment
}

// seed makes two queues with dead letters in two groups.
func seed(t *testing.T, s *bundle) deadLetter {
	t.Helper()
	d := s.fail("orders", "acme", "billing", "ord-1", `{"total":"12.50","html":"<b>bold</b>"}`, "card_declined: insufficient funds\nat charge()")
	s.fail("orders", "acme", "billing", "ord-2", `{"total":1}`, "upstream timeout after 30s")
	s.fail("orders", "initech", "analytics", "ord-3", `{"total":2}`, "upstream timeout after 30s")
	s.fail("emails", "", "notifier", "mail-1", `"plain"`, "550 mailbox unavailable")
	return d
}

func TestEveryPageRendersWholeAndAsAFragment(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	var job jobAnswer
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"emails"},"wait":true}`).want(http.StatusOK).decode(&job)
	cases := []struct {
		path   string
		testid string // present in both renders
	}{
		{"/", "queues"},
		{"/queues/orders", "groups"},
		{"/queues/orders/dead-letters", "dead-letters"},
		{"/queues/orders/dead-letters/" + d.ID + "?group=billing", "facts"},
		{"/charts", "chart-depth"},
		{"/audit", "audit"},
		{"/jobs", "jobs"},
		{jobPath(job.Job.ID), "job-progress"},
		{"/error-groups", "owned-groups"},
		{"/error-groups/1", "group-funnel"},
	}
	for _, tc := range cases {
		whole, frag := page(t, b, tc.path)
		for name, r := range map[string]response{"whole": whole, "fragment": frag} {
			if r.doc().Find(`[data-testid="`+tc.testid+`"]`).Length() == 0 {
				t.Errorf("%s (%s): no %s", tc.path, name, tc.testid)
			}
		}
	}
}

func TestOverviewShowsDepthAndBreaches(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	r := b.get("/").want(http.StatusOK)
	doc := r.doc()
	if got := strings.TrimSpace(doc.Find(`[data-testid="queue-orders"] [data-testid="queue-depth"]`).Text()); got != "3" {
		t.Fatalf("orders depth %q, want 3", got)
	}
	if got := r.testid("tile-depth"); !strings.Contains(got, "4") {
		t.Fatalf("depth tile %q", got)
	}
	// Every ack failed: the failure rate is past its threshold once enough acks are in.
	for i := 0; i < 20; i++ {
		s.fail("orders", "acme", "billing", "more-"+string(rune('a'+i)), `1`, "boom")
	}
	r = b.get("/").want(http.StatusOK)
	row := r.doc().Find(`[data-testid="queue-orders"]`).Text()
	if !strings.Contains(row, "dead letters (limit 10)") || !strings.Contains(row, "of acks failed") {
		t.Fatalf("orders row shows no breach: %q", row)
	}
}

func TestDeadLetterListFiltersAndPages(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	count := func(q string) int {
		return b.get("/queues/orders/dead-letters?" + q).want(http.StatusOK).doc().Find(`[data-testid="dl-row"]`).Length()
	}
	cases := []struct {
		query string
		want  int
	}{
		{"", 3},
		{"group=billing", 2},
		{"partition=initech", 1},
		{"error=TIMEOUT", 2},
		{"tx=ord-1", 1},
		{"since=1h", 3},
		{"from=2030-01-01T00:00", 0},
		{"group=nobody", 0},
	}
	for _, tc := range cases {
		if got := count(tc.query); got != tc.want {
			t.Errorf("?%s: %d rows, want %d", tc.query, got, tc.want)
		}
	}
	// Chips remove their filter; error groups are listed, biggest first.
	r := b.get("/queues/orders/dead-letters?group=billing&error=timeout").want(http.StatusOK)
	chips := r.doc().Find(`[data-testid="chip"] a`)
	if chips.Length() != 2 {
		t.Fatalf("%d chips", chips.Length())
	}
	href, _ := chips.First().Attr("href")
	if strings.Contains(href, "group=") || !strings.Contains(href, "error=timeout") {
		t.Fatalf("chip link %q", href)
	}
	top := b.get("/queues/orders/dead-letters").want(http.StatusOK).doc().Find(`[data-testid="error-group"]`)
	if top.Length() != 2 || strings.TrimSpace(top.First().Find(`[data-testid="error-group-count"]`).Text()) != "2" {
		t.Fatalf("error groups: %d, first %q", top.Length(), top.First().Text())
	}
	// Keyset pages: 25 a page over 30 dead letters.
	for i := 0; i < 27; i++ {
		s.fail("orders", "acme", "billing", "p-"+string(rune('A'+i)), `1`, "x")
		s.clock.Advance(time.Second)
	}
	first := b.get("/queues/orders/dead-letters?size=25").want(http.StatusOK)
	if n := first.doc().Find(`[data-testid="dl-row"]`).Length(); n != 25 {
		t.Fatalf("first page %d rows", n)
	}
	next, ok := first.doc().Find(`[data-testid="next-page"]`).Attr("href")
	if !ok || !strings.Contains(next, "after=") {
		t.Fatalf("next link %q", next)
	}
	second := b.get(next).want(http.StatusOK)
	if n := second.doc().Find(`[data-testid="dl-row"]`).Length(); n != 5 {
		t.Fatalf("second page %d rows", n)
	}
	if second.doc().Find(`[data-testid="next-page"]`).Length() != 0 || second.doc().Find(`[data-testid="first-page"]`).Length() != 1 {
		t.Fatal("last page links are wrong")
	}
	for _, bad := range []string{"size=7", "after=nope", "since=2y", "from=yesterday"} {
		b.get("/queues/orders/dead-letters?" + bad).want(http.StatusBadRequest)
	}
	b.get("/queues/nope/dead-letters").want(http.StatusNotFound)
}

func TestDeadLetterPage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	d := seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	r := b.get("/queues/orders/dead-letters/" + d.ID + "?group=billing").want(http.StatusOK)
	if got := r.testid("dl-error-full"); got != "card_declined: insufficient funds\nat charge()" {
		t.Fatalf("error %q", got)
	}
	if got := r.testid("payload-pretty"); !strings.Contains(got, `"html": "<b>bold</b>"`) {
		t.Fatalf("payload %q", got)
	}
	if strings.Contains(string(r.body), "<b>bold</b>") {
		t.Fatal("payload rendered as HTML")
	}
	if r.testid("fact-tx") == "" || r.doc().Find(`[data-testid="detail-actions"]`).Length() != 0 {
		t.Fatal("viewer sees actions, or no transactionId")
	}
	b.get("/queues/emails/dead-letters/" + d.ID).want(http.StatusNotFound)
	b.get("/queues/orders/dead-letters/not-an-id").want(http.StatusNotFound)
	// A big payload is cut until asked for.
	big := `{"blob":"` + strings.Repeat("x", 70<<10) + `"}`
	dl := s.fail("orders", "acme", "billing", "big", big, "too big")
	r = b.get("/queues/orders/dead-letters/" + dl.ID + "?group=billing").want(http.StatusOK)
	if r.doc().Find(`[data-testid="payload-truncated"]`).Length() != 1 || len(r.testid("payload-raw")) >= len(big) {
		t.Fatal("a 70 KB payload is not cut")
	}
	r = b.get("/queues/orders/dead-letters/" + dl.ID + "?group=billing&full=1").want(http.StatusOK)
	if r.testid("payload-raw") != big {
		t.Fatal("full=1 does not show the whole payload")
	}
}

// operatorFixture is what an operator-action test starts from: the seed's
// dead letters and a viewer and an operator logged in.
type operatorFixture struct {
	s          *bundle
	d          deadLetter // orders' first, of billing
	viewer, op *browser
}

func newOperatorFixture(t *testing.T) operatorFixture {
	t.Helper()
	s := setup(t)
	d := seed(t, s)
	viewer, _ := s.loggedIn(broker.RoleViewer)
	op, _ := s.loggedIn(broker.RoleOperator)
	return operatorFixture{s: s, d: d, viewer: viewer, op: op}
}

// hx posts a form as htmx does, with b's CSRF token.
func hx(b *browser, path string, form url.Values) response {
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", b.csrf())
	return b.postRaw(path, form, htmx)
}

// confirmForm is the form of a bulk confirmation, as the browser sends it.
func confirmForm(t *testing.T, c response) url.Values {
	t.Helper()
	form := url.Values{}
	c.doc().Find(`[data-testid="confirm-dialog"] form input`).Each(func(_ int, in *goquery.Selection) {
		if name, ok := in.Attr("name"); ok {
			if typ, _ := in.Attr("type"); typ == "checkbox" {
				if _, checked := in.Attr("checked"); !checked {
					return // as a browser sends an unchecked box: not at all
				}
			}
			v, _ := in.Attr("value")
			form.Add(name, v)
		}
	})
	return form
}

// Each subtest starts from a fixture of its own: any one runs alone.
func TestOperatorActions(t *testing.T) {
	t.Parallel()
	t.Run("ViewerIsRefused", func(t *testing.T) {
		t.Parallel()
		f := newOperatorFixture(t)
		hx(f.viewer, "/queues/orders/dead-letters/"+f.d.ID+"/replay", nil).want(http.StatusForbidden)
		if n := len(f.s.deadLetters("queue=orders").Messages); n != 3 {
			t.Fatalf("%d dead letters", n)
		}
	})
	t.Run("WithoutCSRFNothingChanges", func(t *testing.T) {
		t.Parallel()
		f := newOperatorFixture(t)
		f.op.postRaw("/queues/orders/dead-letters/"+f.d.ID+"/replay", url.Values{}, htmx).want(http.StatusForbidden)
		if n := len(f.s.deadLetters("queue=orders").Messages); n != 3 {
			t.Fatalf("%d dead letters", n)
		}
	})
	t.Run("ReplayOne", func(t *testing.T) {
		t.Parallel()
		f := newOperatorFixture(t)
		r := hx(f.op, "/queues/orders/dead-letters/"+f.d.ID+"/replay", nil).want(http.StatusOK)
		if r.header.Get("HX-Trigger") != "dlq-changed" || !strings.Contains(r.testid("flash"), "dlq:"+f.d.ID) {
			t.Fatalf("answer %q / %q", r.header.Get("HX-Trigger"), r.testid("flash"))
		}
		hx(f.op, "/queues/orders/dead-letters/"+f.d.ID+"/replay", nil).want(http.StatusNotFound)
	})
	t.Run("ConfirmSaysHowManyThenBulkDelete", func(t *testing.T) {
		t.Parallel()
		f := newOperatorFixture(t)
		l := f.s.deadLetters("queue=orders")
		ids := url.Values{"action": {"delete"}}
		for _, m := range l.Messages {
			ids.Add("ids", m.ID)
		}
		c := f.op.get("/queues/orders/dead-letters/confirm?" + ids.Encode()).want(http.StatusOK)
		if got := c.testid("confirm-summary"); !strings.Contains(got, "3 dead letters") {
			t.Fatalf("confirmation says %q", got)
		}
		form := url.Values{"ids": ids["ids"]}
		r := hx(f.op, "/queues/orders/dead-letters/delete", form).want(http.StatusOK)
		if got := r.testid("flash"); !strings.Contains(got, "Deleting the dead letters of 3 messages") {
			t.Fatalf("result %q", got)
		}
		if j := followJob(t, f.s, f.op, r); j.testid("job-done") != "3" || j.testid("job-skipped") != "0" || j.testid("job-state") != "done" {
			t.Fatalf("job %q", j.testid("job-counts"))
		}
		if n := len(f.s.deadLetters("queue=orders").Messages); n != 0 {
			t.Fatalf("%d left", n)
		}
	})
	t.Run("AFewPickedByHandAreDoneWhenAnswered", func(t *testing.T) {
		// The list the answer makes refresh (dlq-changed) must not show
		// what was just replayed: the job of a few rows picked by hand is
		// done before the answer.
		t.Parallel()
		f := newOperatorFixture(t)
		form := url.Values{}
		for _, m := range f.s.deadLetters("queue=orders").Messages {
			form.Add("ids", m.ID)
		}
		r := hx(f.op, "/queues/orders/dead-letters/replay", form).want(http.StatusOK)
		if r.header.Get("HX-Trigger") != "dlq-changed" {
			t.Fatalf("HX-Trigger %q", r.header.Get("HX-Trigger"))
		}
		if n := len(f.s.deadLetters("queue=orders").Messages); n != 0 {
			t.Fatalf("%d dead letters left once the replay answered", n)
		}
	})
	t.Run("AllMatchingAboveAThousandNeedsTheQueueName", func(t *testing.T) {
		t.Parallel()
		f := newOperatorFixture(t)
		fill(t, f.s, "bulk", 1001)
		c := f.op.get("/queues/bulk/dead-letters/confirm?action=replay&all=1").want(http.StatusOK)
		if c.doc().Find(`[data-testid="confirm-queue"]`).Length() != 1 || !strings.Contains(c.testid("confirm-summary"), "1,001") {
			t.Fatalf("confirmation %q", c.testid("confirm-summary"))
		}
		form := confirmForm(t, c)
		form.Del("canary") // turned off: this replay goes at once
		hx(f.op, "/queues/bulk/dead-letters/replay", form).want(http.StatusBadRequest)
		form.Set("confirm", "bulk")
		r := hx(f.op, "/queues/bulk/dead-letters/replay", form).want(http.StatusOK)
		if j := followJob(t, f.s, f.op, r); j.testid("job-done") != "1,001" {
			t.Fatalf("job %q", j.testid("job-counts"))
		}
	})
}

// "Replay all N matching" acts on the N its confirmation counted: dead
// letters that match but arrived after it are not touched, and the result
// says how many.
func TestBulkConfirmationFreezesWhatItCounted(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"replay", "delete"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			f := newOperatorFixture(t)
			fill(t, f.s, "bulk", 30)
			c := f.op.get("/queues/bulk/dead-letters/confirm?action=" + action + "&all=1").want(http.StatusOK)
			if got := c.testid("confirm-summary"); !strings.Contains(got, "30 dead letters") {
				t.Fatalf("confirmation says %q", got)
			}
			form := confirmForm(t, c)
			if form.Get("bound") == "" {
				t.Fatalf("the confirmation's form has no bound: %v", form)
			}
			f.s.clock.Advance(time.Second)
			fill(t, f.s, "bulk", 11)
			r := hx(f.op, "/queues/bulk/dead-letters/"+action, form).want(http.StatusOK)
			started := map[string]string{"replay": "Replaying 30 messages", "delete": "Deleting 30 dead letters"}[action]
			if got := r.testid("flash"); !strings.Contains(got, started) {
				t.Fatalf("result %q", got)
			}
			j := followJob(t, f.s, f.op, r)
			if j.testid("job-done") != "30" || j.testid("job-planned") != "30" || j.testid("job-arrived-since") != "11 arrived since the confirmation and were not touched." {
				t.Fatalf("job %q / %q", j.testid("job-counts"), j.testid("job-arrived-since"))
			}
			if l := f.s.deadLetters("queue=bulk"); l.Total != 11 {
				t.Fatalf("%d left, want the 11 that arrived since", l.Total)
			}
			// A form with no bound (not from a confirmation) changes nothing.
			form.Del("bound")
			hx(f.op, "/queues/bulk/dead-letters/"+action, form).want(http.StatusBadRequest)
			if l := f.s.deadLetters("queue=bulk"); l.Total != 11 {
				t.Fatalf("a form without a bound changed the dead letters: %d left", l.Total)
			}
		})
	}
}

// The dashboard acts on the page's queue only: no request there reaches
// every queue.
func TestBulkPageActionsStayInTheirQueue(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	for _, path := range []string{"/queues//dead-letters/delete", "/queues/%20/dead-letters/delete", "/queues/nope/dead-letters/delete"} {
		r := hx(f.op, path, url.Values{"all": {"1"}, "bound": {fmt.Sprintf("%d-%d", f.s.clock.Now().Add(time.Hour).UnixMilli(), 1<<40)}})
		if r.status < 400 && !strings.Contains(r.testid("flash"), "Deleted 0.") {
			t.Errorf("%s: status %d, %q", path, r.status, r.testid("flash"))
		}
	}
	if l := f.s.deadLetters(""); l.Total != 4 {
		t.Fatalf("%d dead letters left of 4", l.Total)
	}
}

// Destructive dialogs open on Cancel, and a single delete asks in a dialog
// of the page (data-confirm), not the browser's confirm() whose Enter
// presses OK.
func TestDeleteDialogsFocusCancel(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	list := f.op.get("/queues/orders/dead-letters").want(http.StatusOK)
	detail := f.op.get("/queues/orders/dead-letters/" + f.d.ID + "?group=billing").want(http.StatusOK)
	for name, b := range map[string]*goquery.Selection{
		"row":    list.doc().Find(`[data-testid="row-delete"]`),
		"detail": detail.doc().Find(`[data-testid="detail-delete"]`),
	} {
		if b.Length() == 0 {
			t.Fatalf("%s: no delete button", name)
		}
		b.Each(func(_ int, b *goquery.Selection) {
			if _, ok := b.Attr("hx-confirm"); ok {
				t.Errorf("%s delete asks with hx-confirm (the browser's confirm(), where Enter deletes)", name)
			}
			if q, _ := b.Attr("data-confirm"); !strings.Contains(q, "Delete dead letter") {
				t.Errorf("%s delete: data-confirm %q", name, q)
			}
		})
	}
	fill(t, f.s, "bulk", 1001)
	for _, path := range []string{
		"/queues/orders/dead-letters/confirm?action=delete&ids=" + url.QueryEscape(f.d.ID),
		"/queues/orders/dead-letters/confirm?action=delete&all=1",
		"/queues/bulk/dead-letters/confirm?action=delete&all=1",
		"/queues/orders/dead-letters/confirm?action=delete&all=1&error=nothing-like-this",
	} {
		d := f.op.get(path).want(http.StatusOK).doc()
		focused := d.Find("[autofocus]")
		if focused.Length() != 1 || focused.AttrOr("data-testid", "") != "confirm-cancel" {
			t.Errorf("%s: autofocus on %d elements, want Cancel alone", path, focused.Length())
		}
	}
}

// fill makes n dead letters in queue, group g, through the broker.
func fill(t *testing.T, s *bundle, queue string, n int) {
	t.Helper()
	for left := n; left > 0; left -= broker.MaxPushItems {
		items := make([]broker.PushItem, min(left, broker.MaxPushItems))
		for i := range items {
			items[i] = broker.PushItem{Queue: queue, Payload: []byte(`1`)}
		}
		if _, err := s.broker.Push(s.ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	for left := n; left > 0; {
		res, err := s.broker.Pop(s.ctx, broker.PopRequest{Queue: queue, Group: "g", Batch: 1000})
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("pop: %v", err)
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckDLQ, Error: "bad"}
		}
		if _, err := s.broker.AckBatch(s.ctx, "g", acks); err != nil {
			t.Fatal(err)
		}
		left -= len(res.Messages)
	}
}

func TestChartsPage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b, _ := s.loggedIn(broker.RoleViewer)
	empty := b.get("/charts?range=1h").want(http.StatusOK)
	if n := empty.doc().Find(`[data-testid="chart-empty"]`).Length(); n != 6 {
		t.Fatalf("%d charts say they have no data, want 6 (retention's too)", n)
	}
	seed(t, s)
	s.clock.Advance(2 * time.Minute)
	for _, rng := range []string{"1h", "24h", "7d", "30d"} {
		r := b.get("/charts?range=" + rng).want(http.StatusOK)
		depth := r.doc().Find(`[data-testid="chart-depth"]`)
		if depth.Find(`[data-testid="chart-point"]`).Length() == 0 {
			t.Errorf("%s: no points on the depth chart", rng)
		}
		if !strings.Contains(depth.Find("title").Text(), "orders / billing: 2") {
			t.Errorf("%s: no hover value for orders / billing", rng)
		}
	}
	b.get("/charts?range=1y").want(http.StatusBadRequest)
	// The picker is free text: part of a name is answered with the
	// queues whose names contain it, each a link to its charts.
	part := b.get("/charts?range=7d&queue=rder").want(http.StatusOK)
	if got := part.testid("chart-no-queue"); !strings.Contains(got, "No queue named “rder”") {
		t.Fatalf("part of a name: %q", got)
	}
	match := part.doc().Find(`[data-testid="chart-match"]`)
	if href, _ := match.Attr("href"); match.Length() != 1 || match.Text() != "orders" || href != "/charts?queue=orders&range=7d" {
		t.Fatalf("matches of rder: %d %q %q", match.Length(), match.Text(), href)
	}
	if n := part.doc().Find(`[data-testid^="chart-"] svg`).Length(); n != 0 {
		t.Fatalf("%d charts drawn for no queue", n)
	}
	none := b.get("/charts?queue=nope").want(http.StatusOK)
	if got := none.testid("chart-no-queue"); !strings.Contains(got, "No queue named “nope”") || !strings.Contains(got, "either") {
		t.Fatalf("no match: %q", got)
	}
	b.get("/charts?queue=" + strings.Repeat("q", broker.MaxNameLength+1)).want(http.StatusBadRequest)
}

func TestThresholdsPage(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	admin, _ := s.loggedIn(broker.RoleAdmin)
	viewer, _ := s.loggedIn(broker.RoleViewer)
	viewer.get("/admin/thresholds").want(http.StatusForbidden)
	admin.get("/admin/thresholds").want(http.StatusOK)
	admin.post("/admin/thresholds", url.Values{"default_depth": {"ten"}}).want(http.StatusBadRequest)
	admin.post("/admin/thresholds", url.Values{"new_queue": {"orders"}}).wantRedirect("/admin/thresholds")
	admin.post("/admin/thresholds", url.Values{"q0_queue": {"orders"}, "q0_depth": {"1"}}).wantRedirect("/admin/thresholds")
	th, err := s.broker.Thresholds(s.ctx)
	if err != nil || th.For("orders").Depth != 1 || th.Default.Depth != 10 {
		t.Fatalf("%+v %v", th, err)
	}
	row := viewer.get("/").want(http.StatusOK).doc().Find(`[data-testid="queue-orders"]`).Text()
	if !strings.Contains(row, "(limit 1)") {
		t.Fatalf("override not applied: %q", row)
	}
}

// A queue with more partitions than the filter lists gets a text field for
// the partition's name, and the filter works the same.
func TestPartitionFilterOfManyPartitions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	field := func(path string) string {
		t.Helper()
		f := b.get(path).want(http.StatusOK).doc().Find(`[data-testid="filter-partition"]`)
		if f.Length() != 1 {
			t.Fatalf("%s: %d partition filters", path, f.Length())
		}
		return goquery.NodeName(f)
	}
	if got := field("/queues/orders/dead-letters"); got != "select" {
		t.Fatalf("two partitions: the filter is a %s, want a select", got)
	}
	var items []broker.PushItem
	for i := 0; i < 250; i++ {
		items = append(items, broker.PushItem{Queue: "orders", Partition: fmt.Sprintf("customer-%03d", i), Payload: []byte(`1`)})
	}
	if _, err := s.broker.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	if got := field("/queues/orders/dead-letters"); got != "input" {
		t.Fatalf("252 partitions: the filter is a %s, want an input", got)
	}
	r := b.get("/queues/orders/dead-letters?partition=initech").want(http.StatusOK)
	if v, _ := r.doc().Find(`[data-testid="filter-partition"]`).Attr("value"); v != "initech" {
		t.Fatalf("the field shows %q, want the filter's initech", v)
	}
	if n := r.doc().Find(`[data-testid="dl-row"]`).Length(); n != 1 {
		t.Fatalf("partition=initech: %d rows, want 1", n)
	}
}

// A queue of many partitions (one per customer) lists the first 200 by
// name, says so, and finds the others by the start of their name; a queue
// of few lists them all, with no finder.
func TestQueuePageOfManyPartitions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s) // orders: partitions acme and initech
	b, _ := s.loggedIn(broker.RoleViewer)
	type view struct {
		finder bool
		rows   []string
		shown  string
	}
	look := func(path string) view {
		t.Helper()
		d := b.get(path).want(http.StatusOK).doc()
		var v view
		v.finder = d.Find(`[data-testid="partition-finder"]`).Length() == 1
		d.Find(`[data-testid="partitions"] tbody tr td:first-child`).Each(func(_ int, c *goquery.Selection) { v.rows = append(v.rows, c.Text()) })
		v.shown = strings.TrimSpace(d.Find(`[data-testid="partition-shown"]`).Text())
		return v
	}
	if v := look("/queues/orders"); v.finder || fmt.Sprint(v.rows) != "[acme initech]" {
		t.Fatalf("two partitions: finder %v, rows %v; want no finder and both", v.finder, v.rows)
	}
	var items []broker.PushItem
	for i := range 250 {
		items = append(items, broker.PushItem{Queue: "orders", Partition: fmt.Sprintf("customer-%03d", i), Payload: []byte(`1`)})
	}
	if _, err := s.broker.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	v := look("/queues/orders")
	if !v.finder || len(v.rows) != 200 || v.rows[0] != "acme" || v.rows[199] != "customer-198" {
		t.Fatalf("252 partitions: finder %v, %d rows (%v … %v); want the finder and acme … customer-198", v.finder, len(v.rows), v.rows[:1], v.rows[len(v.rows)-1:])
	}
	if want := "The first 200 of 252 partitions, by name. Find others by the start of their name."; v.shown != want {
		t.Fatalf("shown: %q, want %q", v.shown, want)
	}
	v = look("/queues/orders?partition=customer-24")
	if len(v.rows) != 10 || v.rows[0] != "customer-240" || v.shown != `10 partitions whose name starts with "customer-24".` {
		t.Fatalf("customer-24: rows %v, shown %q", v.rows, v.shown)
	}
	v = look("/queues/orders?partition=customer-")
	if len(v.rows) != 200 || v.shown != `The first 200 of 250 partitions whose name starts with "customer-", by name.` {
		t.Fatalf("customer-: %d rows, shown %q", len(v.rows), v.shown)
	}
	r := b.get("/queues/orders?partition=" + url.QueryEscape(`<b>x</b>`)).want(http.StatusOK)
	if strings.Contains(string(r.body), "<b>x</b>") {
		t.Fatal("the finder's text is written into the page unescaped")
	}
	if v := look("/queues/orders?partition=" + url.QueryEscape(`<b>x</b>`)); len(v.rows) != 0 || v.shown != `No partition's name starts with "<b>x</b>".` {
		t.Fatalf("no match: rows %v, shown %q", v.rows, v.shown)
	}
	b.get("/queues/orders?partition=" + strings.Repeat("x", 256)).want(http.StatusBadRequest)
}
