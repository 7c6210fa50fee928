package demo

import (
	"math"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The one source of the demo's rates: how often the producers send a
// message a worker cannot take, and how often the workers' upstreams fail.
// The live traffic (traffic.go) draws from these; the week of history
// (history.go) derives its failure shares and dead letters an hour from
// them (profiles), so that the live demo looks like the week continued.

// rates are the shares of the demo's messages that fail, and why. A
// failure "of each attempt" is drawn again at each retry (mostly retried
// away); a failure "of a message" fails every attempt of that message
// (the payload is the cause, or an upstream's outage or Retry-After
// outlasts the queue's few retries) and makes a dead letter.
var rates = struct {
	// orders/billing, of a message: digital goods (no shipping address:
	// a panic), the legacy checkout's string total; the invoice
	// database failing over.
	digitalOrder, legacyOrder, billingFailover float64
	// orders/billing, of each attempt.
	billingTimeout float64
	// payments, of a message: acked dlq at once (permanent); globex's
	// account over its rate limit with the processor (transient).
	declinedCard, expiredCard, globexRateLimit float64
	sepa                                       float64 // no card
	// payments/billing, of each attempt.
	stripeTimeout float64
	// emails/notifier, of a message: an address refused at once, a
	// template it does not know yet, umbrella's domain throttled
	// (transient).
	badAddress, unknownTemplate, umbrellaThrottle float64
	// emails/notifier, of each attempt.
	smtpReset float64
	// analytics, of each attempt, on every queue.
	analyticsReset float64
}{
	digitalOrder: 0.0002, legacyOrder: 0.0001, billingFailover: 0.0004,
	billingTimeout: 0.015,
	declinedCard:   0.0003, expiredCard: 0.0001, globexRateLimit: 0.004, sepa: 0.10,
	stripeTimeout: 0.012,
	badAddress:    0.0003, unknownTemplate: 0.0002, umbrellaThrottle: 0.004,
	smtpReset:      0.012,
	analyticsReset: 0.008,
}

// hit reports whether message m is one of the share p that a failure of
// a message (salt names which) strikes: decided by its sequence, so that
// every attempt of it agrees and a replayed copy (a new message) is drawn
// afresh.
func hit(m broker.Delivery, salt uint64, p float64) bool {
	z := uint64(m.Seq)*0x9e3779b97f4a7c15 ^ salt
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)/(1<<53) < p
}

// Bursts: about this many times a day at the day's average traffic, a
// producer sends a batch of 8 to 27 messages its queue's main worker
// cannot take (a bad deploy of the producer for a minute).
const (
	burstsPerDay        = 2.0
	burstMin, burstSpan = 8, 20
)

// Triage: every triageEvery the on-call engineer's routine (the demo's
// triage, as a team's scheduled job would) replays the dead letters of
// transient failures that are triageReplayAfter old and deletes the
// hopeless ones (a bad payload: replaying it fails again) that are
// triageDeleteAfter old. The dead letters waiting then stay at about
// what an hour files, their oldest under an hour, inside the default
// alert levels (broker.DefaultLimits) except in a burst or an incident.
const (
	triageEvery       = 10 * time.Minute
	triageReplayAfter = 5 * time.Minute
	triageDeleteAfter = 20 * time.Minute
)

// transientTexts are what the error texts of the upstreams' failures
// contain: such a dead letter is worth replaying; any other is hopeless.
var transientTexts = []string{"429 Too Many Requests", "upstream timeout", "connection refused", "connection reset"}

// transientError reports whether a dead letter's error is an upstream's
// failure (replayed by the triage) rather than the message's (deleted).
func transientError(text string) bool {
	for _, t := range transientTexts {
		if strings.Contains(text, t) {
			return true
		}
	}
	return false
}

// outcome is what a group's worker makes of its messages on average:
// failed acks and dead letters a message, and the share of those dead
// letters that are transient (replayed; they then succeed).
type outcome struct {
	failed, dead, transientShare float64
	replayOK                     float64 // of a transient one's replay
}

// attempts is a message's expected failed acks and its chance of
// becoming a dead letter when each attempt fails with probability q and
// the queue retries limit times (every failed ack counts, the last one
// files the dead letter).
func attempts(q float64, limit int) (failed, dead float64) {
	p := 1.0
	for range limit + 1 {
		p *= q
		failed += p
	}
	return failed, p
}

// outcomeOf derives what group's worker makes of queue's messages from
// rates and the queue's retry limit: the share of messages each tenant
// sends is the same (1/len(tenants)).
func outcomeOf(queue, group string, limit int) outcome {
	r := rates
	share := 1 / float64(len(tenants))
	var o outcome
	var replayFail float64
	// each adds a failure of each attempt, q for a share of the messages.
	each := func(q, of float64) {
		f, d := attempts(q, limit)
		o.failed += of * f
		o.dead += of * d
		o.transientShare += of * d
		replayFail += of * d * d // its copy fails as the message did
	}
	// sticky adds a failure of a share p of the messages: every attempt
	// (retried) or the first (permanent, acked dlq at once).
	sticky := func(p float64, transient, permanent bool) {
		if !permanent {
			o.failed += p * float64(limit+1)
		}
		o.dead += p
		if transient {
			o.transientShare += p
			replayFail += p * p // its copy is struck again
		}
	}
	if group == groupAnalytics {
		each(r.analyticsReset, 1)
	} else {
		switch queue {
		case "orders":
			sticky(r.digitalOrder+r.legacyOrder, false, false)
			sticky(r.billingFailover, true, false)
			each(r.billingTimeout, 1-r.digitalOrder-r.legacyOrder-r.billingFailover)
		case "payments":
			sticky((1-r.sepa)*(r.declinedCard+r.expiredCard), false, true)
			sticky(share*r.globexRateLimit, true, false)
			each(r.stripeTimeout, 1-share*r.globexRateLimit)
		case "emails":
			sticky(r.badAddress, false, true)
			sticky(r.unknownTemplate, false, false)
			sticky(share*r.umbrellaThrottle, true, false)
			each(r.smtpReset, 1-share*r.umbrellaThrottle)
		}
	}
	o.replayOK = 1
	if o.transientShare > 0 {
		o.replayOK = 1 - replayFail/o.transientShare
	}
	if o.dead > 0 {
		o.transientShare /= o.dead
	}
	return o
}

// meanRhythm is rhythm's average over a week, so that a rate given "at
// the average traffic" becomes one at any time: rate*rhythm(t)/meanRhythm.
var meanRhythm = func() float64 {
	var sum float64
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC) // a Monday
	n := 7 * 24 * 4
	for k := range n {
		sum += rhythm(start.Add(time.Duration(k) * 15 * time.Minute))
	}
	return sum / float64(n)
}()

// rhythm is the share of the day's peak traffic at t (UTC): lower at
// night, a peak in the European afternoon, quieter at weekends. The live
// producers follow it as the week of history does.
func rhythm(t time.Time) float64 {
	t = t.UTC()
	h := float64(t.Hour()) + float64(t.Minute())/60
	r := 0.35 + 0.65*math.Exp(-math.Pow((h-13.5)/4.2, 2))
	if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
		r *= 0.6
	}
	return r
}
