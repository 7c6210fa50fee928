package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// breakerNote is what the acks of one transaction settled for one
// (queue, group) whose queue has the circuit breaker on: the tries,
// folded, and the probe of the group's breaker hold when it settled.
type breakerNote struct {
	q       Queue
	groupID int64
	group   string
	tries   BreakerTries
	hold    *Hold // the group's breaker hold, read at the first try; nil none
	// probe: the hold's probe settled (probeOK: completed), with its
	// transaction id.
	probe     bool
	probeOK   bool
	probeTxID string
}

// noteTry counts one settled try of m (status completed, failed or dlq)
// for the circuit breaker, in settling order. The first try of a (queue,
// group) in the transaction reads its holds (through the cache: nothing
// while it is known unheld). A queue with the breaker off counts nothing,
// but a breaker hold made while it was on still ends by its probe: the
// probe's ack is looked for whatever the option says.
func (k *acker) noteTry(ctx context.Context, q Queue, groupID int64, group, status, errText string, m Message) error {
	key := [2]int64{q.ID, groupID}
	n := k.breakers[key]
	if n == nil {
		hs, err := heldFor(ctx, k.tx, q.ID, groupID)
		if err != nil {
			return fmt.Errorf("ack: breaker: %w", err)
		}
		h := hs.breakerHold()
		if h == nil && q.Options.HoldAfterFailures <= 0 {
			return nil
		}
		n = &breakerNote{q: q, groupID: groupID, group: group, tries: BreakerTries{QueueID: q.ID, GroupID: groupID}, hold: h}
		if k.breakers == nil {
			k.breakers = map[[2]int64]*breakerNote{}
		}
		k.breakers[key] = n
	}
	n.q = q // the options as this ack read them
	ok := status == AckCompleted
	if ok {
		n.tries.Reset, n.tries.Failures = true, 0
	} else {
		n.tries.Failures++
		n.tries.LastError, n.tries.At = firstLine(errText, MaxBreakerReason), k.now
	}
	if h := n.hold; h != nil && h.ProbeSeq == m.Seq && h.ProbePartitionID == m.PartitionID {
		n.probe, n.probeOK, n.probeTxID = true, ok, m.TransactionID
	}
	return nil
}

// finishBreakers writes the counts of the transaction's (queue, group)
// pairs, in (queue, group) order after the consumers (no two acks lock
// them in another order), and acts on them: a count at the queue's
// holdAfterFailures opens the breaker's hold; its probe completed ends
// it, failed leaves it (the probe is over: the next is due at its time).
func (k *acker) finishBreakers(ctx context.Context) error {
	if len(k.breakers) == 0 {
		return nil
	}
	keys := make([][2]int64, 0, len(k.breakers))
	for key := range k.breakers {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b [2]int64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, key := range keys {
		n := k.breakers[key]
		on := n.q.Options.HoldAfterFailures > 0
		var streak int64
		if on { // off: nothing counted, only the hold's probe looked at
			var err error
			if streak, err = k.tx.AddBreakerTries(ctx, n.tries); err != nil {
				return fmt.Errorf("ack: breaker: %w", err)
			}
		}
		var err error
		switch {
		case n.probe && n.probeOK:
			err = k.closeBreaker(ctx, n)
		case n.probe:
			err = k.probeFailed(ctx, n)
		case on && n.hold == nil && n.tries.Failures > 0 && streak >= int64(n.q.Options.HoldAfterFailures):
			err = k.openBreaker(ctx, n, streak)
		}
		if err != nil {
			return err
		}
	}
	k.breakers = nil
	return nil
}

// openBreaker holds the group: a hold of kind breaker by BrokerActor,
// its first probe due holdProbeSeconds from now; audited and told.
func (k *acker) openBreaker(ctx context.Context, n *breakerNote, streak int64) error {
	if k.o.Concurrent {
		return errPlainWrite // a hold is made: the cache is emptied at commit
	}
	reason := fmt.Sprintf("circuit breaker: %d failures in a row", streak)
	if n.tries.LastError != "" {
		reason += ", last error " + n.tries.LastError
	}
	reason = truncate(reason, MaxBreakerReason-len("…"))
	h := Hold{QueueID: n.q.ID, GroupID: n.groupID, Queue: n.q.Name, Group: n.group, Kind: HoldBreaker,
		Reason: reason, Actor: BrokerActor, Since: k.now, ProbeAt: k.now.Add(probeEvery(n.q))}
	created, err := k.tx.InsertHold(ctx, &h)
	if err != nil {
		return fmt.Errorf("ack: breaker: %w", err)
	}
	if !created {
		return nil // another write opened it
	}
	waiting, err := holdWaiting(ctx, k.tx, h, k.now)
	if err != nil {
		return err
	}
	if err := audit(ctx, k.tx, k.now, BrokerActor, AuditHold, n.q.Name, n.group, int(waiting), "held: "+reason); err != nil {
		return err
	}
	if err := k.b.raise(ctx, k.tx, Event{Kind: EventHoldStarted, HoldKind: HoldBreaker, Queue: n.q.Name, Group: n.group, Detail: reason, At: k.now, HoldID: h.ID}); err != nil {
		return err
	}
	k.touched(n.q.Name)
	return k.b.invalidateCache(k.tx)
}

// closeBreaker ends the breaker's hold after its probe completed: the
// pops waiting for the queue are served at once; audited and told.
func (k *acker) closeBreaker(ctx context.Context, n *breakerNote) error {
	if k.o.Concurrent {
		return errPlainWrite
	}
	h := *n.hold
	if err := k.tx.DeleteHold(ctx, h.ID); isNotFound(err) {
		return nil // released meanwhile
	} else if err != nil {
		return fmt.Errorf("ack: breaker: %w", err)
	}
	h.Queue, h.Group = n.q.Name, n.group
	waiting, err := holdWaiting(ctx, k.tx, h, k.now)
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("circuit breaker released: probe %s completed; %d messages waiting", truncate(n.probeTxID, 64), waiting)
	if err := audit(ctx, k.tx, k.now, BrokerActor, AuditHoldRelease, n.q.Name, n.group, int(waiting), detail); err != nil {
		return err
	}
	if err := k.b.raise(ctx, k.tx, Event{Kind: EventHoldReleased, HoldKind: HoldBreaker, Queue: n.q.Name, Group: n.group, Detail: detail, At: k.now, HoldID: h.ID}); err != nil {
		return err
	}
	k.touched(n.q.Name) // the pops waiting for it look again
	return k.b.invalidateCache(k.tx)
}

// probeFailed leaves the hold, its probe over.
func (k *acker) probeFailed(ctx context.Context, n *breakerNote) error {
	if k.o.Concurrent {
		return errPlainWrite
	}
	h := *n.hold
	h.ProbePartitionID, h.ProbeSeq = 0, 0
	if err := k.tx.SaveHoldProbe(ctx, h); err != nil {
		return fmt.Errorf("ack: breaker: %w", err)
	}
	return nil
}
