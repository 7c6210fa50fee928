package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
)

func jobPath(id int64) string { return "/jobs/" + strconv.FormatInt(id, 10) }

// flashJobID is the job the flash of a bulk action links to.
func flashJobID(t *testing.T, r response) int64 {
	t.Helper()
	href, ok := r.doc().Find(`[data-testid="flash-job"]`).Attr("href")
	if !ok {
		t.Fatalf("the flash %q links to no job", r.testid("flash"))
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(href, "/jobs/"), 10, 64)
	if err != nil {
		t.Fatalf("flash link %q", href)
	}
	return id
}

// followJob follows the flash's link to the job, once the job is
// finished or paused: its page.
func followJob(t *testing.T, s *bundle, b *browser, r response) response {
	t.Helper()
	id := flashJobID(t, r)
	if _, err := s.broker.WaitJob(s.ctx, id); err != nil {
		t.Fatalf("wait for job %d: %v", id, err)
	}
	return b.get(jobPath(id)).want(http.StatusOK)
}

// popAll has group pop the queue's messages and ack each: dead-lettered
// with errText when fail says so, else completed.
func popAll(t *testing.T, s *bundle, queue, group string, fail func(i int) bool, errText string) {
	t.Helper()
	for i := 0; ; {
		res, err := s.broker.Pop(s.ctx, broker.PopRequest{Queue: queue, Group: group, Batch: 100})
		if err != nil {
			t.Fatalf("pop: %v", err)
		}
		if len(res.Messages) == 0 {
			return
		}
		acks := make([]broker.Ack, len(res.Messages))
		for k, m := range res.Messages {
			acks[k] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckCompleted}
			if fail(i) {
				acks[k].Status, acks[k].Error = broker.AckDLQ, errText
			}
			i++
		}
		if _, err := s.broker.AckBatch(s.ctx, group, acks); err != nil {
			t.Fatal(err)
		}
	}
}

// startReplay starts a replay job of queue's dead letters by the API
// (202), and returns its id.
func startReplay(t *testing.T, s *bundle, body string) int64 {
	t.Helper()
	var a jobAnswer
	r := s.call("POST", "/api/v1/dlq/replay", body).want(http.StatusAccepted)
	r.decode(&a)
	if a.Job.ID == 0 || r.header.Get("Location") != "/api/v1/jobs/"+strconv.FormatInt(a.Job.ID, 10) {
		t.Fatalf("start: %s (Location %q)", r.body, r.header.Get("Location"))
	}
	return a.Job.ID
}

func hxGet(b *browser, path string) response { return b.do("GET", path, nil, htmx) }

// liveTrigger is the hx-trigger of a job's progress that follows the job:
// its page's event stream, every 5 s should news be lost or the stream
// refused, and the marker of what changed (live.js).
const liveTrigger = "sse:changed, every 5s, live-refresh"

// pollOf is the hx-trigger of a job's progress ("" none), and whether it
// asks for itself.
func pollOf(t *testing.T, r response) string {
	t.Helper()
	p := r.doc().Find(`[data-testid="job-progress"]`)
	if p.Length() != 1 {
		t.Fatalf("%s: no progress: %s", r.req, r.body)
	}
	trig, has := p.Attr("hx-trigger")
	get, hasGet := p.Attr("hx-get")
	if has != hasGet || (has && !strings.HasSuffix(get, "/progress")) {
		t.Fatalf("progress hx-trigger %q hx-get %q", trig, get)
	}
	return trig
}

