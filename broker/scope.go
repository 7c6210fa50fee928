package broker

import (
	"fmt"
	"time"
)

// TxScope is the memory of one write transaction, beside its writes: the
// effects on memory that the functions run in it wait to apply until it
// has committed, and what those functions tell one another while it is
// open (a store may run several in one transaction). A store gives a
// new one to each write transaction (Tx.Scope) and ends it; the broker
// fills it. It is used by one goroutine at a time, as the Tx is.
//
// This is what lets the function given to Update run more than once: it
// changes nothing outside its transaction, and what it would change is
// applied by End, in commit order, once it is known to have committed.
type TxScope struct {
	ends    []scopeEnd
	state   *txState // the broker's, made at first use
	foreign bool     // SetForeign
	handled bool     // the broker emptied its cache for it (ForeignHandled)
}

// SetForeign is the store's news, before the transaction's first
// function runs, that another process may have changed or removed what
// this process keeps in memory of the store (queues, partitions, groups,
// subscriptions) since this process's previous write transaction: the
// broker then empties its lookup cache before it looks anything up. A
// store of one process never calls it; one shared by several does when
// another of them may have changed those.
func (s *TxScope) SetForeign() { s.foreign = true }

// Foreign reports whether SetForeign was called in this transaction.
func (s *TxScope) Foreign() bool { return s.foreign }

// ForeignHandled reports whether the broker acted on SetForeign in this
// transaction (it emptied its cache): a write of the broker's that does
// not look anything up in the cache leaves it unhandled, and the store
// must say it again in the next transaction.
func (s *TxScope) ForeignHandled() bool { return s.handled }

type scopeEnd struct {
	f       func(committed bool)
	dropped bool // its function was rolled back alone
}

// Savepoint returns a mark for RollbackTo: a store that runs several
// functions in one transaction calls it before each that it may roll
// back alone.
func (s *TxScope) Savepoint() int { return len(s.ends) }

// RollbackTo says that the function run since mark was rolled back alone
// while the transaction goes on: what it registered is
// ended as not committed, whatever the transaction does.
func (s *TxScope) RollbackTo(mark int) {
	for i := mark; i < len(s.ends); i++ {
		s.ends[i].dropped = true
	}
}

// End is called by the store once, when the transaction has ended:
// committed says whether it committed. It runs what the functions
// registered in the order they registered it, in the store's goroutine;
// a store with one writer calls it before the next write transaction
// begins and before any Update of the transaction returns, so that the
// next transaction, and each caller, sees memory as of the commit. A
// panic in one is returned as an error (the rest still run).
func (s *TxScope) End(committed bool) (err error) {
	ends := s.ends
	s.ends, s.state, s.foreign, s.handled = nil, nil, false, false
	for _, e := range ends {
		if perr := runEnd(e.f, committed && !e.dropped); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

func runEnd(f func(bool), committed bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic after a transaction: %v", p)
		}
	}()
	f(committed)
	return nil
}

// OnEnd registers f to run when the transaction ends (End): committed
// is false when it rolled back, or when the function that registered f
// was rolled back alone. f runs before the store begins the next write
// and before any Update of the transaction returns: it must do quick work on memory only, and never call the
// store (an Update from f waits for itself for ever).
func (s *TxScope) OnEnd(f func(committed bool)) { s.ends = append(s.ends, scopeEnd{f: f}) }

// txState is what the broker's functions in one write transaction tell
// one another: the later ones must see what the earlier ones did to
// memory before it is applied.
type txState struct {
	// cacheOff: a function changed or removed something the lookup cache
	// may hold; the later ones look everything up in the store.
	cacheOff bool
	// The pending counts (pendingStats) as this transaction sees them:
	// the committed ones (unless a function of it wrote them: took), less
	// the queues it deleted, plus those its functions deferred.
	took     bool
	dropped  map[int64]bool
	deferred []pendingEntry
	since    time.Time // when the first of deferred was made
}

// scopeTx is a transaction's scope alone (Tx.Scope): what a function
// needs to run something once the transaction has committed.
type scopeTx interface {
	Scope() *TxScope
}

// scopeOf returns tx's scope and the broker's state in it.
func scopeOf(tx scopeTx) (*TxScope, *txState, error) {
	s := tx.Scope()
	if s == nil {
		return nil, nil, fmt.Errorf("a write transaction without a scope: the store breaks broker.Tx's contract")
	}
	if s.state == nil {
		s.state = &txState{}
	}
	return s, s.state, nil
}

// afterCommit registers f to run once tx has committed (never if it does
// not).
func afterCommit(tx scopeTx, f func()) error {
	s, _, err := scopeOf(tx)
	if err != nil {
		return err
	}
	s.OnEnd(func(committed bool) {
		if committed {
			f()
		}
	})
	return nil
}

// invalidateCache empties the lookup cache once tx has committed; the
// later functions of tx look everything up in the store meanwhile.
func (b *Broker) invalidateCache(tx scopeTx) error {
	_, st, err := scopeOf(tx)
	if err != nil {
		return err
	}
	st.cacheOff = true
	return afterCommit(tx, b.cache.invalidate)
}

// visible returns the pending counts as the transaction sees them.
func (st *txState) visible(p *pendingStats) []pendingEntry {
	var out []pendingEntry
	if !st.took {
		for _, e := range p.snapshot() {
			if !st.dropped[e.key.queueID] {
				out = append(out, e)
			}
		}
	}
	return append(out, st.deferred...)
}

// mayDefer reports whether counts of now can join the pending ones, as
// the transaction sees them (see pendingStats.mayDefer).
func (st *txState) mayDefer(p *pendingStats, now time.Time) bool {
	es := st.visible(p)
	if len(es) == 0 {
		return true
	}
	minute := now.Unix() / 60
	for _, e := range es {
		if e.key.minute != minute {
			return false
		}
	}
	// The oldest of them: the committed ones' (of a queue deleted since,
	// too: deferring less is safe) or this transaction's first.
	since, have := time.Time{}, false
	if !st.took {
		since, have = p.oldest()
	}
	if len(st.deferred) > 0 && (!have || st.since.Before(since)) {
		since = st.since
	}
	return now.Sub(since) < StatsDelay
}

// deferCounts records counts deferred by a function of the transaction.
func (st *txState) deferCounts(es []pendingEntry, now time.Time) {
	if len(es) == 0 {
		return
	}
	if len(st.deferred) == 0 {
		st.since = now
	}
	st.deferred = append(st.deferred, es...)
}

// tookAll records that a function wrote every pending count it saw.
func (st *txState) tookAll() { st.took, st.deferred = true, nil }

// drop records that the transaction deleted a queue: its pending counts
// are not written by a later function of it.
func (st *txState) drop(queueID int64) {
	if st.dropped == nil {
		st.dropped = map[int64]bool{}
	}
	st.dropped[queueID] = true
	keep := st.deferred[:0]
	for _, e := range st.deferred {
		if e.key.queueID != queueID {
			keep = append(keep, e)
		}
	}
	st.deferred = keep
}
