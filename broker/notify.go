package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// The broker's side of notifications (SPEC section 8): the admins'
// channels and rules, the outbox each event writes in its own
// transaction (raise), and the leader's sending of it (SendNotifications,
// Run). Secrets are kept for the Sender only: no call here returns one
// but CreateChannel, once, and none goes to the audit, a log or a
// delivery's error.

// The audit actions of notifications (admins' actions).
const (
	AuditNotifyChannel       = "notify_channel"
	AuditNotifyChannelDelete = "notify_channel_delete"
	AuditNotifyRule          = "notify_rule"
	AuditNotifyRuleDelete    = "notify_rule_delete"
	AuditNotifyTest          = "notify_test"
)

// Notification bounds and timings beside those of notify_types.go.
const (
	// MaxChannelName is the longest name of a channel, in bytes.
	MaxChannelName = 100
	// MaxChannelURL is the longest URL of a channel, in bytes.
	MaxChannelURL = 2000
	// MaxEmailTo is how many receivers an email channel may have.
	MaxEmailTo = 20
	// NotifyRetention is how long sent and failed notifications stay in
	// the delivery log (the maintenance's notifications task).
	NotifyRetention = 30 * 24 * time.Hour
	// NotifyFirstRetry is the wait after a first failed send; each
	// failure doubles it, up to NotifyMaxRetry.
	NotifyFirstRetry = 10 * time.Second
	NotifyMaxRetry   = 30 * time.Minute
	// NotifyPoll is how often the leader looks for notifications to
	// send besides being woken by a commit of this process that wrote
	// some (those of other processes on PostgreSQL are found so).
	NotifyPoll = 5 * time.Second
	// DefaultDeliveryPage and MaxDeliveryPage bound a page of the
	// delivery log.
	DefaultDeliveryPage = 50
	MaxDeliveryPage     = 500
	// notifySendTimeout bounds one send (a Sender has its own too).
	notifySendTimeout = 30 * time.Second
	// maxNotifyError is how much of a send's error a delivery keeps, in
	// bytes.
	maxNotifyError = 500
)

// notifyState is the broker's memory of the sending: the wake-up of the
// loop, the warning, said once, that nothing sends, and whether the last
// marks could not be written (the next pass then takes one a channel).
type notifyState struct {
	wake       chan struct{} // buffered 1: a commit wrote notifications
	warned     sync.Once
	markFailed atomic.Bool
}

// wakeSender wakes the sending loop (Run), without waiting.
func (b *Broker) wakeSender() {
	select {
	case b.sending.wake <- struct{}{}:
	default:
	}
}

// CreateChannel makes a channel for actor (an admin), audited, and
// returns it with its secret: a webhook channel's signing secret, made
// here ("whsec_" and the base64 of 24 random bytes), or an email
// channel's SMTP password as given. That is the only time a secret is
// returned. Bad input is ErrInvalid and makes nothing: a kind not known,
// a name empty, over MaxChannelName bytes or taken, a slack or webhook
// URL that is not http or https, an email channel without its server,
// port, sender or receivers.
func (b *Broker) CreateChannel(ctx context.Context, c Channel, actor string) (Channel, error) {
	if err := checkChannel(&c); err != nil {
		return Channel{}, err
	}
	if c.Kind == ChannelWebhook {
		var raw [24]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return Channel{}, fmt.Errorf("channel: secret: %w", err)
		}
		c.Secret = "whsec_" + base64.StdEncoding.EncodeToString(raw[:])
	}
	c.CreatedBy = actor
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		c.ID = 0
		c.CreatedAt = b.now()
		have, err := tx.NotifyChannels(ctx)
		if err != nil {
			return fmt.Errorf("channels: %w", err)
		}
		if len(have) >= MaxChannels {
			return errorf(ErrInvalid, "there are %d channels already, the most there may be: delete one first", MaxChannels)
		}
		for _, h := range have {
			if h.Name == c.Name {
				return errorf(ErrInvalid, "a channel named %q exists already", c.Name)
			}
		}
		if err := tx.InsertNotifyChannel(ctx, &c); err != nil {
			return fmt.Errorf("channel: %w", err)
		}
		return audit(ctx, tx, c.CreatedAt, actor, AuditNotifyChannel, "", "", 1,
			fmt.Sprintf("channel #%d %q (%s) created: %s", c.ID, c.Name, c.Kind, channelWhere(c)))
	})
	if err != nil {
		return Channel{}, err
	}
	return c, nil
}

