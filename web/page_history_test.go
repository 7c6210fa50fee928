package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// failAs pops one message of queue q for group and acks it with status
// and errText, through the broker.
func (s *bundle) failAs(group, status, errText string) broker.Delivery {
	s.t.Helper()
	res, err := s.broker.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: group, Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		s.t.Fatalf("pop for %s: %+v, %v", group, res, err)
	}
	m := res.Messages[0]
	if _, err := s.broker.Ack(s.ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: status, Error: errText, Group: group}); err != nil {
		s.t.Fatal(err)
	}
	return m
}

// hostile is an error text a worker could send to attack the page.
const hostile = `<script>alert("pwned")</script><img src=x onerror=alert(1)>` + "\n  at evil()"

func historyFixture(t *testing.T) (*bundle, string) {
	t.Helper()
	s := setup(t)
	s.configure("q", `{"retryLimit":2,"retryDelay":0}`)
	if _, err := s.broker.Push(s.ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "order-1", Payload: json.RawMessage(`{"n":1}`)}}); err != nil {
		t.Fatal(err)
	}
	s.failAs("billing", broker.AckFailed, hostile)
	s.clock.Advance(time.Minute)
	s.failAs("billing", broker.AckFailed, "timeout after 30s")
	s.clock.Advance(time.Minute)
	m := s.failAs("billing", broker.AckFailed, "card declined")
	return s, m.ID()
}

func TestDeadLetterPageShowsItsHistory(t *testing.T) {
	t.Parallel()
	s, id := historyFixture(t)
	b, _ := s.loggedIn(broker.RoleViewer)
	r := b.get("/queues/q/dead-letters/" + id + "?group=billing").want(http.StatusOK)
	doc := r.doc()
	attempts := doc.Find(`[data-testid="attempt"]`)
	if attempts.Length() != 2 {
		t.Fatalf("%d attempts shown, want 2:\n%s", attempts.Length(), doc.Find(`[data-testid="history"]`).Text())
	}
	first := attempts.First()
	if got := strings.TrimSpace(first.Find(`[data-testid="attempt-error"]`).Text()); got != `<script>alert("pwned")</script><img src=x onerror=alert(1)> …` {
		t.Errorf("first attempt's line %q", got)
	}
	if got := first.Find(`[data-testid="attempt-full"]`).Text(); got != hostile {
		t.Errorf("first attempt's whole text %q", got)
	}
	if v, _ := first.Attr("value"); v != "1" {
		t.Errorf("first attempt numbered %q", v)
	}
	if got := strings.TrimSpace(attempts.Eq(1).Find(`[data-testid="attempt-error"]`).Text()); got != "timeout after 30s" {
		t.Errorf("second attempt %q", got)
	}
	if strings.Contains(string(r.body), "<script>alert") || strings.Contains(string(r.body), "<img src=x") {
		t.Fatal("an attempt's error is rendered as HTML")
	}
	if r.testid("dl-error-full") != "card declined" {
		t.Errorf("the dead letter's error %q", r.testid("dl-error-full"))
	}

	// The API's answer has the same history.
	var out struct {
		History struct {
			Attempts []struct {
				Attempt int     `json:"attempt"`
				At      string  `json:"at"`
				Error   *string `json:"error"`
			} `json:"attempts"`
			ReplayOf []any `json:"replayOf"`
			Replays  []any `json:"replays"`
		} `json:"history"`
	}
	s.call("GET", "/api/v1/dlq/"+id, "").want(http.StatusOK).decode(&out)
	a := out.History.Attempts
	if len(a) != 2 || a[0].Attempt != 1 || *a[0].Error != hostile || a[1].At != "2026-11-01T12:01:00.000Z" || out.History.ReplayOf == nil || out.History.Replays == nil {
		t.Errorf("API history %+v", out.History)
	}
}

