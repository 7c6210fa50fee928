package main

import (
	"context"
	"database/sql"
	"sync"
)

// groupCommit is raw+gc's writer: concurrent callers share a transaction.
// A caller queues its work; if no one is committing, it leads: it takes
// every caller's work queued so far, runs it in one transaction (one
// BEGIN, one COMMIT, one fsync at FULL) and gives each caller its result.
// Work queued while a leader commits waits for the next round, which the
// first of those callers leads. No timer: a group is whoever arrived
// during the previous commit, as in a database's group commit.
type groupCommit struct {
	// commit runs the work of one group and returns each one's error.
	commit func(ctx context.Context, work []func(*sql.Tx) error) []error
	// queued, when set, is told how many are waiting after each arrival
	// (for tests).
	queued func(n int)

	mu      sync.Mutex
	pending []*gcOp
	leading bool
}

type gcOp struct {
	fn   func(*sql.Tx) error
	done chan gcResult
}

type gcResult struct {
	err  error
	lead bool // no result: the caller leads the next round, its work among it
}

// newGroupCommit commits groups on d: all of a group in one transaction;
// should one fail, the transaction is rolled back and each runs alone, so
// that one caller's error is not another's.
func newGroupCommit(d *sql.DB) *groupCommit {
	return &groupCommit{commit: func(ctx context.Context, work []func(*sql.Tx) error) []error {
		errs := make([]error, len(work))
		err := inTx(ctx, d, func(tx *sql.Tx) error {
			for _, fn := range work {
				if err := fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil || len(work) == 1 {
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
		for i, fn := range work {
			errs[i] = inTx(ctx, d, fn)
		}
		return errs
	}}
}

// do runs fn in a transaction shared with the callers of the same group
// and returns fn's error (or the commit's).
func (g *groupCommit) do(ctx context.Context, fn func(*sql.Tx) error) error {
	op := &gcOp{fn: fn, done: make(chan gcResult, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, op)
	if g.queued != nil {
		g.queued(len(g.pending))
	}
	if g.leading {
		g.mu.Unlock()
		if r := <-op.done; !r.lead {
			return r.err
		}
		g.mu.Lock() // leading was handed to us, still set
	} else {
		g.leading = true
	}
	group := g.pending
	g.pending = nil
	g.mu.Unlock()

	work := make([]func(*sql.Tx) error, len(group))
	for i, o := range group {
		work[i] = o.fn
	}
	errs := g.commit(ctx, work)
	var mine error
	for i, o := range group {
		if o == op {
			mine = errs[i]
			continue
		}
		o.done <- gcResult{err: errs[i]}
	}

	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].done <- gcResult{lead: true} // it takes the whole queue, itself included
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return mine
}
