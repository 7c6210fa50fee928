package views

import (
	"fmt"
	"time"
)

// HoldNote is a hold of a queue, or of one consumer group of it (SPEC
// section 6), as the pages show it wherever the queue or the group
// appears: who made it, why, since when, what waits behind it.
type HoldNote struct {
	ID      int64
	Queue   string
	Group   string // "": the whole queue
	Breaker bool   // made by the circuit breaker, not by a person
	Reason  string // the person's words (or the breaker's): untrusted text
	By      string
	Since   time.Time
	Waiting int64 // messages pushed and not yet settled by the group (by every group of the queue)
	// The circuit breaker's probe: when the next is due (zero: not
	// known), how many were let through so far.
	ProbeAt time.Time
	Probes  int64
	// ReleaseURL is where Release posts; "" when the visitor may not
	// release (a viewer).
	ReleaseURL string
}

// HoldForm is what a page's Hold dialog needs: where it posts (the
// page's queue) and where it leads back to; "" PostURL: the visitor may
// not hold (a viewer), and there is no dialog.
type HoldForm struct {
	PostURL   string
	Queue     string
	Back      string   // the page to come back to, after the hold or a release
	Groups    []string // the queue's consumer groups, to choose from
	CSRFToken string
}

// HoldTarget is one Hold button: the consumer group it holds ("" the
// whole queue) and the reason it suggests ("" none).
type HoldTarget struct {
	Queue  string
	Group  string
	Reason string
	// AnyGroup: the button does not know the group (an error group
	// summed over several): the dialog asks.
	AnyGroup bool
}

// What says what a hold holds, for people: "group billing of queue
// orders", "queue orders (every group)".
func (h HoldNote) What() string { return HoldWhat(h.Queue, h.Group) }

// HoldWhat says what a hold of queue and group ("" the whole queue)
// holds.
func HoldWhat(queue, group string) string {
	if group == "" {
		return "queue " + queue + " (every consumer group)"
	}
	return "group " + group + " of queue " + queue
}

// holdTitle is a badge's tooltip: who held it, why, since when.
func holdTitle(h HoldNote, now time.Time) string {
	who := "held by " + h.By
	if h.Breaker {
		who = "held by the circuit breaker"
	}
	return fmt.Sprintf("%s %s: %s (%s waiting)", who, Ago(h.Since, now), Reveal(Cut(h.Reason, 200)), Count(h.Waiting))
}

// WaitingText says what waits behind a hold: "12 messages waiting".
func WaitingText(n int64) string {
	switch n {
	case 0:
		return "No message waiting"
	case 1:
		return "1 message waiting"
	}
	return Count(n) + " messages waiting"
}

// releaseQuestion is what Release asks, once: what it lets go.
func releaseQuestion(h HoldNote) string {
	q := "Release the hold of " + h.What() + "? "
	switch h.Waiting {
	case 0:
		q += "No message is waiting: the next ones pushed are delivered as usual."
	case 1:
		q += "The 1 message waiting will be delivered."
	default:
		q += "The " + Count(h.Waiting) + " messages waiting will be delivered."
	}
	if h.Breaker {
		q += " The circuit breaker's count of failures starts again from 0."
	}
	return q
}

// HeldGroup returns the hold of the queue or of the group among hs (the
// queue's first), nil when neither is held.
func HeldGroup(hs []HoldNote, group string) *HoldNote {
	for i := range hs {
		if hs[i].Group == "" {
			return &hs[i]
		}
	}
	for i := range hs {
		if group != "" && hs[i].Group == group {
			return &hs[i]
		}
	}
	return nil
}

// heldOnly returns the group's own holds among hs (not the queue's).
func heldOnly(hs []HoldNote, group string) *HoldNote {
	for i := range hs {
		if hs[i].Group == group {
			return &hs[i]
		}
	}
	return nil
}
