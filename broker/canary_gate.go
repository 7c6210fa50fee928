package broker

import (
	"fmt"
	"slices"
)

// canaryHead hands a held group's canary copy when it is first in line
// in its partition (SPEC section 4; the plan's decision 1): the copy of a
// replay job whose canary is settling, that replaced a dead letter of
// this group, and that is the next message the group would be handed
// there (no lease live, no retry delay, no windowBuffer pending, only
// copies for other groups before it). It goes alone (batch 1) under the
// pop's usual lease (or autoAck); nothing behind it passes. A canary
// copy behind held messages waits (and counts as unsettled at its
// canary's deadline). It reports whether it handed one.
//
// Its cost: one statement (the settling canaries, by jobs_state; no row
// while none settles); then, per partition where a copy of this group is
// pending, the group's head there, read once and looked up among those
// copies, whichever job they are of.
func (r *popRun) canaryHead(q Queue, _ HoldSet) (bool, error) {
	ctx, tx := r.ctx, r.tx
	canaries, err := tx.SettlingCanaries(ctx)
	if err != nil {
		return false, fmt.Errorf("pop: canary jobs: %w", err)
	}
	pending := map[string]map[int64]bool{} // partition name: copy seqs
	for _, c := range canaries {
		for _, cp := range c.Copies {
			if cp.Queue != q.Name || cp.Group != r.req.Group || cp.Outcome != CanaryPending {
				continue
			}
			if r.req.Partition != "" && cp.Partition != r.req.Partition {
				continue
			}
			if pending[cp.Partition] == nil {
				pending[cp.Partition] = map[int64]bool{}
			}
			pending[cp.Partition][cp.Seq] = true
		}
	}
	names := make([]string, 0, len(pending))
	for name := range pending {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		part, err := tx.PartitionByName(ctx, q.ID, name)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("pop: partition: %w", err)
		}
		if handed, err := r.canaryAt(q, part, pending[name]); handed || err != nil {
			return handed, err
		}
	}
	return false, nil
}

// canaryAt hands the group's head in part when it is one of the copies
// seqs. A copy the group settled already (its outcome not yet read by
// its job) is behind the cursor: the head may be the next copy.
func (r *popRun) canaryAt(q Queue, part Partition, seqs map[int64]bool) (bool, error) {
	ctx, tx, now := r.ctx, r.tx, r.now
	c, err := tx.Consumer(ctx, part.ID, r.gid)
	if err != nil {
		return false, fmt.Errorf("pop: consumer: %w", err)
	}
	last := int64(0)
	for seq := range seqs {
		last = max(last, seq)
	}
	if c.leaseLive(now) || c.AvailableAt.After(now) || c.Cursor >= last {
		return false, nil
	}
	if end, err := windowEnd(ctx, tx, q, part.ID); err != nil {
		return false, fmt.Errorf("pop: %w", err)
	} else if end.After(now) {
		return false, nil
	}
	ps := passer{tx: tx, gid: r.gid, budget: passBudget}
	msgs, _, _, _, err := ps.take(ctx, &c, 1, q.Options.Delay(), now)
	if err != nil {
		return false, fmt.Errorf("pop: %w", err)
	}
	if len(msgs) != 1 || !seqs[msgs[0].Seq] {
		return false, nil // something of the group's is before it: it waits
	}
	return true, r.hand(q, part, &c, msgs)
}
