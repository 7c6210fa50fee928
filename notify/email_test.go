package notify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"mime/quotedprintable"
	"net"
	"net/http/httptest"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/lazarus-dlq/lazarus/broker"
)

// smtpOptions say what a test SMTP server offers.
type smtpOptions struct {
	tls      bool              // offer STARTTLS, with a test certificate
	users    map[string]string // offer AUTH PLAIN for these users and passwords
	insecure bool              // offer AUTH without TLS too
	implicit bool              // TLS from the first byte (port 465's way)
}

// smtpMail is one mail the test server received.
type smtpMail struct {
	from   string
	to     []string
	data   []byte
	tls    bool   // the mail came over TLS
	user   string // who logged in ("" no one)
	passed string // the password given at login, if any
}

// smtpBackend is a go-smtp backend that keeps what it receives.
type smtpBackend struct {
	opts     smtpOptions
	sessions atomic.Int64
	logins   atomic.Int64 // AUTH attempts
	mu       sync.Mutex
	mails    []smtpMail
}

func (be *smtpBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	be.sessions.Add(1)
	return &smtpSession{be: be, conn: c}, nil
}

func (be *smtpBackend) received() []smtpMail {
	be.mu.Lock()
	defer be.mu.Unlock()
	return append([]smtpMail(nil), be.mails...)
}

type smtpSession struct {
	be   *smtpBackend
	conn *smtp.Conn
	cur  smtpMail
}

func (s *smtpSession) AuthMechanisms() []string {
	if s.be.opts.users == nil {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		s.be.logins.Add(1)
		s.cur.passed = pass
		if want, ok := s.be.opts.users[user]; !ok || want != pass {
			return smtp.ErrAuthFailed
		}
		s.cur.user = user
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.be.opts.users != nil && s.cur.user == "" {
		return smtp.ErrAuthRequired
	}
	s.cur.from = from
	_, s.cur.tls = s.conn.TLSConnectionState()
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = b
	s.be.mu.Lock()
	s.be.mails = append(s.be.mails, s.cur)
	s.be.mu.Unlock()
	return nil
}

func (s *smtpSession) Reset()        { s.cur = smtpMail{user: s.cur.user} }
func (s *smtpSession) Logout() error { return nil }

// smtpServer is a real SMTP server on 127.0.0.1, and the pool that
// trusts its certificate.
type smtpServer struct {
	be    *smtpBackend
	addr  net.Addr
	roots *x509.CertPool
}

// startSMTP starts a go-smtp server on 127.0.0.1:0 for the test.
func startSMTP(t *testing.T, opts smtpOptions) *smtpServer {
	t.Helper()
	be := &smtpBackend{opts: opts}
	srv := smtp.NewServer(be)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.AllowInsecureAuth = opts.insecure
	out := &smtpServer{be: be}
	var tlsConfig *tls.Config
	if opts.tls || opts.implicit {
		cert, roots := testCertificate(t)
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		out.roots = roots
	}
	if opts.tls {
		srv.TLSConfig = tlsConfig
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.implicit {
		l = tls.NewListener(l, tlsConfig)
	}
	out.addr = l.Addr()
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return out
}

// testCertificate is net/http/httptest's certificate for 127.0.0.1, and
// a pool that trusts it.
func testCertificate(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hs.StartTLS()
	defer hs.Close()
	roots := x509.NewCertPool()
	roots.AddCert(hs.Certificate())
	return hs.TLS.Certificates[0], roots
}

func emailChannel(srv *smtpServer) broker.Channel {
	return broker.Channel{ID: 9, Name: "ops mail", Kind: broker.ChannelEmail,
		SMTPHost: "127.0.0.1", SMTPPort: srv.addr.(*net.TCPAddr).Port,
		From: "lazarus@example.com", To: []string{"ops@example.com", "oncall@example.com"}}
}

// parsed is a received mail's headers and decoded text body.
func parsed(t *testing.T, m smtpMail) (mail.Header, string) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(m.data))
	if err != nil {
		t.Fatalf("the mail does not parse: %v\n%s", err, m.data)
	}
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return msg.Header, strings.ReplaceAll(string(b), "\r\n", "\n")
}

