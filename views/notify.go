package views

import (
	"strconv"
	"time"
)

// Notify is the admin page of notifications: the channels, the rules,
// and the forms that add them.
type Notify struct {
	Page
	Channels []ChannelRow
	Rules    []RuleRow
	Events   []string // the events a rule may name, in order
	// NewSecret is the signing secret of a webhook channel just made,
	// shown this once.
	NewSecret string
}

// ChannelRow is a channel as the page shows it: Where is its URL's
// scheme and host, or its SMTP server and receivers; never a secret.
type ChannelRow struct {
	ID        int64
	Name      string
	Kind      string
	Where     string
	Rules     int
	CreatedAt time.Time
	CreatedBy string
}

// RuleRow is a rule as the page shows it.
type RuleRow struct {
	ID        int64
	Channel   string // the channel's name
	Events    []string
	Queue     string
	Group     string // "": any
	CreatedAt time.Time
	CreatedBy string
}

// Deliveries is the delivery log page: newest first, filtered by
// channel and state, a keyset page at a time.
type Deliveries struct {
	Page
	Rows     []DeliveryRow
	Channels []ChannelRow // for the filter
	Channel  int64        // the filter's channel (0: any)
	State    string       // the filter's state ("": any)
	States   []string
	SelfURL  string // this page, for the refresh
	NextURL  string // the next page ("": none)
	FirstURL string // the first page, when this is a later one ("": this is)
}

// DeliveryRow is one notification of the log.
type DeliveryRow struct {
	ID        int64
	Channel   string // the channel's name ("#id" when it is gone)
	Event     string
	Queue     string
	Group     string
	Detail    string
	Path      string // the dashboard page it is about ("": none)
	At        time.Time
	State     string
	Attempts  int
	NextAt    time.Time // pending: the next try
	SentAt    time.Time
	LastError string
}

func notifyChannelURL(id int64, action string) string {
	return "/admin/notify/channels/" + strconv.FormatInt(id, 10) + "/" + action
}

func notifyRuleURL(id int64) string {
	return "/admin/notify/rules/" + strconv.FormatInt(id, 10) + "/delete"
}

// In says when t comes, from now: "in 12 s", or "now" when it is due.
func In(t, now time.Time) string {
	if !t.After(now) {
		return "now"
	}
	return "in " + Age(t.Sub(now))
}
