package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hookReceiver is a webhook receiver on the loopback that checks every
// request's Standard Webhooks signature and answers as its mode says:
// 503 (down), 200, or holding the request until release is closed.
type hookReceiver struct {
	srv     *httptest.Server
	secret  string // set once the channel is made, before any send
	arrived chan string
	release chan struct{}

	mu   sync.Mutex
	mode string // "down", "up" or "block"
	got  []hookRequest
}

// hookRequest is one request as the receiver saw it.
type hookRequest struct {
	id, body string
	status   int   // what the receiver answered (0: held, not answered)
	sigErr   error // nil: the signature is valid
}

func newHookReceiver(t *testing.T, mode string) *hookReceiver {
	r := &hookReceiver{mode: mode, arrived: make(chan string, 16), release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		mode := r.mode
		sigErr := verifyWebhookSignature(r.secret, req.Header, body, time.Now())
		i := len(r.got)
		r.got = append(r.got, hookRequest{id: req.Header.Get("webhook-id"), body: string(body), sigErr: sigErr})
		r.mu.Unlock()
		select {
		case r.arrived <- req.Header.Get("webhook-id"):
		default: // the test reads the first only
		}
		status := http.StatusOK
		switch mode {
		case "down":
			status = http.StatusServiceUnavailable
		case "block":
			// Held while the test kills the process that sent it: its
			// answer never reaches that process.
			<-r.release
			return
		}
		r.mu.Lock()
		r.got[i].status = status
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	// Closed before the server: Close waits for the held handlers.
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() {
		select {
		case <-r.release:
		default:
			close(r.release)
		}
	})
	return r
}

func (r *hookReceiver) setMode(mode string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mode = mode
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.got...)
}

// verifyWebhookSignature checks a request as the Standard Webhooks
// specification says, with crypto/hmac and not the library the sender
// signs with: the key is the base64 after "whsec_", the signed text
// "<webhook-id>.<webhook-timestamp>.<body>", and one of the
// space-separated signatures "v1,<base64 of HMAC-SHA256>"; the timestamp
// is within 5 minutes of now.
func verifyWebhookSignature(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("a webhook header is missing")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp: %w", err)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("webhook-timestamp too far from now")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return fmt.Errorf("the secret is not whsec_<base64>: %v", err)
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
	return errors.New("no signature matches")
}

// notifyDelivery is an entry of GET /api/v1/notify/deliveries.
type notifyDelivery struct {
	ID        int64      `json:"id"`
	Event     string     `json:"event"`
	Queue     string     `json:"queue"`
	State     string     `json:"state"`
	Attempts  int        `json:"attempts"`
	NextAt    *time.Time `json:"nextAt"`
	LastError string     `json:"lastError"`
	At        time.Time  `json:"at"`
}

// deliveriesOf reads the delivery log of a channel.
func deliveriesOf(c *crashClient, channel int64) []notifyDelivery {
	c.t.Helper()
	b := c.mustDo(http.MethodGet, fmt.Sprintf("/api/v1/notify/deliveries?channel=%d", channel), "", http.StatusOK)
	var res struct {
		Deliveries []notifyDelivery `json:"deliveries"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		c.t.Fatalf("deliveries: %v %.300s", err, b)
	}
	return res.Deliveries
}

// waitDelivery polls the channel's delivery log until its one delivery
// is as ok says, or fails the test after wait.
func waitDelivery(c *crashClient, channel int64, wait time.Duration, what string, ok func(notifyDelivery) bool) notifyDelivery {
	c.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ds := deliveriesOf(c, channel)
		if len(ds) > 1 {
			c.t.Fatalf("%d deliveries, want one: %+v", len(ds), ds)
		}
		if len(ds) == 1 && ok(ds[0]) {
			return ds[0]
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no delivery %s within %v: %+v", what, wait, ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notifySetup starts the binary, makes a webhook channel to rec and a
// rule for error_group.new on "pay*", and files the first dead letter of
// a new error group in queue payments. It returns the process's client,
// the channel's id, and a func that kills the process with SIGKILL.
func notifySetup(t *testing.T, bin, dbPath string, rec *hookReceiver) (*crashClient, int64, func()) {
	t.Helper()
	cmd, base := startBinary(t, bin, dbPath, "normal", "--notify-allow-private")
	c := &crashClient{t: t, base: base, http: &http.Client{Timeout: time.Minute}}
	var ch struct {
		ID     int64  `json:"id"`
		Secret string `json:"secret"`
	}
	b := c.mustPost("/api/v1/notify/channels", fmt.Sprintf(`{"name":"hook","kind":"webhook","url":%q}`, rec.srv.URL+"/hook"), http.StatusCreated)
	if err := json.Unmarshal(b, &ch); err != nil || !strings.HasPrefix(ch.Secret, "whsec_") {
		t.Fatalf("channel: %v %s", err, b)
	}
	rec.mu.Lock()
	rec.secret = ch.Secret
	rec.mu.Unlock()
	c.mustPost("/api/v1/notify/rules", fmt.Sprintf(`{"channel":%d,"events":["error_group.new"],"queue":"pay*"}`, ch.ID), http.StatusCreated)

	c.mustPost("/api/v1/push", `{"items":[{"queue":"payments","transactionId":"p1","payload":{"amount":12}}]}`, http.StatusCreated)
	status, pb, err := c.do(context.Background(), http.MethodGet, "/api/v1/pop/queue/payments?consumerGroup=billing&batch=1&wait=false", "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("pop: %d %v %.200s", status, err, pb)
	}
	var popped struct {
		Messages []crashDelivery `json:"messages"`
	}
	if err := json.Unmarshal(pb, &popped); err != nil || len(popped.Messages) != 1 {
		t.Fatalf("pop: %v %.300s", err, pb)
	}
	m := popped.Messages[0]
	ack, _ := json.Marshal(map[string]any{"consumerGroup": "billing", "acknowledgments": []map[string]string{
		{"transactionId": m.TxID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": "card declined: issuer unavailable"},
	}})
	c.mustPost("/api/v1/ack/batch", string(ack), http.StatusOK)
	return c, ch.ID, func() { killServer(t, cmd) }
}

// checkArrived checks what rec got: every request signed with the
// channel's secret, all with the id of delivery d, about the new error
// group in payments; and answered 200 at least once and at most twice.
func checkArrived(t *testing.T, rec *hookReceiver, d notifyDelivery) {
	t.Helper()
	want := fmt.Sprintf("msg_%d_%d", d.ID, d.At.UnixMilli()) // notify.WebhookID
	ok := 0
	for _, r := range rec.requests() {
		if r.sigErr != nil {
			t.Errorf("request %s: signature: %v", r.id, r.sigErr)
		}
		if r.id != want {
			t.Errorf("webhook-id %q, want %q (the delivery's)", r.id, want)
		}
		var body struct {
			Type string `json:"type"`
			Data struct {
				Queue string `json:"queue"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Type != "error_group.new" || body.Data.Queue != "payments" {
			t.Errorf("body %v: %.300s", err, r.body)
		}
		if r.status == http.StatusOK {
			ok++
		}
	}
	if ok < 1 || ok > 2 {
		t.Errorf("answered 200 %d times, want once or twice: %+v", ok, rec.requests())
	}
}

