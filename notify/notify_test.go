package notify

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// errOffMachine is the test guard's refusal: tests never reach past this
// machine, even when the code under test is broken on purpose.
var errOffMachine = errors.New("test guard: an address off this machine")

// newTestSender is New(cfg) with a short timeout and a guard that refuses
// every address but loopback after the Sender's own check, counting the
// dials that reach the guard (dials counts them all; offMachine those
// the guard refused).
func newTestSender(t *testing.T, cfg Config) (s *Sender, dials, offMachine *atomic.Int64) {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	s = New(cfg)
	dials, offMachine = new(atomic.Int64), new(atomic.Int64)
	s.dialGuard = func(address string) error {
		dials.Add(1)
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().IsLoopback() {
			offMachine.Add(1)
			return errOffMachine
		}
		return nil
	}
	return s, dials, offMachine
}

// notification is a new error group's notification, as the outbox
// keeps it.
func notification() broker.Notification {
	return broker.Notification{
		ID: 42, ChannelID: 7, Event: broker.EventErrorGroupNew, Queue: "orders", Group: "billing",
		Detail: "card declined", Path: "/error-groups/12",
		At: time.Date(2026, 12, 3, 0, 30, 0, 0, time.UTC),
	}
}

func TestHeadline(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	for _, tc := range []struct {
		name string
		edit func(*broker.Notification)
		want string
	}{
		{"NewErrorGroup", func(*broker.Notification) {}, "New error group in orders / billing: card declined"},
		{"NoGroup", func(n *broker.Notification) { n.Group = "" }, "New error group in orders: card declined"},
		{"NoQueue", func(n *broker.Notification) {
			n.Event, n.Queue, n.Group, n.Detail = broker.EventArchiveFailed, "", "", "disk full"
		}, "Archive failed: disk full"},
		{"UnknownEventByName", func(n *broker.Notification) { n.Event = "something.else" }, "something.else in orders / billing: card declined"},
		{"Test", func(n *broker.Notification) { n.Test = true }, "[test] New error group in orders / billing: card declined"},
		{"NewlinesBecomeSpaces", func(n *broker.Notification) { n.Detail = "line one\r\nSubject: forged" }, "New error group in orders / billing: line one  Subject: forged"},
		{"LongDetailCut", func(n *broker.Notification) { n.Detail = long },
			"New error group in orders / billing: " + strings.Repeat("é", broker.NotifySampleChars-1) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := notification()
			tc.edit(&n)
			if got := headline(n); got != tc.want {
				t.Errorf("headline = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLinkJoinsPublicURLAndPath(t *testing.T) {
	t.Parallel()
	n := notification()
	for pub, want := range map[string]string{
		"https://lazarus.example.com":  "https://lazarus.example.com/error-groups/12",
		"https://lazarus.example.com/": "https://lazarus.example.com/error-groups/12",
		"https://example.com/lazarus/": "https://example.com/lazarus/error-groups/12",
		"":                             "/error-groups/12",
	} {
		if got := New(Config{PublicURL: pub}).link(n); got != want {
			t.Errorf("PublicURL %q: link = %q, want %q", pub, got, want)
		}
	}
	n.Path = ""
	if got := New(Config{PublicURL: "https://x"}).link(n); got != "" {
		t.Errorf("no path: link = %q, want none", got)
	}
}

func TestUnknownKindIsAnError(t *testing.T) {
	t.Parallel()
	s, dials, _ := newTestSender(t, Config{AllowPrivate: true})
	err := s.Send(t.Context(), broker.Channel{Kind: "pigeon"}, notification())
	if err == nil || !strings.Contains(err.Error(), "unknown channel kind") {
		t.Fatalf("Send = %v, want an unknown kind", err)
	}
	if dials.Load() != 0 {
		t.Errorf("%d dials, want none", dials.Load())
	}
}

// The Sender's log line names the channel and the notification by id,
// never a URL or a secret.
func TestLogHasNoSecrets(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, _, _ := newTestSender(t, Config{AllowPrivate: true, Logger: log})
	url := srv.URL + "/services/T0SECRET/hook-path-secret?token=t0ken"
	for _, ch := range []broker.Channel{{ID: 5, Kind: broker.ChannelSlack, URL: url}, {ID: 6, Kind: broker.ChannelWebhook, URL: url, Secret: testSecret}} {
		if err := s.Send(t.Context(), ch, notification()); err != nil {
			t.Fatalf("%s: %v", ch.Kind, err)
		}
	}
	out := buf.String()
	if !strings.Contains(out, "channel_id=5") || !strings.Contains(out, "channel_id=6") {
		t.Errorf("no line per notification sent:\n%s", out)
	}
	for _, p := range []string{"T0SECRET", "hook-path-secret", "t0ken", strings.TrimPrefix(testSecret, "whsec_")} {
		if strings.Contains(out, p) {
			t.Errorf("the log holds %q:\n%s", p, out)
		}
	}
}
