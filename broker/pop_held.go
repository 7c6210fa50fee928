package broker

// runHeld is a pop of a held (queue, group): it hands nothing out, and
// its wake stays zero, so a wait ends only by news of the queue (a
// release touches it, as does a push, after which the pop finds the hold
// again) or its timeout. Nothing of the group is touched: no lease
// running out is handed back and no retry delay is cut short, so no retry
// is spent while held. Two things pass a hold, one message at a time: the
// circuit breaker's probe (SPEC section 6, breaker_gate.go) and a canary
// copy first in line (SPEC section 4, canary_gate.go).
func (r *popRun) runHeld(q Queue, hs HoldSet) error {
	if handed, err := r.probe(q, hs); handed || err != nil {
		return err
	}
	_, err := r.canaryHead(q, hs)
	return err
}
