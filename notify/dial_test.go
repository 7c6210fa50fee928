package notify

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func TestRefusedAs(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1":              "a loopback address",
		"127.8.9.10":             "a loopback address",
		"::1":                    "a loopback address",
		"::ffff:127.0.0.1":       "a loopback address",
		"169.254.169.254":        "a cloud metadata address",
		"::ffff:169.254.169.254": "a cloud metadata address",
		"64:ff9b::a9fe:a9fe":     "a cloud metadata address", // 169.254.169.254 through NAT64
		"fd00:ec2::254":          "a cloud metadata address",
		"100.100.100.200":        "a cloud metadata address",
		"169.254.1.2":            "a link-local address",
		"fe80::1":                "a link-local address",
		"fe80::1%eth0":           "a link-local address",
		"febf::1":                "a link-local address",
		"0.0.0.0":                "an unspecified address",
		"0.1.2.3":                "an unspecified address",
		"::":                     "an unspecified address",
		// Reached: the public internet, and private networks (an
		// intranet's chat or mail server is a fair receiver).
		"93.184.216.34":    "",
		"2606:4700::1111":  "",
		"10.1.2.3":         "",
		"192.168.1.10":     "",
		"172.16.0.1":       "",
		"100.100.100.201":  "",
		"fd00:ec2::253":    "",
		"fec0::1":          "",
		"64:ff9b::808:808": "",
	} {
		if got := refusedAs(netip.MustParseAddr(addr)); got != want {
			t.Errorf("refusedAs(%s) = %q, want %q", addr, got, want)
		}
	}
}

// counter is an HTTP receiver that counts the requests it gets.
func counter(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1) }))
	t.Cleanup(srv.Close)
	return srv, &n
}

// Without AllowPrivate, a receiver on this machine is refused, by
// address and by a name that resolves to it, for every kind of channel:
// the check is on the address dialed, not on the URL's text.
func TestLoopbackRefusedWithoutAllowPrivate(t *testing.T) {
	t.Parallel()
	srv, hits := counter(t)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	s, _, _ := newTestSender(t, Config{})
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		for _, ch := range []broker.Channel{webhookChannel(u, testSecret), {Kind: broker.ChannelSlack, URL: u}} {
			err := s.Send(t.Context(), ch, notification())
			var refused *RefusedError
			if !errors.As(err, &refused) || refused.Reason != "a loopback address" {
				t.Errorf("%s %s: Send = %v, want a loopback address refused", ch.Kind, u, err)
			}
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the receiver got %d requests", hits.Load())
	}
	allowed, _, _ := newTestSender(t, Config{AllowPrivate: true})
	if err := allowed.Send(t.Context(), broker.Channel{Kind: broker.ChannelSlack, URL: srv.URL}, notification()); err != nil {
		t.Fatalf("with AllowPrivate: %v", err)
	}
	if hits.Load() != 1 {
		t.Errorf("with AllowPrivate the receiver got %d requests, want 1", hits.Load())
	}
}

// The metadata addresses are refused before connect(2): the test's guard,
// asked after the Sender's check, sees no dial (and would stop it if the
// check let it through, so this test sends nothing off the machine even
// when broken).
func TestMetadataAddressesRefused(t *testing.T) {
	t.Parallel()
	s, dials, _ := newTestSender(t, Config{})
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://100.100.100.200/latest/meta-data/",
		"https://169.254.169.254/",
		"http://[::ffff:a9fe:a9fe]/",
		"http://169.254.0.1/",
		"http://0.0.0.0:80/",
	} {
		err := s.Send(t.Context(), webhookChannel(u, testSecret), notification())
		var refused *RefusedError
		if !errors.As(err, &refused) {
			t.Errorf("%s: Send = %v, want refused", u, err)
			continue
		}
		if !strings.Contains(err.Error(), "--notify-allow-private") {
			t.Errorf("%s: the error %q does not say how to allow it", u, err)
		}
	}
	if dials.Load() != 0 {
		t.Errorf("%d dials reached past the check", dials.Load())
	}
}

// The SMTP connection goes through the same dialer.
func TestEmailLoopbackRefusedWithoutAllowPrivate(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, smtpOptions{})
	s, _, _ := newTestSender(t, Config{})
	err := s.Send(t.Context(), emailChannel(srv), notification())
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Reason != "a loopback address" {
		t.Fatalf("Send = %v, want a loopback address refused", err)
	}
	if n := srv.be.sessions.Load(); n != 0 {
		t.Errorf("the SMTP server saw %d sessions", n)
	}
	s, _, _ = newTestSender(t, Config{})
	ch := emailChannel(srv)
	ch.SMTPHost = "169.254.169.254"
	if err := s.Send(t.Context(), ch, notification()); !errors.As(err, &refused) || refused.Reason != "a cloud metadata address" {
		t.Fatalf("Send to 169.254.169.254 = %v, want refused", err)
	}
}
