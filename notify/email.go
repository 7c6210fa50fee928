package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/lazarus-dlq/lazarus/broker"
)

// SMTP ports.
const (
	// DefaultSMTPPort is an email channel's port when it names none: the
	// submission port, where STARTTLS is usual.
	DefaultSMTPPort = 587
	// ImplicitTLSPort is submission over TLS from the first byte (RFC
	// 8314, "SMTPS"): a channel on this port speaks TLS at once, as a
	// server there waits for the TLS handshake and would never greet a
	// plain connection.
	ImplicitTLSPort = 465
)

// sendEmail sends n as a plain-text mail through the channel's SMTP
// server. STARTTLS is used when the server offers it (on port 465, TLS
// from the start); a login is made
// only when the channel has a user, and then only with a mechanism that
// does not show the password to the network: over TLS any (PLAIN
// included), without TLS only challenge-response ones (go-mail's
// auto-discovery), so a server that offers neither gets no password.
func (s *Sender) sendEmail(ctx context.Context, ch broker.Channel, n broker.Notification) error {
	if ch.SMTPHost == "" {
		return errors.New("email: the channel has no SMTP host")
	}
	if ch.From == "" || len(ch.To) == 0 {
		return errors.New("email: the channel needs a sender and at least one receiver")
	}
	port := ch.SMTPPort
	if port == 0 {
		port = DefaultSMTPPort
	}

	m := mail.NewMsg(mail.WithNoDefaultUserAgent())
	if err := m.From(ch.From); err != nil {
		return fmt.Errorf("email: the sender: %w", err)
	}
	if err := m.To(ch.To...); err != nil {
		return fmt.Errorf("email: a receiver: %w", err)
	}
	m.Subject(emailSubject(n))
	m.SetDateWithValue(s.now())
	// The same notification sent again (a retry) has the same Message-ID,
	// so mail readers can show it once.
	m.SetMessageIDWithValue(fmt.Sprintf("notify.%d.lazarus@%s", n.ID, s.messageIDHost()))
	// RFC 3834: no vacation replies to a machine.
	m.SetGenHeader(mail.Header("Auto-Submitted"), "auto-generated")
	m.SetUserAgent(userAgent)
	m.SetBodyString(mail.TypeTextPlain, emailBody(n, s.link(n), s.now()))

	tlsConfig := &tls.Config{ServerName: ch.SMTPHost, RootCAs: s.cfg.RootCAs, MinVersion: tls.VersionTLS12}
	dial := s.dialer.DialContext
	if port == s.implicitTLSPort {
		// go-mail's own implicit TLS (WithSSL) would not use our dialer;
		// over a TLS connection it sees TLS anyway (and no STARTTLS to
		// offer), so a login may use PLAIN.
		dial = (&tls.Dialer{NetDialer: s.dialer, Config: tlsConfig}).DialContext
	}
	// go-mail bounds each phase by its timeout but not by ctx (the
	// context it dials with ends with the dial): a server that answers a
	// byte at a time could hold a shutdown for twice the timeout. The
	// connection is closed when this send's ctx ends.
	dial = closedWhenDone(ctx, dial)
	opts := []mail.Option{
		mail.WithPort(port),
		mail.WithTimeout(s.cfg.Timeout),
		mail.WithTLSPolicy(mail.TLSOpportunistic),
		mail.WithTLSConfig(tlsConfig),
		mail.WithDialContextFunc(dial),
	}
	if ch.SMTPUser != "" {
		// A login needs TLS: with STARTTLS merely opportunistic, someone
		// on the path could strip it and be sent a challenge-response
		// (CRAM-MD5) to crack offline.
		if port != s.implicitTLSPort {
			opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
		}
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(ch.SMTPUser), mail.WithPassword(ch.Secret))
	}
	c, err := mail.NewClient(ch.SMTPHost, opts...)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		// go-mail v0.8.1 has no sentinel error for a server without
		// STARTTLS under TLSMandatory: its message is matched.
		if errors.Is(err, mail.ErrNoSupportedAuthDiscovered) || (ch.SMTPUser != "" && strings.Contains(err.Error(), "does not support STARTTLS")) {
			return errors.New("email: the server offers no login that keeps the password off the network (no STARTTLS, or no mechanism go-mail knows): nothing sent")
		}
		return fmt.Errorf("email: %w", transportError(ctx, err, s.cfg.Timeout))
	}
	return nil
}

// messageIDHost is the right side of a Message-ID: the public URL's host,
// so that two installations' IDs differ, or "lazarus.invalid".
func (s *Sender) messageIDHost() string {
	if u, err := url.Parse(s.cfg.PublicURL); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "lazarus.invalid"
}

// emailSubject is "[Lazarus] <event>: <queue>", on one line.
func emailSubject(n broker.Notification) string {
	subj := "[Lazarus] "
	if n.Test {
		subj += "[test] "
	}
	subj += n.Event
	if n.Queue != "" {
		subj += ": " + n.Queue
	}
	return oneLine(subj)
}

// emailBody is n in plain text: the headline, the facts one a line, and
// the link.
func emailBody(n broker.Notification, link string, now time.Time) string {
	var b strings.Builder
	b.WriteString(headline(n))
	b.WriteString("\n\n")
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-15s %s\n", k+":", oneLine(v))
		}
	}
	line("Event", n.Event)
	line("Queue", n.Queue)
	line("Consumer group", n.Group)
	if d := detail(n); d != "" {
		line("Detail", d)
	}
	at := n.At
	if at.IsZero() {
		at = now
	}
	line("At", at.UTC().Format("2006-01-02 15:04:05 UTC"))
	if link != "" {
		b.WriteString("\nOpen in Lazarus: ")
		b.WriteString(link)
		b.WriteString("\n")
	}
	if n.Test {
		b.WriteString("\nThis is a test, sent from the channel's page in Lazarus.\n")
	}
	b.WriteString("\n-- \nLazarus sends this because a notification rule matches; admins change the rules on the Notifications page.\n")
	return b.String()
}

// dialFunc dials as net.Dialer.DialContext does.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// closedWhenDone returns dial whose connections are closed when ctx ends
// (cancelled or past its deadline), so that whatever is reading or
// writing them returns at once. The connection is returned as dialed:
// go-mail tells a TLS connection by its type. Send's ctx ends when Send
// returns, so nothing waits on it for long; closing a connection go-mail
// has closed already does nothing.
func closedWhenDone(ctx context.Context, dial dialFunc) dialFunc {
	return func(dialCtx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(dialCtx, network, address)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, func() { conn.Close() })
		return conn, nil
	}
}
