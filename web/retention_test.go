package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/lazarus-dlq/lazarus/broker"
)

// After retentionSeconds removed messages, the queue page shows each
// group's expired unread count, the partition's messages and the lags as
// they are (compared with what is left), and a dead letter whose message
// went still shows its payload, escaped.
func TestQueuePageAfterRetention(t *testing.T) {
	t.Parallel()
	s := setup(t)
	payload := `{"note":"<script>alert(1)</script>"}`
	d := s.fail("q", "p", "billing", "t1", payload, "declined") // billing settles t1
	s.configure("q", `{"retentionSeconds":60}`)
	s.pop("q", "consumerGroup=analytics&batch=1") // analytics gets t1, leased
	s.clock.Advance(10 * time.Minute)             // analytics' lease ran out
	s.push("q", "p", "t2", `2`)
	s.push("q", "p", "t3", `3`)
	s.clock.Advance(61 * time.Second)
	s.push("q", "p", "young", `4`)
	rep, err := s.broker.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskMessages); r.Removed != 3 {
		t.Fatalf("removed %d, want t1 t2 t3", r.Removed)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	doc := b.get("/queues/q").want(http.StatusOK).doc()
	row := func(group string) (lag, expired string) {
		r := doc.Find(`[data-testid="group-` + group + `"]`)
		return strings.TrimSpace(r.Find("td").Eq(1).Text()), strings.TrimSpace(r.Find(`[data-testid="group-expired"]`).Text())
	}
	// billing had settled t1: t2 t3 expired unread; analytics read none.
	if lag, exp := row("billing"); lag != "1" || exp != "2" {
		t.Errorf("billing: lag %q, expired %q; want 1 and 2", lag, exp)
	}
	if lag, exp := row("analytics"); lag != "1" || exp != "3" {
		t.Errorf("analytics: lag %q, expired %q; want 1 and 3", lag, exp)
	}
	var counts []string
	doc.Find(`[data-testid="partitions"] tbody tr`).Each(func(_ int, r *goquery.Selection) {
		counts = append(counts, strings.TrimSpace(r.Find("td").Eq(0).Text())+"="+strings.TrimSpace(r.Find("td").Eq(2).Text()))
	})
	if strings.Join(counts, ",") != "p=1" {
		t.Errorf("partitions %v, want p=1 (young)", counts)
	}
	r := b.get("/queues/q/dead-letters/" + d.ID + "?group=billing").want(http.StatusOK)
	if v, _ := r.doc().Find(`[data-testid="copy-payload"]`).Attr("data-copy"); v != payload {
		t.Errorf("the dead letter's payload once its message went: %q", v)
	}
	if strings.Contains(string(r.body), "<script>alert(1)</script>") {
		t.Error("the payload is written into the page unescaped")
	}
}

// A replay job whose copies retentionSeconds removed before the group
// settled them says so on its page, and stops waiting for them: the
// progress no longer polls.
func TestJobPageSaysCopiesExpired(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 3) // 3 dead letters of group g
	page, err := s.broker.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Limit: 1})
	if err != nil || len(page.Items) != 1 {
		t.Fatal(page, err)
	}
	original := page.Items[0].MessageID()
	viewer, _ := s.loggedIn(broker.RoleViewer)
	id := startReplay(t, s, `{"filter":{"queue":"q"}}`)
	if _, err := s.broker.RunJob(s.ctx, id); err != nil {
		t.Fatal(err)
	}
	s.configure("q", `{"retentionSeconds":60}`)
	s.clock.Advance(2 * time.Minute)
	if _, err := s.broker.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	frag := hxGet(viewer, jobPath(id)+"/progress").want(http.StatusOK)
	if got := frag.testid("job-outcome-summary"); got != "0 succeeded, 0 failed again, 3 expired (removed by retentionSeconds unread), 0 pending" {
		t.Errorf("outcome %q", got)
	}
	if p := pollOf(t, frag); p != "" {
		t.Errorf("the page polls %q for copies that are gone", p)
	}
	// The page of a replayed original whose message went: what became of
	// it, from what its replay kept.
	gone := viewer.get("/queues/q/dead-letters/" + original + "?group=g").want(http.StatusNotFound)
	if gone.testid("gone-message-removed") == "" || !strings.Contains(string(gone.body), "removed by retention before g settled it") {
		t.Errorf("the page of %s once retention removed it and its copy: %s", original, gone.testid("gone"))
	}
}