func TestEmailWithoutTLSOrLogin(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, smtpOptions{})
	s, _, _ := newTestSender(t, Config{AllowPrivate: true, PublicURL: "https://lazarus.example.com"})
	if err := s.Send(t.Context(), emailChannel(srv), notification()); err != nil {
		t.Fatalf("Send: %v", err)
	}
	mails := srv.be.received()
	if len(mails) != 1 {
		t.Fatalf("%d mails received, want 1", len(mails))
	}
	m := mails[0]
	if m.from != "lazarus@example.com" || strings.Join(m.to, ",") != "ops@example.com,oncall@example.com" || m.tls || m.user != "" {
		t.Errorf("envelope from %q to %q, tls %v, user %q", m.from, m.to, m.tls, m.user)
	}
	h, body := parsed(t, m)
	for k, want := range map[string]string{
		"Subject":        "[Lazarus] error_group.new: orders",
		"From":           "<lazarus@example.com>",
		"To":             "<ops@example.com>, <oncall@example.com>",
		"Message-Id":     "<notify.42.lazarus@lazarus.example.com>",
		"Auto-Submitted": "auto-generated",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
	for _, want := range []string{
		"New error group in orders / billing: card declined\n",
		"Queue:          orders\n",
		"Consumer group: billing\n",
		"At:             2026-12-03 00:30:00 UTC\n",
		"Open in Lazarus: https://lazarus.example.com/error-groups/12\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the body lacks %q:\n%s", want, body)
		}
	}
}

func TestEmailSTARTTLSUsedWhenOffered(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, smtpOptions{tls: true})
	s, _, _ := newTestSender(t, Config{AllowPrivate: true, RootCAs: srv.roots})
	n := notification()
	n.Test = true
	if err := s.Send(t.Context(), emailChannel(srv), n); err != nil {
		t.Fatalf("Send: %v", err)
	}
	mails := srv.be.received()
	if len(mails) != 1 || !mails[0].tls {
		t.Fatalf("received %d mails (tls %v), want 1 over TLS", len(mails), len(mails) == 1 && mails[0].tls)
	}
	h, body := parsed(t, mails[0])
	if got := h.Get("Subject"); got != "[Lazarus] [test] error_group.new: orders" {
		t.Errorf("Subject %q", got)
	}
	if !strings.Contains(body, "This is a test") {
		t.Errorf("a test's body does not say so:\n%s", body)
	}
}

// STARTTLS offered with a certificate the Sender does not trust: an
// error, not a fall back to plain text.
func TestEmailUntrustedCertificateRefused(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, smtpOptions{tls: true})
	s, _, _ := newTestSender(t, Config{AllowPrivate: true}) // the system's roots
	err := s.Send(t.Context(), emailChannel(srv), notification())
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Send = %v, want a certificate error", err)
	}
	if n := len(srv.be.received()); n != 0 {
		t.Errorf("%d mails received", n)
	}
}

func TestEmailLoginOverSTARTTLS(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, smtpOptions{tls: true, users: map[string]string{"lazarus": "s3cret-pass"}})
	s, _, _ := newTestSender(t, Config{AllowPrivate: true, RootCAs: srv.roots})
	ch := emailChannel(srv)
	ch.SMTPUser, ch.Secret = "lazarus", "s3cret-pass"
	if err := s.Send(t.Context(), ch, notification()); err != nil {
		t.Fatalf("Send: %v", err)
	}
	mails := srv.be.received()
	if len(mails) != 1 || mails[0].user != "lazarus" || !mails[0].tls {
		t.Fatalf("received %+v, want one mail from the logged-in user over TLS", mails)
	}

	ch.Secret = "wrong-pass"
	err := s.Send(t.Context(), ch, notification())
	if err == nil || !strings.Contains(err.Error(), "535") {
		t.Fatalf("a wrong password: Send = %v, want the server's 535", err)
	}
	if strings.Contains(err.Error(), "wrong-pass") {
		t.Errorf("the error shows the password: %v", err)
	}
	if n := len(srv.be.received()); n != 1 {
		t.Errorf("%d mails received, want still 1", n)
	}
}

