package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// bulkGrace is how long background writes hold back for other writes
// after any write: enough for a caller that was just answered to send its
// next one.
const bulkGrace = time.Millisecond

// bulkMaxWait bounds how long a background write waits for a quiet
// moment: then it goes ahead of the writes that queue up, so that a bulk
// action under steady traffic still moves (a chunk every bulkMaxWait at
// least), and ordinary writes wait at most one chunk.
const bulkMaxWait = 10 * time.Millisecond

// maxGroup caps how many Updates share one transaction.
const maxGroup = 256

// lateFor is how long after its BEGIN a transaction still takes the
// writes that queued while it ran (late joiners, commitGroup): under a
// steady stream of them, its first caller waits about this long more,
// plus the last batch taken (at most maxGroup functions in all).
const lateFor = 2 * time.Millisecond

type writeRequest struct {
	ctx  context.Context
	o    broker.UpdateOptions
	fn   func(broker.Tx) error
	done chan error
}

// Update runs fn in a write transaction: all of fn commits or none of it.
//
// There is one writer at a time. When nothing else is being written, the
// caller writes itself, with no hand-over to another goroutine. Updates
// that arrive meanwhile queue up and are committed together, one after
// the other in one transaction (group commit): those that queued while a
// transaction ran join it before its COMMIT (late joiners, commitGroup),
// the others go in the writer goroutine's next one. One fsync for many
// callers, so that synchronous=FULL costs little under load. When an fn
// of the group fails, the group is rolled back and run again, each fn in
// a savepoint of its own (see commit): the one that fails is rolled back
// to its savepoint and does not affect the others. Update returns once
// its group has committed.
//
// How it keeps broker.Store.Update's promises: the write transaction
// begins with BEGIN IMMEDIATE, which takes SQLite's lock for writing
// (the whole database, every process) and holds it to the commit, so
// every write runs alone; a View locks nothing (a WAL snapshot). An fn of
// a group that returned nil still fails when what the whole group needs
// fails (the ready mark, the fold's or an fn's savepoint, COMMIT): then
// nothing of the group committed, and each Update returns that error.
// The ready mark is set once per group commit (markReady), the kept
// counts folded at most once a foldEvery (foldCounts). Apart from the
// group run again after a failure, no fn runs twice. Another process's
// lock held past the busy timeout, and a full disk, come back as
// broker.ErrUnavailable and broker.ErrNoSpace (unavailable), also when
// fn wrapped SQLite's error with %w; a write queued at Close gets
// ErrClosed.
//
// Background writes (broker.UpdateOptions.Background: bulk replay and
// delete, maintenance) run alone, on the low-priority lane: only when no
// other write waits and none ended within bulkGrace. Ephemeral ones
// relax the commit's sync (syncFor). Every write is alone on SQLite:
// Concurrent changes nothing.
func (d *Store) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := writeRequest{ctx: ctx, o: o, fn: fn, done: make(chan error, 1)}
	low := o.Background
	d.wmu.Lock()
	switch {
	case d.isClosed:
		d.wmu.Unlock()
		return sqlcore.ErrClosed
	case !low && !d.busy && len(d.waiting) == 0 && !d.bulkOverdue() && !d.catchUpDue.Load():
		d.busy = true
		d.changed.Broadcast()
		d.wmu.Unlock()
		d.commit([]writeRequest{req})
		d.release(false)
	case low:
		if len(d.bulk) == 0 {
			d.bulkSince = time.Now()
		}
		d.bulk = append(d.bulk, req)
		d.changed.Broadcast()
		d.wmu.Unlock()
		d.wake()
	default:
		d.waiting = append(d.waiting, req)
		d.changed.Broadcast()
		d.wmu.Unlock()
		d.wake()
	}
	// Once queued, wait for the outcome even if ctx ends: only then is it
	// known whether fn committed (commit skips a request whose ctx ended
	// before its turn).
	err := unavailable(<-req.done)
	if errors.Is(err, broker.ErrNoSpace) && !d.full.Swap(true) {
		d.log.Warn("writes fail: no space left for the database; they go on once space is freed", "err", err)
	}
	return err
}

// bulkOverdue reports whether a background write has waited bulkMaxWait.
// d.wmu is held.
func (d *Store) bulkOverdue() bool {
	return len(d.bulk) > 0 && time.Since(d.bulkSince) >= bulkMaxWait
}

