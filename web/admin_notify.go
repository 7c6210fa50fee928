package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// The admin pages of notifications (SPEC section 8): /admin/notify (the
// channels and rules, with their forms) and /admin/notify/deliveries
// (the delivery log). A webhook's signing secret is shown once, on the
// page the creation redirects to, through the flash cookie (sealed, like
// a new API token's).

// notifyURL is the admin page of channels and rules.
const notifyURL = "/admin/notify"

// showNotify lists the channels and the rules, with the forms that add
// them.
func (s *Server) showNotify(c echo.Context) error {
	ctx := c.Request().Context()
	chs, err := s.broker.Channels(ctx)
	if err != nil {
		return err
	}
	rules, err := s.broker.Rules(ctx)
	if err != nil {
		return err
	}
	v := views.Notify{Page: s.page(c, "Notifications", "notify"), Events: broker.NotifyEvents}
	v.Channels = channelRows(chs, rules)
	names := channelNames(chs)
	for _, r := range rules {
		v.Rules = append(v.Rules, views.RuleRow{ID: r.ID, Channel: names(r.ChannelID), Events: r.Events, Queue: r.Queue, Group: r.Group,
			CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy})
	}
	if v.Flash, v.NewSecret, err = s.takeFlash(c); err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.NotifyView(v), views.NotifyContent(v))
}

// channelRows are the channels as the pages show them, with how many
// rules send to each.
func channelRows(chs []broker.Channel, rules []broker.Rule) []views.ChannelRow {
	out := make([]views.ChannelRow, 0, len(chs))
	for _, ch := range chs {
		row := views.ChannelRow{ID: ch.ID, Name: ch.Name, Kind: ch.Kind, Where: ch.URL, CreatedAt: ch.CreatedAt, CreatedBy: ch.CreatedBy}
		if ch.Kind == broker.ChannelEmail {
			row.Where = fmt.Sprintf("%s:%d → %s", ch.SMTPHost, ch.SMTPPort, strings.Join(ch.To, ", "))
		}
		for _, r := range rules {
			if r.ChannelID == ch.ID {
				row.Rules++
			}
		}
		out = append(out, row)
	}
	return out
}

// channelNames names a channel by its id ("#id (deleted)" when it is
// gone).
func channelNames(chs []broker.Channel) func(int64) string {
	return func(id int64) string {
		for _, ch := range chs {
			if ch.ID == id {
				return ch.Name
			}
		}
		return "#" + strconv.FormatInt(id, 10) + " (deleted)"
	}
}

// createChannelPage adds a channel from one of the page's three forms.
func (s *Server) createChannelPage(c echo.Context) error {
	ch := broker.Channel{Name: c.FormValue("name"), Kind: c.FormValue("kind"), URL: strings.TrimSpace(c.FormValue("url")),
		SMTPHost: strings.TrimSpace(c.FormValue("smtpHost")), SMTPUser: c.FormValue("smtpUser"), Secret: c.FormValue("smtpPassword"),
		From: strings.TrimSpace(c.FormValue("from"))}
	if ch.Kind == broker.ChannelEmail {
		port, err := strconv.Atoi(strings.TrimSpace(c.FormValue("smtpPort")))
		if err != nil {
			return s.backToNotify(c, "", shownError("the SMTP port must be a number from 1 to 65535"))
		}
		ch.SMTPPort = port
		for _, to := range strings.Split(c.FormValue("to"), ",") {
			if to = strings.TrimSpace(to); to != "" {
				ch.To = append(ch.To, to)
			}
		}
	}
	made, err := s.broker.CreateChannel(c.Request().Context(), ch, actor(c))
	if err != nil {
		return s.backToNotify(c, "", err)
	}
	msg := fmt.Sprintf("Channel %s (%s) created. Add a rule to send it events, and send a test.", made.Name, made.Kind)
	secret := ""
	if made.Kind == broker.ChannelWebhook {
		secret = made.Secret
		msg = fmt.Sprintf("Webhook %s created: copy its signing secret below.", made.Name)
	}
	if err := s.setFlash(c, views.Flash{Kind: "ok", Text: msg}, secret); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, notifyURL)
}

// deleteChannelPage deletes a channel with its rules and pending
// notifications, and says how many went.
func (s *Server) deleteChannelPage(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return s.backToNotify(c, "", err)
	}
	r, err := s.broker.DeleteChannel(c.Request().Context(), id, actor(c))
	return s.backToNotify(c, fmt.Sprintf("Channel %s deleted, with its %s and %s not sent yet.", r.Channel.Name,
		views.Plural(r.Rules, "rule", "rules"), views.Plural(r.Pending, "notification", "notifications")), err)
}