// A server that offers AUTH PLAIN without TLS gets no password: it would
// cross the network in clear.
func TestEmailNoPasswordWithoutTLS(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, smtpOptions{users: map[string]string{"lazarus": "s3cret-pass"}, insecure: true})
	s, _, _ := newTestSender(t, Config{AllowPrivate: true})
	ch := emailChannel(srv)
	ch.SMTPUser, ch.Secret = "lazarus", "s3cret-pass"
	err := s.Send(t.Context(), ch, notification())
	if err == nil || !strings.Contains(err.Error(), "keeps the password off the network") {
		t.Fatalf("Send = %v, want refused to log in without TLS", err)
	}
	if n := srv.be.logins.Load(); n != 0 {
		t.Errorf("%d logins tried in clear", n)
	}
	if n := len(srv.be.received()); n != 0 {
		t.Errorf("%d mails received", n)
	}
}

func TestEmailNeedsHostSenderReceivers(t *testing.T) {
	t.Parallel()
	s, dials, _ := newTestSender(t, Config{AllowPrivate: true})
	for name, ch := range map[string]broker.Channel{
		"NoHost":     {Kind: broker.ChannelEmail, From: "a@example.com", To: []string{"b@example.com"}},
		"NoFrom":     {Kind: broker.ChannelEmail, SMTPHost: "127.0.0.1", To: []string{"b@example.com"}},
		"NoTo":       {Kind: broker.ChannelEmail, SMTPHost: "127.0.0.1", From: "a@example.com"},
		"BadTo":      {Kind: broker.ChannelEmail, SMTPHost: "127.0.0.1", From: "a@example.com", To: []string{"not an address"}},
		"HeaderInTo": {Kind: broker.ChannelEmail, SMTPHost: "127.0.0.1", From: "a@example.com", To: []string{"b@example.com\r\nBcc: c@example.com"}},
	} {
		if err := s.Send(t.Context(), ch, notification()); err == nil {
			t.Errorf("%s: sent, want an error", name)
		}
	}
	if dials.Load() != 0 {
		t.Errorf("%d dials, want none", dials.Load())
	}
}

// On the implicit-TLS port (465) the Sender speaks TLS at once, and may
// log in with PLAIN there.
func TestEmailImplicitTLSPort(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, smtpOptions{implicit: true, users: map[string]string{"lazarus": "s3cret-pass"}})
	s, _, _ := newTestSender(t, Config{AllowPrivate: true, RootCAs: srv.roots, Timeout: 5 * time.Second})
	ch := emailChannel(srv)
	s.implicitTLSPort = ch.SMTPPort // the server's port stands for 465
	ch.SMTPUser, ch.Secret = "lazarus", "s3cret-pass"
	if err := s.Send(t.Context(), ch, notification()); err != nil {
		t.Fatalf("Send: %v", err)
	}
	mails := srv.be.received()
	if len(mails) != 1 || mails[0].user != "lazarus" || !mails[0].tls {
		t.Fatalf("received %+v, want one mail from the logged-in user over TLS", mails)
	}
}

// A server that greets and then says nothing holds a send only until its
// context ends, not for go-mail's timeout: a shutdown is not held up.
func TestEmailStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	connected := make(chan net.Conn, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		conn.Write([]byte("220 slow.example ESMTP\r\n"))
		// The client's EHLO: it is past dialing, in the conversation.
		// No answer follows.
		if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
			conn.Close()
			return
		}
		connected <- conn
	}()
	s, _, _ := newTestSender(t, Config{AllowPrivate: true, Timeout: time.Hour})
	ch := broker.Channel{ID: 9, Kind: broker.ChannelEmail, SMTPHost: "127.0.0.1", SMTPPort: ln.Addr().(*net.TCPAddr).Port,
		From: "lazarus@example.com", To: []string{"ops@example.com"}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Send(ctx, ch, notification()) }()
	conn := <-connected
	defer conn.Close()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Send succeeded against a silent server")
		}
		t.Logf("Send: %v", err)
	case <-time.After(30 * time.Second): // a bound for a failure, far below the hour
		t.Fatal("Send still running 30 s after its context ended")
	}
}
