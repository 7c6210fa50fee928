package sqlite

// WaitWriting waits until a goroutine is writing (in a transaction, or
// waiting for the database's lock): for the tests of package db_test.
func WaitWriting(d *Store) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for !d.busy {
		d.changed.Wait()
	}
}
