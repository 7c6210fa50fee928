package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// testSecret is a webhook channel's secret as the broker makes them.
const testSecret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// Errors of verifyStandardWebhook.
var (
	errMissingHeaders = errors.New("missing webhook headers")
	errTooOld         = errors.New("timestamp outside the tolerance")
	errNoSignature    = errors.New("no matching signature")
)

// verifyStandardWebhook checks a request as a receiver does, written
// here from the Standard Webhooks specification and not with the
// library the Sender signs with: the key is the base64 after "whsec_",
// the signed text is "<webhook-id>.<webhook-timestamp>.<body>", the
// signature "v1,<base64 of HMAC-SHA256>" one of the space-separated
// ones in webhook-signature, and the timestamp within 5 minutes of now.
func verifyStandardWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp: %w", err)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errTooOld
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(sigs) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errNoSignature
}

// TestVerifierKnownAnswer anchors the test's verifier to the example
// signature published with the specification (Svix's docs), so that a
// verifier and a signer wrong the same way cannot agree.
func TestVerifierKnownAnswer(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)
	at := time.Unix(1614265330, 0)
	if err := verifyStandardWebhook(testSecret, h, body, at); err != nil {
		t.Fatalf("the published example does not verify: %v", err)
	}
	if err := verifyStandardWebhook(testSecret, h, []byte(`{"test": 2432232315}`), at); !errors.Is(err, errNoSignature) {
		t.Errorf("a changed body: %v, want no matching signature", err)
	}
	if err := verifyStandardWebhook(testSecret, h, body, at.Add(6*time.Minute)); !errors.Is(err, errTooOld) {
		t.Errorf("6 minutes later: %v, want too old", err)
	}
}

// received is one request a test receiver got.
type received struct {
	header http.Header
	body   []byte
	verify error // the test's verifier's verdict
	lib    error // the library's verifier's verdict
}

