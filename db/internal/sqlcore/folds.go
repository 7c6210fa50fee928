package sqlcore

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// FoldEvery is how often, at most, a commit brings the counts kept for
// the queue page and API up to date (migration 0010), by default.
const FoldEvery = time.Second

// Folds are a store's notes of the partitions pushed to, and the
// consumers written, since their counts were last brought up to date
// (Counts), and when that was. They belong to whoever is writing: the
// store's writer holds them.
type Folds struct {
	// Unfolded and UnfoldedConsumers are the notes; FoldedAt when the
	// last fold was. Read and set by tests.
	Unfolded          map[int64]struct{}
	UnfoldedConsumers map[[2]int64]struct{}
	FoldedAt          time.Time
	// Every is how often, at most, a commit folds (0: at every commit).
	Every time.Duration
	log   *slog.Logger
}

// NewFolds are the notes of a store folding every every (0: FoldEvery;
// negative: at every commit), logging what goes wrong to log.
func NewFolds(every time.Duration, log *slog.Logger) *Folds {
	f := &Folds{Unfolded: map[int64]struct{}{}, UnfoldedConsumers: map[[2]int64]struct{}{}, Every: max(every, 0), log: log}
	if every == 0 {
		f.Every = FoldEvery
	}
	return f
}

// Pending reports whether anything is noted and not folded yet.
func (f *Folds) Pending() bool { return len(f.Unfolded)+len(f.UnfoldedConsumers) > 0 }

// Due reports whether Counts folds at the commit of st: when something
// is noted, by st or since the last fold, and the last fold was Every
// ago or more.
func (f *Folds) Due(st *Tx) bool {
	noted := f.Pending() || len(st.pushedTo)+len(st.saved) > 0
	return noted && time.Since(f.FoldedAt) >= f.Every
}

// Counts notes the partitions the transaction pushed to and the
// consumers it wrote and, when the counts were last brought up to date
// Every ago or more, brings those of every partition and consumer noted
// since up to date, just before the commit (migration 0010). The counts
// are made from the rows, so a write rolled back counts nothing, and a
// partition or consumer left unfolded (a crash forgets which) is only
// read a little slower: a read counts what lies past its kept seq. The
// fold has a savepoint of its own: should it fail, the transaction
// commits without it and the next commit a second later tries again.
// broken is the error that must fail the whole transaction: it is no
// longer to be trusted. exec runs the savepoint's statements on the
// transaction's connection. Both stores fold so, each process the rows
// it noted.
//
// On PostgreSQL, where writes marked broker.UpdateOptions.Concurrent run
// beside each other, only the rows the fold can lock without waiting are
// folded (a push holds its partition's row to its commit, a pop or an
// ack its consumer's: Dialect.FoldLock); the others stay noted for the
// next fold (left).
//
// before, when not nil, runs just before a fold begins (not at all when
// none is due): the PostgreSQL store sends there the writes it kept and
// its ready mark, so that the fold reads what they changed and takes its
// row locks last (it never waits for one; the mark may).
func (f *Folds) Counts(ctx context.Context, st *Tx, exec func(string) error, before func() error) (folded bool, left FoldLeft, broken error) {
	due := f.Due(st)
	for id := range st.pushedTo {
		f.Unfolded[id] = struct{}{}
	}
	for k := range st.saved {
		f.UnfoldedConsumers[k] = struct{}{}
	}
	if !due {
		return false, left, nil
	}
	if before != nil {
		if err := before(); err != nil {
			return false, FoldLeft{}, err
		}
	}
	err, broken := Savepoint(exec, func() (err error) {
		left, err = FoldRows(ctx, st, f.Unfolded, f.UnfoldedConsumers)
		return err
	})
	if broken != nil {
		return false, FoldLeft{}, fmt.Errorf("count messages: %w", broken)
	}
	if err != nil {
		f.log.Warn("bring the counts of the queue page up to date", "err", err)
		f.FoldedAt = time.Now()
		return false, FoldLeft{}, nil
	}
	return true, left, nil
}

// Committed forgets the notes a committed fold brought up to date: all
// but those it left.
func (f *Folds) Committed(left FoldLeft) {
	clear(f.Unfolded)
	clear(f.UnfoldedConsumers)
	for _, id := range left.Partitions {
		f.Unfolded[id] = struct{}{}
	}
	for _, k := range left.Consumers {
		f.UnfoldedConsumers[k] = struct{}{}
	}
	f.FoldedAt = time.Now()
}

// Savepoint runs fn inside a savepoint, rolling back to it when fn
// fails; exec runs the savepoint's statements on the transaction's
// connection. broken is set when the savepoint itself could not be
// handled.
func Savepoint(exec func(string) error, fn func() error) (err, broken error) {
	if err := exec("SAVEPOINT w"); err != nil {
		return fmt.Errorf("savepoint: %w", err), nil
	}
	if err := fn(); err != nil {
		if rerr := exec("ROLLBACK TO w"); rerr != nil {
			return err, fmt.Errorf("rollback to savepoint: %w", rerr)
		}
		if rerr := exec("RELEASE w"); rerr != nil {
			return err, fmt.Errorf("release savepoint: %w", rerr)
		}
		return err, nil
	}
	if err := exec("RELEASE w"); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return nil, nil
}
