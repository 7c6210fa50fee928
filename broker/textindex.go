package broker

import "context"

// Tidying the full-text indexes of dead letters (issue 37, D7).
//
// A store's full-text index may keep its entries in segments that it
// merges now and then (SQLite's FTS4: each commit that files or removes
// dead letters adds a segment to each index, and the commit that fills a
// level of segments merges the whole level at once, which, once the
// level holds most of the index, rewrites most of it inside that commit:
// up to 157 ms of CPU at 50k dead letters, about twenty times that at
// 1M, while every push waits). Merged instead a few pages at a time, each
// step a low-priority write of its own, no level fills and no commit
// merges much: the pushes wait for one step at most. The indexes' content
// is the same however their segments are merged: searches find the same.
const (
	// TextMergePages is how many pages of merged segments a step writes
	// at most (a page of FTS4's is a few KiB; a word's list of documents
	// is written whole, so a step writes one word's list at least).
	TextMergePages = 8
	// textMergeSteps bounds the steps run in one go (after a job's chunk,
	// or by the maintenance task): the next go takes the rest.
	textMergeSteps = 10_000
)

// TextIndexTx is what tidying the full-text indexes needs from storage.
type TextIndexTx interface {
	// MergeTextIndex runs one bounded step of merging the segments of the
	// full-text indexes of dead letters, where a store keeps segments
	// (SQLite's FTS4): it writes about pages pages of merged segments
	// at most, and reports whether more merging is due (a level of an
	// index holding enough segments to be merged, or a merge begun and
	// not finished). It changes no index's content: a search finds the
	// same before and after. A store that keeps no segments
	// (PostgreSQL's GIN indexes) does nothing and reports none due. It
	// reads and writes the indexes' own tables only; in View it fails,
	// but with pages 0, which merges nothing and only reads whether any
	// merging is due.
	MergeTextIndex(ctx context.Context, pages int) (bool, error)
}

// tidyTextIndex merges the full-text indexes' segments a step at a time
// (TextMergePages), each step a low-priority write of its own, so that
// the writes waiting go between them, until the store reports no more
// merging due (or textMergeSteps were run). It returns the steps run. A
// look from a read snapshot first: most calls find nothing due, and then
// write nothing.
func (b *Broker) tidyTextIndex(ctx context.Context) (int, error) {
	var due bool
	if err := b.store.View(ctx, func(tx Tx) (err error) {
		due, err = tx.MergeTextIndex(ctx, 0)
		return err
	}); err != nil || !due {
		return 0, err
	}
	for steps := 1; ; steps++ {
		var more bool
		err := b.store.Update(ctx, background, func(tx Tx) (err error) {
			more, err = tx.MergeTextIndex(ctx, TextMergePages)
			return err
		})
		if err != nil || !more || steps >= textMergeSteps {
			return steps, err
		}
		if err := ctx.Err(); err != nil {
			return steps, err
		}
	}
}

// maintainTextIndex is the text index task of Maintain: the merging
// that the dead letters filed and removed since its last run (by acks,
// sweeps, one at a time) have made due; it reports the steps as Chunks.
func (b *Broker) maintainTextIndex(ctx context.Context, r *TaskReport) error {
	n, err := b.tidyTextIndex(ctx)
	r.Chunks += n
	return err
}
