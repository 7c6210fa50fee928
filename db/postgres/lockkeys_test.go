package postgres

import "testing"

// Each advisory lock of Lazarus has a key of its own: the filing lock
// once took the lead's key, and every filing of every process then
// waited for the leader's session to end (the fault campaign found it:
// maintenance and dead-letter filings stalled while a process led).
func TestAdvisoryLockKeysDiffer(t *testing.T) {
	keys := map[string]int64{"writerLock": writerLock, "migrateLock": migrateLock, "leadLock": leadLock,
		"memberLock": memberLock, "fileLock": fileLock, "listenLock": listenLock}
	seen := map[int64]string{}
	for name, k := range keys {
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s are both advisory lock %#x", name, other, k)
		}
		seen[k] = name
	}
}