// wake tells the writer goroutine that there is work.
func (d *Store) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// release ends a turn at writing and hands queued work to the writer
// goroutine. Only ordinary writes hold background ones back (bulkGrace):
// a bulk action's chunks follow one another at once when nothing else
// writes.
func (d *Store) release(low bool) {
	d.wmu.Lock()
	d.busy = false
	if !low {
		d.lastWrite = time.Now()
	}
	more := len(d.waiting) > 0 || len(d.bulk) > 0 || d.catchUpDue.Load()
	d.changed.Broadcast()
	d.wmu.Unlock()
	if more {
		d.wake()
	}
}

// writer is the goroutine that commits what queued up while another write
// was under way, in groups, and the low-priority writes.
func (d *Store) writer() {
	defer close(d.stopped)
	var grace *time.Timer
	var graceC <-chan time.Time
	var foldC <-chan time.Time
	if d.folds.Every > 0 {
		t := time.NewTicker(d.folds.Every)
		defer t.Stop()
		foldC = t.C
	}
	for {
		select {
		case <-d.kick:
		case <-graceC:
			graceC = nil
		case <-foldC:
			d.foldIdle()
		case <-d.stop:
			d.drain()
			return
		}
		for {
			d.wmu.Lock()
			if d.busy {
				// A caller is writing; it wakes us when it is done.
				d.wmu.Unlock()
				break
			}
			if d.catchUpDue.Swap(false) {
				d.busy = true
				d.changed.Broadcast()
				d.wmu.Unlock()
				d.catchUp()
				d.release(true)
				continue
			}
			if n := len(d.waiting); n > 0 && !d.bulkOverdue() {
				group := d.takeWaiting(min(n, maxGroup))
				d.busy = true
				d.changed.Broadcast()
				d.wmu.Unlock()
				d.commit(group)
				d.release(false)
				continue
			}
			if len(d.bulk) > 0 {
				wait := bulkGrace - time.Since(d.lastWrite)
				if d.bulkOverdue() {
					wait = 0
				}
				if wait > 0 {
					wait = min(wait, bulkMaxWait-time.Since(d.bulkSince))
					d.wmu.Unlock()
					if grace == nil {
						grace = time.NewTimer(wait)
					} else {
						grace.Reset(wait)
					}
					graceC = grace.C
					break
				}
				r := d.bulk[0]
				d.bulk = append(d.bulk[:0], d.bulk[1:]...)
				d.bulkSince = time.Now()
				d.busy = true
				d.changed.Broadcast()
				d.wmu.Unlock()
				d.commit([]writeRequest{r})
				d.release(true)
				continue
			}
			d.wmu.Unlock()
			break
		}
	}
}

// drain, at Close, waits for the write under way and refuses what is
// queued.
func (d *Store) drain() {
	d.wmu.Lock()
	for d.busy {
		d.changed.Wait()
	}
	queued := append(d.waiting, d.bulk...)
	d.waiting, d.bulk = nil, nil
	d.wmu.Unlock()
	for _, r := range queued {
		r.done <- sqlcore.ErrClosed
	}
}

// commit runs a group of requests in one transaction and answers each.
//
// The functions of a group run one after the other with no savepoint
// around each (SAVEPOINT and RELEASE cost 2-9 % of a push's CPU with 8
// callers: BenchmarkPushConcurrent8/normal, bench L3). When one
// fails, the transaction is rolled back, its scope ended as not
// committed, and the whole group run again in a new transaction, each
// function in a savepoint of its own (commitSavepoints): the functions
// before it run a second time, which they may (broker.Store.Update), and
// the group still commits once.
func (d *Store) commit(group []writeRequest) { d.commitGroup(group, false) }

// commitSavepoints is commit with each function of the group in a
// savepoint of its own: one that fails is rolled back to it, and the
// others commit.
func (d *Store) commitSavepoints(group []writeRequest) { d.commitGroup(group, true) }

