package db

// WaitWriting waits until a goroutine is writing (in a transaction, or
// waiting for the database's lock): for the tests of package db_test.
func WaitWriting(d *DB) {
	d.sq.wmu.Lock()
	defer d.sq.wmu.Unlock()
	for !d.sq.busy {
		d.sq.changed.Wait()
	}
}
