package web

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Notifications (SPEC section 8, broker/notify.go), admins only:
// channels (GET/POST /api/v1/notify/channels, DELETE …/:id, POST
// …/:id/test), rules (GET/POST /api/v1/notify/rules, DELETE …/:id) and
// the delivery log (GET /api/v1/notify/deliveries). A channel's secret
// (a webhook's signing secret) is in POST's answer only; its URL is shown
// as its scheme and host afterwards (a Slack URL's path is its
// credential), and an SMTP password is never shown.

// channelRequest is POST /api/v1/notify/channels's body: url for slack
// and webhook; the smtp fields, from and to for email.
type channelRequest struct {
	Name         string   `json:"name"`
	Kind         string   `json:"kind"`
	URL          string   `json:"url"`
	SMTPHost     string   `json:"smtpHost"`
	SMTPPort     int      `json:"smtpPort"`
	SMTPUser     string   `json:"smtpUser"`
	SMTPPassword string   `json:"smtpPassword"`
	From         string   `json:"from"`
	To           []string `json:"to"`
}

// channelJSON is a channel as the API shows it. url is its scheme and
// host, the rest "…"; the smtp fields are an email channel's. secret is
// in POST's answer only, and only for a webhook channel (its signing
// secret, made by the server).
type channelJSON struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	URL       *string   `json:"url"`
	SMTPHost  *string   `json:"smtpHost"`
	SMTPPort  *int      `json:"smtpPort"`
	SMTPUser  *string   `json:"smtpUser"`
	From      *string   `json:"from"`
	To        []string  `json:"to"`
	CreatedAt timestamp `json:"createdAt"`
	CreatedBy string    `json:"createdBy"`
	Secret    string    `json:"secret,omitempty"`
}

// shownURL is a channel's URL as it may be shown: its scheme and host,
// the rest "…" (as broker.Channels gives it).
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "…"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// toChannelJSON is ch in the API's shape, without its secret. ch.URL is
// as the broker gives it from Channels (cut already), or as created
// (cut here).
func toChannelJSON(ch broker.Channel) channelJSON {
	j := channelJSON{ID: ch.ID, Name: ch.Name, Kind: ch.Kind, To: ch.To, CreatedAt: timestamp(ch.CreatedAt), CreatedBy: ch.CreatedBy}
	if ch.Kind == broker.ChannelEmail {
		port := ch.SMTPPort
		j.SMTPHost, j.SMTPPort, j.SMTPUser, j.From = &ch.SMTPHost, &port, optional(ch.SMTPUser), &ch.From
	} else {
		u := shownURL(ch.URL)
		j.URL = &u
	}
	if j.To == nil {
		j.To = []string{}
	}
	return j
}

// listChannels answers GET /api/v1/notify/channels.
func (s *Server) listChannels(c echo.Context) error {
	chs, err := s.broker.Channels(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]channelJSON, len(chs))
	for i, ch := range chs {
		out[i] = toChannelJSON(ch)
	}
	return writeJSON(c, http.StatusOK, struct {
		Channels []channelJSON `json:"channels"`
	}{out})
}

// createChannel answers POST /api/v1/notify/channels: 201 and the
// channel, with a webhook's signing secret (the only time it is shown).
func (s *Server) createChannel(c echo.Context) error {
	var req channelRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ch, err := s.broker.CreateChannel(c.Request().Context(), broker.Channel{Name: req.Name, Kind: req.Kind, URL: req.URL,
		SMTPHost: req.SMTPHost, SMTPPort: req.SMTPPort, SMTPUser: req.SMTPUser, Secret: req.SMTPPassword, From: req.From, To: req.To}, actor(c))
	if err != nil {
		return err
	}
	j := toChannelJSON(ch)
	if ch.Kind == broker.ChannelWebhook {
		j.Secret = ch.Secret
	}
	return writeJSON(c, http.StatusCreated, j)
}

// deleteChannel answers DELETE /api/v1/notify/channels/:id: the channel
// as it was, and how many rules and pending notifications went with it.
func (s *Server) deleteChannel(c echo.Context) error {
	id, err := positiveID(c, "channel")
	if err != nil {
		return err
	}
	r, err := s.broker.DeleteChannel(c.Request().Context(), id, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		Deleted        bool        `json:"deleted"`
		Channel        channelJSON `json:"channel"`
		RulesDeleted   int64       `json:"rulesDeleted"`
		PendingDeleted int64       `json:"pendingDeleted"`
	}{true, toChannelJSON(r.Channel), r.Rules, r.Pending})
}

// testChannel answers POST /api/v1/notify/channels/:id/test: 202 and the
// test notification written to the outbox; the delivery log says how its
// sending went.
func (s *Server) testChannel(c echo.Context) error {
	id, err := positiveID(c, "channel")
	if err != nil {
		return err
	}
	n, err := s.broker.TestChannel(c.Request().Context(), id, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, toDeliveryJSON(broker.NotifyDelivery{Notification: n, State: broker.DeliveryPending, NextAt: n.At}))
}

