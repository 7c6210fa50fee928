package storetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/broker"
)

// sender is a Sender written for the tests: it records what it is given
// and fails on demand (the protocols are package notify's, tested
// against real receivers there).
type sender struct {
	mu     sync.Mutex
	got    []broker.Notification
	tries  []int64                  // the ids of every send, failed ones too
	failN  map[int64]int            // a notification's sends still to fail
	always bool                     // every send fails
	sent   chan broker.Notification // when set, told each one sent
	after  func()                   // when set, run after each send that succeeded
}

// Send fails with an error that names the channel's URL and secret,
// as a careless library's might: the broker must keep them out of the
// delivery log.
func (f *sender) Send(_ context.Context, ch broker.Channel, n broker.Notification) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries = append(f.tries, n.ID)
	if f.always || f.failN[n.ID] > 0 {
		f.failN[n.ID]--
		return fmt.Errorf("post %s: 503 from the receiver (signed with %s)", ch.URL, ch.Secret)
	}
	f.got = append(f.got, n)
	if f.sent != nil {
		f.sent <- n
	}
	if f.after != nil {
		f.after()
	}
	return nil
}

func (f *sender) gotIDs() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []int64
	for _, n := range f.got {
		ids = append(ids, n.ID)
	}
	return ids
}

// notifyBundle is a bundle whose broker sends through a sender.
func notifyBundle(t *testing.T, harness Harness) (*bundle, *sender) {
	t.Helper()
	s := setup(t, harness)
	f := &sender{failN: map[int64]int{}}
	s.b = broker.New(broker.Config{Store: &retryStore{Store: s.db}, Clock: s.clock, Notify: f})
	t.Cleanup(s.b.Close)
	return s, f
}

// webhook makes a webhook channel; it fails the test on error.
func (s *bundle) webhook(name string) broker.Channel {
	s.t.Helper()
	c, err := s.b.CreateChannel(s.ctx, broker.Channel{Name: name, Kind: broker.ChannelWebhook, URL: "https://hooks.example.com/services/T0/" + name + "-path-token"}, "ada")
	if err != nil {
		s.t.Fatalf("channel %s: %v", name, err)
	}
	return c
}

// rule makes a rule; it fails the test on error.
func (s *bundle) rule(ch int64, queue, group string, events ...string) broker.Rule {
	s.t.Helper()
	r, err := s.b.CreateRule(s.ctx, broker.Rule{ChannelID: ch, Queue: queue, Group: group, Events: events}, "ada")
	if err != nil {
		s.t.Fatalf("rule: %v", err)
	}
	return r
}

// outbox returns a channel's notifications, newest first.
func (s *bundle) outbox(ch int64) []broker.NotifyDelivery {
	s.t.Helper()
	p, err := s.b.Deliveries(s.ctx, broker.DeliveryQuery{ChannelID: ch, Limit: broker.MaxDeliveryPage})
	if err != nil {
		s.t.Fatalf("deliveries: %v", err)
	}
	return p.Items
}

// send runs a pass of the sender; it fails the test on error.
func (s *bundle) send() broker.SendReport {
	s.t.Helper()
	rep, err := s.b.SendNotifications(s.ctx)
	if err != nil {
		s.t.Fatalf("send: %v", err)
	}
	return rep
}

// onlyGroup returns the one error group of q.
func (s *bundle) onlyGroup() broker.OwnedErrorGroup {
	s.t.Helper()
	gs, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Queue: "q", Limit: 10})
	if err != nil || len(gs) != 1 {
		s.t.Fatalf("error groups: %+v %v, want one", gs, err)
	}
	return gs[0]
}

// auditText is every audit entry, people's and the broker's, in words.
func (s *bundle) auditText() string {
	s.t.Helper()
	es, err := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamAll}, broker.Page{Limit: 1000})
	if err != nil {
		s.t.Fatal(err)
	}
	return fmt.Sprintf("%+v", es)
}