// commitGroup is commit, or commitSavepoints with savepoints set: it
// begins the transaction, runs the group's functions (runGroup), then
// commits what succeeded (finishGroup), and answers each request once
// the transaction has ended. A group run without savepoints whose
// function failed having changed rows is rolled back and run again by
// commitSavepoints, which answers it.
func (d *Store) commitGroup(group []writeRequest, savepoints bool) {
	began := time.Now()
	d.cur = &d.main
	if group[0].o.Background {
		d.cur = &d.bg // alone in its group (takeLate)
	}
	if err := d.beginGroup(group); err != nil {
		for _, r := range group {
			r.done <- err
		}
		if isBusy(err) {
			// The writes that queued up while BEGIN waited out the busy
			// timeout have waited as long as this group: answer them now
			// rather than make each wait out a timeout of its own.
			d.refuseWaiting(err)
		}
		return
	}
	st := sqlcore.NewTx(writer{raw: d.cur.raw, conn: d.cur.conn}, dialect{s: d.search}, sqlcore.NoLocks{}, &broker.TxScope{}).WithMemo(d.cur.raw.memo)
	// The memory effects of the group's functions are applied (or
	// dropped) once the transaction has ended, before any Update of it
	// returns and before the next transaction begins: in commit order.
	errs := make([]error, len(group))
	committed := false
	answer := func() {
		if err := st.Scope().End(committed); err != nil {
			d.log.Error("after a transaction", "err", err)
		}
		for i, r := range group {
			r.done <- errs[i]
		}
	}
	ok, rerun, broken := d.runGroup(st, group, errs, savepoints, len(group) == 1)
	// The writes that queued while the group ran join it before its
	// COMMIT (late joiners), each run as the group's others are: callers
	// answered by the last commit come back while this one runs, and
	// would otherwise make the next transaction, and its commit, of
	// their own. Not into a background write's transaction (it runs
	// alone: a failure beside it would run its chunk again), not after a
	// function of a group of one failed (it ran with no savepoint: its
	// transaction is to be rolled back), and not past lateFor.
	joinable := !group[0].o.Background
	for joinable && !rerun && broken == nil && len(group) < maxGroup && (len(group) > 1 || errs[0] == nil) && time.Since(began) < d.lateFor {
		late := d.takeLate(maxGroup - len(group))
		if len(late) == 0 {
			break
		}
		from := len(group)
		group, errs = append(group, late...), append(errs, make([]error, len(late))...)
		var k int
		k, rerun, broken = d.runGroup(st, group[from:], errs[from:], savepoints, false)
		ok += k
	}
	switch {
	case rerun:
		d.rollback()
		if err := st.Scope().End(false); err != nil {
			d.log.Error("after a transaction", "err", err)
		}
		d.commitSavepoints(group)
		return
	case broken != nil:
		// The transaction can no longer be trusted: nothing of the
		// group commits.
		d.rollback()
		for j := range errs {
			errs[j] = broken
		}
	case ok == 0:
		d.rollback()
	default:
		committed = d.finishGroup(st, errs)
	}
	answer()
}

// beginGroup readies the writer's connection for a group (syncFor) and
// begins its transaction, taking SQLite's write lock at once (BEGIN
// IMMEDIATE) so that no statement of the group waits for it halfway.
func (d *Store) beginGroup(group []writeRequest) error {
	err := d.syncFor(group)
	if err == nil {
		err = d.exec("BEGIN IMMEDIATE")
	}
	if err != nil {
		d.cur.raw.memo.Clear()
		return fmt.Errorf("begin: %w", err)
	}
	d.cur.raw.memoBegun()
	return nil
}

// takeLate takes, for a group under way, up to n of the writes queued
// since it began, in their order: none when a background write is
// overdue or the search file's catch-up is due (they go next), and,
// while the group commits relaxed (syncFor: ephemeral writes only),
// only the ephemeral ones at the head of the queue.
func (d *Store) takeLate(n int) []writeRequest {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if d.bulkOverdue() || d.catchUpDue.Load() {
		return nil
	}
	k := 0
	for k < len(d.waiting) && k < n && (!d.cur.relaxed || d.waiting[k].o.Ephemeral) {
		k++
	}
	if k == 0 {
		return nil
	}
	return d.takeWaiting(k)
}

// takeWaiting takes the first n of the writes waiting. d.wmu is held.
func (d *Store) takeWaiting(n int) []writeRequest {
	taken := append([]writeRequest(nil), d.waiting[:n]...)
	d.waiting = append(d.waiting[:0], d.waiting[n:]...)
	return taken
}