// checkChannel checks c as CreateChannel says, and clears what its kind
// does not use.
func checkChannel(c *Channel) error {
	c.Name = strings.TrimSpace(c.Name)
	switch {
	case c.Name == "":
		return errorf(ErrInvalid, "a channel needs a name")
	case len(c.Name) > MaxChannelName:
		return errorf(ErrInvalid, "a channel's name is at most %d bytes", MaxChannelName)
	case strings.ContainsFunc(c.Name, unicode.IsControl) || !utf8.ValidString(c.Name):
		return errorf(ErrInvalid, "a channel's name must be printable text")
	}
	switch c.Kind {
	case ChannelSlack, ChannelWebhook:
		if err := checkChannelURL(c.URL); err != nil {
			return err
		}
		c.SMTPHost, c.SMTPPort, c.SMTPUser, c.From, c.To, c.Secret = "", 0, "", "", nil, ""
	case ChannelEmail:
		switch {
		case c.SMTPHost == "" || len(c.SMTPHost) > 255 || strings.ContainsFunc(c.SMTPHost, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '/' }):
			return errorf(ErrInvalid, "an email channel needs its SMTP server's host name")
		case c.SMTPPort < 1 || c.SMTPPort > 65535:
			return errorf(ErrInvalid, "an email channel's SMTP port must be 1 to 65535")
		case len(c.SMTPUser) > 255 || strings.ContainsFunc(c.SMTPUser, unicode.IsControl):
			return errorf(ErrInvalid, "an email channel's SMTP login is at most 255 printable bytes")
		case len(c.Secret) > 1000:
			return errorf(ErrInvalid, "an email channel's SMTP password is at most 1000 bytes")
		}
		if err := checkAddress("sender", c.From); err != nil {
			return err
		}
		if len(c.To) == 0 || len(c.To) > MaxEmailTo {
			return errorf(ErrInvalid, "an email channel needs 1 to %d receivers", MaxEmailTo)
		}
		for _, to := range c.To {
			if err := checkAddress("receiver", to); err != nil {
				return err
			}
		}
		c.URL = ""
	default:
		return errorf(ErrInvalid, "a channel's kind is %s, %s or %s, not %q", ChannelSlack, ChannelWebhook, ChannelEmail, truncate(c.Kind, 32))
	}
	return nil
}

// checkChannelURL refuses a URL that is not absolute http or https.
// Which addresses it may reach is the Sender's to check, when it dials.
func checkChannelURL(raw string) error {
	if raw == "" || len(raw) > MaxChannelURL {
		return errorf(ErrInvalid, "a channel needs a URL of at most %d bytes", MaxChannelURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return errorf(ErrInvalid, "a channel's URL must be an http or https URL with a host")
	}
	return nil
}

// checkAddress refuses what is not one bare email address.
func checkAddress(what, s string) error {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || len(s) > 254 {
		return errorf(ErrInvalid, "an email channel's %s must be one address, such as ops@example.com", what)
	}
	return nil
}

// channelWhere says where a channel sends, for the audit: the URL's
// scheme and host only (a Slack URL's path is its secret), or the SMTP
// server and receivers.
func channelWhere(c Channel) string {
	if c.Kind == ChannelEmail {
		return fmt.Sprintf("smtp %s:%d to %s", c.SMTPHost, c.SMTPPort, strings.Join(c.To, ", "))
	}
	if u, err := url.Parse(c.URL); err == nil {
		return u.Scheme + "://" + u.Host
	}
	return "?"
}

// Channels lists the channels, by id, without their secrets: no Secret,
// and of a URL its scheme and host only, the rest said "…" (a Slack
// URL's path is its credential, and any URL may carry one).
func (b *Broker) Channels(ctx context.Context) ([]Channel, error) {
	var out []Channel
	err := b.store.View(ctx, func(tx Tx) (err error) {
		out, err = tx.NotifyChannels(ctx)
		return err
	})
	for i := range out {
		out[i] = shownChannel(out[i])
	}
	return out, err
}

// shownChannel is c as it may be shown: without its secret, and its URL
// cut to its scheme and host.
func shownChannel(c Channel) Channel {
	c.Secret = ""
	if c.URL != "" {
		c.URL = channelWhere(c) + "/…"
	}
	return c
}

// DeleteChannel deletes the channel id for actor, audited, with its
// rules and its notifications not sent yet (what went is said in the
// answer and the audit); those sent or failed stay in the delivery log.
// A channel that is not there is ErrNotFound.
func (b *Broker) DeleteChannel(ctx context.Context, id int64, actor string) (ChannelRemoved, error) {
	var out ChannelRemoved
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		c, err := tx.NotifyChannel(ctx, id)
		if isNotFound(err) {
			return errorf(ErrNotFound, "channel %d not found", id)
		} else if err != nil {
			return fmt.Errorf("channel: %w", err)
		}
		out = ChannelRemoved{Channel: shownChannel(c)}
		if out.Rules, out.Pending, err = tx.DeleteNotifyChannel(ctx, id); err != nil {
			return fmt.Errorf("delete channel: %w", err)
		}
		return audit(ctx, tx, b.now(), actor, AuditNotifyChannelDelete, "", "", int(out.Pending),
			fmt.Sprintf("channel #%d %q (%s) deleted, with its %d rules and %d notifications not sent yet", c.ID, c.Name, c.Kind, out.Rules, out.Pending))
	})
	return out, err
}

