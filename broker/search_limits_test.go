package broker

// SetSearchLimits makes the search's limits (MatchCap, FieldScan) small
// for a test, until restore is called; such a test must not run in
// parallel with another search test.
func SetSearchLimits(cap, scan int) (restore func()) {
	oldCap, oldScan := matchCap, fieldScan
	matchCap, fieldScan = cap, scan
	return func() { matchCap, fieldScan = oldCap, oldScan }
}
