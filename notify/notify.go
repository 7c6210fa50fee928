// Package notify sends the broker's notifications (SPEC section 8) to
// their channels: Slack incoming webhooks, webhooks signed as Standard
// Webhooks do, and email over SMTP. It implements broker.Sender; the
// outbox, the rules and the retries are the broker's.
//
// A channel's URL or SMTP host is written by an admin and can point
// anywhere, so every connection goes through one dialer that refuses
// loopback, link-local, unspecified and cloud metadata addresses (unless
// the server was started with --notify-allow-private), checked on the
// address actually dialed after DNS, so a name that resolves to a refused
// address is refused too. No redirect is followed and no proxy is used:
// either would connect somewhere the check did not see. Errors name the
// status or the address dialed, never a channel's URL (a Slack URL is a
// secret), its credentials or a secret.
package notify

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/broker"
)

// DefaultTimeout bounds one Send when Config.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Config configures a Sender. The zero value works: links are paths,
// private addresses are refused, sends time out after DefaultTimeout and
// nothing is logged.
type Config struct {
	// PublicURL is the dashboard's base URL (--public-url), put before a
	// notification's path to make its link; "" leaves the path alone.
	PublicURL string
	// AllowPrivate lets channels reach loopback, link-local and metadata
	// addresses (--notify-allow-private): for tests and for receivers on
	// the same machine.
	AllowPrivate bool
	// Timeout bounds one Send: connecting, TLS, the request or the mail,
	// and the answer. 0 is DefaultTimeout.
	Timeout time.Duration
	// RootCAs are the certificate authorities trusted for https and
	// STARTTLS; nil is the system's. For a private CA (and tests).
	RootCAs *x509.CertPool
	// Logger gets one debug line per notification sent; nil logs nothing.
	Logger *slog.Logger
}

// Sender sends notifications; it implements broker.Sender and is safe
// for concurrent use.
type Sender struct {
	cfg    Config
	log    *slog.Logger
	dialer *net.Dialer
	client *http.Client
	// now gives the webhook-timestamp; tests set it to sign in the past.
	now func() time.Time
	// implicitTLSPort is ImplicitTLSPort; tests set their server's port.
	implicitTLSPort int
	// dialGuard, when set, is asked after the address check about every
	// address about to be dialed (tests: so that a broken check can never
	// send a packet off this machine).
	dialGuard func(address string) error
}

var _ broker.Sender = (*Sender)(nil)

// New returns a Sender for cfg.
func New(cfg Config) *Sender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sender{cfg: cfg, log: log, now: time.Now, implicitTLSPort: ImplicitTLSPort}
	s.dialer = &net.Dialer{Timeout: cfg.Timeout, Control: s.control}
	s.client = newHTTPClient(s.dialer, cfg)
	return s
}

// Send sends n to ch. An error says what went wrong in words safe to
// show and keep (the delivery log): no URL, no credentials, no secret.
func (s *Sender) Send(ctx context.Context, ch broker.Channel, n broker.Notification) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var err error
	switch ch.Kind {
	case broker.ChannelWebhook:
		err = s.sendWebhook(ctx, ch, n)
	case broker.ChannelSlack:
		err = s.sendSlack(ctx, ch, n)
	case broker.ChannelEmail:
		err = s.sendEmail(ctx, ch, n)
	default:
		err = fmt.Errorf("notify: unknown channel kind %q", ch.Kind)
	}
	if err != nil {
		return err
	}
	s.log.Debug("notification sent", "channel_id", ch.ID, "channel_kind", ch.Kind,
		"notification_id", n.ID, "event", n.Event)
	return nil
}

// link is the notification's page in the dashboard: the public URL and
// the path, or the path alone when no public URL is set.
func (s *Sender) link(n broker.Notification) string {
	if n.Path == "" {
		return ""
	}
	return strings.TrimRight(s.cfg.PublicURL, "/") + n.Path
}

// eventPhrases say each event in words for people.
var eventPhrases = map[string]string{
	broker.EventErrorGroupNew:       "New error group",
	broker.EventErrorGroupRegressed: "Error group came back",
	broker.EventThresholdBreached:   "Threshold breached",
	broker.EventThresholdRecovered:  "Threshold recovered",
	broker.EventHoldStarted:         "Hold started",
	broker.EventHoldReleased:        "Hold released",
	broker.EventJobPaused:           "Replay job paused",
	broker.EventArchiveFailed:       "Archive failed",
}

// headline is the notification in one line for people: "New error group
// in orders / billing: card declined". The detail is cut to
// NotifySampleChars (the broker cuts it already; a Sender does not trust
// that) and put on one line.
func headline(n broker.Notification) string {
	var b strings.Builder
	if n.Test {
		b.WriteString("[test] ")
	}
	phrase, ok := eventPhrases[n.Event]
	if !ok {
		phrase = n.Event
	}
	b.WriteString(phrase)
	if n.Queue != "" {
		b.WriteString(" in ")
		b.WriteString(oneLine(n.Queue))
		if n.Group != "" {
			b.WriteString(" / ")
			b.WriteString(oneLine(n.Group))
		}
	}
	if d := detail(n); d != "" {
		b.WriteString(": ")
		b.WriteString(d)
	}
	return b.String()
}

// detail is n.Detail on one line, cut to NotifySampleChars characters.
func detail(n broker.Notification) string {
	d := oneLine(n.Detail)
	if utf8.RuneCountInString(d) <= broker.NotifySampleChars {
		return d
	}
	r := []rune(d)
	return string(r[:broker.NotifySampleChars-1]) + "…"
}

// oneLine replaces control characters (newlines included) with spaces,
// so text from strangers cannot start a line or a header of its own.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}
