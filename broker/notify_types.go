package broker

import (
	"context"
	"time"
)

// Notifications (SPEC section 8): events (Event) go, by the rules people
// set, to channels (Slack, signed webhooks, email). Each is written to an
// outbox in the transaction of the change that caused it, and sent by
// the leading process (Run) with retries for NotifyRetryFor, at least
// once, in order per channel. The sending itself (HTTP, SMTP, the
// signatures) is a Sender's: package notify.

// Channel kinds.
const (
	ChannelSlack   = "slack"   // an incoming-webhook URL: {"text": ...}
	ChannelWebhook = "webhook" // any URL: JSON, signed as Standard Webhooks do
	ChannelEmail   = "email"   // SMTP
)

// Notification limits and timings.
const (
	// NotifyRetryFor is how long a notification is tried again after it
	// was written; then it is marked failed (given up), and says why.
	NotifyRetryFor = 24 * time.Hour
	// NotifySampleChars is how many characters of an error a
	// notification carries at most.
	NotifySampleChars = 200
	// MaxChannels and MaxRules bound the configuration.
	MaxChannels = 100
	MaxRules    = 500
)

// Channel is where notifications go.
type Channel struct {
	ID   int64
	Name string // unique, for people
	Kind string // ChannelSlack, ChannelWebhook, ChannelEmail
	// URL is a slack or webhook channel's: http or https.
	URL string
	// An email channel's SMTP server, login (optional), sender and
	// receivers. STARTTLS is used when the server offers it.
	SMTPHost string
	SMTPPort int
	SMTPUser string
	From     string
	To       []string
	// Secret is a webhook channel's signing secret (whsec_ and base64,
	// made by the broker) or an email channel's SMTP password. It is
	// returned once, by CreateChannel, and never read back by any other
	// call (they leave it "").
	Secret    string
	CreatedAt time.Time
	CreatedBy string
}

// Rule sends the events it names, of the queues its pattern matches (and
// of one consumer group, when set), to a channel.
type Rule struct {
	ID        int64
	ChannelID int64
	Events    []string // EventErrorGroupNew, …; at least one
	Queue     string   // a pattern: * matches any run of characters ("orders*", "*")
	Group     string   // "" any
	CreatedAt time.Time
	CreatedBy string
}

// NotifyEvents are the events a rule may name.
var NotifyEvents = []string{EventErrorGroupNew, EventErrorGroupRegressed, EventThresholdBreached, EventThresholdRecovered,
	EventHoldStarted, EventHoldReleased, EventJobPaused, EventArchiveFailed}

// The events this issue adds (the others are raised where they happen).
const (
	EventThresholdBreached  = "threshold.breached"
	EventThresholdRecovered = "threshold.recovered"
	EventArchiveFailed      = "archive.failed"
)

// Notification is one event for one channel, as the outbox keeps it. It
// carries no payload: the queue, group, a sample error cut to
// NotifySampleChars, and a path in the dashboard (the Sender makes it a
// link with the public URL).
type Notification struct {
	ID        int64 // the outbox row: a Sender's idempotency key (webhook-id)
	ChannelID int64
	Event     string
	Queue     string
	Group     string
	Detail    string // in words; an error sample cut to NotifySampleChars
	Path      string // e.g. /error-groups/12 ("" none)
	At        time.Time
	Test      bool // a "send a test"
}

// NotifyDelivery is a notification and how its sending went.
type NotifyDelivery struct {
	Notification
	State     string // DeliveryPending, DeliverySent, DeliveryFailed
	Attempts  int
	NextAt    time.Time // pending: when it is tried next
	SentAt    time.Time
	LastError string
}

// Delivery states.
const (
	DeliveryPending = "pending"
	DeliverySent    = "sent"
	DeliveryFailed  = "failed" // given up after NotifyRetryFor
)

// Sender sends a notification to a channel (package notify). An error
// is tried again later; the Sender must not log the channel's secret or
// URL's credentials.
type Sender interface {
	Send(ctx context.Context, ch Channel, n Notification) error
}

// EventTest is the event of a "send a test" (Broker.TestChannel): it is
// sent as the others are, and no rule names it.
const EventTest = "test"

// DeliveryQuery selects a page of the delivery log (Broker.Deliveries),
// newest first.
type DeliveryQuery struct {
	ChannelID int64  // 0: any
	State     string // "": any; else DeliveryPending, DeliverySent, DeliveryFailed
	Before    int64  // keyset: ids below it (0: from the newest)
	Limit     int    // 1 to MaxDeliveryPage (0: DefaultDeliveryPage)
}

// DeliveryPage is a page of the delivery log; Next is the Before of the
// next page (0: none).
type DeliveryPage struct {
	Items []NotifyDelivery
	Next  int64
}

