package broker

import (
	"context"
	"time"
)

// PartitionMinAge is how long a partition is kept at least after it was
// made, empty or not (it goes once it is older): a producer that has just been given its UUID may
// still ack or pop by it.
const PartitionMinAge = time.Hour

// PartitionSweepChunk is how many partitions a transaction of the sweep
// deletes at most: fewer than maintainChunk rows, as each takes its
// consumers (one a group) and index entries with it. Measured with two
// groups (2 consumers a partition, 20,000 empty of 120,000): 500 a chunk
// held the writer 3.5-3.8 ms (median; p90 5.4-7.7 ms), 200 a chunk
// 1.7-1.9 ms (p90 2.4-3.7 ms), within D6's target of idle p99 + 3 ms.
const PartitionSweepChunk = 200

// PartitionSweepScan is how many candidates (partitions with a kept
// count of 0) a snapshot of the sweep reads at most: a partition emptied
// by retention that keeps a dead letter (kept for ever by default), a
// replay or a removed record stays a candidate for good, and is passed
// over by reads, a page a snapshot, never by a write.
const PartitionSweepScan = 1000

// PartitionSweepTx is what the sweep of empty partitions needs from
// storage.
type PartitionSweepTx interface {
	// EmptyPartitions reads a page of up to limit partitions (of any
	// queue), above after in id order, whose kept count of messages is
	// 0, and returns those of them that are empty at now by the rule
	// DeleteEmptyPartitions checks (made before before, no message, dead
	// letter, record, replay, live lease or retry), and the highest id
	// of the page (0: it was the last). Reads partitions by an index of
	// those with a count of 0 only, and one index probe a check; locks
	// nothing.
	EmptyPartitions(ctx context.Context, before, now time.Time, after int64, limit int) (ids []int64, last int64, err error)
	// DeleteEmptyPartitions deletes those of ids that are empty now,
	// checked in this transaction: made before before, with no
	// message, no dead letter, no record of a deleted or expired dead
	// letter (removed_dead_letters), no replay naming the partition
	// (replays.partition_id: the history pages join it for its name), no
	// consumer holding a live lease at now or a retry; with each one its
	// consumers and settle marks. It returns the partitions it deleted
	// (an id that is not there, or no longer empty, is left alone: no
	// error). Writes partitions, consumers, settle_marks.
	DeleteEmptyPartitions(ctx context.Context, ids []int64, before, now time.Time) ([]Partition, error)
}

// maintainPartitions deletes the partitions left empty (retention takes
// their messages; a producer with a partition per key leaves one a key).
// A partition goes when it has no message, no dead letter, no record of
// a deleted or expired dead letter and no replay naming it, none of its
// consumers holds a live lease or a retry, and it was made more than
// PartitionMinAge ago; its consumers and settle marks go with it. A push
// to its name afterwards makes a new partition (a new UUID), which every
// group reads from its start; the old UUID is unknown from then on (an
// ack naming it is refused as any unknown partition is). Any queue's
// partitions are swept, whatever its retention: only retention empties a
// partition (its first message comes with it, DeleteQueue takes the
// rest), and one emptied before the retention was turned off is as empty.
//
// Candidates are read from snapshots (View), PartitionSweepScan of the
// partitions with a kept count of 0 a snapshot, which apply the rule
// already: a partition kept (by a dead letter, say) costs a read each
// run, no write. Those found empty are then checked again and deleted,
// PartitionSweepChunk a transaction on the low-priority lane: a push that
// arrived meanwhile keeps its partition.
// A chunk that deletes any empties the lookup cache once it has
// committed, before a later write transaction begins (as DeleteQueue
// does; see TxScope). Removed counts the partitions.
func (b *Broker) maintainPartitions(ctx context.Context, r *TaskReport) error {
	var after int64
	for {
		var ids []int64
		var last int64
		if err := b.store.View(ctx, func(tx Tx) (err error) {
			now := b.now()
			ids, last, err = tx.EmptyPartitions(ctx, now.Add(-PartitionMinAge), now, after, PartitionSweepScan)
			return err
		}); err != nil {
			return err
		}
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), PartitionSweepChunk)]
			ids = ids[len(chunk):]
			var n int
			if err := b.store.Update(ctx, background, func(tx Tx) error {
				now := b.now()
				gone, err := tx.DeleteEmptyPartitions(ctx, chunk, now.Add(-PartitionMinAge), now)
				if err != nil {
					return err
				}
				if n = len(gone); n > 0 {
					return b.invalidateCache(tx)
				}
				return nil
			}); err != nil {
				return err
			}
			r.Chunks++
			r.Removed += int64(n)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if last == 0 {
			return nil
		}
		after = last
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