// Channels: a webhook channel gets a secret of its own, returned once;
// an email channel keeps the SMTP password given; neither is read back
// by Channels or written to the audit. Bad channels are refused and
// make nothing; a deleted channel takes its rules and pending
// notifications with it, and says so.
func testNotifyChannelsAreCheckedAndTheirSecretsKept(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := notifyBundle(t, harness)
	hook := s.webhook("ops-hook")
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(hook.Secret, "whsec_"))
	if !strings.HasPrefix(hook.Secret, "whsec_") || err != nil || len(raw) != 24 {
		t.Fatalf("webhook secret %q: want whsec_ and 24 bytes in base64 (%v)", hook.Secret, err)
	}
	if other := s.webhook("other-hook"); other.Secret == hook.Secret {
		t.Fatal("two channels have one secret")
	}
	const password = "smtp-pass-Zq81"
	mail, err := s.b.CreateChannel(s.ctx, broker.Channel{Name: "ops mail", Kind: broker.ChannelEmail, SMTPHost: "smtp.example.com", SMTPPort: 587,
		SMTPUser: "lazarus", Secret: password, From: "lazarus@example.com", To: []string{"ops@example.com", "dev@example.com"}}, "ada")
	if err != nil || mail.Secret != password {
		t.Fatalf("email channel: %+v %v", mail, err)
	}
	slack, err := s.b.CreateChannel(s.ctx, broker.Channel{Name: "slack", Kind: broker.ChannelSlack, URL: "http://hooks.slack.example/services/XYZ", Secret: "ignored"}, "ada")
	if err != nil || slack.Secret != "" {
		t.Fatalf("slack channel: %+v %v", slack, err)
	}

	before := s.auditText()
	long := strings.Repeat("n", broker.MaxChannelName+1)
	okMail := broker.Channel{Kind: broker.ChannelEmail, SMTPHost: "smtp.example.com", SMTPPort: 25, From: "a@example.com", To: []string{"b@example.com"}}
	withMail := func(name string, f func(*broker.Channel)) broker.Channel {
		c := okMail
		c.Name = name
		f(&c)
		return c
	}
	for _, c := range []broker.Channel{
		{Name: "", Kind: broker.ChannelWebhook, URL: "https://x.example"},
		{Name: long, Kind: broker.ChannelWebhook, URL: "https://x.example"},
		{Name: "ops-hook", Kind: broker.ChannelWebhook, URL: "https://x.example"}, // taken
		{Name: "bell\a", Kind: broker.ChannelWebhook, URL: "https://x.example"},
		{Name: "pager", Kind: "pager", URL: "https://x.example"},
		{Name: "ftp", Kind: broker.ChannelWebhook, URL: "ftp://x.example/in"},
		{Name: "file", Kind: broker.ChannelSlack, URL: "file:///etc/passwd"},
		{Name: "nohost", Kind: broker.ChannelWebhook, URL: "https:///in"},
		{Name: "nourl", Kind: broker.ChannelSlack},
		withMail("nohost", func(c *broker.Channel) { c.SMTPHost = "" }),
		withMail("port", func(c *broker.Channel) { c.SMTPPort = 70000 }),
		withMail("from", func(c *broker.Channel) { c.From = "not an address" }),
		withMail("to", func(c *broker.Channel) { c.To = nil }),
		withMail("to2", func(c *broker.Channel) { c.To = []string{"ok@example.com", "Eve <eve@example.com>"} }),
	} {
		if _, err := s.b.CreateChannel(s.ctx, c, "ada"); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("channel %+v: %v, want ErrInvalid", c, err)
		}
	}
	cs, err := s.b.Channels(s.ctx)
	if err != nil || len(cs) != 4 {
		t.Fatalf("channels: %d %v, want the 4 made", len(cs), err)
	}
	if after := s.auditText(); after != before {
		t.Errorf("refused channels were audited:\n%s", after)
	}
	for _, c := range cs {
		if c.Secret != "" {
			t.Errorf("channel %q read back with its secret", c.Name)
		}
	}
	if cs[3].URL != "http://hooks.slack.example/…" || cs[0].URL != "https://hooks.example.com/…" {
		t.Errorf("URLs read back: %q %q, want their paths hidden", cs[3].URL, cs[0].URL)
	}
	if cs[2].Name != "ops mail" || cs[2].SMTPUser != "lazarus" || len(cs[2].To) != 2 || cs[2].To[1] != "dev@example.com" || cs[2].CreatedBy != "ada" {
		t.Errorf("email channel read back: %+v", cs[2])
	}

	s.rule(hook.ID, "*", "", broker.EventHoldStarted)
	s.rule(hook.ID, "orders", "", broker.EventHoldReleased)
	s.rule(mail.ID, "*", "", broker.EventHoldStarted)
	if _, err := s.b.TestChannel(s.ctx, hook.ID, "ada"); err != nil {
		t.Fatal(err)
	}
	gone, err := s.b.DeleteChannel(s.ctx, hook.ID, "ada")
	if err != nil || gone.Rules != 2 || gone.Pending != 1 || gone.Channel.Name != "ops-hook" || gone.Channel.Secret != "" {
		t.Fatalf("delete: %+v %v, want its 2 rules and 1 pending notification", gone, err)
	}
	if rs, _ := s.b.Rules(s.ctx); len(rs) != 1 || rs[0].ChannelID != mail.ID {
		t.Errorf("rules left: %+v", rs)
	}
	if ds := s.outbox(hook.ID); len(ds) != 0 {
		t.Errorf("pending notifications left: %+v", ds)
	}
	if _, err := s.b.DeleteChannel(s.ctx, hook.ID, "ada"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	text := s.auditText()
	for _, secret := range []string{hook.Secret, password, "path-token", "XYZ"} {
		if strings.Contains(text, secret) {
			t.Errorf("the audit holds a secret %q:\n%s", secret, text)
		}
	}
	if !strings.Contains(text, "with its 2 rules and 1 notifications not sent yet") {
		t.Errorf("the audit does not say what went with the channel:\n%s", text)
	}
}