// The old link of a replayed dead letter says by whom, when and as which
// message it was replayed, and how that copy did: a 404 with a page.
func TestReplayedDeadLetterPageSaysWhatHappened(t *testing.T) {
	t.Parallel()
	s, id := historyFixture(t)
	s.clock.Advance(time.Minute)
	res, err := s.broker.Replay(s.ctx, id, "user:alice")
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(5 * time.Minute)
	b, _ := s.loggedIn(broker.RoleViewer)
	link := "/queues/q/dead-letters/" + id + "?group=billing"
	r := b.get(link).want(http.StatusNotFound)
	fate := r.doc().Find(`[data-testid="fate"]`)
	if fate.Length() != 1 || fate.AttrOr("data-how", "") != "replayed" {
		t.Fatalf("fate:\n%s", r.body)
	}
	text := strings.Join(strings.Fields(fate.Text()), " ")
	if !strings.Contains(text, "Replayed by user:alice 5 min ago as "+res.MessageID) || !strings.Contains(text, "pending in billing") {
		t.Errorf("fate says %q", text)
	}
	if href := fate.Find(`[data-testid="fate-copy"]`).AttrOr("href", ""); href != "/search?"+(url.Values{"q": {res.MessageID}}).Encode() {
		t.Errorf("copy link %q", href)
	}
	// The copy fails again in billing: the old page links to its dead letter.
	s.configure("q", `{"retryLimit":0}`)
	s.failAs("billing", broker.AckFailed, "declined again")
	r = b.get(link).want(http.StatusNotFound)
	out := r.doc().Find(`[data-testid="fate-outcome"]`)
	if got := strings.TrimSpace(out.Text()); got != "failed again in billing" {
		t.Errorf("outcome %q", got)
	}
	copyLink := out.AttrOr("href", "")
	if copyLink != "/queues/q/dead-letters/"+res.MessageID+"?group=billing" {
		t.Fatalf("outcome link %q", copyLink)
	}
	// ... whose page says it is a replay of the original, linked back.
	c := b.get(copyLink).want(http.StatusOK)
	back := c.doc().Find(`[data-testid="replay-of"] a`).First()
	if back.AttrOr("href", "") != "/queues/q/dead-letters/"+id || !strings.Contains(c.testid("replay-of"), "user:alice") {
		t.Errorf("lineage %q, link %q", c.testid("replay-of"), back.AttrOr("href", ""))
	}
	// Without a group the page tells every group's fate: the same here.
	if b.get("/queues/q/dead-letters/"+id).want(http.StatusNotFound).doc().Find(`[data-testid="fate"]`).Length() != 1 {
		t.Error("no fate without ?group=")
	}

	var gone struct {
		Error string `json:"error"`
		Gone  struct {
			How  string `json:"how"`
			By   string `json:"by"`
			At   string `json:"at"`
			Copy struct {
				MessageID     string `json:"messageId"`
				TransactionID string `json:"transactionId"`
				Outcome       string `json:"outcome"`
				DeadLetter    bool   `json:"deadLetter"`
			} `json:"copy"`
		} `json:"gone"`
	}
	s.call("GET", "/api/v1/dlq/"+id, "").want(http.StatusNotFound).decode(&gone)
	if g := gone.Gone; g.How != "replayed" || g.By != "user:alice" || g.At != "2026-11-01T12:03:00.000Z" || g.Copy.MessageID != res.MessageID ||
		g.Copy.TransactionID != "dlq:"+id || g.Copy.Outcome != "failed" || !g.Copy.DeadLetter || !strings.Contains(gone.Error, res.MessageID) {
		t.Errorf("API gone answer %+v", gone)
	}
}