// A job's progress asks for itself at the news of its page's event
// stream (live.go) while the job runs and while a finished replay's
// copies are pending, and not at all once nothing changes by itself (done
// and settled, or paused).
func TestJobProgressPollsWhileRunning(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 3)
	viewer, _ := s.loggedIn(broker.RoleViewer)
	id := startReplay(t, s, `{"filter":{"queue":"q"}}`)

	whole := viewer.get(jobPath(id)).want(http.StatusOK)
	if p := pollOf(t, whole); p != liveTrigger {
		t.Fatalf("running job's page polls %q", p)
	}
	frag := hxGet(viewer, jobPath(id)+"/progress").want(http.StatusOK)
	if p := pollOf(t, frag); p != liveTrigger || strings.Contains(string(frag.body), "<html") {
		t.Fatalf("running job's progress polls %q: %s", p, frag.body)
	}
	if got := frag.testid("job-state"); got != "running" {
		t.Fatalf("state %q", got)
	}
	if _, err := s.broker.RunJob(s.ctx, id); err != nil {
		t.Fatal(err)
	}
	frag = hxGet(viewer, jobPath(id)+"/progress").want(http.StatusOK)
	if p := pollOf(t, frag); p != liveTrigger || frag.testid("job-outcome-summary") != "0 succeeded, 0 failed again, 3 pending" {
		t.Fatalf("done with copies pending: polls %q, outcome %q", p, frag.testid("job-outcome-summary"))
	}
	popAll(t, s, "q", "g", func(i int) bool { return i == 0 }, "again")
	frag = hxGet(viewer, jobPath(id)+"/progress").want(http.StatusOK)
	if p := pollOf(t, frag); p != "" || frag.testid("job-outcome-summary") != "2 succeeded, 1 failed again, 0 pending" {
		t.Fatalf("done and settled: polls %q, outcome %q", p, frag.testid("job-outcome-summary"))
	}
	// Its page opens no event stream: a finished job's tab would hold
	// one of its user's few (liveHub's bounds) for nothing.
	whole = viewer.get(jobPath(id)).want(http.StatusOK)
	if n := whole.doc().Find(`[data-live]`).Length(); n != 0 || pollOf(t, whole) != "" {
		t.Fatalf("a finished job's page follows a stream (%d) or polls", n)
	}

	// Paused: nothing moves until someone resumes it.
	fill(t, s, "p", 2)
	id2 := startReplay(t, s, `{"filter":{"queue":"p"}}`)
	if _, err := s.broker.PauseJob(s.ctx, id2, "test"); err != nil {
		t.Fatal(err)
	}
	frag = hxGet(viewer, jobPath(id2)+"/progress").want(http.StatusOK)
	if p := pollOf(t, frag); p != "" || frag.testid("job-state") != "paused" || !strings.Contains(frag.testid("job-reason"), "paused by test") {
		t.Fatalf("paused: polls %q, state %q, reason %q", p, frag.testid("job-state"), frag.testid("job-reason"))
	}
	if frag.doc().Find(`[data-testid="job-pause"]`).Length() != 0 {
		t.Fatal("a viewer sees the job's actions")
	}
}

// Pause, resume and cancel from the job's page: htmx gets the progress
// back; an action the job's state does not allow is a 409 that says why;
// a viewer and a form without the CSRF token change nothing.
func TestJobActionsOnItsPage(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 3)
	op, _ := s.loggedIn(broker.RoleOperator)
	viewer, _ := s.loggedIn(broker.RoleViewer)
	id := startReplay(t, s, `{"filter":{"queue":"q"}}`)
	page := op.get(jobPath(id)).want(http.StatusOK)
	for _, a := range []string{"pause", "cancel"} {
		if page.doc().Find(`[data-testid="job-`+a+`"]`).Length() != 1 {
			t.Fatalf("a running job's page has no %s", a)
		}
	}
	if page.doc().Find(`[data-testid="job-resume"]`).Length() != 0 || page.doc().Find(`[data-testid="job-undo"]`).Length() != 0 {
		t.Fatal("a running replay offers resume or undo")
	}
	hx(viewer, jobPath(id)+"/pause", nil).want(http.StatusForbidden)
	op.postRaw(jobPath(id)+"/pause", url.Values{}, htmx).want(http.StatusForbidden)
	if j, _ := s.broker.JobDetail(s.ctx, id); j.State != broker.JobRunning {
		t.Fatalf("refused pauses paused the job: %s", j.State)
	}

	r := hx(op, jobPath(id)+"/pause", nil).want(http.StatusOK)
	if r.testid("job-state") != "paused" || r.doc().Find(`[data-testid="job-resume"]`).Length() != 1 {
		t.Fatalf("after pause: %q", r.testid("job-facts"))
	}
	r = hx(op, jobPath(id)+"/pause", nil).want(http.StatusConflict)
	if got := r.testid("flash"); !strings.Contains(got, "is paused") || r.header.Get("HX-Retarget") != "#flash" {
		t.Fatalf("pausing a paused job: %q", got)
	}
	r = hx(op, jobPath(id)+"/resume", nil).want(http.StatusOK)
	if r.testid("job-state") != "running" {
		t.Fatalf("after resume: %q", r.testid("job-state"))
	}
	hx(op, jobPath(id)+"/resume", nil).want(http.StatusConflict)
	// Without htmx, the form goes back to the job's page.
	form := url.Values{"_csrf": {op.csrf()}}
	r = op.postRaw(jobPath(id)+"/cancel", form, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != jobPath(id) {
		t.Fatalf("plain cancel: %d %q", r.status, r.header.Get("Location"))
	}
	r = hx(op, jobPath(id)+"/cancel", nil).want(http.StatusConflict)
	if got := r.testid("flash"); !strings.Contains(got, "cancelled already") {
		t.Fatalf("cancelling a cancelled job: %q", got)
	}
	if got := op.get(jobPath(id)).testid("job-state"); got != "cancelled" {
		t.Fatalf("state %q", got)
	}
	hx(op, jobPath(id)+"/undo", nil).want(http.StatusConflict)
	hx(op, "/jobs/999/pause", nil).want(http.StatusNotFound)
	op.get("/jobs/nope").want(http.StatusNotFound)
	op.get("/jobs/999").want(http.StatusNotFound)
}