// Rules: bad ones are refused; an event goes to each channel one of
// whose rules matches its event, its queue by the pattern and its group
// when the rule names one: once per channel, however many of its rules
// match.
func testNotifyRulesMatchByPatternAndGroup(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := notifyBundle(t, harness)
	orders, billing, pay := s.webhook("orders"), s.webhook("billing"), s.webhook("payments")
	for _, r := range []broker.Rule{
		{ChannelID: orders.ID, Queue: "*"},
		{ChannelID: orders.ID, Queue: "*", Events: []string{"error_group.maybe"}},
		{ChannelID: orders.ID, Queue: "orders/eu", Events: []string{broker.EventHoldStarted}},
		{ChannelID: orders.ID, Queue: "*", Group: "bad group", Events: []string{broker.EventHoldStarted}},
	} {
		if _, err := s.b.CreateRule(s.ctx, r, "ada"); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("rule %+v: %v, want ErrInvalid", r, err)
		}
	}
	if _, err := s.b.CreateRule(s.ctx, broker.Rule{ChannelID: 999, Queue: "*", Events: []string{broker.EventHoldStarted}}, "ada"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("rule of no channel: %v", err)
	}
	s.rule(orders.ID, "orders*", "", broker.EventHoldStarted, broker.EventHoldReleased)
	s.rule(orders.ID, "*-eu", "", broker.EventHoldStarted) // matches too: still one
	s.rule(billing.ID, "*", "billing", broker.EventHoldStarted)
	s.rule(pay.ID, "payments", "", broker.EventHoldStarted)
	if rs, err := s.b.Rules(s.ctx); err != nil || len(rs) != 4 || len(rs[0].Events) != 2 {
		t.Fatalf("rules: %+v %v", rs, err)
	}

	s.push("orders-eu", "p", "a")
	s.push("payments", "p", "a")
	hold := func(queue, group string) broker.Hold {
		t.Helper()
		h, _, err := s.b.Hold(s.ctx, broker.HoldRequest{Queue: queue, Group: group, Reason: "deploy", Actor: "ada"})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := hold("orders-eu", "")
	hold("orders-eu", "billing")
	hold("payments", "")
	if _, err := s.b.Release(s.ctx, h.ID, "ada"); err != nil {
		t.Fatal(err)
	}
	type row struct{ event, queue, group, path string }
	rows := func(ch int64) []row {
		var out []row
		for _, d := range s.outbox(ch) {
			out = append(out, row{d.Event, d.Queue, d.Group, d.Path})
		}
		return out
	}
	want := map[int64][]row{
		orders.ID: {{broker.EventHoldReleased, "orders-eu", "", "/queues/orders-eu"}, {broker.EventHoldStarted, "orders-eu", "billing", "/queues/orders-eu"},
			{broker.EventHoldStarted, "orders-eu", "", "/queues/orders-eu"}},
		billing.ID: {{broker.EventHoldStarted, "orders-eu", "billing", "/queues/orders-eu"}},
		pay.ID:     {{broker.EventHoldStarted, "payments", "", "/queues/payments"}},
	}
	for ch, w := range want {
		if got := rows(ch); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("channel %d: %v, want %v", ch, got, w)
		}
	}
	if err := s.b.DeleteRule(s.ctx, 999, "ada"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("delete a rule that is not there: %v", err)
	}
}

// A new error group is told once to each channel whose rules match, in
// the transaction of its first dead letter, with a sample of its error
// cut to NotifySampleChars and the path of its page; a burst of 1,000
// more dead letters of the group tells nothing more. A channel whose
// rule names another queue hears nothing.
func testNotifyNewErrorGroupIsToldOnce(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := notifyBundle(t, harness)
	a, b, other := s.webhook("a"), s.webhook("b"), s.webhook("other")
	s.rule(a.ID, "q", "", broker.EventErrorGroupNew)
	s.rule(b.ID, "*", "g", broker.EventErrorGroupNew, broker.EventErrorGroupRegressed)
	s.rule(other.ID, "elsewhere", "", broker.EventErrorGroupNew)
	txids := make([]string, 1001)
	for i := range txids {
		txids[i] = fmt.Sprintf("m%d", i)
	}
	s.push("q", "p", txids[:1]...)
	s.push("q", "p", txids[1:]...)
	long := strings.Repeat("é", 150) + strings.Repeat("x", 300)
	s.fail("q", "g", 1, long)
	g := s.onlyGroup()
	for _, ch := range []int64{a.ID, b.ID} {
		ds := s.outbox(ch)
		if len(ds) != 1 {
			t.Fatalf("channel %d: %d notifications, want 1", ch, len(ds))
		}
		d := ds[0]
		if d.Event != broker.EventErrorGroupNew || d.Queue != "q" || d.Group != "g" || d.Path != fmt.Sprintf("/error-groups/%d", g.ID) ||
			d.State != broker.DeliveryPending || !d.At.Equal(s.clock.Now()) || !d.NextAt.Equal(d.At) || d.Attempts != 0 {
			t.Errorf("channel %d: %+v", ch, d)
		}
		if n := utf8.RuneCountInString(d.Detail); n != broker.NotifySampleChars || !strings.HasPrefix(d.Detail, strings.Repeat("é", 150)) {
			t.Errorf("detail of %d characters, want %d from the error's start", n, broker.NotifySampleChars)
		}
	}
	if ds := s.outbox(other.ID); len(ds) != 0 {
		t.Errorf("a rule of another queue was told: %+v", ds)
	}
	// The burst: 1,000 dead letters of the same group, in batches.
	for left := 1000; left > 0; {
		res := s.pop("q", "g", 100)
		if len(res.Messages) == 0 {
			t.Fatalf("nothing to pop, %d left", left)
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckDLQ, Error: long, Group: "g"}
		}
		if _, err := s.b.AckBatch(s.ctx, "g", acks); err != nil {
			t.Fatal(err)
		}
		left -= len(res.Messages)
	}
	if g := s.onlyGroup(); g.Life.Filed != 1001 {
		t.Fatalf("filed %d, want 1001", g.Life.Filed)
	}
	for _, ch := range []int64{a.ID, b.ID} {
		if ds := s.outbox(ch); len(ds) != 1 {
			t.Errorf("channel %d after the burst: %d notifications, want still 1", ch, len(ds))
		}
	}
}

