package broker

import (
	"context"
	"fmt"
	"time"
)

// The circuit breaker (SPEC section 6; queue options holdAfterFailures
// and holdProbeSeconds): a consumer group whose tries of a queue fail
// holdAfterFailures times in a row holds itself, with a hold of kind
// HoldBreaker made by BrokerActor. While that hold is the only one of the
// group, one message is let through every holdProbeSeconds (the probe,
// breaker_gate.go); a probe acked completed ends the hold by itself, a
// failed one leaves it (breaker_ack.go).
//
// What counts, per (queue, group) across its partitions, in the order
// the tries settle: an ack failed, or dlq (the worker says it failed), is
// a failed try; completed (an ack, an autoAck pop, an ack inside a
// transaction) puts the count back to 0; retry and a lease running out
// count neither way. Completions of leases handed out before the hold
// reset the count but leave the hold: only the probe's ends it. A person's
// release of a breaker hold puts the count back to 0 too.
//
// A queue with holdAfterFailures 0 (the default) costs its acks no
// statement; one with the breaker on costs a completed ack one UPDATE
// that changes nothing (and locks no row on PostgreSQL) while the count
// is 0, and a failed one an upsert of its (queue, group) row.

// MaxBreakerReason is the longest reason the breaker gives its hold, in
// bytes: the count and the start of the last error.
const MaxBreakerReason = 200

// BreakerTries are the settled tries of one transaction for one (queue,
// group): whether a completed came, and the failures after the last one.
type BreakerTries struct {
	QueueID, GroupID int64
	Reset            bool // a completed try came: the count starts again from 0
	Failures         int  // failed tries after the last completed one
	LastError        string
	At               time.Time
}

// BreakerTx is what the circuit breaker needs from storage: its count of
// failed tries in a row, one row a (queue, group) (group_breakers), and
// the probe of its hold.
type BreakerTx interface {
	// AddBreakerTries folds t into the (queue, group)'s count: (t.Reset ?
	// 0 : count) + t.Failures, with the last error and its time when
	// t.Failures > 0; it returns the new count. With no failures it is an
	// UPDATE of a count that is not 0 already (on PostgreSQL no row is
	// locked while the count is 0: healthy acks run beside each other).
	// Locks the row, to commit.
	AddBreakerTries(ctx context.Context, t BreakerTries) (int64, error)
	// ResetBreaker puts the count back to 0 (no row: nothing to do).
	ResetBreaker(ctx context.Context, queueID, groupID int64) error
	// Breaker reads the count and the last error (no row: 0, "").
	Breaker(ctx context.Context, queueID, groupID int64) (streak int64, lastError string, err error)
	// SaveHoldProbe writes the probe of h.ID: ProbeAt, ProbePartitionID,
	// ProbeSeq and Probes.
	SaveHoldProbe(ctx context.Context, h Hold) error
}

// BreakerOnly returns the breaker's hold when it is the only hold in the
// set (a probe may pass it), else nil.
func (s HoldSet) BreakerOnly() *Hold {
	if len(s.Holds) != 1 || s.Holds[0].Kind != HoldBreaker {
		return nil
	}
	return &s.Holds[0]
}

// breakerHold returns the breaker's hold in the set, or nil.
func (s HoldSet) breakerHold() *Hold {
	for i := range s.Holds {
		if s.Holds[i].Kind == HoldBreaker {
			return &s.Holds[i]
		}
	}
	return nil
}

// Breaker is what the circuit breaker counts for a (queue, group): its
// failed tries in a row and the last error (cut).
type Breaker struct {
	Streak    int64
	LastError string
}

// BreakerOf reads the circuit breaker's count of a group of a queue (an
// unknown queue or group: zero).
func (b *Broker) BreakerOf(ctx context.Context, queue, group string) (Breaker, error) {
	var out Breaker
	err := b.store.View(ctx, func(tx Tx) error {
		q, err := tx.QueueByName(ctx, queue)
		if isNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if group == "" {
			group = QueueModeGroup
		}
		gid, err := tx.GroupID(ctx, group, false)
		if isNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		out.Streak, out.LastError, err = tx.Breaker(ctx, q.ID, gid)
		return err
	})
	return out, err
}

// consumerQueueTx is a transaction for ConsumerTx and QueueTx.
type consumerQueueTx interface {
	ConsumerTx
	QueueTx
}

// probeOf fills in a breaker's hold what its probe is: every how many
// seconds (the queue's option), and whether the one handed out is still
// leased.
func probeOf(ctx context.Context, tx consumerQueueTx, h *Hold, now time.Time) error {
	if h.Kind != HoldBreaker {
		return nil
	}
	q, err := tx.QueueByID(ctx, h.QueueID)
	if err != nil {
		return fmt.Errorf("holds: queue: %w", err)
	}
	return probeIn(ctx, tx, h, q, now)
}

// withProbes fills the probes of the breaker's holds among hs, holds of
// q (probeOf), and returns hs.
func withProbes(ctx context.Context, tx ConsumerTx, hs []Hold, q Queue, now time.Time) ([]Hold, error) {
	for i := range hs {
		if hs[i].Kind == HoldBreaker {
			if err := probeIn(ctx, tx, &hs[i], q, now); err != nil {
				return hs, err
			}
		}
	}
	return hs, nil
}

func probeIn(ctx context.Context, tx ConsumerTx, h *Hold, q Queue, now time.Time) error {
	h.ProbeSeconds = q.Options.HoldProbeSeconds
	if h.ProbeSeq == 0 {
		return nil
	}
	c, err := tx.Consumer(ctx, h.ProbePartitionID, h.GroupID)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("holds: probe: %w", err)
	}
	h.ProbeInFlight = probeLeased(c, h.ProbeSeq, now)
	return nil
}