// ruleRequest is POST /api/v1/notify/rules's body.
type ruleRequest struct {
	Channel       int64    `json:"channel"`
	Events        []string `json:"events"`
	Queue         string   `json:"queue"`
	ConsumerGroup string   `json:"consumerGroup"`
}

// ruleJSON is a rule: consumerGroup null for any group.
type ruleJSON struct {
	ID            int64     `json:"id"`
	Channel       int64     `json:"channel"`
	Events        []string  `json:"events"`
	Queue         string    `json:"queue"`
	ConsumerGroup *string   `json:"consumerGroup"`
	CreatedAt     timestamp `json:"createdAt"`
	CreatedBy     string    `json:"createdBy"`
}

func toRuleJSON(r broker.Rule) ruleJSON {
	return ruleJSON{ID: r.ID, Channel: r.ChannelID, Events: r.Events, Queue: r.Queue, ConsumerGroup: optional(r.Group),
		CreatedAt: timestamp(r.CreatedAt), CreatedBy: r.CreatedBy}
}

// listRules answers GET /api/v1/notify/rules.
func (s *Server) listRules(c echo.Context) error {
	rs, err := s.broker.Rules(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]ruleJSON, len(rs))
	for i, r := range rs {
		out[i] = toRuleJSON(r)
	}
	return writeJSON(c, http.StatusOK, struct {
		Rules []ruleJSON `json:"rules"`
	}{out})
}

// createRule answers POST /api/v1/notify/rules: 201 and the rule; 404
// when its channel is not there.
func (s *Server) createRule(c echo.Context) error {
	var req ruleRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Channel <= 0 {
		return badRequest("channel is required: the id of a channel")
	}
	r, err := s.broker.CreateRule(c.Request().Context(), broker.Rule{ChannelID: req.Channel, Events: req.Events, Queue: req.Queue, Group: req.ConsumerGroup}, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, toRuleJSON(r))
}

// deleteRule answers DELETE /api/v1/notify/rules/:id.
func (s *Server) deleteRule(c echo.Context) error {
	id, err := positiveID(c, "rule")
	if err != nil {
		return err
	}
	if err := s.broker.DeleteRule(c.Request().Context(), id, actor(c)); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		Deleted bool  `json:"deleted"`
		ID      int64 `json:"id"`
	}{true, id})
}

// deliveryJSON is a notification of the outbox and how its sending
// went: nextAt while pending, sentAt once sent, lastError the last
// failure's reason (null: none).
type deliveryJSON struct {
	ID            int64      `json:"id"`
	Channel       int64      `json:"channel"`
	Event         string     `json:"event"`
	Queue         *string    `json:"queue"`
	ConsumerGroup *string    `json:"consumerGroup"`
	Detail        string     `json:"detail"`
	Path          *string    `json:"path"`
	At            timestamp  `json:"at"`
	Test          bool       `json:"test"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	NextAt        *timestamp `json:"nextAt"`
	SentAt        *timestamp `json:"sentAt"`
	LastError     *string    `json:"lastError"`
}

func toDeliveryJSON(d broker.NotifyDelivery) deliveryJSON {
	j := deliveryJSON{ID: d.ID, Channel: d.ChannelID, Event: d.Event, Queue: optional(d.Queue), ConsumerGroup: optional(d.Group),
		Detail: d.Detail, Path: optional(d.Path), At: timestamp(d.At), Test: d.Test, State: d.State, Attempts: d.Attempts,
		SentAt: optionalTime(d.SentAt), LastError: optional(d.LastError)}
	if d.State == broker.DeliveryPending {
		j.NextAt = optionalTime(d.NextAt)
	}
	return j
}

// listDeliveries answers GET /api/v1/notify/deliveries?channel=&state=&before=&limit=:
// newest first; next is the before of the next page (null: the last).
func (s *Server) listDeliveries(c echo.Context) error {
	q, err := deliveryQuery(c)
	if err != nil {
		return err
	}
	page, err := s.broker.Deliveries(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := make([]deliveryJSON, len(page.Items))
	for i, d := range page.Items {
		out[i] = toDeliveryJSON(d)
	}
	var next *int64
	if page.Next != 0 {
		next = &page.Next
	}
	return writeJSON(c, http.StatusOK, struct {
		Deliveries []deliveryJSON `json:"deliveries"`
		Next       *int64         `json:"next"`
	}{out, next})
}

// deliveryQuery reads the delivery log's filters from the query string
// (the API's and the page's): channel, state, before, limit.
func deliveryQuery(c echo.Context) (broker.DeliveryQuery, error) {
	q := broker.DeliveryQuery{State: c.QueryParam("state")}
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"channel", &q.ChannelID}, {"before", &q.Before}} {
		if v := c.QueryParam(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return q, badRequest("%s must be a positive integer", p.name)
			}
			*p.dst = n
		}
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > broker.MaxDeliveryPage {
			return q, badRequest("limit must be 1 to %d", broker.MaxDeliveryPage)
		}
		q.Limit = n
	}
	return q, nil
}

// positiveID reads the path parameter id, naming what it is of.
func positiveID(c echo.Context, what string) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("%s id must be a positive integer", what)
	}
	return id, nil
}