// ChannelRemoved says what DeleteChannel removed with the channel.
type ChannelRemoved struct {
	Channel Channel // as it was, without its secret
	Rules   int64   // its rules
	Pending int64   // its notifications not sent yet
}

// ThresholdState is the thresholds' last verdict of a queue (Group "":
// the whole queue) or of one consumer group of it, kept so that a
// breach and its recovery are each told once.
type ThresholdState struct {
	Queue     string
	Group     string
	Breached  bool
	Detail    string // the thresholds past, in words
	ChangedAt time.Time
}

// NotifyTx is what notifications need from storage: the channels, the
// rules, the outbox and the thresholds' last verdicts. Channels and
// rules are written only by writes that run alone (admins' actions);
// the outbox by the transaction of the event that causes a notification
// and by the sender's marks.
type NotifyTx interface {
	// InsertNotifyChannel stores c (its secret too) and sets c.ID; it
	// writes notify_channels only. A name taken is the store's unique
	// constraint error: the broker reads NotifyChannels first.
	InsertNotifyChannel(ctx context.Context, c *Channel) error
	// NotifyChannels reads every channel, by id, secrets included (the
	// broker strips them before they leave it).
	NotifyChannels(ctx context.Context) ([]Channel, error)
	// NotifyChannel reads one channel by id, its secret included
	// (ErrNotFound).
	NotifyChannel(ctx context.Context, id int64) (Channel, error)
	// DeleteNotifyChannel deletes the channel id, its rules and its
	// pending notifications (its sent and failed ones stay in the log
	// until their retention), and says how many rules and notifications
	// went; a channel that is not there: ErrNotFound, nothing deleted.
	DeleteNotifyChannel(ctx context.Context, id int64) (rules, pending int64, err error)
	// InsertNotifyRule stores r (its events joined) and sets r.ID.
	InsertNotifyRule(ctx context.Context, r *Rule) error
	// NotifyRules reads every rule, by id (none: empty). Every event
	// reads them: they are few (MaxRules).
	NotifyRules(ctx context.Context) ([]Rule, error)
	// DeleteNotifyRule deletes one rule by id (ErrNotFound).
	DeleteNotifyRule(ctx context.Context, id int64) error
	// InsertNotification writes n to the outbox, pending, due at n.At
	// with no attempt yet, and sets n.ID (ids only grow, never given
	// twice: a receiver's idempotency key). The broker writes the outbox
	// only in writes that run alone (not marked Concurrent: the events
	// come from holds, jobs, the maintenance) or, for dead letters'
	// filings, after FileDeadLetters in the same write, under its filing
	// lock (one filing at a time, and none beside a write that runs
	// alone), so its ids commit in their order, and a channel's order by
	// id is the order its notifications were written.
	InsertNotification(ctx context.Context, n *Notification) error
	// NotifyDeliveries reads a page of the outbox, newest first by id,
	// as q selects (q.Limit rows at most: the broker has checked it).
	NotifyDeliveries(ctx context.Context, q DeliveryQuery) ([]NotifyDelivery, error)
	// DueNotifications reads, of each channel whose oldest pending
	// notification is due at now (next_at ≤ now), its oldest pending
	// ones, up to perChannel, all by id, up to limit in all: a channel
	// whose oldest pending one is not due gives none, so a later one is
	// never sent before it (a caller stops a channel's list at one not
	// due). A cut by limit leaves each channel a prefix of its list.
	DueNotifications(ctx context.Context, now time.Time, perChannel, limit int) ([]NotifyDelivery, error)
	// SaveNotifyDelivery writes d's state, attempts, next_at, sent_at
	// and last_error to its row when that row is still pending (a row
	// gone with its channel, or settled already: nothing, no error). It
	// writes that one row by its key, so it may run in a write marked
	// Concurrent (the row lock of its UPDATE is all it takes).
	SaveNotifyDelivery(ctx context.Context, d NotifyDelivery) error
	// SweepNotifications deletes up to limit sent or failed
	// notifications written before before, oldest first, and says how
	// many.
	SweepNotifications(ctx context.Context, before time.Time, limit int) (int64, error)
	// ThresholdStates reads every kept verdict (none: empty).
	ThresholdStates(ctx context.Context) ([]ThresholdState, error)
	// SaveThresholdState writes s over the verdict of its (queue,
	// group), or as a new one.
	SaveThresholdState(ctx context.Context, s ThresholdState) error
	// DeleteThresholdState deletes the verdict of (queue, group) (none
	// there: nothing, no error).
	DeleteThresholdState(ctx context.Context, queue, group string) error
}
