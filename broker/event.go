package broker

import "time"

// Event is news the broker tells people about (SPEC section 8: the
// notifications issue carries them to channels). Today they are handed,
// once their transaction has committed, to Config.OnEvent.
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

// raiser is raise bound to tx, for functions that take a narrower
// transaction.
func (b *Broker) raiser(tx Tx) func(Event) error {
	return func(e Event) error { return b.raise(tx, e) }
}

// raise tells e once tx has committed (never when it does not): to
// Config.OnEvent, when one was given.
func (b *Broker) raise(tx Tx, e Event) error {
	if b.onEvent == nil {
		return nil
	}
	return afterCommit(tx, func() { b.onEvent(e) })
}