// A deleted dead letter's page says who deleted it and until when it can
// be restored: operators get a Restore button, viewers do not.
func TestDeletedDeadLetterPage(t *testing.T) {
	t.Parallel()
	s, id := historyFixture(t)
	if _, err := s.broker.Delete(s.ctx, id, "billing", "user:carol"); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(time.Hour)
	link := "/queues/q/dead-letters/" + id + "?group=billing"
	viewer, _ := s.loggedIn(broker.RoleViewer)
	op, _ := s.loggedIn(broker.RoleOperator)
	r := viewer.get(link).want(http.StatusNotFound)
	fate := r.doc().Find(`[data-testid="fate"]`)
	if fate.AttrOr("data-how", "") != "deleted" || !strings.Contains(fate.Text(), "user:carol") || !strings.Contains(r.testid("fate-restorable"), "23 h left") {
		t.Fatalf("fate %q", strings.Join(strings.Fields(fate.Text()), " "))
	}
	if r.doc().Find(`[data-testid="restore"]`).Length() != 0 {
		t.Error("a viewer sees Restore")
	}
	ro := op.get(link).want(http.StatusNotFound)
	restore := ro.doc().Find(`[data-testid="restore"]`).AttrOr("hx-post", "")
	if restore != "/queues/q/dead-letters/"+id+"/restore?group=billing" {
		t.Fatalf("restore button posts to %q", restore)
	}
	// A viewer may not restore; nor may anyone through another queue.
	hx(viewer, restore, nil).want(http.StatusForbidden)
	hx(op, "/queues/other/dead-letters/"+id+"/restore?group=billing", nil).want(http.StatusNotFound)
	hx(op, restore, nil).want(http.StatusOK)
	op.get(link).want(http.StatusOK)
	hx(op, restore, nil).want(http.StatusNotFound) // nothing left to restore

	var gone struct {
		Gone struct {
			How             string  `json:"how"`
			By              string  `json:"by"`
			RestorableUntil *string `json:"restorableUntil"`
		} `json:"gone"`
	}
	if _, err := s.broker.Delete(s.ctx, id, "billing", "user:carol"); err != nil {
		t.Fatal(err)
	}
	s.call("GET", "/api/v1/dlq/"+id+"?consumerGroup=billing", "").want(http.StatusNotFound).decode(&gone)
	if gone.Gone.How != "deleted" || gone.Gone.By != "user:carol" || gone.Gone.RestorableUntil == nil || *gone.Gone.RestorableUntil != "2026-11-02T13:02:00.000Z" {
		t.Errorf("API gone answer %+v", gone.Gone)
	}
	// Past the window, the page says it is gone for good, with no button.
	s.clock.Advance(25 * time.Hour)
	op, _ = s.loggedIn(broker.RoleOperator) // the session ran out meanwhile
	r = op.get(link).want(http.StatusNotFound)
	if !strings.Contains(r.testid("fate-window-ended"), "gone for good") || r.doc().Find(`[data-testid="restore"]`).Length() != 0 {
		t.Errorf("after the window: %q", strings.Join(strings.Fields(r.testid("gone")), " "))
	}
}

// A message that never was a dead letter says so; an id of nothing is the
// plain not-found page.
func TestNeverADeadLetterPage(t *testing.T) {
	t.Parallel()
	s, id := historyFixture(t)
	b, _ := s.loggedIn(broker.RoleViewer)
	r := b.get("/queues/q/dead-letters/" + id + "?group=analytics").want(http.StatusNotFound)
	if !strings.Contains(r.testid("gone-never"), "analytics") || r.doc().Find(`[data-testid="gone-live"] a`).AttrOr("href", "") != "/queues/q/dead-letters/"+id+"?group=billing" {
		t.Errorf("never page: %q / %q", r.testid("gone-never"), r.testid("gone-live"))
	}
	for _, path := range []string{
		"/queues/q/dead-letters/" + broker.MessageID(s.clock.Now(), 424242),
		"/queues/other/dead-letters/" + id,
		"/queues/q/dead-letters/not-an-id",
	} {
		r := b.get(path).want(http.StatusNotFound)
		if r.doc().Find(`[data-testid="gone"]`).Length() != 0 {
			t.Errorf("%s: a gone page for nothing known", path)
		}
	}
	s.call("GET", "/api/v1/dlq/"+id+"?consumerGroup=analytics", "").wantError(http.StatusNotFound, "analytics")
}