// A replay job's page: per group, what became of the copies, and the
// copies that failed again, each linked to its dead letter and its error
// group, their error texts escaped.
func TestJobPageShowsOutcomesAndEscapedFailures(t *testing.T) {
	t.Parallel()
	s := setup(t)
	fill(t, s, "q", 4)
	op, _ := s.loggedIn(broker.RoleOperator)
	id := startReplay(t, s, `{"filter":{"queue":"q"},"wait":false}`)
	if _, err := s.broker.WaitJob(s.ctx, id); err != nil {
		t.Fatal(err)
	}
	evil := `<script>alert("x")</script><img src=x onerror=alert(1)>` + "\nsecond line"
	popAll(t, s, "q", "g", func(i int) bool { return i < 2 }, evil)
	r := op.get(jobPath(id)).want(http.StatusOK)
	if got := r.testid("job-outcome-summary"); got != "2 succeeded, 2 failed again, 0 pending" {
		t.Fatalf("outcome %q", got)
	}
	row := r.doc().Find(`[data-testid="outcome-row"][data-group="g"]`)
	if row.Find(`[data-testid="outcome-succeeded"]`).Text() != "2" || row.Find(`[data-testid="outcome-failed"]`).Text() != "2" {
		t.Fatalf("group g's row %q", row.Text())
	}
	if strings.Contains(string(r.body), "<script>alert") || strings.Contains(string(r.body), "<img src=x") || r.doc().Find("#job-progress script, #job-progress img").Length() != 0 {
		t.Fatal("an error text is markup on the job's page")
	}
	fails := r.doc().Find(`[data-testid="failure-row"]`)
	if fails.Length() != 2 {
		t.Fatalf("%d failures listed", fails.Length())
	}
	link, _ := fails.First().Find(`[data-testid="failure-link"]`).Attr("href")
	eg := fails.First().Find(`[data-testid="failure-errorgroup"]`)
	egURL, _ := eg.Attr("href")
	if !strings.HasPrefix(link, "/queues/q/dead-letters/") || !strings.Contains(egURL, "fingerprint=") || !strings.HasPrefix(strings.TrimSpace(eg.Text()), `<script>alert("x")</script>`) || strings.Contains(eg.Text(), "second line") {
		t.Fatalf("failure link %q, error group %q %q", link, egURL, eg.Text())
	}
	// The link opens the copy's dead letter.
	if d := op.get(link).want(http.StatusOK); !strings.Contains(d.testid("fact-tx"), "dlq:") {
		t.Fatalf("the failure's page: %q", d.testid("fact-tx"))
	}
	if got := r.testid("job-actor"); got != "anonymous" {
		t.Fatalf("actor %q", got)
	}
	if href, _ := r.doc().Find(`[data-testid="job-audit"]`).Attr("href"); href != "/audit?job="+strconv.FormatInt(id, 10)+"&stream=all" {
		t.Fatalf("audit link %q", href)
	}
}