// CreateRule makes a rule for actor (an admin), audited: r.Events (at
// least one, each of NotifyEvents, said once) of the queues r.Queue
// matches (names with * for any run of characters) and of the consumer
// group r.Group ("" any) go to the channel r.ChannelID. Bad input is
// ErrInvalid; a channel that is not there is ErrNotFound.
func (b *Broker) CreateRule(ctx context.Context, r Rule, actor string) (Rule, error) {
	if len(r.Events) == 0 {
		return Rule{}, errorf(ErrInvalid, "a rule needs at least one event: %s", strings.Join(NotifyEvents, ", "))
	}
	var events []string
	for _, e := range r.Events {
		if !slices.Contains(NotifyEvents, e) {
			return Rule{}, errorf(ErrInvalid, "no event is called %q: the events are %s", truncate(e, 64), strings.Join(NotifyEvents, ", "))
		}
		if !slices.Contains(events, e) {
			events = append(events, e)
		}
	}
	r.Events = events
	if r.Queue == "" {
		r.Queue = "*"
	}
	if !ValidName(strings.ReplaceAll(r.Queue, "*", "a")) {
		return Rule{}, errorf(ErrInvalid, "a rule's queue pattern %q must be 1-255 letters, digits, '.', '_', '-' or '*'", truncate(r.Queue, 64))
	}
	if r.Group != "" {
		if err := checkName("consumer group", r.Group); err != nil {
			return Rule{}, err
		}
	}
	r.CreatedBy = actor
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		r.ID, r.CreatedAt = 0, b.now()
		c, err := tx.NotifyChannel(ctx, r.ChannelID)
		if isNotFound(err) {
			return errorf(ErrNotFound, "channel %d not found", r.ChannelID)
		} else if err != nil {
			return fmt.Errorf("rule: %w", err)
		}
		have, err := tx.NotifyRules(ctx)
		if err != nil {
			return fmt.Errorf("rules: %w", err)
		}
		if len(have) >= MaxRules {
			return errorf(ErrInvalid, "there are %d rules already, the most there may be: delete one first", MaxRules)
		}
		if err := tx.InsertNotifyRule(ctx, &r); err != nil {
			return fmt.Errorf("rule: %w", err)
		}
		return audit(ctx, tx, r.CreatedAt, actor, AuditNotifyRule, "", r.Group, 1,
			fmt.Sprintf("rule #%d: %s of queues %s%s to channel #%d %q", r.ID, strings.Join(r.Events, ", "), r.Queue, groupWords(r.Group), c.ID, c.Name))
	})
	if err != nil {
		return Rule{}, err
	}
	return r, nil
}

func groupWords(g string) string {
	if g == "" {
		return ""
	}
	return " (group " + g + ")"
}

// Rules lists the rules, by id.
func (b *Broker) Rules(ctx context.Context) ([]Rule, error) {
	var out []Rule
	err := b.store.View(ctx, func(tx Tx) (err error) {
		out, err = tx.NotifyRules(ctx)
		return err
	})
	return out, err
}

// DeleteRule deletes the rule id for actor, audited (ErrNotFound when it
// is not there).
func (b *Broker) DeleteRule(ctx context.Context, id int64, actor string) error {
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		if err := tx.DeleteNotifyRule(ctx, id); isNotFound(err) {
			return errorf(ErrNotFound, "rule %d not found", id)
		} else if err != nil {
			return fmt.Errorf("delete rule: %w", err)
		}
		return audit(ctx, tx, b.now(), actor, AuditNotifyRuleDelete, "", "", 1, fmt.Sprintf("rule #%d deleted", id))
	})
}

