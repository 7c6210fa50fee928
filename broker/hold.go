package broker

import (
	"context"
	"fmt"
	"time"
)

// Holds (SPEC section 6): a queue, or one consumer group of it, whose
// pops deliver nothing while the hold lasts. Pushes are stored as ever;
// leases handed out before stay valid and their acks work; no retry is
// spent and no retry delay cut short (a held pop touches nothing). A
// release wakes the pops waiting for the queue, in every process (the
// queue's news). Holds are rows of the store (HoldTx), so they survive a
// restart and hold for every process of a store shared by several.
//
// Maintenance mode's design, per queue and group: a pop reads the holds
// through the lookup cache, which keeps the (queue, group) pairs known to
// be unheld; a pop of such a pair reads nothing more. Any change of a
// hold empties the cache (this process: invalidateCache; the others on
// PostgreSQL: the cache generation, which migrations_pg/0009 moves at
// every change of holds), so a hold or a release is seen by the next pop
// anywhere. While a pair is held each of its pops reads its holds (one
// statement), so that the release is seen at once.

// HoldKind says who made a hold.
type HoldKind string

// The kinds of holds.
const (
	// HoldManual is a person's (POST /api/v1/holds).
	HoldManual HoldKind = "manual"
	// HoldBreaker is the circuit breaker's (queue option
	// holdAfterFailures), made by the acker (breaker_ack.go).
	HoldBreaker HoldKind = "breaker"
)

// The audit actions of holds (the people's stream; a hold by
// BrokerActor goes to the broker's).
const (
	AuditHold        = "hold"
	AuditHoldRelease = "hold_release"
)

// MaxHoldReason is the longest reason a hold may give, in bytes.
const MaxHoldReason = 500

// Hold is one hold of a queue (Group "", GroupID 0) or of one consumer
// group of it.
type Hold struct {
	ID      int64
	QueueID int64
	GroupID int64 // 0: the whole queue
	Queue   string
	Group   string // "": the whole queue
	Kind    HoldKind
	Reason  string
	Actor   string
	Since   time.Time
	// The circuit breaker's probe (kind breaker): when the next one is
	// due, the one in flight (partition and seq; 0 none), how many were
	// handed out.
	ProbeAt          time.Time
	ProbePartitionID int64
	ProbeSeq         int64
	Probes           int64
	// ProbeSeconds (the queue's holdProbeSeconds) and ProbeInFlight (the
	// probe handed out is still leased) are filled for a breaker's hold
	// by Broker.Holds.
	ProbeSeconds  int
	ProbeInFlight bool
	// Waiting is filled by Broker.Holds and Release: the messages pushed
	// and not yet settled by the group (its lag), or by each group of
	// the queue, summed, for a hold of the queue.
	Waiting int64
	// ReleasedBy and ReleasedAt are set by Release.
	ReleasedBy string
	ReleasedAt time.Time
}

// HoldRequest asks Broker.Hold for a manual hold.
type HoldRequest struct {
	Queue  string
	Group  string // "": the whole queue
	Reason string // 1 to MaxHoldReason bytes: why
	Actor  string
}

// HoldFilter selects the holds Broker.Holds lists ("" any).
type HoldFilter struct {
	Queue string
	Group string
}

// HoldSet is what holds one (queue, group): the holds of its queue and
// of the group.
type HoldSet struct {
	Holds []Hold
}

// Held reports whether any hold is in the set.
func (s HoldSet) Held() bool { return len(s.Holds) > 0 }

// HoldTx is what holds need from storage.
type HoldTx interface {
	// InsertHold stores h and sets h.ID. When a hold of the same (queue,
	// group, kind) exists, nothing is stored: h becomes that hold and
	// InsertHold returns false. Writes holds.
	InsertHold(ctx context.Context, h *Hold) (bool, error)
	// HoldByID reads one hold with its queue's and group's names
	// (ErrNotFound).
	HoldByID(ctx context.Context, id int64) (Hold, error)
	// HoldsOf reads the holds of the queue (group 0) and of groupID (0:
	// the queue's only), by id, without names; none: empty. One
	// statement, by UNIQUE (queue_id, group_id, kind).
	HoldsOf(ctx context.Context, queueID, groupID int64) ([]Hold, error)
	// Holds lists holds with their queue's and group's names, by id:
	// those of queueID and of groupID (0: any).
	Holds(ctx context.Context, queueID, groupID int64) ([]Hold, error)
	// DeleteHold removes one (ErrNotFound when it is not there).
	DeleteHold(ctx context.Context, id int64) error
}