// The Jobs page lists jobs newest first, filtered, with a link to each;
// the navigation leads to it.
func TestJobsPageListsJobs(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	viewer, _ := s.loggedIn(broker.RoleViewer)
	r := viewer.get("/jobs").want(http.StatusOK)
	if r.doc().Find(`[data-testid="empty"]`).Length() != 1 {
		t.Fatal("no empty state")
	}
	if href, _ := r.doc().Find(`[data-testid="nav-jobs"]`).Attr("href"); href != "/jobs" {
		t.Fatalf("nav link %q", href)
	}
	fill(t, s, "q", 2)
	first := startReplay(t, s, `{"filter":{"queue":"q"}}`)
	var del jobAnswer
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"q","consumerGroup":"g"}}`).want(http.StatusAccepted).decode(&del)
	r = viewer.get("/jobs").want(http.StatusOK)
	rows := r.doc().Find(`[data-testid="job-row"]`)
	if rows.Length() != 2 {
		t.Fatalf("%d rows", rows.Length())
	}
	if href, _ := rows.First().Find(`[data-testid="job-link"]`).Attr("href"); href != jobPath(del.Job.ID) {
		t.Fatalf("newest first: %q", href)
	}
	r = viewer.get("/jobs?kind=replay").want(http.StatusOK)
	if href, _ := r.doc().Find(`[data-testid="job-link"]`).Attr("href"); href != jobPath(first) || r.doc().Find(`[data-testid="job-row"]`).Length() != 1 {
		t.Fatalf("kind=replay: %q", href)
	}
	frag := hxGet(viewer, "/jobs?state=done")
	if frag.doc().Find(`[data-testid="job-row"]`).Length() != 0 || strings.Contains(string(frag.body), "<html") {
		t.Fatalf("state=done as a fragment: %s", frag.body)
	}
	viewer.get("/jobs?state=sleeping").want(http.StatusBadRequest)
	viewer.get("/jobs?after=x").want(http.StatusBadRequest)
}

// The confirmation of a bulk action says how many per group, shows the
// first five, offers a rate and, for a replay, where the copies go: in
// words, with the filter's group named.
func TestBulkConfirmShowsGroupsSampleAndChoices(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	fill(t, f.s, "bulk", 7)
	deadLetterAlso(t, f.s, "bulk", "h", 3)
	c := f.op.get("/queues/bulk/dead-letters/confirm?action=replay&all=1").want(http.StatusOK)
	groups := map[string]string{}
	c.doc().Find(`[data-testid="confirm-group"]`).Each(func(_ int, g *goquery.Selection) {
		name, _ := g.Attr("data-group")
		groups[name] = strings.Join(strings.Fields(g.Text()), " ")
	})
	if fmt.Sprint(groups) != "map[g:g 7 dead letters h:h 3 dead letters]" {
		t.Fatalf("groups %v", groups)
	}
	if n := c.doc().Find(`[data-testid="confirm-sample-row"]`).Length(); n != 5 {
		t.Fatalf("%d sample rows, want 5", n)
	}
	if c.doc().Find(`[data-testid="confirm-rate"]`).Length() != 1 || c.doc().Find(`[data-testid="confirm-mode-every"][checked]`).Length() != 1 {
		t.Fatal("no rate field, or every group is not the default")
	}
	if got := c.testid("confirm-mode-own-label"); got != "only the group that gave up on each" { // g and h
		t.Fatalf("own mode says %q", got)
	}
	c = f.op.get("/queues/bulk/dead-letters/confirm?action=replay&all=1&group=h").want(http.StatusOK)
	if got := c.testid("confirm-mode-own-label"); got != "Replay to h only" {
		t.Fatalf("own mode of a group's filter says %q", got)
	}
	if n := c.doc().Find(`[data-testid="confirm-sample-row"]`).Length(); n != 3 || strings.Join(strings.Fields(c.testid("confirm-groups")), " ") != "By consumer group: h 3 dead letters" {
		t.Fatalf("group h's confirmation: %d rows, %q", n, c.testid("confirm-groups"))
	}
	// The error texts of the seed's orders, in its sample, are text.
	c = f.op.get("/queues/orders/dead-letters/confirm?action=delete&all=1").want(http.StatusOK)
	if got := c.doc().Find(`[data-testid="confirm-sample-row"] td.error`).First().Text(); got != "upstream timeout after 30s" {
		t.Fatalf("sample's error %q", got)
	}
	if c.doc().Find(`[data-testid="confirm-modes"]`).Length() != 0 {
		t.Fatal("a delete offers replay modes")
	}

	// Replay to h only, at most 5 a second: the job says so.
	c = f.op.get("/queues/bulk/dead-letters/confirm?action=replay&all=1&group=h").want(http.StatusOK)
	form := confirmForm(t, c)
	form.Set("mode", "own")
	form.Set("rate", "5")
	r := hx(f.op, "/queues/bulk/dead-letters/replay", form).want(http.StatusOK)
	if got := r.testid("flash"); !strings.Contains(got, "Replaying 3 dead letters to group h only, at most 5 a second") {
		t.Fatalf("flash %q", got)
	}
	jv, err := f.s.broker.JobDetail(f.s.ctx, flashJobID(t, r))
	if err != nil || jv.Scope.Mode != broker.ReplayOwnGroup || jv.Rate != 5 || jv.Scope.Filter.Group != "h" {
		t.Fatalf("job %+v %v", jv.Job, err)
	}
	for _, bad := range []url.Values{{"rate": {"-1"}}, {"rate": {"fast"}}, {"rate": {"1000001"}}, {"mode": {"sideways"}}} {
		form := confirmForm(t, c)
		for k, v := range bad {
			form[k] = v
		}
		hx(f.op, "/queues/bulk/dead-letters/replay", form).want(http.StatusBadRequest)
	}
	form = confirmForm(t, f.op.get("/queues/bulk/dead-letters/confirm?action=delete&all=1").want(http.StatusOK))
	form.Set("mode", "own")
	hx(f.op, "/queues/bulk/dead-letters/delete", form).want(http.StatusBadRequest)
	if jobs, _ := f.s.broker.Jobs(f.s.ctx, broker.JobFilter{}, broker.Page{Limit: 10}); len(jobs) != 1 {
		t.Fatalf("%d jobs, want the one started: refused forms started some", len(jobs))
	}
}

// Deleting one dead letter stays at once; its flash offers Undo.
func TestDeleteOneOffersUndo(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t)
	r := hx(f.op, "/queues/orders/dead-letters/"+f.d.ID+"/delete?group=billing", nil).want(http.StatusOK)
	undo := r.doc().Find(`[data-testid="flash-undo"]`)
	if u, _ := undo.Attr("hx-post"); u != "/queues/orders/dead-letters/"+f.d.ID+"/restore?group=billing" {
		t.Fatalf("undo posts to %q", u)
	}
	if !strings.Contains(r.testid("flash"), "Deleted dead letter") {
		t.Fatalf("flash %q", r.testid("flash"))
	}
}

// The audit has a person's bulk action as one entry linked to its job;
// the broker's own entries (dead letters filed) are hidden unless asked
// for; the job's page links to its entries alone.
func TestAuditLinksJobsAndHidesTheBrokersEntries(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 3)
	viewer, _ := s.loggedIn(broker.RoleViewer)
	id := startReplay(t, s, `{"filter":{"queue":"q"}}`)
	if _, err := s.broker.PauseJob(s.ctx, id, "user:carol"); err != nil {
		t.Fatal(err)
	}
	actions := func(r response) (out []string) {
		r.doc().Find(`[data-testid="audit-row"]`).Each(func(_ int, row *goquery.Selection) {
			a := strings.TrimSpace(row.Find(".badge").First().Text())
			if a == "login" || a == "user" {
				return // the test's users
			}
			if row.Find(`[data-testid="audit-broker-entry"]`).Length() == 1 {
				a += "(broker)"
			}
			if href, ok := row.Find(`[data-testid="audit-job-link"]`).Attr("href"); ok {
				a += "->" + href
			}
			out = append(out, a)
		})
		return out
	}
	job := "->" + jobPath(id)
	r := viewer.get("/audit").want(http.StatusOK)
	if got := fmt.Sprint(actions(r)); got != "[job_pause"+job+" replay"+job+"]" {
		t.Fatalf("people's entries: %s", got)
	}
	if r.doc().Find(`[data-testid="audit-broker"][checked]`).Length() != 0 {
		t.Fatal("the broker's entries are shown by default")
	}
	r = viewer.get("/audit?stream=all").want(http.StatusOK)
	if got := actions(r); len(got) != 5 || got[4] != "dead_letter(broker)" || r.doc().Find(`[data-testid="audit-broker"][checked]`).Length() != 1 {
		t.Fatalf("every entry: %v", got)
	}
	fill(t, s, "other", 1)
	s.call("POST", "/api/v1/dlq/delete", `{"filter":{"queue":"other"}}`).want(http.StatusAccepted)
	r = viewer.get("/audit?job=" + strconv.FormatInt(id, 10)).want(http.StatusOK)
	if got := fmt.Sprint(actions(r)); got != "[job_pause"+job+" replay"+job+"]" || r.doc().Find(`[data-testid="audit-job"]`).Length() != 1 {
		t.Fatalf("the job's entries: %s", got)
	}
	viewer.get("/audit?stream=some").want(http.StatusBadRequest)
	viewer.get("/audit?job=x").want(http.StatusBadRequest)
}
