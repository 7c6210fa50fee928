package broker

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// PartitionLag is a consumer group's oldest unread message in one
// partition.
type PartitionLag struct {
	Group, Queue, Partition string
	PartitionUUID           string
	OldestUnread            time.Time // its push time
	Lag                     time.Duration
}

// LaggingPartitions lists, for every queue and every group reading it,
// the partitions whose oldest message the group has not settled was
// pushed more than min ago, most behind first (Queen's lagging
// partitions). It reads each consumer by its key and the first message
// past its cursor by messages_partition_seq: two probes a (partition,
// group), no scan of messages.
func (b *Broker) LaggingPartitions(ctx context.Context, min time.Duration) ([]PartitionLag, error) {
	var out []PartitionLag
	err := b.store.View(ctx, func(tx Tx) error {
		out = nil
		now := b.now()
		queues, err := tx.Queues(ctx)
		if err != nil {
			return err
		}
		for _, q := range queues {
			names, err := tx.GroupNames(ctx, q.ID)
			if err != nil || len(names) == 0 {
				if err != nil {
					return fmt.Errorf("groups: %w", err)
				}
				continue
			}
			parts, err := tx.PartitionList(ctx, q.ID)
			if err != nil {
				return err
			}
			for _, name := range names {
				gid, err := tx.GroupID(ctx, name, false)
				if err != nil {
					return fmt.Errorf("group: %w", err)
				}
				for _, p := range parts {
					c, err := tx.Consumer(ctx, p.ID, gid)
					if isNotFound(err) {
						continue
					}
					if err != nil {
						return fmt.Errorf("consumer: %w", err)
					}
					next, err := tx.MessagesAfter(ctx, p.ID, c.Cursor, 1)
					if err != nil {
						return err
					}
					if len(next) == 0 {
						continue
					}
					if lag := now.Sub(next[0].CreatedAt); lag > min {
						out = append(out, PartitionLag{Group: name, Queue: q.Name, Partition: p.Name, PartitionUUID: p.UUID, OldestUnread: next[0].CreatedAt, Lag: lag})
					}
				}
			}
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b PartitionLag) int { return int(b.Lag - a.Lag) })
	return out, err
}
