package broker

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// SendReport says what a pass of SendNotifications did.
type SendReport struct {
	Sent    int // sent now
	Retried int // failed, tried again later
	GivenUp int // failed, and past NotifyRetryFor: marked failed
	// More: the pass stopped at one of its bounds with more perhaps due;
	// the loop goes on at once rather than at the next poll.
	More bool
}

// SendNotifications sends, in one pass, what is due in the outbox through
// Config.Notify: of each channel whose oldest pending notification's
// time has come, its pending ones in order, up to notifyBatch, one at a
// time, until one fails (the channel's later ones wait for it); channels
// beside each other. The pass reads what is due once, and marks what
// each channel sent, or tried, in one write once that channel is done: a
// crash between a send and that write sends it again (at least once;
// its ID lets the receiver drop the repeat). A send that fails is tried
// again after NotifyFirstRetry, doubling up to NotifyMaxRetry, until
// NotifyRetryFor after it was written; then it is marked failed and the
// channel's next one goes. Its error is kept cut, with the channel's
// secret and URL path taken out. Without a Sender nothing is sent (a
// warning is logged once). Run it from one process at a time (Run does,
// in the leader).
//
// A channel with more pending than a pass takes (notifyBatch, or what
// notifyPassFor allowed it) makes the pass say More, and the loop goes
// on; what was written during the pass wakes the loop, and what others
// wrote is found at the poll.
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
	now := b.now()
	// After a mark that could not be written, a pass takes one a
	// channel until a mark is written again: what it sends is sent
	// again at the next pass, and no more than that.
	perChannel := notifyBatch
	if b.sending.markFailed.Load() {
		perChannel = 1
	}
	var due []NotifyDelivery
	channels := map[int64]Channel{}
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		if due, err = tx.DueNotifications(ctx, now, perChannel, notifyPassMax); err != nil || len(due) == 0 {
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
	more := len(due) == notifyPassMax
	lists := map[int64][]NotifyDelivery{}
	for _, d := range due {
		if _, ok := channels[d.ChannelID]; ok { // else deleted with its channel since
			lists[d.ChannelID] = append(lists[d.ChannelID], d)
		}
	}
	var mu sync.Mutex
	var errs []error
	marked := false
	var wg sync.WaitGroup
	for id, list := range lists {
		c := channels[id]
		wg.Go(func() {
			done, cut := b.sendList(ctx, c, list, now)
			err := b.markSends(ctx, done)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			marked = marked || len(done) > 0
			more = more || cut
			for _, d := range done {
				switch d.State {
				case DeliverySent:
					rep.Sent++
				case DeliveryFailed:
					rep.GivenUp++
					b.log.Warn("notification given up", "notification", d.ID, "channel", d.ChannelID, "event", d.Event, "attempts", d.Attempts, "err", d.LastError)
				case DeliveryPending:
					rep.Retried++
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		b.sending.markFailed.Store(true)
		return rep, fmt.Errorf("mark notifications: %w", errs[0])
	}
	if marked {
		b.sending.markFailed.Store(false)
	}
	rep.More = marked && more
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	return rep, nil
}

// markSends writes the new states of a channel's sends of a pass, in one
// write (a burst of notifications would otherwise take the writer from
// pushes and acks once each), beside them, not in their way. The write
// outlives ctx (notifyMarkTimeout): a stop or a lost lead during the
// pass must not leave what was sent unmarked, to be sent again. A row
// another process has marked since is left as it is (SaveNotifyDelivery
// writes pending rows only).
func (b *Broker) markSends(ctx context.Context, done []NotifyDelivery) error {
	if len(done) == 0 {
		return nil
	}
	slices.SortFunc(done, func(x, y NotifyDelivery) int { return cmp.Compare(x.ID, y.ID) })
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyMarkTimeout)
	defer cancel()
	return b.store.Update(mctx, b.hot(UpdateOptions{}), func(tx Tx) error {
		for _, d := range done {
			if err := tx.SaveNotifyDelivery(mctx, d); err != nil {
				return fmt.Errorf("mark notification %d: %w", d.ID, err)
			}
		}
		return nil
	})
}

// notifyMarkTimeout bounds the write that marks a channel's sends.
const notifyMarkTimeout = 10 * time.Second

// The bounds of a pass of SendNotifications: notifyBatch notifications
// a channel, notifyPassMax in all, and a channel takes no next one once
// notifyPassFor has passed since the pass began (each channel's sends
// are marked as it finishes: a slow receiver holds back its own marks,
// and the next pass, not the other channels' marks).
var (
	notifyBatch   = 100
	notifyPassMax = 1000
	notifyPassFor = 5 * time.Second
)

// sendList sends a channel's due notifications (list, by id) one at a
// time, each with its new state to be marked: until one fails (it is
// tried again later, and the later ones wait for it), one that is not due
// at now, or ctx ends (what was sent is marked all the same: markSends).
// more: the channel may have more due than the pass took.
func (b *Broker) sendList(ctx context.Context, c Channel, list []NotifyDelivery, now time.Time) (done []NotifyDelivery, more bool) {
	for i, d := range list {
		if d.NextAt.After(now) || ctx.Err() != nil {
			return done, false
		}
		if i > 0 && b.clock.Now().Sub(now) >= notifyPassFor {
			return done, true
		}
		d, ok := b.sendOne(ctx, c, d)
		if !ok {
			return done, false
		}
		done = append(done, d)
		if d.State == DeliveryPending {
			return done, false
		}
	}
	return done, len(list) == notifyBatch
}

// sendOne sends d to c and returns it with its new state, to be marked
// (ok false: ctx ended during a send that failed, nothing to mark).
func (b *Broker) sendOne(ctx context.Context, c Channel, d NotifyDelivery) (NotifyDelivery, bool) {
	sctx, cancel := context.WithTimeout(ctx, notifySendTimeout)
	err := b.sender.Send(sctx, c, d.Notification)
	cancel()
	if err != nil && ctx.Err() != nil {
		return d, false // stopping: it goes again at the next lead
	}
	now := b.now()
	d.Attempts++
	if err == nil {
		d.State, d.SentAt, d.NextAt = DeliverySent, now, time.Time{} // LastError: why it took more than one try
		return d, true
	}
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
	return d, true
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
// process leads): when woken by a commit of this process that wrote
// some, once notifyGather has passed (so that a burst of commits, each
// writing one, goes in one pass: half a second more before a new error
// group is told, well inside SPEC's 60 s), and every
// NotifyPoll (those of other processes, retries that came due). ticks
// and gather stand for the poll's ticker and the wait's timer in tests
// (gather: a value ends each wait).
func (b *Broker) notifyLoop(ctx context.Context, ticks, gather <-chan time.Time) {
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
			if !b.gather(ctx, gather) {
				return
			}
		case <-ticks:
		}
	}
}

// gather waits notifyGather (or for a value of the test's gather), then
// takes the wake-up the commits during the wait left: the pass that
// follows reads what they wrote. It reports false when ctx ended first.
func (b *Broker) gather(ctx context.Context, gather <-chan time.Time) bool {
	if gather == nil {
		t := time.NewTimer(notifyGather)
		defer t.Stop()
		gather = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-gather:
	}
	select {
	case <-b.sending.wake:
	default:
	}
	return true
}

// notifyGather is how long the sending loop, once woken by a commit,
// waits for the commits that follow before it sends.
const notifyGather = 500 * time.Millisecond