// testChannelPage writes a test notification for a channel and leads to
// the delivery log, where it shows how it went.
func (s *Server) testChannelPage(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return s.backToNotify(c, "", err)
	}
	n, err := s.broker.TestChannel(c.Request().Context(), id, actor(c))
	if err != nil {
		return s.backToNotify(c, "", err)
	}
	if err := s.setFlash(c, views.Flash{Kind: "ok", Text: fmt.Sprintf("Test notification #%d written: it is sent within seconds, and its row below says how it went.", n.ID)}, ""); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, notifyURL+"/deliveries?channel="+strconv.FormatInt(id, 10))
}

// createRulePage adds a rule from the page's form.
func (s *Server) createRulePage(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return s.backToNotify(c, "", shownError("the form could not be read"))
	}
	chID, err := strconv.ParseInt(form.Get("channel"), 10, 64)
	if err != nil || chID <= 0 {
		return s.backToNotify(c, "", shownError("choose the channel the rule sends to"))
	}
	r, err := s.broker.CreateRule(c.Request().Context(), broker.Rule{ChannelID: chID, Events: form["events"],
		Queue: strings.TrimSpace(form.Get("queue")), Group: strings.TrimSpace(form.Get("consumerGroup"))}, actor(c))
	return s.backToNotify(c, fmt.Sprintf("Rule #%d added: %s of queues %s.", r.ID, strings.Join(r.Events, ", "), r.Queue), err)
}

// deleteRulePage deletes a rule.
func (s *Server) deleteRulePage(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return s.backToNotify(c, "", err)
	}
	err = s.broker.DeleteRule(c.Request().Context(), id, actor(c))
	return s.backToNotify(c, fmt.Sprintf("Rule #%d deleted.", id), err)
}

// backToNotify redirects (303) to the notifications page with a flash:
// ok when err is nil, else the error's safe text (internal errors are
// answered as such).
func (s *Server) backToNotify(c echo.Context, ok string, err error) error {
	f := views.Flash{Kind: "ok", Text: ok}
	var be *broker.Error
	var shown shownError
	switch {
	case err == nil:
	case errors.As(err, &be):
		f = views.Flash{Kind: "error", Text: capitalize(be.Message) + "."}
	case errors.As(err, &shown):
		f = views.Flash{Kind: "error", Text: capitalize(shown.Error()) + "."}
	default:
		return err
	}
	if err := s.setFlash(c, f, ""); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, notifyURL)
}

// showDeliveries is the delivery log: newest first, filtered by channel
// and state, a keyset page at a time (?before=).
func (s *Server) showDeliveries(c echo.Context) error {
	ctx := c.Request().Context()
	q, err := deliveryQuery(c)
	if err != nil {
		return err
	}
	page, err := s.broker.Deliveries(ctx, q)
	if err != nil {
		return err
	}
	chs, err := s.broker.Channels(ctx)
	if err != nil {
		return err
	}
	v := views.Deliveries{Page: s.page(c, "Delivery log", "notify", views.Crumb{Label: "Notifications", URL: notifyURL}),
		Channels: channelRows(chs, nil), Channel: q.ChannelID, State: q.State,
		States: []string{broker.DeliveryPending, broker.DeliverySent, broker.DeliveryFailed}}
	names := channelNames(chs)
	for _, d := range page.Items {
		row := views.DeliveryRow{ID: d.ID, Channel: names(d.ChannelID), Event: d.Event, Queue: d.Queue, Group: d.Group,
			Detail: d.Detail, Path: localPath(d.Path), At: d.At, State: d.State, Attempts: d.Attempts, NextAt: d.NextAt, SentAt: d.SentAt, LastError: d.LastError}
		if d.Test {
			row.Path = "" // a test is about nothing on the dashboard
		}
		v.Rows = append(v.Rows, row)
	}
	link := func(before int64) string {
		u := url.Values{}
		if q.ChannelID != 0 {
			u.Set("channel", strconv.FormatInt(q.ChannelID, 10))
		}
		if q.State != "" {
			u.Set("state", q.State)
		}
		if before != 0 {
			u.Set("before", strconv.FormatInt(before, 10))
		}
		if len(u) == 0 {
			return notifyURL + "/deliveries"
		}
		return notifyURL + "/deliveries?" + u.Encode()
	}
	v.SelfURL = link(q.Before)
	if page.Next != 0 {
		v.NextURL = link(page.Next)
	}
	if q.Before != 0 {
		v.FirstURL = link(0)
	}
	if v.Flash, _, err = s.takeFlash(c); err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.DeliveriesView(v), views.DeliveriesContent(v))
}

// localPath is p when it is a path of this dashboard ("/…", not "//…"),
// else "" (no link is made of it).
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") {
		return ""
	}
	return p
}
