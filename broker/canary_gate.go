package broker

// canaryHead hands a held group's canary copy when it is first in line in
// its partition; it reports whether it handed one. (Not built yet.)
func (r *popRun) canaryHead(_ Queue, _ HoldSet) (bool, error) {
	return false, nil
}