// Deliveries returns a page of the delivery log, newest first, as q
// selects. A state not known, or a limit out of range, is ErrInvalid.
func (b *Broker) Deliveries(ctx context.Context, q DeliveryQuery) (DeliveryPage, error) {
	switch q.State {
	case "", DeliveryPending, DeliverySent, DeliveryFailed:
	default:
		return DeliveryPage{}, errorf(ErrInvalid, "a delivery's state is %s, %s or %s", DeliveryPending, DeliverySent, DeliveryFailed)
	}
	if q.Limit == 0 {
		q.Limit = DefaultDeliveryPage
	}
	if q.Limit < 1 || q.Limit > MaxDeliveryPage || q.Before < 0 || q.ChannelID < 0 {
		return DeliveryPage{}, errorf(ErrInvalid, "a page of deliveries has 1 to %d rows", MaxDeliveryPage)
	}
	var page DeliveryPage
	err := b.store.View(ctx, func(tx Tx) error {
		q := q
		q.Limit++
		items, err := tx.NotifyDeliveries(ctx, q)
		if err != nil {
			return fmt.Errorf("deliveries: %w", err)
		}
		if len(items) == q.Limit {
			items = items[:len(items)-1]
			page.Next = items[len(items)-1].ID
		}
		page.Items = items
		return nil
	})
	return page, err
}

// TestChannel writes a test notification for the channel id to the
// outbox, for actor, audited: it is sent as the others are, so the
// delivery log says how it went. ErrNotFound when the channel is not
// there.
func (b *Broker) TestChannel(ctx context.Context, id int64, actor string) (Notification, error) {
	var n Notification
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		c, err := tx.NotifyChannel(ctx, id)
		if isNotFound(err) {
			return errorf(ErrNotFound, "channel %d not found", id)
		} else if err != nil {
			return fmt.Errorf("test: %w", err)
		}
		now := b.now()
		n = Notification{ChannelID: c.ID, Event: EventTest, Detail: "A test of channel " + strconv.Quote(c.Name) + ", sent by " + actor + ".", Path: "/", At: now, Test: true}
		if err := tx.InsertNotification(ctx, &n); err != nil {
			return fmt.Errorf("test: %w", err)
		}
		if err := afterCommit(tx, b.wakeSender); err != nil {
			return err
		}
		return audit(ctx, tx, now, actor, AuditNotifyTest, "", "", 1, fmt.Sprintf("test notification #%d to channel #%d %q", n.ID, c.ID, c.Name))
	})
	return n, err
}

// writeOutbox writes, in tx, a notification of e for each channel one
// of whose rules match it (its event, queue pattern and group), and
// says how many. Events are rare (a new or regressed error group, a
// hold, a paused job, a threshold, an archive failing), so reading the
// rules each time costs the hot paths nothing: an ack that files a dead
// letter of a known group raises none.
func writeOutbox(ctx context.Context, tx NotifyTx, e Event) (int, error) {
	rules, err := tx.NotifyRules(ctx)
	if err != nil || len(rules) == 0 {
		return 0, err
	}
	var told []int64
	for _, r := range rules {
		if !r.Matches(e) || slices.Contains(told, r.ChannelID) {
			continue
		}
		n := Notification{ChannelID: r.ChannelID, Event: e.Kind, Queue: e.Queue, Group: e.Group,
			Detail: cutRunes(e.Detail, NotifySampleChars), Path: eventPath(e), At: e.At}
		if err := tx.InsertNotification(ctx, &n); err != nil {
			return 0, err
		}
		told = append(told, r.ChannelID)
	}
	return len(told), nil
}

// Matches reports whether the rule sends e: its event is one of the
// rule's, its queue matches the rule's pattern, and its group is the
// rule's when the rule names one.
func (r Rule) Matches(e Event) bool {
	return slices.Contains(r.Events, e.Kind) && matchPattern(r.Queue, e.Queue) && (r.Group == "" || r.Group == e.Group)
}

// matchPattern reports whether s matches pattern, where * matches any
// run of characters (none included) and everything else itself.
func matchPattern(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, last)
}

// eventPath is where the dashboard shows what e is about (web's
// routes_pages.go): its error group, job, or queue.
func eventPath(e Event) string {
	switch {
	case e.URL != "":
		return e.URL
	case e.ErrorGroupID != 0:
		return "/error-groups/" + strconv.FormatInt(e.ErrorGroupID, 10)
	case e.JobID != 0:
		return "/jobs/" + strconv.FormatInt(e.JobID, 10)
	case e.Queue != "":
		return "/queues/" + url.PathEscape(e.Queue)
	}
	return "/"
}

// cutRunes cuts s to n characters at most, the last of a cut one an
// ellipsis.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
