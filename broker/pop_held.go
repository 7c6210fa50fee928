package broker

// runHeld is a pop of a held (queue, group): it hands nothing out, and
// its wake stays zero, so a wait ends only by news of the queue (a
// release touches it, as does a push, after which the pop finds the hold
// again) or its timeout. Nothing of the group is touched: no lease
// running out is handed back and no retry delay is cut short, so no retry
// is spent while held. (The circuit breaker's probe and a canary copy at
// the head, SPEC sections 6 and 4, are to let one message through here.)
func (r *popRun) runHeld(_ Queue, _ HoldSet) error {
	return nil
}
