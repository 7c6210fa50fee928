package broker

import "fmt"

// canaryHead hands a held group's canary copy when it is first in line
// in its partition (SPEC section 4; the plan's decision 1): the copy of a
// replay job whose canary is settling, that replaced a dead letter of
// this group, and that is the next message the group would be handed
// there (no lease live, no retry delay, no windowBuffer pending, only
// copies for other groups before it). It goes alone (batch 1) under the
// pop's usual lease (or autoAck); nothing behind it passes. A canary
// copy behind held messages waits (and counts as unsettled at its
// canary's deadline). It reports whether it handed one. It reads the
// running jobs (one statement) only while the group is held.
func (r *popRun) canaryHead(q Queue, _ HoldSet) (bool, error) {
	ctx, tx := r.ctx, r.tx
	jobs, err := tx.Jobs(ctx, JobFilter{State: JobRunning, Kind: JobReplay}, Page{Limit: MaxPageSize})
	if err != nil {
		return false, fmt.Errorf("pop: canary jobs: %w", err)
	}
	tried := map[int64]bool{} // partitions looked at
	for _, j := range jobs {
		c := j.Canary
		if c == nil || c.State != CanarySettling {
			continue
		}
		for _, cp := range c.Copies {
			if cp.Queue != q.Name || cp.Group != r.req.Group || cp.Outcome != CanaryPending {
				continue
			}
			if r.req.Partition != "" && cp.Partition != r.req.Partition {
				continue
			}
			part, err := tx.PartitionByName(ctx, q.ID, cp.Partition)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("pop: partition: %w", err)
			}
			if tried[part.ID] {
				continue
			}
			handed, past, err := r.canaryAt(q, part, cp.Seq)
			if handed || err != nil {
				return handed, err
			}
			// A copy the group settled already, whose outcome the job has
			// not read yet, says nothing of the partition: the next copy
			// there may be first in line now.
			tried[part.ID] = !past
		}
	}
	return false, nil
}

// canaryAt hands the copy seq when it is the group's head in part; past:
// the group's cursor is past it already (settled, its outcome not yet
// read by the job).
func (r *popRun) canaryAt(q Queue, part Partition, seq int64) (handed, past bool, err error) {
	ctx, tx, now := r.ctx, r.tx, r.now
	c, err := tx.Consumer(ctx, part.ID, r.gid)
	if err != nil {
		return false, false, fmt.Errorf("pop: consumer: %w", err)
	}
	if c.Cursor >= seq && !c.leaseLive(now) {
		return false, true, nil
	}
	if c.leaseLive(now) || c.AvailableAt.After(now) || c.Cursor >= seq {
		return false, false, nil
	}
	if end, err := windowEnd(ctx, tx, q, part.ID); err != nil {
		return false, false, fmt.Errorf("pop: %w", err)
	} else if end.After(now) {
		return false, false, nil
	}
	ps := passer{tx: tx, gid: r.gid, budget: passBudget}
	msgs, _, _, _, err := ps.take(ctx, &c, 1, q.Options.Delay(), now)
	if err != nil {
		return false, false, fmt.Errorf("pop: %w", err)
	}
	if len(msgs) != 1 || msgs[0].Seq != seq {
		return false, false, nil // something of the group's is before it: it waits
	}
	return true, false, r.hand(q, part, &c, msgs)
}
