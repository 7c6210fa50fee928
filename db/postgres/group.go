package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Group commit on PostgreSQL. A process runs one write transaction at a
// time (wmu); each durable one waits for its own flush of the server's
// log, and the writes that arrive meanwhile wait for it. So, as on
// SQLite (db/sqlite/writer.go), the Updates that queued while a
// transaction ran join the next one that may hold them: once its first
// Update's fn has run, the others' run one after the other in the same
// transaction, and one COMMIT (one flush) ends them all.
//
//   - Each joining Update runs under a SAVEPOINT of its own, sent in the
//     pipeline of its first statement (no round trip of its own): one
//     that fails is rolled back to it (ROLLBACK TO SAVEPOINT, a round
//     trip then) and the others commit. The first needs none: the
//     others join only once it has succeeded.
//   - A write kept for the next round trip (ExecLater: a pop's and an
//     ack's consumer update) goes with the next member's first
//     statement, or with the COMMIT. Should it fail there, the failure
//     is its own member's: rolled back to that member's savepoint, the
//     members after it, none of whose statements ran, run again
//     (settle). A member that left the transaction failed (an error it
//     went on from) is found likewise, by the SAVEPOINT that follows
//     it. The first member's such failure fails the transaction: the
//     others go back to the queue and run in the next.
//   - A group joins only a transaction that holds the writer's lock
//     exclusively: a process alone on its database (members.go), or a
//     write not marked Concurrent. Beside other processes' writes
//     (rowLocks), the row locks of its members, taken in no common
//     order, could deadlock with theirs, and a deadlock costs a second
//     (deadlock_timeout) before it is broken. There, the processes'
//     transactions share the server's flushes by themselves.
//   - Background writes (bulk work) neither lead a group nor join one;
//     nor does a write run again with its BEGIN first (eager): both run
//     in transactions of their own.
//   - The scope (broker.TxScope) is the transaction's, shared by its
//     members as on SQLite, ended before any of them returns; the cache
//     generation is read once, with the first member's first statement,
//     and none can move it while the lock is held; the folds and the
//     ready mark are the transaction's.
//   - While members share the transaction, none's ctx cancels a
//     statement (pgx closes the connection of a statement it gives up
//     on, which would end the others' writes): a member whose ctx ended
//     before its turn is not run, and answered so.
//   - Under FULL, a group begun by an ephemeral write (a lease) that
//     holds a durable one sets synchronous_commit back on before COMMIT.
//
// maxGroup bounds its members: each one that writes has a
// subtransaction id, and PostgreSQL keeps 64 of them a backend in
// shared memory before others' snapshots must look them up on disk.
const maxGroup = 64

// writeReq is one Update waiting for a transaction.
type writeReq struct {
	ctx   context.Context
	o     broker.UpdateOptions
	fn    func(broker.Tx) error
	eager bool
	// done carries its outcome, or errLead: it leads the next
	// transaction.
	done chan error
}

// errLead tells a queued Update to run the next transaction itself.
var errLead = errors.New("lead the next write transaction")

// errGroupRerun fails the statements of a member of a group once an
// earlier member's failure was found in their round trip: the member
// runs again (settle).
var errGroupRerun = errors.New("an earlier write of its group failed in the same round trip")

// blame is the failure of member, found by a later round trip.
type blame struct {
	member int
	err    error
}

func (b *blame) rerun() error { return fmt.Errorf("%w: %w", errGroupRerun, b.err) }

// leaderFailed fails a transaction for its first member's write alone,
// found once others had joined: those go back to the queue.
type leaderFailed struct{ err error }

func (e *leaderFailed) Error() string { return e.err.Error() }
func (e *leaderFailed) Unwrap() error { return e.err }

// write runs fn once in a write transaction: leading it when no other
// is under way, else queued until the one under way either takes it
// into its group (and answers it) or hands it the lead.
func (d *Store) write(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error, eager bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &writeReq{ctx: ctx, o: o, fn: fn, eager: eager}
	d.qmu.Lock()
	switch {
	case d.closed:
		d.qmu.Unlock()
		return sqlcore.ErrClosed
	case d.busy:
		r.done = make(chan error, 1)
		d.waiting = append(d.waiting, r)
		d.qmu.Unlock()
		// Once queued, its outcome is waited for even when ctx ends:
		// only then is it known whether fn committed.
		if err := <-r.done; err != errLead {
			return err
		}
	default:
		d.busy = true
		d.qmu.Unlock()
	}
	defer d.handOn()
	return d.lead(r)
}

// handOn ends a transaction's turn: the first Update queued leads the
// next (or, after Close, each is refused).
func (d *Store) handOn() {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	if d.closed {
		for _, r := range d.waiting {
			r.done <- sqlcore.ErrClosed
		}
		d.waiting, d.busy = nil, false
		return
	}
	if len(d.waiting) == 0 {
		d.busy = false
		return
	}
	next := d.waiting[0]
	d.waiting = append(d.waiting[:0], d.waiting[1:]...)
	next.done <- errLead
}

// othersWaiting reports whether Updates that may join a group (take)
// are queued.
func (d *Store) othersWaiting() bool {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	return slices.ContainsFunc(d.waiting, joins)
}

// joins reports whether r may join a group.
func joins(r *writeReq) bool { return !r.o.Background && !r.eager }

// isClosed reports whether Close was called.
func (d *Store) isClosed() bool {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	return d.closed
}

