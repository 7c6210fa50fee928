package broker

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// SendReport says what a pass of SendNotifications did.
type SendReport struct {
	Sent    int // sent now
	Retried int // failed, tried again later
	GivenUp int // failed, and past NotifyRetryFor: marked failed
	// More: the pass stopped at its bound on rounds with more due; the
	// loop goes on at once rather than at the next poll.
	More bool
}

// SendNotifications sends what is due in the outbox through Config.Notify:
// of each channel its oldest pending notification, when its time has
// come, then the next one of a channel whose send succeeded, until
// nothing more is due; channels beside each other, each one at a time.
// A notification is marked sent after its send returned, in a write of
// its own: a crash between the two sends it again (at least once; its
// ID lets the receiver drop the repeat). A send that fails is tried
// again after NotifyFirstRetry, doubling up to NotifyMaxRetry, until
// NotifyRetryFor after it was written; then it is marked failed and
// the channel's next one goes. Its error is kept cut, with the channel's
// secret and URL path taken out. Without a Sender nothing is sent (a
// warning is logged once). Run it from one process at a time (Run does,
// in the leader).
func (b *Broker) SendNotifications(ctx context.Context) (SendReport, error) {
	var rep SendReport
	if b.sender == nil {
		var pending bool
		err := b.store.View(ctx, func(tx Tx) error {
			ds, err := tx.NotifyDeliveries(ctx, DeliveryQuery{State: DeliveryPending, Limit: 1})
			pending = len(ds) > 0
			return err
		})
		if err == nil && pending {
			b.sending.warned.Do(func() {
				b.log.Warn("notifications are kept, not sent: no sender is configured")
			})
		}
		return rep, err
	}
	// A bound on the rounds, so that a channel with a long queue does
	// not keep the loop from its other work (stopping): the next pass
	// goes on at once (More).
	for round := 0; round < notifyRounds; round++ {
		var due []NotifyDelivery
		channels := map[int64]Channel{}
		err := b.store.View(ctx, func(tx Tx) error {
			var err error
			if due, err = tx.DueNotifications(ctx, b.now(), MaxChannels); err != nil || len(due) == 0 {
				return err
			}
			cs, err := tx.NotifyChannels(ctx)
			for _, c := range cs {
				channels[c.ID] = c
			}
			return err
		})
		if err != nil {
			return rep, fmt.Errorf("notifications due: %w", err)
		}
		if len(due) == 0 {
			return rep, nil
		}
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		sent := 0
		for _, d := range due {
			c, ok := channels[d.ChannelID]
			if !ok {
				continue // deleted with its channel since
			}
			wg.Go(func() {
				outcome, err := b.sendOne(ctx, c, d)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				switch outcome {
				case DeliverySent:
					rep.Sent++
					sent++
				case DeliveryFailed:
					rep.GivenUp++
					sent++ // the channel's next one may go
				case DeliveryPending:
					rep.Retried++
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return rep, fmt.Errorf("notifications: %w", errs[0])
		}
		if sent == 0 || ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	rep.More = true
	return rep, nil
}

// notifyRounds bounds one pass of SendNotifications: each round sends at
// most one notification a channel.
var notifyRounds = 100

// sendOne sends d to c and marks how it went, returning its new state
// ("" when nothing was marked).
func (b *Broker) sendOne(ctx context.Context, c Channel, d NotifyDelivery) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, notifySendTimeout)
	err := b.sender.Send(sctx, c, d.Notification)
	cancel()
	if err != nil && ctx.Err() != nil {
		return "", ctx.Err() // stopping: it goes again at the next lead
	}
	now := b.now()
	d.Attempts++
	if err == nil {
		d.State, d.SentAt, d.NextAt = DeliverySent, now, time.Time{} // LastError: why it took more than one try
	} else {
		d.LastError = scrubError(err.Error(), c)
		giveUp := d.At.Add(NotifyRetryFor)
		if !now.Before(giveUp) {
			d.State, d.NextAt = DeliveryFailed, time.Time{}
		} else {
			d.NextAt = now.Add(notifyBackoff(d.Attempts))
			if d.NextAt.After(giveUp) {
				d.NextAt = giveUp // the last try, at the end of the retries
			}
		}
	}
	// A mark is one row by its key: beside pushes and acks, not in
	// their way (a burst of notifications would otherwise take the
	// writer from them once each).
	if err := b.store.Update(ctx, b.hot(UpdateOptions{}), func(tx Tx) error { return tx.SaveNotifyDelivery(ctx, d) }); err != nil {
		return "", fmt.Errorf("mark notification %d: %w", d.ID, err)
	}
	if d.State == DeliveryFailed {
		b.log.Warn("notification given up", "notification", d.ID, "channel", c.ID, "event", d.Event, "attempts", d.Attempts, "err", d.LastError)
	}
	return d.State, nil
}

// notifyBackoff is the wait after the attempts-th failed send.
func notifyBackoff(attempts int) time.Duration {
	w := NotifyFirstRetry
	for i := 1; i < attempts && w < NotifyMaxRetry; i++ {
		w *= 2
	}
	return min(w, NotifyMaxRetry)
}

// scrubError cuts a send's error to maxNotifyError bytes, with the
// channel's secret and its URL (a Slack URL's path is a secret, and a
// URL may carry a login) said as "[secret]" and the URL's scheme and
// host, so that the delivery log and the logs never show them.
//
// A secret shorter than minScrubbedSecret is not replaced where it
// appears (the "[secret]" marks would spell it out: a password "e" taken
// out of "send failed"), the whole error is withheld instead. The secret
// is also taken out in base64, alone and as an SMTP AUTH PLAIN answer,
// should a server echo what it was sent.
func scrubError(s string, c Channel) string {
	if c.Secret != "" {
		if len(c.Secret) < minScrubbedSecret && strings.Contains(s, c.Secret) {
			return "the error is withheld: it holds the channel's secret, which is too short (under 8 characters) to take out of it unseen"
		}
		for _, form := range []string{
			c.Secret,
			base64.StdEncoding.EncodeToString([]byte(c.Secret)),
			base64.StdEncoding.EncodeToString([]byte("\x00" + c.SMTPUser + "\x00" + c.Secret)),
		} {
			s = strings.ReplaceAll(s, form, "[secret]")
		}
	}
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err == nil {
			short := u.Scheme + "://" + u.Host
			s = strings.ReplaceAll(s, c.URL, short)
			if u.User != nil {
				s = strings.ReplaceAll(s, u.User.String(), "[login]")
			}
			if p := u.EscapedPath(); len(p) > 1 {
				s = strings.ReplaceAll(s, p, "/[path]")
			}
			if u.RawQuery != "" {
				s = strings.ReplaceAll(s, u.RawQuery, "[query]")
			}
		}
	}
	return truncate(s, maxNotifyError)
}

// minScrubbedSecret is the shortest secret scrubError takes out of an
// error text in place.
const minScrubbedSecret = 8

// notifyLoop sends the outbox's notifications while ctx lasts (this
// process leads): at once, when woken by a commit of this process that
// wrote some, and every NotifyPoll (those of other processes, retries
// that came due). ticks stands for the poll's ticker in tests.
func (b *Broker) notifyLoop(ctx context.Context, ticks <-chan time.Time) {
	if ticks == nil {
		t := time.NewTicker(NotifyPoll)
		defer t.Stop()
		ticks = t.C
	}
	for {
		rep, err := b.SendNotifications(ctx)
		if err != nil && ctx.Err() == nil {
			b.log.Error("send notifications", "err", err)
		}
		if err == nil && rep.More {
			continue // a long queue: no wait between passes
		}
		select {
		case <-ctx.Done():
			return
		case <-b.sending.wake:
		case <-ticks:
		}
	}
}