// webhookReceiver is an HTTP server that verifies Standard Webhooks
// signatures with secret, both with the test's own verifier and the
// library's, answers 204 when both accept and 401 when not, and hands
// every request to the test.
func webhookReceiver(t *testing.T, secret string) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 10)
	lib, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := received{header: r.Header.Clone(), body: body,
			verify: verifyStandardWebhook(secret, r.Header, body, time.Now()),
			lib:    lib.Verify(body, r.Header)}
		got <- rec
		if err := errors.Join(rec.verify, rec.lib); err != nil {
			http.Error(w, "signature: "+err.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func webhookChannel(url, secret string) broker.Channel {
	return broker.Channel{ID: 7, Name: "hooks", Kind: broker.ChannelWebhook, URL: url, Secret: secret}
}

func TestWebhookSignedAsStandardWebhooks(t *testing.T) {
	t.Parallel()
	srv, got := webhookReceiver(t, testSecret)
	s, _, _ := newTestSender(t, Config{AllowPrivate: true, PublicURL: "https://lazarus.example.com/"})
	n := notification()
	if err := s.Send(t.Context(), webhookChannel(srv.URL+"/hook", testSecret), n); err != nil {
		t.Fatalf("Send: %v", err)
	}
	rec := <-got
	if rec.verify != nil || rec.lib != nil {
		t.Fatalf("signature: ours %v, the library's %v", rec.verify, rec.lib)
	}
	if id, want := rec.header.Get("webhook-id"), "msg_42_"+strconv.FormatInt(n.At.UnixMilli(), 10); id != want {
		t.Errorf("webhook-id = %q, want %s", id, want)
	}
	if ct := rec.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var body struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      struct {
			Queue         string `json:"queue"`
			ConsumerGroup string `json:"consumerGroup"`
			Detail        string `json:"detail"`
			URL           string `json:"url"`
			Test          *bool  `json:"test"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rec.body, &body); err != nil {
		t.Fatalf("body %s: %v", rec.body, err)
	}
	if body.Type != "error_group.new" || !body.Timestamp.Equal(n.At) || body.Data.Queue != "orders" ||
		body.Data.ConsumerGroup != "billing" || body.Data.Detail != "card declined" ||
		body.Data.URL != "https://lazarus.example.com/error-groups/12" || body.Data.Test == nil || *body.Data.Test {
		t.Errorf("body = %s", rec.body)
	}
}

// A retry is the same message: the same webhook-id (a receiver drops the
// repeat), signed again with the time of the attempt (a receiver's
// tolerance is minutes, retries go on for a day).
func TestWebhookRetryKeepsIDAndSignsAnew(t *testing.T) {
	t.Parallel()
	srv, got := webhookReceiver(t, testSecret)
	s, _, _ := newTestSender(t, Config{AllowPrivate: true})
	ch := webhookChannel(srv.URL, testSecret)
	n := notification()
	n.At = time.Now().Add(-3 * time.Hour) // written to the outbox long ago
	for range 2 {
		if err := s.Send(t.Context(), ch, n); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	a, b := <-got, <-got
	if want := WebhookID(n); a.header.Get("webhook-id") != want || b.header.Get("webhook-id") != want {
		t.Errorf("webhook-ids %q and %q, want %s both", a.header.Get("webhook-id"), b.header.Get("webhook-id"), want)
	}
	if !bytesEqual(a.body, b.body) {
		t.Errorf("the retry's body differs:\n%s\n%s", a.body, b.body)
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

func TestWebhookWrongSecretRejected(t *testing.T) {
	t.Parallel()
	srv, got := webhookReceiver(t, testSecret)
	s, _, _ := newTestSender(t, Config{AllowPrivate: true})
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another channel's key, 32 bytes"))
	err := s.Send(t.Context(), webhookChannel(srv.URL, other), notification())
	rec := <-got
	if !errors.Is(rec.verify, errNoSignature) || rec.lib == nil {
		t.Errorf("receiver's verdicts: ours %v, the library's %v; want both to refuse", rec.verify, rec.lib)
	}
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Send = %v, want the receiver's 401", err)
	}
	if strings.Contains(err.Error(), other) || strings.Contains(err.Error(), strings.TrimPrefix(other, "whsec_")) {
		t.Errorf("the error shows the secret: %v", err)
	}
}

func TestWebhookOldTimestampRejected(t *testing.T) {
	t.Parallel()
	srv, got := webhookReceiver(t, testSecret)
	s, _, _ := newTestSender(t, Config{AllowPrivate: true})
	s.now = func() time.Time { return time.Now().Add(-10 * time.Minute) }
	err := s.Send(t.Context(), webhookChannel(srv.URL, testSecret), notification())
	rec := <-got
	if !errors.Is(rec.verify, errTooOld) || !errors.Is(rec.lib, standardwebhooks.ErrMessageTooOld) {
		t.Errorf("receiver's verdicts: ours %v, the library's %v; want both: too old", rec.verify, rec.lib)
	}
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Send = %v, want the receiver's 401", err)
	}
}

func TestWebhookBadSecretIsAnErrorWithoutIt(t *testing.T) {
	t.Parallel()
	s, dials, _ := newTestSender(t, Config{AllowPrivate: true})
	secret := "whsec_not*base64*at*all"
	err := s.Send(t.Context(), webhookChannel("http://127.0.0.1:1/", secret), notification())
	if err == nil || strings.Contains(err.Error(), "not*base64") {
		t.Fatalf("Send = %v, want an error that does not show the secret", err)
	}
	if dials.Load() != 0 {
		t.Errorf("%d dials, want none", dials.Load())
	}
}

func TestNon2xxIsAnErrorWithTheStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusInternalServerError, http.StatusNotFound, http.StatusTooManyRequests} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "no_service", status)
			}))
			t.Cleanup(srv.Close)
			s, _, _ := newTestSender(t, Config{AllowPrivate: true})
			for _, ch := range []broker.Channel{webhookChannel(srv.URL, testSecret), {Kind: broker.ChannelSlack, URL: srv.URL}} {
				err := s.Send(t.Context(), ch, notification())
				want := fmt.Sprintf("%s: the receiver answered %d %s: no_service", ch.Kind, status, http.StatusText(status))
				if err == nil || err.Error() != want {
					t.Errorf("%s: Send = %v, want %q", ch.Kind, err, want)
				}
			}
		})
	}
}

func TestAny2xxIsSuccess(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusOK, http.StatusAccepted, http.StatusNoContent} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
		}))
		t.Cleanup(srv.Close)
		s, _, _ := newTestSender(t, Config{AllowPrivate: true})
		if err := s.Send(t.Context(), webhookChannel(srv.URL, testSecret), notification()); err != nil {
			t.Errorf("%d: Send = %v", status, err)
		}
	}
}

// A redirect is an error and is not followed: it would send the request
// to an address the channel's owner did not give.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	s, _, _ := newTestSender(t, Config{AllowPrivate: true})
	for _, ch := range []broker.Channel{webhookChannel(redirect.URL, testSecret), {Kind: broker.ChannelSlack, URL: redirect.URL}} {
		err := s.Send(t.Context(), ch, notification())
		if err == nil || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), "redirects are not followed") {
			t.Errorf("%s: Send = %v, want a 307 refused", ch.Kind, err)
		}
	}
	if reached.Load() != 0 {
		t.Errorf("the redirect's target was reached %d times", reached.Load())
	}
}

func TestOnlyHTTPAndHTTPS(t *testing.T) {
	t.Parallel()
	s, dials, _ := newTestSender(t, Config{AllowPrivate: true})
	for _, u := range []string{"ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1:70/", "javascript:alert(1)",
		"127.0.0.1:8080/hook", "", "http:///no-host", "http://[::1", "unix:///run/docker.sock"} {
		for _, kind := range []string{broker.ChannelWebhook, broker.ChannelSlack} {
			ch := broker.Channel{Kind: kind, URL: u, Secret: testSecret}
			err := s.Send(t.Context(), ch, notification())
			if err == nil || !strings.HasPrefix(err.Error(), kind+": the channel's URL ") {
				t.Errorf("%s %q: Send = %v, want the URL refused", kind, u, err)
			}
		}
	}
	if dials.Load() != 0 {
		t.Errorf("%d dials, want none", dials.Load())
	}
}

// An error is kept in the delivery log and shown to admins: it never
// holds the URL (a Slack URL's path is its secret, a query may hold a
// token), its user and password, or the channel's secret, whatever went
// wrong.
func TestErrorTextHasNoSecrets(t *testing.T) {
	t.Parallel()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusBadGateway)
	}))
	t.Cleanup(failing.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close() // nothing listens there now: connection refused
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); hanging.Close() })

	secretParts := []string{"pa55word", "t0ken", "T0SECRET", "hook-path-secret", testSecret, strings.TrimPrefix(testSecret, "whsec_")}
	withSecrets := func(hostport string) string {
		return "http://ops:pa55word@" + hostport + "/services/T0SECRET/hook-path-secret?token=t0ken"
	}
	for _, tc := range []struct {
		name  string
		url   string
		allow bool
	}{
		{"Non2xx", withSecrets(strings.TrimPrefix(failing.URL, "http://")), true},
		{"ConnectionRefused", withSecrets(closedAddr), true},
		{"Timeout", withSecrets(strings.TrimPrefix(hanging.URL, "http://")), true},
		{"AddressRefused", withSecrets(strings.TrimPrefix(failing.URL, "http://")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _, _ := newTestSender(t, Config{AllowPrivate: tc.allow, Timeout: 500 * time.Millisecond})
			for _, ch := range []broker.Channel{webhookChannel(tc.url, testSecret), {Kind: broker.ChannelSlack, URL: tc.url}} {
				err := s.Send(t.Context(), ch, notification())
				if err == nil {
					t.Fatalf("%s: sent, want an error", ch.Kind)
				}
				for _, p := range secretParts {
					if strings.Contains(err.Error(), p) {
						t.Errorf("%s: the error %q holds %q", ch.Kind, err, p)
					}
				}
			}
		})
	}
}

func TestTimeoutBoundsASend(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); srv.Close() })
	s, _, _ := newTestSender(t, Config{AllowPrivate: true, Timeout: 300 * time.Millisecond})
	start := time.Now()
	err := s.Send(t.Context(), webhookChannel(srv.URL, testSecret), notification())
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("Send = %v, want no answer within 300ms", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Send took %s with a 300ms timeout", d)
	}
}

func TestSlackMessage(t *testing.T) {
	t.Parallel()
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		got <- body
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	ch := broker.Channel{ID: 3, Kind: broker.ChannelSlack, URL: srv.URL + "/services/T000/B000/XXXX"}

	for _, tc := range []struct {
		name   string
		public string
		edit   func(*broker.Notification)
		want   string
	}{
		{"WithLink", "https://lazarus.example.com", func(*broker.Notification) {},
			"New error group in orders / billing: card declined\n<https://lazarus.example.com/error-groups/12|Open in Lazarus>"},
		{"StrangersTextEscaped", "https://lazarus.example.com", func(n *broker.Notification) {
			n.Detail = "<!channel> a & b <https://evil.example|click>"
		}, "New error group in orders / billing: &lt;!channel&gt; a &amp; b &lt;https://evil.example|click&gt;\n<https://lazarus.example.com/error-groups/12|Open in Lazarus>"},
		{"LinkEscaped", "https://lazarus.example.com/a&b|c", func(*broker.Notification) {},
			"New error group in orders / billing: card declined\n<https://lazarus.example.com/a&amp;b%7Cc/error-groups/12|Open in Lazarus>"},
		{"NoPublicURL", "", func(*broker.Notification) {},
			"New error group in orders / billing: card declined\nIn Lazarus: /error-groups/12"},
		{"NoLink", "https://lazarus.example.com", func(n *broker.Notification) { n.Path = "" },
			"New error group in orders / billing: card declined"},
		{"Test", "https://lazarus.example.com", func(n *broker.Notification) {
			n.Event, n.Queue, n.Group, n.Detail, n.Test = broker.EventHoldStarted, "payments", "", "circuit breaker: 50 failures in 1m", true
		}, "[test] Hold started in payments: circuit breaker: 50 failures in 1m\n<https://lazarus.example.com/error-groups/12|Open in Lazarus>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newTestSender(t, Config{AllowPrivate: true, PublicURL: tc.public})
			n := notification()
			tc.edit(&n)
			if err := s.Send(t.Context(), ch, n); err != nil {
				t.Fatalf("Send: %v", err)
			}
			var msg map[string]any
			body := <-got
			if err := json.Unmarshal(body, &msg); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			if len(msg) != 1 || msg["text"] != tc.want {
				t.Errorf("body = %s\nwant text %q", body, tc.want)
			}
		})
	}
}