// runGroup runs the functions of group one after the other in st's
// transaction, each one's error in errs (a request whose ctx ended
// before its turn is not run), and counts those that succeeded (ok). A
// function alone in its transaction needs no savepoint: its failure
// fails the transaction. It stops at the first function that leaves the
// transaction unusable for the others: without savepoints, one that
// failed having changed rows (rerun: the group is to run again, each in
// a savepoint); with them, a savepoint that could not be handled
// (broken).
func (d *Store) runGroup(st *sqlcore.Tx, group []writeRequest, errs []error, savepoints, alone bool) (ok int, rerun bool, broken error) {
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		switch {
		case alone:
			errs[i] = sqlcore.Run(r.fn, st)
		case savepoints:
			if errs[i], broken = d.runInSavepoint(st, r.fn); broken != nil {
				return ok, false, broken
			}
		default:
			if rerun, errs[i] = d.runBare(st, r.fn); rerun {
				return ok, true, nil
			}
		}
		if errs[i] == nil {
			ok++
		}
	}
	return ok, false, nil
}

// runBare runs fn of a group with no savepoint around it (they cost a
// few per cent of a push: see commit). A failure that changed no row (a
// refused ack, a lookup that found nothing) has nothing to roll back but
// its effects on memory, which are, and the group goes on; one that
// changed rows cannot be undone alone: rerun says so.
func (d *Store) runBare(st *sqlcore.Tx, fn func(broker.Tx) error) (rerun bool, err error) {
	mark, before := st.Scope().Savepoint(), d.cur.raw.totalChanges()
	if err = sqlcore.Run(fn, st); err == nil {
		return false, nil
	}
	if d.cur.raw.totalChanges() == before {
		st.Scope().RollbackTo(mark)
		return false, err
	}
	return true, err
}

// runInSavepoint runs fn of a group in a savepoint of its own: a failure
// is rolled back to it, in the database and in memory, and the others
// commit. broken is set when the savepoint itself could not be handled.
func (d *Store) runInSavepoint(st *sqlcore.Tx, fn func(broker.Tx) error) (err, broken error) {
	mark := st.Scope().Savepoint()
	err, broken = sqlcore.Savepoint(d.exec, func() error { return sqlcore.Run(fn, st) })
	if broken == nil && err != nil {
		st.Scope().RollbackTo(mark)
	}
	return err, broken
}

// finishGroup commits a group of which some function succeeded, after
// the writes every transaction ends with (markReady, foldCounts), and
// reports whether it committed. When any of those or the COMMIT fails,
// nothing of the group commits: the error goes to each function that
// had succeeded (errs).
func (d *Store) finishGroup(st *sqlcore.Tx, errs []error) (committed bool) {
	failAll := func(err error) bool {
		d.rollback()
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return false
	}
	if err := st.MarkReady(context.Background()); err != nil {
		return failAll(fmt.Errorf("mark consumers ready: %w", err))
	}
	folded, left, broken := d.folds.Counts(context.Background(), st, d.exec, nil)
	if broken != nil {
		return failAll(broken)
	}
	if err := d.search.beforeCommit(context.Background(), st); err != nil {
		return failAll(err)
	}
	if err := d.exec("COMMIT"); err != nil {
		// SQLite may leave the transaction open when COMMIT fails.
		d.cur.raw.memo.Clear()
		return failAll(fmt.Errorf("commit: %w", err))
	}
	d.cur.raw.memoCommitted()
	d.search.afterCommit()
	if folded {
		d.folds.Committed(left)
	}
	if d.ckpt != nil {
		select {
		case d.ckpt <- struct{}{}:
		default:
		}
		d.kickByFrames(d.cur.wal.frames())
	}
	return true
}

// syncFor sets how hard the group's commit waits for the disk. Under
// synchronous=FULL, a group of ephemeral writes only (a pop's lease)
// commits as under NORMAL: in WAL mode that is consistent after a power
// cut, it may only lose the group, and the next commit that waits for
// the disk makes it durable as well (the log is written in order). A
// group with any other write gets FULL back before it begins.
func (d *Store) syncFor(group []writeRequest) error {
	if d.sync != SyncFull {
		return nil
	}
	relax := true
	for _, r := range group {
		relax = relax && r.o.Ephemeral
	}
	if relax == d.cur.relaxed {
		return nil
	}
	if relax {
		// Should NORMAL not take, the group commits under FULL: slower,
		// never less safe.
		if err := d.exec("PRAGMA synchronous=NORMAL"); err != nil {
			d.log.Warn("synchronous=NORMAL for a lease", "err", err)
			return nil
		}
		d.cur.relaxed = true
		return nil
	}
	if err := d.exec("PRAGMA synchronous=FULL"); err != nil {
		return fmt.Errorf("synchronous: %w", err)
	}
	d.cur.relaxed = false
	return nil
}