// heldFor returns what holds the pops of a (queue, group) in a write of
// the broker's: through the lookup cache when tx is one of updateStats
// (no statement while the pair is known unheld), else from the store.
func heldFor(ctx context.Context, tx HoldTx, queueID, groupID int64) (HoldSet, error) {
	if s, ok := tx.(*statsTx); ok {
		if c, ok := s.Tx.(*cacheTx); ok {
			return c.heldFor(ctx, queueID, groupID)
		}
	}
	hs, err := tx.HoldsOf(ctx, queueID, groupID)
	if err != nil {
		return HoldSet{}, fmt.Errorf("holds: %w", err)
	}
	return HoldSet{Holds: hs}, nil
}

// Hold holds a queue, or one consumer group of it, for r.Actor (an
// operator), audited. The queue must exist (ErrNotFound); a group need
// not read it yet (its name is made). A hold of the same (queue, group)
// made by a person already is not made again: Hold returns it and
// created false (nothing audited), so a request sent twice holds once.
func (b *Broker) Hold(ctx context.Context, r HoldRequest) (h Hold, created bool, err error) {
	if err := checkName("queue", r.Queue); err != nil {
		return Hold{}, false, err
	}
	if r.Group != "" {
		if err := checkName("consumer group", r.Group); err != nil {
			return Hold{}, false, err
		}
	}
	if r.Reason == "" || len(r.Reason) > MaxHoldReason {
		return Hold{}, false, errorf(ErrInvalid, "a hold needs a reason of 1 to %d bytes: say why deliveries are held", MaxHoldReason)
	}
	err = b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		q, err := tx.QueueByName(ctx, r.Queue)
		if isNotFound(err) {
			return errorf(ErrNotFound, "queue %q not found", r.Queue)
		}
		if err != nil {
			return fmt.Errorf("hold: %w", err)
		}
		var gid int64
		if r.Group != "" {
			if gid, err = tx.GroupID(ctx, r.Group, true); err != nil {
				return fmt.Errorf("hold: group: %w", err)
			}
		}
		h = Hold{QueueID: q.ID, GroupID: gid, Queue: q.Name, Group: r.Group, Kind: HoldManual, Reason: r.Reason, Actor: r.Actor, Since: now}
		if created, err = tx.InsertHold(ctx, &h); err != nil {
			return fmt.Errorf("hold: %w", err)
		}
		h.Queue, h.Group = q.Name, r.Group
		if h.Waiting, err = holdWaiting(ctx, tx, h, now); err != nil {
			return err
		}
		if !created {
			return nil
		}
		if err := audit(ctx, tx, now, r.Actor, AuditHold, q.Name, r.Group, int(h.Waiting), "held: "+r.Reason); err != nil {
			return err
		}
		if err := b.raise(ctx, tx, Event{Kind: EventHoldStarted, HoldKind: HoldManual, Queue: q.Name, Group: r.Group, Detail: r.Reason, At: now, HoldID: h.ID}); err != nil {
			return err
		}
		touched(q.Name) // the pages that follow the queue
		// The cache knows which pairs are unheld.
		return b.invalidateCache(tx)
	})
	return h, created, err
}