// Sending: each channel's notifications go in the order they were
// written, one at a time. A send that fails is tried again after 10 s,
// then 20 s, 40 s (on the test's clock), and the channel's later
// notification waits for it; another channel's goes meanwhile. Once
// sent, a notification is marked so and not sent again; the delivery
// log says how many tries it took and why the last failed.
func testNotifySendsInOrderPerChannelWithRetries(t *testing.T, harness Harness) {
	t.Parallel()
	s, f := notifyBundle(t, harness)
	a, b := s.webhook("a"), s.webhook("b")
	first, err := s.b.TestChannel(s.ctx, a.ID, "ada")
	if err != nil {
		t.Fatal(err)
	}
	second, _ := s.b.TestChannel(s.ctx, a.ID, "ada")
	other, _ := s.b.TestChannel(s.ctx, b.ID, "ada")
	if !first.Test || first.Event != broker.EventTest || second.ID <= first.ID {
		t.Fatalf("test notifications: %+v %+v", first, second)
	}
	f.failN[first.ID] = 3
	written := s.clock.Now()

	if rep := s.send(); rep.Sent != 1 || rep.Retried != 1 || fmt.Sprint(f.gotIDs()) != fmt.Sprint([]int64{other.ID}) {
		t.Fatalf("first pass: %+v, sent %v: want b's sent and a's first failed", rep, f.gotIDs())
	}
	for k, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		d := s.outbox(a.ID)[1] // the first, newest first
		if d.ID != first.ID || d.State != broker.DeliveryPending || d.Attempts != k+1 || !d.NextAt.Equal(s.clock.Now().Add(wait)) ||
			!strings.Contains(d.LastError, "503 from the receiver") {
			t.Fatalf("after failure %d: %+v, want next try in %v", k+1, d, wait)
		}
		s.clock.Advance(wait - time.Millisecond)
		if rep := s.send(); rep != (broker.SendReport{}) {
			t.Fatalf("before its time: %+v (tries %v)", rep, f.tries)
		}
		s.clock.Advance(time.Millisecond)
		rep := s.send()
		if k < 2 && rep != (broker.SendReport{Retried: 1}) {
			t.Fatalf("retry %d: %+v", k+1, rep)
		}
		if k == 2 && rep != (broker.SendReport{Sent: 2}) {
			t.Fatalf("last retry: %+v, want the first and then the second sent", rep)
		}
	}
	if got, want := fmt.Sprint(f.gotIDs()), fmt.Sprint([]int64{other.ID, first.ID, second.ID}); got != want {
		t.Errorf("sent %v, want %v", got, want)
	}
	for _, id := range f.tries[:5] {
		if id == second.ID {
			t.Fatalf("the second was tried before the first was sent: %v", f.tries)
		}
	}
	ds := s.outbox(a.ID)
	if d := ds[1]; d.State != broker.DeliverySent || d.Attempts != 4 || !d.SentAt.Equal(s.clock.Now()) || !d.NextAt.IsZero() || !d.At.Equal(written) {
		t.Errorf("the first once sent: %+v", d)
	}
	if d := ds[0]; d.State != broker.DeliverySent || d.Attempts != 1 || d.LastError != "" {
		t.Errorf("the second once sent: %+v", d)
	}
	if rep := s.send(); rep != (broker.SendReport{}) || len(f.got) != 3 {
		t.Errorf("a pass with nothing due: %+v, %d sent", rep, len(f.got))
	}
	// The log's filters and pages.
	p, err := s.b.Deliveries(s.ctx, broker.DeliveryQuery{Limit: 2})
	if err != nil || len(p.Items) != 2 || p.Items[0].ID != other.ID || p.Next != second.ID {
		t.Fatalf("page 1: %+v %v", p, err)
	}
	if p, err = s.b.Deliveries(s.ctx, broker.DeliveryQuery{Limit: 2, Before: p.Next}); err != nil || len(p.Items) != 1 || p.Items[0].ID != first.ID || p.Next != 0 {
		t.Fatalf("page 2: %+v %v", p, err)
	}
	if p, _ := s.b.Deliveries(s.ctx, broker.DeliveryQuery{State: broker.DeliveryPending}); len(p.Items) != 0 {
		t.Errorf("pending left: %+v", p.Items)
	}
	for _, q := range []broker.DeliveryQuery{{State: "lost"}, {Limit: broker.MaxDeliveryPage + 1}, {Limit: -1}} {
		if _, err := s.b.Deliveries(s.ctx, q); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("deliveries %+v: %v, want ErrInvalid", q, err)
		}
	}
	// Sent ones are kept NotifyRetention after they were written, then
	// swept by the maintenance.
	s.clock.Advance(written.Add(broker.NotifyRetention).Sub(s.clock.Now()) - time.Minute)
	if rep, err := s.b.Maintain(s.ctx); err != nil || rep.Task(broker.TaskNotifications).Removed != 0 {
		t.Fatalf("before the retention: %+v %v", rep.Task(broker.TaskNotifications), err)
	}
	s.clock.Advance(time.Minute + time.Millisecond)
	if rep, err := s.b.Maintain(s.ctx); err != nil || rep.Task(broker.TaskNotifications).Removed != 3 {
		t.Fatalf("after the retention: %+v %v", rep.Task(broker.TaskNotifications), err)
	}
}

