package broker

// probe hands the circuit breaker's probe through a breaker hold when it
// is due; it reports whether it handed one. (Not built yet.)
func (r *popRun) probe(_ Queue, _ HoldSet) (bool, error) {
	return false, nil
}