// Release ends the hold id for actor, audited, and wakes the pops
// waiting for its queue, in every process. It returns the hold as it was,
// with ReleasedBy, ReleasedAt and what was waiting. A hold released
// already, or never made, is ErrNotFound.
func (b *Broker) Release(ctx context.Context, id int64, actor string) (Hold, error) {
	var h Hold
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		var err error
		if h, err = tx.HoldByID(ctx, id); isNotFound(err) {
			return errorf(ErrNotFound, "hold %d not found: released already, or never made", id)
		} else if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if err := tx.DeleteHold(ctx, id); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if h.Kind == HoldBreaker {
			// A person let the group go: its count starts again.
			if err := tx.ResetBreaker(ctx, h.QueueID, h.GroupID); err != nil {
				return fmt.Errorf("release: breaker: %w", err)
			}
		}
		if h.Waiting, err = holdWaiting(ctx, tx, h, now); err != nil {
			return err
		}
		if err := probeOf(ctx, tx, &h, now); err != nil {
			return err
		}
		h.ReleasedBy, h.ReleasedAt = actor, now
		detail := fmt.Sprintf("released after %s; %d messages waiting", now.Sub(h.Since).Round(time.Second), h.Waiting)
		if err := audit(ctx, tx, now, actor, AuditHoldRelease, h.Queue, h.Group, int(h.Waiting), detail); err != nil {
			return err
		}
		if err := b.raise(ctx, tx, Event{Kind: EventHoldReleased, HoldKind: h.Kind, Queue: h.Queue, Group: h.Group, Detail: detail, At: now, HoldID: h.ID}); err != nil {
			return err
		}
		touched(h.Queue) // the pops waiting for it look again
		return b.invalidateCache(tx)
	})
	return h, err
}

// Holds lists the holds f selects, by id, each with what waits behind it
// (Hold.Waiting). An unknown queue or group has none.
func (b *Broker) Holds(ctx context.Context, f HoldFilter) ([]Hold, error) {
	var out []Hold
	err := b.store.View(ctx, func(tx Tx) error {
		now := b.now()
		var qid, gid int64
		if f.Queue != "" {
			q, err := tx.QueueByName(ctx, f.Queue)
			if isNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("holds: %w", err)
			}
			qid = q.ID
		}
		if f.Group != "" {
			var err error
			if gid, err = tx.GroupID(ctx, f.Group, false); isNotFound(err) {
				return nil
			} else if err != nil {
				return fmt.Errorf("holds: group: %w", err)
			}
		}
		hs, err := tx.Holds(ctx, qid, gid)
		if err != nil {
			return fmt.Errorf("holds: %w", err)
		}
		for i := range hs {
			if hs[i].Waiting, err = holdWaiting(ctx, tx, hs[i], now); err != nil {
				return err
			}
			if err := probeOf(ctx, tx, &hs[i], now); err != nil {
				return err
			}
		}
		out = hs
		return nil
	})
	return out, err
}

// holdWaiting counts what waits behind h: the lag of its group, or of
// every group of its queue.
func holdWaiting(ctx context.Context, tx SubscriptionTx, h Hold, now time.Time) (int64, error) {
	gs, err := tx.Groups(ctx, h.QueueID, now)
	if err != nil {
		return 0, fmt.Errorf("holds: groups: %w", err)
	}
	return waitingBehind(h, gs), nil
}

// waitingBehind counts what waits behind h among its queue's groups gs.
func waitingBehind(h Hold, gs []GroupInfo) int64 {
	var n int64
	for _, g := range gs {
		if h.GroupID == 0 || g.ID == h.GroupID {
			n += g.Lag
		}
	}
	return n
}

// holdsByQueue reads the holds of queueID (0: of every queue), with
// their names, by queue id: one statement.
func holdsByQueue(ctx context.Context, tx HoldTx, queueID int64) (map[int64][]Hold, error) {
	hs, err := tx.Holds(ctx, queueID, 0)
	if err != nil {
		return nil, fmt.Errorf("holds: %w", err)
	}
	out := make(map[int64][]Hold, len(hs))
	for _, h := range hs {
		out[h.QueueID] = append(out[h.QueueID], h)
	}
	return out, nil
}

// withWaiting sets the Waiting of the holds hs of one queue from its
// groups gs (read in the same snapshot), and returns hs.
func withWaiting(hs []Hold, gs []GroupInfo) []Hold {
	for i := range hs {
		hs[i].Waiting = waitingBehind(hs[i], gs)
	}
	return hs
}