// A notification that keeps failing is tried, with waits that double up
// to 30 minutes, until NotifyRetryFor after it was written, and then
// given up (failed), and the channel's next one goes. The error kept
// never holds the channel's secret nor its URL's path, nor does any
// other read of the broker.
func testNotifyGivesUpAfterRetryForAndKeepsSecrets(t *testing.T, harness Harness) {
	t.Parallel()
	s, f := notifyBundle(t, harness)
	hook := s.webhook("hook")
	s.rule(hook.ID, "*", "", broker.EventHoldStarted)
	s.push("q", "p", "a")
	if _, _, err := s.b.Hold(s.ctx, broker.HoldRequest{Queue: "q", Reason: "deploy", Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	later, _ := s.b.TestChannel(s.ctx, hook.ID, "ada")
	written := s.clock.Now()
	f.failN[s.outbox(hook.ID)[1].ID] = 1 << 30 // the hold's: the receiver refuses it
	var waits []time.Duration
	for pass := 0; ; pass++ {
		if pass > 100 {
			t.Fatal("never given up")
		}
		rep := s.send()
		d := s.outbox(hook.ID)[1]
		if rep.GivenUp == 1 {
			if rep.Sent != 1 || f.gotIDs()[0] != later.ID {
				t.Errorf("the next one after the given up: %+v %v", rep, f.gotIDs())
			}
			if d.State != broker.DeliveryFailed || s.clock.Now().Before(written.Add(broker.NotifyRetryFor)) || !d.NextAt.IsZero() {
				t.Fatalf("given up: %+v at %v", d, s.clock.Now())
			}
			break
		}
		if rep.Retried != 1 || d.State != broker.DeliveryPending {
			t.Fatalf("pass %d: %+v %+v", pass, rep, d)
		}
		wait := d.NextAt.Sub(s.clock.Now())
		waits = append(waits, wait)
		s.clock.Advance(wait)
	}
	if waits[0] != 10*time.Second || waits[1] != 20*time.Second || waits[8] != 30*time.Minute || waits[len(waits)-2] != 30*time.Minute {
		t.Errorf("waits %v: want 10 s doubling up to 30 min", waits)
	}
	d := s.outbox(hook.ID)[1]
	if d.Attempts != len(waits)+1 || !strings.Contains(d.LastError, "https://hooks.example.com") {
		t.Errorf("given up: %+v after %d waits", d, len(waits))
	}
	page, err := s.b.Deliveries(s.ctx, broker.DeliveryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := s.b.Channels(s.ctx)
	everything := fmt.Sprintf("%+v %+v %s", page, cs, s.auditText())
	for _, secret := range []string{hook.Secret, strings.TrimPrefix(hook.Secret, "whsec_"), "path-token"} {
		if strings.Contains(everything, secret) {
			t.Errorf("%q is shown back:\n%s", secret, everything)
		}
	}
}

// Without a Sender nothing is sent and nothing lost: the notifications
// wait, pending, for a process that has one.
func testNotifyWithoutASenderKeepsThemPending(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := notifyBundle(t, harness)
	hook := s.webhook("hook")
	n, _ := s.b.TestChannel(s.ctx, hook.ID, "ada")
	bare := broker.New(broker.Config{Store: s.db, Clock: s.clock})
	t.Cleanup(bare.Close)
	if rep, err := bare.SendNotifications(s.ctx); err != nil || rep != (broker.SendReport{}) {
		t.Fatalf("no sender: %+v %v", rep, err)
	}
	if ds := s.outbox(hook.ID); len(ds) != 1 || ds[0].ID != n.ID || ds[0].State != broker.DeliveryPending || ds[0].Attempts != 0 {
		t.Fatalf("kept: %+v", ds)
	}
}

// Run sends a notification as soon as the commit that wrote it, with
// no tick of its poll: the sending loop is woken by the commit.
func testNotifyRunSendsOnCommit(t *testing.T, harness Harness) {
	t.Parallel()
	s, f := notifyBundle(t, harness)
	f.sent = make(chan broker.Notification, 10)
	hook := s.webhook("hook")
	ctx, cancel := context.WithCancel(s.ctx)
	never := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		s.b.Run(ctx, broker.RunConfig{MaintainTicks: never, FlushTicks: never, NotifyTicks: never})
		close(done)
	}()
	defer func() { cancel(); <-done }()
	s.rule(hook.ID, "*", "", broker.EventHoldStarted)
	s.push("q", "p", "a")
	if _, _, err := s.b.Hold(s.ctx, broker.HoldRequest{Queue: "q", Reason: "deploy", Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-f.sent:
		if n.Event != broker.EventHoldStarted || n.Queue != "q" || n.Detail != "deploy" {
			t.Errorf("sent %+v", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("not sent: the loop was not woken by the commit")
	}
}

// A channel with a long queue is emptied pass after pass without waiting
// for the poll: more than two passes' worth (a pass sends 100 a channel
// at most) is sent with no tick at all (a commit's wake serves one pass
// at most).
func testNotifyLongQueueGoesOnWithoutThePoll(t *testing.T, harness Harness) {
	t.Parallel()
	s, f := notifyBundle(t, harness)
	const n = 205
	f.sent = make(chan broker.Notification, n)
	hook := s.webhook("hook")
	for range n {
		if _, err := s.b.TestChannel(s.ctx, hook.ID, "ada"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(s.ctx)
	never := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		s.b.Run(ctx, broker.RunConfig{MaintainTicks: never, FlushTicks: never, NotifyTicks: never})
		close(done)
	}()
	defer func() { cancel(); <-done }()
	for i := range n {
		select {
		case <-f.sent:
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d sent, then nothing: the loop waited for a poll", i, n)
		}
	}
}

// Thresholds: a queue and its group past a threshold are told breached
// once each, whatever the number of checks, a restart included; back
// within them, recovered once each.
func testNotifyThresholdBreachedThenRecoveredOnce(t *testing.T, harness Harness) {
	t.Parallel()
	s, _ := notifyBundle(t, harness)
	hook := s.webhook("hook")
	s.rule(hook.ID, "*", "", broker.EventThresholdBreached, broker.EventThresholdRecovered)
	limits := broker.DefaultLimits()
	limits.Depth = 1
	if err := s.b.SetThresholds(s.ctx, broker.Thresholds{Default: limits}, "ada"); err != nil {
		t.Fatal(err)
	}
	s.push("q", "p", "a", "b", "c")
	s.fail("q", "g", 1, "boom")
	check := func(want int) {
		t.Helper()
		if n, err := s.b.CheckThresholds(s.ctx); err != nil || n != want {
			t.Fatalf("check: %d %v, want %d events", n, err, want)
		}
	}
	check(0)
	s.fail("q", "g", 1, "boom")
	check(2)
	check(0)
	restarted := broker.New(broker.Config{Store: s.db, Clock: s.clock})
	t.Cleanup(restarted.Close)
	if n, err := restarted.CheckThresholds(s.ctx); err != nil || n != 0 {
		t.Fatalf("after a restart: %d %v, want nothing told again", n, err)
	}
	ds := s.outbox(hook.ID)
	if len(ds) != 2 || ds[0].Event != broker.EventThresholdBreached || ds[1].Event != broker.EventThresholdBreached ||
		ds[1].Group != "" || ds[0].Group != "g" || !strings.Contains(ds[0].Detail, "2 dead letters (limit 1)") || ds[0].Path != "/queues/q" {
		t.Fatalf("breached: %+v", ds)
	}
	limits.Depth = 10
	if err := s.b.SetThresholds(s.ctx, broker.Thresholds{Default: limits}, "ada"); err != nil {
		t.Fatal(err)
	}
	check(2)
	check(0)
	ds = s.outbox(hook.ID)
	if len(ds) != 4 || ds[0].Event != broker.EventThresholdRecovered || ds[1].Event != broker.EventThresholdRecovered {
		t.Fatalf("recovered: %+v", ds)
	}
}

// An archive that cannot be written is told once a failure, not at
// each maintenance that tries it again.
func testNotifyArchiveFailureIsToldOnce(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.withArchive(nil) // deadLetterArchive with no archive: a failure
	s.archiving()
	hook := s.webhook("hook")
	s.rule(hook.ID, "orders", "", broker.EventArchiveFailed)
	s.clock.Advance(2 * time.Hour)
	for run := 0; run < 3; run++ {
		if _, err := s.b.Maintain(s.ctx); err == nil {
			t.Fatalf("run %d: the archive did not fail", run)
		}
		s.clock.Advance(time.Minute)
	}
	ds := s.outbox(hook.ID)
	if len(ds) != 1 || ds[0].Event != broker.EventArchiveFailed || ds[0].Queue != "orders" || !strings.Contains(ds[0].Detail, "cannot be written") {
		t.Fatalf("told %+v, want one archive.failed", ds)
	}
}

// A process that stops between a send and its mark (here: its context
// ends as the send returns) leaves the notification pending: the next
// pass sends it again, with the same id for the receiver to drop the
// repeat. At least once, never lost.
// A failure whose telling did not commit is told at the next failed
// write, not never.
func testNotifyArchiveFailureUntoldIsToldAgain(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	store := &noOutboxStore{Store: s.db}
	s.b = broker.New(broker.Config{Store: store, Clock: s.clock}) // no archive: a failure
	t.Cleanup(s.b.Close)
	s.archiving()
	hook := s.webhook("hook")
	s.rule(hook.ID, "orders", "", broker.EventArchiveFailed)
	s.clock.Advance(2 * time.Hour)
	store.armed.Store(true)
	if _, err := s.b.Maintain(s.ctx); err == nil {
		t.Fatal("the archive did not fail")
	}
	if ds := s.outbox(hook.ID); len(ds) != 0 {
		t.Fatalf("told %+v while the outbox refused writes", ds)
	}
	store.armed.Store(false)
	for run := 0; run < 2; run++ {
		s.clock.Advance(time.Minute)
		if _, err := s.b.Maintain(s.ctx); err == nil {
			t.Fatal("the archive did not fail")
		}
	}
	if ds := s.outbox(hook.ID); len(ds) != 1 || ds[0].Event != broker.EventArchiveFailed {
		t.Fatalf("told %+v, want one archive.failed after the failed telling", ds)
	}
}

// noOutboxStore fails every write that files a notification while armed.
type noOutboxStore struct {
	broker.Store
	armed atomic.Bool
}

var errNoOutbox = errors.New("the outbox refuses writes")

func (s *noOutboxStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return s.Store.Update(ctx, o, func(tx broker.Tx) error {
		if s.armed.Load() {
			tx = noOutboxTx{tx}
		}
		return fn(tx)
	})
}

type noOutboxTx struct{ broker.Tx }

func (noOutboxTx) InsertNotification(context.Context, *broker.Notification) error { return errNoOutbox }

// testNotifications writes n test notifications of channel ch and
// returns their ids, in order.
func (s *bundle) testNotifications(ch int64, n int) []int64 {
	s.t.Helper()
	var ids []int64
	for range n {
		d, err := s.b.TestChannel(s.ctx, ch, "ada")
		if err != nil {
			s.t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	return ids
}

// A mark that cannot be written (the store fails) leaves what was sent
// pending: it is sent again (at least once). Until a mark is written
// again a pass takes one a channel, so that a store that cannot write
// does not have the whole outbox sent again at every pass.
func testNotifyMarkLostSendsAgain(t *testing.T, harness Harness) {
	t.Parallel()
	s, f, counter := markBundle(t, harness)
	hook := s.webhook("hook")
	ids := s.testNotifications(hook.ID, 3)
	counter.failMarks = true
	if _, err := s.b.SendNotifications(s.ctx); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a pass whose marks fail: %v", err)
	}
	for _, d := range s.outbox(hook.ID) {
		if d.State != broker.DeliveryPending || d.Attempts != 0 {
			t.Fatalf("after the lost marks: %+v, want it pending", d)
		}
	}
	if _, err := s.b.SendNotifications(s.ctx); err == nil {
		t.Fatal("a second pass whose marks fail: no error")
	}
	counter.failMarks = false
	if rep := s.send(); rep != (broker.SendReport{Sent: 1, More: false}) {
		t.Fatalf("the pass after: %+v, want the first sent again, alone", rep)
	}
	if rep := s.send(); rep != (broker.SendReport{Sent: 2}) {
		t.Fatalf("the next pass: %+v, want the two others", rep)
	}
	want := append(append(append([]int64{}, ids...), ids[0], ids[0]), ids[1:]...)
	if got := f.gotIDs(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sent %v, want %v: the pass, one a pass while the marks failed, then the rest", got, want)
	}
}

// Run also polls: a notification written by another process's broker
// (here, another broker on the same store, whose commits do not wake
// this one) is sent at the next tick of the poll.
func testNotifyRunPollsForOthersNotifications(t *testing.T, harness Harness) {
	t.Parallel()
	s, f := notifyBundle(t, harness)
	f.sent = make(chan broker.Notification, 10)
	hook := s.webhook("hook")
	other := broker.New(broker.Config{Store: s.db, Clock: s.clock})
	t.Cleanup(other.Close)
	ctx, cancel := context.WithCancel(s.ctx)
	never, ticks := make(chan time.Time), make(chan time.Time)
	done := make(chan struct{})
	go func() {
		s.b.Run(ctx, broker.RunConfig{MaintainTicks: never, FlushTicks: never, NotifyTicks: ticks})
		close(done)
	}()
	defer func() { cancel(); <-done }()
	tick := func() {
		t.Helper()
		select {
		case ticks <- s.clock.Now(): // taken when the loop waits
		case <-time.After(20 * time.Second):
			t.Fatal("the loop does not take its ticks")
		}
	}
	// Two ticks taken: the loop has passed once since the first, and
	// waits, idle, before the other broker writes.
	tick()
	tick()
	n, err := other.TestChannel(s.ctx, hook.ID, "ada")
	if err != nil {
		t.Fatal(err)
	}
	tick()
	select {
	case got := <-f.sent:
		if got.ID != n.ID {
			t.Errorf("sent %+v, want %d", got, n.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("not sent at the poll's tick")
	}
}

// markCounter counts the writes that mark notifications sent or tried
// (and the marks in them) and the reads of what is due.
type markCounter struct {
	broker.Store
	mu                  sync.Mutex
	writes, marks, dues int
	marked              chan int // when set, told the marks of each such write once it has committed
	failMarks           bool     // every mark fails, as a store that cannot write
}

func (s *markCounter) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	n := 0
	s.mu.Lock()
	fail := s.failMarks
	s.mu.Unlock()
	err := s.Store.Update(ctx, o, func(tx broker.Tx) error {
		n = 0
		return fn(markTx{tx, &n, fail})
	})
	if n > 0 && err == nil {
		s.mu.Lock()
		s.writes++
		s.marks += n
		s.mu.Unlock()
		if s.marked != nil {
			s.marked <- n
		}
	}
	return err
}

func (s *markCounter) View(ctx context.Context, fn func(broker.Tx) error) error {
	return s.Store.View(ctx, func(tx broker.Tx) error { return fn(dueTx{tx, s}) })
}

// take returns the counts since the last take.
func (s *markCounter) take() (writes, marks, dues int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writes, marks, dues = s.writes, s.marks, s.dues
	s.writes, s.marks, s.dues = 0, 0, 0
	return writes, marks, dues
}

type markTx struct {
	broker.Tx
	n    *int
	fail bool
}

func (t markTx) SaveNotifyDelivery(ctx context.Context, d broker.NotifyDelivery) error {
	if t.fail {
		return errors.New("disk full")
	}
	*t.n++
	return t.Tx.SaveNotifyDelivery(ctx, d)
}

type dueTx struct {
	broker.Tx
	s *markCounter
}

func (t dueTx) DueNotifications(ctx context.Context, now time.Time, perChannel, limit int) ([]broker.NotifyDelivery, error) {
	t.s.mu.Lock()
	t.s.dues++
	t.s.mu.Unlock()
	return t.Tx.DueNotifications(ctx, now, perChannel, limit)
}

// markBundle is a notifyBundle whose store counts the sender's marks.
func markBundle(t *testing.T, harness Harness) (*bundle, *sender, *markCounter) {
	t.Helper()
	s := setup(t, harness)
	f := &sender{failN: map[int64]int{}}
	counter := &markCounter{Store: &retryStore{Store: s.db}}
	s.b = broker.New(broker.Config{Store: counter, Clock: s.clock, Notify: f})
	t.Cleanup(s.b.Close)
	return s, f, counter
}

// Notifications due together go in one pass: one read of what is due,
// each channel's in order, and one write a channel marking its sends (issue 37:
// a burst of new error groups cost a read and a write each). A send that
// fails stops its channel's: the channel's later ones are not tried, and
// go once it has been sent.
func testNotifyPassMarksItsSendsInOneWrite(t *testing.T, harness Harness) {
	t.Parallel()
	s, f, counter := markBundle(t, harness)
	a, b := s.webhook("a"), s.webhook("b")
	var ofA, ofB []int64
	for i := range 33 {
		ch := a.ID
		if i%11 == 5 {
			ch = b.ID
		}
		n, err := s.b.TestChannel(s.ctx, ch, "ada")
		if err != nil {
			t.Fatal(err)
		}
		if ch == a.ID {
			ofA = append(ofA, n.ID)
		} else {
			ofB = append(ofB, n.ID)
		}
	}
	f.failN[ofB[1]] = 1
	counter.take()
	if rep := s.send(); rep != (broker.SendReport{Sent: 31, Retried: 1}) {
		t.Fatalf("the pass: %+v, want a's 30 and b's first sent, b's second tried", rep)
	}
	if writes, marks, dues := counter.take(); writes != 2 || marks != 32 || dues != 1 {
		t.Fatalf("the pass made %d writes marking %d and %d reads of what is due; want 2 writes (one a channel) of 32 marks, 1 read", writes, marks, dues)
	}
	var sentA []int64
	for _, id := range f.gotIDs() {
		if id != ofB[0] {
			sentA = append(sentA, id)
		}
	}
	if fmt.Sprint(sentA) != fmt.Sprint(ofA) {
		t.Errorf("a's sent %v, want %v", sentA, ofA)
	}
	for _, id := range f.tries {
		if id == ofB[2] {
			t.Fatalf("b's third was tried before its second was sent: %v", f.tries)
		}
	}
	for _, d := range s.outbox(a.ID) {
		if d.State != broker.DeliverySent || d.Attempts != 1 || !d.SentAt.Equal(s.clock.Now()) {
			t.Fatalf("a's once marked: %+v", d)
		}
	}
	// Nothing due: a read, no write.
	if rep := s.send(); rep != (broker.SendReport{}) {
		t.Fatalf("before b's retry: %+v", rep)
	}
	if writes, _, dues := counter.take(); writes != 0 || dues != 1 {
		t.Fatalf("a pass with nothing due: %d writes, %d reads", writes, dues)
	}
	s.clock.Advance(broker.NotifyFirstRetry)
	if rep := s.send(); rep != (broker.SendReport{Sent: 2}) {
		t.Fatalf("b's retry: %+v, want its second and third sent", rep)
	}
	if writes, marks, _ := counter.take(); writes != 1 || marks != 2 {
		t.Fatalf("b's retry: %d writes of %d marks", writes, marks)
	}
	if got := f.gotIDs(); fmt.Sprint(got[len(got)-2:]) != fmt.Sprint(ofB[1:]) {
		t.Errorf("b's last sent %v, want %v", got[len(got)-2:], ofB[1:])
	}
}

// Run, woken by a commit that wrote a notification, waits a moment (the
// test's gather) before it sends, so that the notifications the commits
// just after wrote go in the same pass, marked in one write.
func testNotifyRunGathersABurstInOnePass(t *testing.T, harness Harness) {
	t.Parallel()
	s, f, counter := markBundle(t, harness)
	const n = 5
	f.sent = make(chan broker.Notification, n+1)
	counter.marked = make(chan int, n+1)
	hook := s.webhook("hook")
	// The first, written before Run: its commit's wake-up waits for the
	// loop, which sends it in its first pass, then takes the wake-up and
	// waits for the end of its gathering (the test's, here).
	first, err := s.b.TestChannel(s.ctx, hook.ID, "ada")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	never, gather := make(chan time.Time), make(chan time.Time)
	done := make(chan struct{})
	go func() {
		s.b.Run(ctx, broker.RunConfig{MaintainTicks: never, FlushTicks: never, NotifyTicks: never, NotifyGather: gather})
		close(done)
	}()
	defer func() { cancel(); <-done }()
	marked := func(what string) int {
		t.Helper()
		select {
		case marks := <-counter.marked:
			return marks
		case <-time.After(20 * time.Second):
			t.Fatalf("nothing marked: %s", what)
			return 0
		}
	}
	if marks := marked("the first pass"); marks != 1 {
		t.Fatalf("the first pass marked %d, want 1", marks)
	}
	ids := []int64{first.ID}
	for range n {
		d, err := s.b.TestChannel(s.ctx, hook.ID, "ada")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	if len(f.sent) != 1 {
		t.Fatalf("%d sent before the gathering's end, want the first only", len(f.sent))
	}
	select {
	case gather <- s.clock.Now(): // taken when the loop waits for it
	case <-time.After(20 * time.Second):
		t.Fatal("the loop does not wait to gather")
	}
	if marks := marked("after the gathering"); marks != n {
		t.Fatalf("the pass after the gathering marked %d in its write, want the burst's %d", marks, n)
	}
	if got := f.gotIDs(); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("sent %v, want %v", got, ids)
	}
}

// A pass cut short by a stop (its ctx ended during a send) still marks
// what it sent: the next lead sends the rest, not those again.
func testNotifyPassStoppedMarksWhatItSent(t *testing.T, harness Harness) {
	t.Parallel()
	s, f, _ := markBundle(t, harness)
	hook := s.webhook("hook")
	ids := s.testNotifications(hook.ID, 3)
	ctx, stop := context.WithCancel(s.ctx)
	defer stop()
	f.after = stop // the stop comes during the first send
	if _, err := s.b.SendNotifications(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a pass stopped: %v, want context.Canceled", err)
	}
	f.after = nil
	if got := f.gotIDs(); fmt.Sprint(got) != fmt.Sprint(ids[:1]) {
		t.Fatalf("sent before the stop %v, want %v", got, ids[:1])
	}
	if rep := s.send(); rep != (broker.SendReport{Sent: 2}) {
		t.Fatalf("the next pass: %+v, want the two left sent", rep)
	}
	if got := f.gotIDs(); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("sent %v, want each of %v once", got, ids)
	}
}
