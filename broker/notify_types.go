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