// take takes up to n of the queued Updates that may join a group, in
// their order, leaving the others queued.
func (d *Store) take(n int) []*writeReq {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	var taken []*writeReq
	kept := d.waiting[:0]
	for _, r := range d.waiting {
		if len(taken) < n && joins(r) {
			taken = append(taken, r)
			continue
		}
		kept = append(kept, r)
	}
	clear(d.waiting[len(kept):])
	d.waiting = kept
	return taken
}

// requeue puts rs back at the head of the queue, in their order.
func (d *Store) requeue(rs []*writeReq) {
	if len(rs) == 0 {
		return
	}
	d.qmu.Lock()
	defer d.qmu.Unlock()
	d.waiting = append(rs, d.waiting...)
}

// group is the Updates that joined a transaction after its first.
type group struct {
	ran   []*member // run, in order (their savepoints nested so)
	queue []*member // to run
	n     int       // the members numbered (writer.member) so far
}

// member is an Update of a group.
type member struct {
	r     *writeReq
	index int   // writer.member while it runs; its savepoint is g<index>
	mark  int   // its scope's savepoint (broker.TxScope.Savepoint)
	err   error // its own failure
}

// all is the group's Updates, run or not.
func (g *group) all() []*writeReq {
	var rs []*writeReq
	for _, m := range append(g.ran, g.queue...) {
		rs = append(rs, m.r)
	}
	return rs
}

// durable reports whether a member that ran waits for the disk.
func (g *group) durable() bool {
	for _, m := range g.ran {
		if !m.r.o.Ephemeral {
			return true
		}
	}
	return false
}

// answer answers each member run: its own failure, or, when it succeeded,
// err unless the transaction committed.
func (g *group) answer(committed bool, err error) {
	for _, m := range g.ran {
		switch {
		case m.err != nil:
			m.r.done <- m.err
		case committed:
			m.r.done <- nil
		case err != nil:
			m.r.done <- err
		default:
			m.r.done <- errors.New("write transaction ended without a commit")
		}
	}
}

// queued is the group's Updates not run yet.
func (g *group) queued() []*writeReq {
	var rs []*writeReq
	for _, m := range g.queue {
		rs = append(rs, m.r)
	}
	return rs
}

// runGroup runs the queued Updates that may join st's transaction, each
// under a savepoint of its own, until none is queued or the group is
// full. Its error fails the whole transaction.
func (d *Store) runGroup(ctx context.Context, st *sqlcore.Tx, w *writer, g *group) error {
	for {
		if len(g.queue) == 0 {
			room := maxGroup - 1 - len(g.ran)
			if room <= 0 {
				return nil
			}
			rs := d.take(room)
			if len(rs) == 0 {
				return nil
			}
			for _, r := range rs {
				g.queue = append(g.queue, &member{r: r})
			}
		}
		m := g.queue[0]
		g.queue = g.queue[1:]
		g.ran = append(g.ran, m)
		if err := m.r.ctx.Err(); err != nil {
			m.err = err
			continue
		}
		g.n++
		m.index, m.mark, m.err = g.n, st.Scope().Savepoint(), nil
		w.member = m.index
		w.later = append(w.later, later{text: "SAVEPOINT g" + strconv.Itoa(m.index), owner: m.index, savepoint: true})
		err := sqlcore.Run(m.r.fn, st)
		if w.blame != nil {
			if err := d.settle(ctx, st, w, g); err != nil {
				return err
			}
			continue
		}
		// What of it is still to be sent is its last: its savepoint
		// (when it sent nothing yet) and its writes kept.
		first := len(w.later)
		for first > 0 && w.later[first-1].owner == m.index {
			first--
		}
		sent := first == len(w.later) || !w.later[first].savepoint
		switch {
		case err != nil:
			w.later = w.later[:first]
			if sent {
				if err := w.rollbackTo(ctx, m.index); err != nil {
					return err
				}
			}
			st.Scope().RollbackTo(m.mark)
			m.err = err
		case !sent && first == len(w.later)-1:
			w.later = w.later[:first] // it sent nothing: no savepoint
		}
	}
}

// settle acts on the failure of an earlier member that a round trip
// found (w.blame): that member is rolled back to its savepoint and
// fails; those after it, none of whose statements ran, run again. Of
// the first member, it fails the transaction (leaderFailed).
func (d *Store) settle(ctx context.Context, st *sqlcore.Tx, w *writer, g *group) error {
	b := w.blame
	w.blame, w.later, w.member = nil, nil, -1
	if b.member <= 0 {
		return &leaderFailed{err: b.err}
	}
	i := 0
	for i < len(g.ran) && g.ran[i].index != b.member {
		i++
	}
	if i == len(g.ran) {
		return fmt.Errorf("group commit: no member %d to roll back: %w", b.member, b.err)
	}
	if err := w.rollbackTo(ctx, b.member); err != nil {
		return err
	}
	c := g.ran[i]
	st.Scope().RollbackTo(c.mark)
	c.err = b.err
	again := append([]*member(nil), g.ran[i+1:]...)
	g.ran = g.ran[:i+1]
	g.queue = append(again, g.queue...)
	return nil
}

// rollbackTo rolls the transaction back to member k's savepoint, in a
// round trip of its own; its failure fails the transaction.
func (w *writer) rollbackTo(ctx context.Context, k int) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	w.begin.wire.add(1)
	w.last = -1
	if _, err := w.begin.pgc.Exec(rctx, "ROLLBACK TO SAVEPOINT g"+strconv.Itoa(k)); err != nil {
		return fmt.Errorf("group commit: roll back to a savepoint: %w", err)
	}
	return nil
}
