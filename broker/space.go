package broker

import (
	"context"
	"fmt"
)

// Giving free pages back (the space task of Maintain). Rows deleted by
// the sweeps leave their pages on the database's freelist, where new rows
// reuse them: under steady load the file stops growing whatever is done
// here. What this task adds is the way back after the load falls or a big
// sweep: free pages past a margin are given back to the file system, a
// few at a time.
const (
	// SpaceStep is how many free pages one transaction of the space task
	// gives back at most (1 MiB at 4 KiB pages, about half a millisecond
	// of moving pages on the low-priority lane).
	SpaceStep = 256
	// SpaceKeepPages is the least number of free pages the space task
	// leaves on the freelist: the next minutes' rows reuse them, rather
	// than growing the file again as soon as it shrank.
	SpaceKeepPages = 1024
	// SpaceKeepFraction is the fraction of the file's pages the space
	// task leaves free when that is more than SpaceKeepPages.
	SpaceKeepFraction = 0.1
)

// Space is the size of the database and of what it holds free.
type Space struct {
	PageSize  int64 // bytes a page
	Pages     int64 // pages of the database, free ones included
	FreePages int64 // pages on the freelist: reused by new rows, or given back
	// Reclaims is set when free pages can be given back to the file
	// system (SQLite's auto_vacuum=INCREMENTAL); when it is not, free
	// pages are only reused.
	Reclaims bool
}

// Bytes is the database's size: its pages, free ones included.
func (s Space) Bytes() int64 { return s.Pages * s.PageSize }

// FreeBytes is the size of its free pages.
func (s Space) FreeBytes() int64 { return s.FreePages * s.PageSize }

// keep is how many free pages the space task leaves: SpaceKeepPages, or
// SpaceKeepFraction of the file when that is more.
func (s Space) keep() int64 {
	return max(SpaceKeepPages, int64(float64(s.Pages)*SpaceKeepFraction))
}

// SpaceTx is what giving free pages back needs from storage.
type SpaceTx interface {
	// Space reads the database's page size and its page and free page
	// counts (the database header: no rows read, no lock beyond the
	// transaction's snapshot). It never returns ErrNotFound.
	Space(ctx context.Context) (Space, error)
	// GiveBackPages gives up to pages free pages back to the file system
	// (moving pages from the end of the file into free ones and cutting
	// the file), writing only the pages it moves and their parents, and
	// returns how many it gave back: 0 when the freelist is empty or the
	// database cannot give pages back (Space.Reclaims false). The file
	// is cut at the commit.
	GiveBackPages(ctx context.Context, pages int) (int64, error)
}

// Space returns the database's size and free pages, read from a snapshot.
func (b *Broker) Space(ctx context.Context) (Space, error) {
	var s Space
	err := b.store.View(ctx, func(tx Tx) (err error) {
		s, err = tx.Space(ctx)
		return err
	})
	if err != nil {
		return Space{}, fmt.Errorf("space: %w", err)
	}
	return s, nil
}

// maintainSpace gives free pages back to the file system while more than
// the margin (Space.keep) are free, SpaceStep pages a transaction; it
// reports the pages given back as Removed. A database that cannot give
// pages back (made before auto_vacuum, and not converted) is left as it
// is: its free pages are reused.
func (b *Broker) maintainSpace(ctx context.Context, r *TaskReport) error {
	// A look first: most runs have nothing to give back, and then write
	// nothing.
	s, err := b.Space(ctx)
	if err != nil {
		return err
	}
	if !s.Reclaims || s.FreePages <= s.keep() {
		return nil
	}
	for {
		var n int64
		var more bool
		err := b.store.Update(ctx, background, func(tx Tx) error {
			n, more = 0, false
			s, err := tx.Space(ctx)
			if err != nil {
				return err
			}
			over := s.FreePages - s.keep()
			if !s.Reclaims || over <= 0 {
				return nil
			}
			step := min(over, SpaceStep)
			if n, err = tx.GiveBackPages(ctx, int(step)); err != nil {
				return err
			}
			more = n == step && over > step
			return nil
		})
		if err != nil {
			return err
		}
		r.Chunks++
		r.Removed += n
		if !more {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
