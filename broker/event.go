package broker

import (
	"context"
	"fmt"
	"time"
)

// Event is news the broker tells people about (SPEC section 8): it is
// written to the notifications' outbox for each channel whose rules
// match it, in the transaction of the change, and handed, once that
// transaction has committed, to Config.OnEvent.
type Event struct {
	Kind string // EventHoldStarted, EventHoldReleased, …
	// HoldKind is the kind of the hold of a hold's event (manual, or the
	// circuit breaker's).
	HoldKind HoldKind
	Queue    string
	Group    string // "": the whole queue
	Detail   string // in words: the reason of a hold, what a release let go
	URL      string // where to look ("" none yet)
	At       time.Time
	HoldID   int64
	JobID    int64
	// ErrorGroupID and Fingerprint name the error group of an error
	// group's event (error_group_states.id, and its fingerprint).
	ErrorGroupID int64
	Fingerprint  string
}

// The kinds of events.
const (
	EventHoldStarted  = "hold.started"
	EventHoldReleased = "hold.released"
	// EventJobPaused: a replay job paused itself, its canary having
	// failed or too many of its copies failing again (Detail: the
	// reason, "canary: …" or "paused itself: …").
	EventJobPaused = "job.paused"
)

// raiseTx is what raising an event needs: the notifications it queues
// (NotifyTx), and the transaction's scope, to wake the sender once it
// has committed.
type raiseTx interface {
	NotifyTx
	scopeTx
}

// raiser is raise bound to ctx and tx, for functions that take a
// narrower transaction.
func (b *Broker) raiser(ctx context.Context, tx raiseTx) func(Event) error {
	return func(e Event) error { return b.raise(ctx, tx, e) }
}

// raise writes e to the outbox in tx, once for each channel whose rules
// match it (writeOutbox), and, once tx has committed (never when it does
// not), wakes the sending loop when it wrote any and tells e to
// Config.OnEvent, when one was given.
func (b *Broker) raise(ctx context.Context, tx raiseTx, e Event) error {
	n, err := writeOutbox(ctx, tx, e)
	if err != nil {
		return fmt.Errorf("notifications of %s: %w", e.Kind, err)
	}
	if n > 0 {
		if err := afterCommit(tx, b.wakeSender); err != nil {
			return err
		}
	}
	if b.onEvent == nil {
		return nil
	}
	return afterCommit(tx, func() { b.onEvent(e) })
}