// The receiver is down (503) when a new error group is told, and the
// process is killed with SIGKILL while the notification waits for its
// next try: started again on the same file, once the receiver is up, the
// notification goes, signed, with the webhook-id of the failed tries,
// once; the delivery log says sent.
func TestNotificationRetriedAfterKill9(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dbPath := filepath.Join(t.TempDir(), "notify.db")
	rec := newHookReceiver(t, "down")
	c, channel, kill := notifySetup(t, bin, dbPath, rec)

	failed := waitDelivery(c, channel, 30*time.Second, "tried and pending", func(d notifyDelivery) bool {
		return d.State == "pending" && d.Attempts >= 1 && d.NextAt != nil
	})
	if failed.Event != "error_group.new" || failed.Queue != "payments" || !strings.Contains(failed.LastError, "503") {
		t.Errorf("the failed delivery: %+v", failed)
	}
	kill()
	tries := len(rec.requests())
	if tries < 1 {
		t.Fatalf("the receiver saw no try, the log says %d", failed.Attempts)
	}
	rec.setMode("up")

	cmd, base := startBinary(t, bin, dbPath, "normal", "--notify-allow-private")
	defer killServer(t, cmd)
	c = &crashClient{t: t, base: base, http: &http.Client{Timeout: time.Minute}}
	// The first retry is 10 s after the failure, found by a poll every 5 s.
	sent := waitDelivery(c, channel, 45*time.Second, "sent", func(d notifyDelivery) bool { return d.State != "pending" })
	if sent.State != "sent" || sent.Attempts != failed.Attempts+1 || sent.NextAt != nil {
		t.Errorf("after the restart: %+v, want sent at attempt %d", sent, failed.Attempts+1)
	}
	checkArrived(t, rec, sent)
	if got := rec.requests(); len(got) != tries+1 {
		t.Errorf("%d requests, want the %d failed tries and one sent: %+v", len(got), tries, got)
	}
}

// The process is killed with SIGKILL while the notification of a new
// error group is being sent (after the commit that wrote it, before any
// answer): started again on the same file, it sends it again, with the
// same webhook-id: the receiver has it once or twice, never not at all.
func TestNotificationInFlightSurvivesKill9(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dbPath := filepath.Join(t.TempDir(), "notify.db")
	rec := newHookReceiver(t, "block")
	_, channel, kill := notifySetup(t, bin, dbPath, rec)

	select {
	case <-rec.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the notification was never sent")
	}
	kill()
	rec.setMode("up")
	close(rec.release)

	cmd, base := startBinary(t, bin, dbPath, "normal", "--notify-allow-private")
	defer killServer(t, cmd)
	c := &crashClient{t: t, base: base, http: &http.Client{Timeout: time.Minute}}
	sent := waitDelivery(c, channel, 30*time.Second, "sent", func(d notifyDelivery) bool { return d.State != "pending" })
	if sent.State != "sent" || sent.Attempts != 1 {
		t.Errorf("after the restart: %+v, want sent at the first attempt the log knows of", sent)
	}
	checkArrived(t, rec, sent)
	if got := rec.requests(); len(got) != 2 {
		t.Errorf("%d requests, want the one in flight at the kill and its repeat: %+v", len(got), got)
	}
}
