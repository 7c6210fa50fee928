package postgres

import "sync/atomic"

// wire counts the round trips of a store's write transactions and the
// statements they carry (BEGIN, the writer's lock and COMMIT included):
// what a write costs in waits on the network and the server, whatever
// its rows. Tests read it (Wire) to show that a write's round trips do
// not grow with the rows it writes.
type wire struct {
	trips, statements atomic.Int64
	commits           atomic.Int64 // the write transactions committed
}

// add counts one round trip carrying n statements.
func (w *wire) add(n int) {
	if w == nil {
		return
	}
	w.trips.Add(1)
	w.statements.Add(int64(n))
}

// Wire returns how many round trips this store's writes have made so
// far, and how many statements they carried.
func (d *Store) Wire() (trips, statements int64) {
	return d.wire.trips.Load(), d.wire.statements.Load()
}

// Commits returns how many write transactions this store has committed
// so far (a group commit's members count once).
func (d *Store) Commits() int64 { return d.wire.commits.Load() }
