package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/lazarus-dlq/lazarus/broker"
)

// userAgent names the sender to receivers.
const userAgent = "Lazarus-Notify/1"

// newHTTPClient is the client of webhook and Slack channels: it dials
// through the checking dialer, uses no proxy (the check would see the
// proxy's address, not the receiver's) and follows no redirect (a 3xx
// could send the request to an address nobody checked).
func newHTTPClient(d *net.Dialer, cfg Config) *http.Client {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: t,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// webhookBody is a webhook channel's JSON, shaped as Standard Webhooks
// suggest: the event's type, when it happened, and its data.
type webhookBody struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      webhookData `json:"data"`
}

type webhookData struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	Detail        string `json:"detail"`
	URL           string `json:"url"`
	Test          bool   `json:"test"`
}

// sendWebhook posts n as JSON signed with the channel's secret: headers
// webhook-id (stable across retries, so a receiver can drop a repeat),
// webhook-timestamp (this attempt's, so a retry a day later is not taken
// for a replay) and webhook-signature.
func (s *Sender) sendWebhook(ctx context.Context, ch broker.Channel, n broker.Notification) error {
	at := n.At
	if at.IsZero() {
		at = s.now()
	}
	body, err := json.Marshal(webhookBody{Type: n.Event, Timestamp: at.UTC(), Data: webhookData{
		Queue: n.Queue, ConsumerGroup: n.Group, Detail: detail(n), URL: s.link(n), Test: n.Test,
	}})
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	wh, err := standardwebhooks.NewWebhook(ch.Secret)
	if err != nil {
		// The library's error says what is wrong with the secret's
		// encoding, not the secret.
		return fmt.Errorf("webhook: the channel's secret: %w", err)
	}
	id := WebhookID(n)
	ts := s.now()
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		return fmt.Errorf("webhook: signing: %w", err)
	}
	h := http.Header{}
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return s.post(ctx, "webhook", ch.URL, h, body)
}

// slackMessage is an incoming webhook's JSON.
type slackMessage struct {
	Text string `json:"text"`
}

// sendSlack posts n to a Slack incoming webhook as one or two lines: the
// headline, and the link to the dashboard.
func (s *Sender) sendSlack(ctx context.Context, ch broker.Channel, n broker.Notification) error {
	body, err := json.Marshal(slackMessage{Text: slackText(n, s.link(n))})
	if err != nil {
		return fmt.Errorf("slack: %w", err)
	}
	return s.post(ctx, "slack", ch.URL, http.Header{}, body)
}

// slackText is n in Slack's mrkdwn: the headline escaped (so an error
// text cannot mention <!channel> or make a link of its own), and a link
// "<url|Open in Lazarus>" when the link is absolute.
func slackText(n broker.Notification, link string) string {
	text := slackEscape(headline(n))
	switch {
	case strings.HasPrefix(link, "http://") || strings.HasPrefix(link, "https://"):
		// A | would end the URL early; a URL holds none unescaped.
		link = strings.ReplaceAll(link, "|", "%7C")
		text += "\n<" + slackEscape(link) + "|Open in Lazarus>"
	case link != "":
		text += "\nIn Lazarus: " + slackEscape(link)
	}
	return text
}

// slackEscape escapes the three characters Slack's mrkdwn gives meaning
// to (https://api.slack.com/reference/surfaces/formatting#escaping).
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// post sends body to rawURL as JSON; any 2xx is success. what names the
// channel kind in errors, which never carry the URL.
func (s *Sender) post(ctx context.Context, what, rawURL string, h http.Header, body []byte) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the URL.
		return fmt.Errorf("%s: the channel's URL does not parse", what)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s: the channel's URL must be http or https", what)
	}
	if u.Host == "" {
		return fmt.Errorf("%s: the channel's URL has no host", what)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: the channel's URL is not usable", what)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, transportError(ctx, err, s.cfg.Timeout))
	}
	defer resp.Body.Close()
	// Read a little of the answer: a short reason for the log (Slack's
	// "invalid_token"), and the connection can be used again.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	msg := fmt.Sprintf("%s: the receiver answered %d %s", what, resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		msg += " (redirects are not followed)"
	}
	if reason := shortReason(answer); reason != "" {
		msg += ": " + reason
	}
	return errors.New(msg)
}

// transportError is err without the url.Error around it, which quotes
// the request's URL (and with it a Slack URL's secret path or a token in
// the query), and says a timeout in words.
func transportError(ctx context.Context, err error, timeout time.Duration) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if errors.Is(err, context.DeadlineExceeded) || (ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)) {
		return fmt.Errorf("no answer within %s: %w", timeout, context.DeadlineExceeded)
	}
	var terr interface{ Timeout() bool }
	if errors.As(err, &terr) && terr.Timeout() {
		return fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return err
}

// shortReason is the start of a receiver's answer, on one line, for the
// delivery log: at most 100 characters.
func shortReason(answer []byte) string {
	r := []rune(strings.TrimSpace(oneLine(string(answer))))
	if len(r) > 100 {
		r = append(r[:99], '…')
	}
	return string(r)
}

// WebhookID is a notification's webhook-id: the same at every try of it
// (its outbox row and when that was written), so a receiver can drop a
// repeat; the time keeps two databases' rows of the same number (a
// restore, a staging and a production sending to one receiver) apart.
func WebhookID(n broker.Notification) string {
	return "msg_" + strconv.FormatInt(n.ID, 10) + "_" + strconv.FormatInt(n.At.UnixMilli(), 10)
}
