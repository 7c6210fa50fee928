package broker

import (
	"fmt"
	"time"
)

// probe hands the circuit breaker's probe through a breaker hold when it
// is due, and reports whether it handed one: one message (batch 1, one
// partition, a lease of its own; never to an autoAck pop), the group's
// next ready one, as any pop would take it (retry delays, leases and
// order kept). The next probe is due holdProbeSeconds after this one was
// handed out, whatever becomes of it; while the one handed out is still
// leased no other is. Any other hold of the group or its queue lets no
// probe through. Not due, the pop's wake is the probe's time, so that a
// long-poll is served then.
func (r *popRun) probe(q Queue, hs HoldSet) (bool, error) {
	h := hs.BreakerOnly()
	if h == nil || r.req.AutoAck {
		return false, nil
	}
	ctx, tx, now := r.ctx, r.tx, r.now
	if now.Before(h.ProbeAt) {
		r.wake = h.ProbeAt
		return false, nil
	}
	if h.ProbeSeq != 0 {
		// Its consumer row gone (the partition swept): no probe in flight.
		c, err := tx.Consumer(ctx, h.ProbePartitionID, r.gid)
		if err != nil && !isNotFound(err) {
			return false, fmt.Errorf("pop: probe: %w", err)
		}
		if err == nil && probeLeased(c, h.ProbeSeq, now) {
			r.wake = c.LeaseUntil
			return false, nil
		}
	}
	r.req.Batch, r.req.shared, r.req.lease = 1, false, ""
	ps := passer{tx: tx, gid: r.gid, budget: passBudget}
	var c Consumer
	var part Partition
	var msgs []Message
	var err error
	if r.req.Partition != "" {
		part, c, msgs, err = r.takeNamed(q, &ps)
	} else {
		c, msgs, err = r.takeReady(q, &ps)
	}
	if err != nil || len(msgs) == 0 {
		return false, err // nothing ready: the pop stays as light as it came
	}
	if r.o.Concurrent || r.o.Ephemeral {
		// The hold's row is written: an ordinary write, never lost (it
		// runs again as one, and takes the probe again).
		return false, errPlainWrite
	}
	if part.ID == 0 {
		if part, err = tx.PartitionByID(ctx, c.PartitionID); err != nil {
			return false, fmt.Errorf("pop: partition: %w", err)
		}
	}
	if err := r.hand(q, part, &c, msgs); err != nil {
		return false, err
	}
	h.ProbeAt = now.Add(probeEvery(q))
	h.ProbePartitionID, h.ProbeSeq = c.PartitionID, msgs[0].Seq
	h.Probes++
	if err := tx.SaveHoldProbe(ctx, *h); err != nil {
		return false, fmt.Errorf("pop: probe: %w", err)
	}
	return true, nil
}

// probeLeased reports whether the probe seq is still under c's live
// lease (handed out and not settled).
func probeLeased(c Consumer, seq int64, now time.Time) bool {
	return c.leaseLive(now) && seq > c.Cursor && seq <= c.LeaseLast
}

// probeEvery is the queue's holdProbeSeconds as a duration (at least a
// second).
func probeEvery(q Queue) time.Duration {
	return time.Duration(max(q.Options.HoldProbeSeconds, 1)) * time.Second
}

// breakerCompleted puts the group's count back to 0 after an autoAck
// pop settled its messages as completed (a queue with the breaker on).
func (r *popRun) breakerCompleted(q Queue) error {
	if q.Options.HoldAfterFailures <= 0 {
		return nil
	}
	if err := r.tx.ResetBreaker(r.ctx, q.ID, r.gid); err != nil {
		return fmt.Errorf("pop: breaker: %w", err)
	}
	return nil
}
