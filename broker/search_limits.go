package broker

// SetSearchLimits makes the search's limits (MatchCap, FieldScan) small
// for a test, until restore is called; such a test must not run in
// parallel with another search test. It is for tests only (the store
// suite, broker/storetest, is a package of its own): the limits are the
// package's, shared by every Broker of the process.
func SetSearchLimits(cap, scan int) (restore func()) {
	oldCap, oldScan := matchCap, fieldScan
	matchCap, fieldScan = cap, scan
	return func() { matchCap, fieldScan = oldCap, oldScan }
}