// refuseWaiting answers err to every write waiting to be taken, without
// running it.
func (d *Store) refuseWaiting(err error) {
	d.wmu.Lock()
	queued := d.waiting
	d.waiting = nil
	d.wmu.Unlock()
	for _, r := range queued {
		r.done <- err
	}
}

// exec runs a statement of the writer's own (BEGIN, COMMIT, savepoints)
// on the connection of the write under way, kept prepared: parsing them
// took a tenth of a one-message transaction.
func (d *Store) exec(stmt string) error {
	_, err := d.cur.raw.exec(stmt, nil)
	return err
}

// rollback ends the writer's transaction, if SQLite has not already,
// and empties the memo, which may hold what the transaction saved.
func (d *Store) rollback() {
	d.cur.raw.memo.Clear()
	if d.cur.conn.Raw(func(c any) error {
		if sc, ok := c.(*sqlite3.SQLiteConn); ok && sc.AutoCommit() {
			return errNoTx
		}
		return nil
	}) == nil {
		_ = d.exec("ROLLBACK")
	}
}

var errNoTx = errors.New("no transaction")

// View runs fn in a read transaction on one snapshot (broker.Store.View).
// On SQLite it is a WAL reader: it runs beside the writer and other
// Views and neither waits for the other. Its connections are query_only,
// so a write method fails ("attempt to write a readonly database"). One
// watcher a View interrupts the statement running when ctx ends
// (sqlite3_interrupt: watchCancel). After Close it returns the pool's
// error ("begin: sql: database is closed"), not ErrClosed.
func (d *Store) View(ctx context.Context, fn func(broker.Tx) error) error {
	// A connection of the read pool, its transaction begun and ended by
	// hand: on a database/sql transaction, every query would start a
	// goroutine to watch the transaction's context; one watcher for the
	// whole read (watchCancel) interrupts it instead.
	conn, err := d.read.Conn(ctx)
	if err != nil {
		return unavailable(fmt.Errorf("begin: %w", err))
	}
	defer conn.Close()
	bg := context.Background()
	if _, err := conn.ExecContext(bg, "BEGIN"); err != nil {
		return unavailable(fmt.Errorf("begin: %w", err))
	}
	defer func() {
		if _, err := conn.ExecContext(bg, "ROLLBACK"); err != nil {
			// A connection left inside its transaction would serve an old
			// snapshot to the next reader: the pool drops it instead.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	// Deferred after the ROLLBACK's defer, so it runs first, also when fn
	// panics: no interrupt may outlive the read and reach the
	// connection's next user.
	defer watchCancel(ctx, conn)()
	err = fn(sqlcore.NewTx(reader{conn: conn}, dialect{s: d.search}, sqlcore.NoLocks{}, nil))
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		return fmt.Errorf("read: %w", ctxErr) // interrupted, or stopped at a statement
	}
	if d.search != nil && d.search.damage(ctx, err, false) {
		// A search read a damaged page of the search file (a full-text
		// table's: for other damage the indexer checks the file, not a
		// read, which would hold its connection for the whole check).
		if f := d.search.failure.Load(); f != nil {
			return fmt.Errorf("%w: %s", broker.ErrUnavailable, *f)
		}
	} else if d.search != nil {
		d.search.suspectDamage(err)
	}
	return unavailable(err)
}

// watchCancel interrupts the statement running on conn when ctx ends
// before stop is called: one goroutine a read transaction (none when ctx
// cannot end), rather than one a query as database/sql would start. stop
// returns once no interrupt can come any more, so none reaches the
// connection's next user.
func watchCancel(ctx context.Context, conn *sql.Conn) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	var h unsafe.Pointer
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(*sqlite3.SQLiteConn); ok {
			h = interruptHandle(c)
		}
		return nil
	})
	if h == nil {
		return func() {}
	}
	var mu sync.Mutex
	done, over := make(chan struct{}), false
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			mu.Lock()
			if !over {
				interrupt(h)
			}
			mu.Unlock()
		case <-done:
		}
	}()
	return func() {
		mu.Lock()
		over = true
		mu.Unlock()
		close(done)
		<-exited
	}
}
