package broker

import (
	"context"
	"fmt"
	"time"
)

// Destination is where a replay puts its copies instead of each
// message's own partition (SPEC 4, "Replay elsewhere"): a queue, a
// partition, or both. What it leaves out is the message's own: its
// queue, or the name of its partition (in the destination queue, so
// that a partition that stands for an ordering key keeps it). A queue or
// partition that is missing is made, the queue with the default options,
// in the replay's transaction.
type Destination struct {
	Queue     string `json:"queue,omitempty"`
	Partition string `json:"partition,omitempty"`
}

// Empty reports whether d names nothing: the message's own partition.
func (d Destination) Empty() bool { return d.Queue == "" && d.Partition == "" }

func (d Destination) validate() error {
	if d.Queue != "" {
		if err := checkName("destination queue", d.Queue); err != nil {
			return err
		}
	}
	if d.Partition != "" {
		if err := checkName("destination partition", d.Partition); err != nil {
			return err
		}
	}
	return nil
}

// String is the destination in words, for the audit and job descriptions.
func (d Destination) String() string {
	switch {
	case d.Queue != "" && d.Partition != "":
		return fmt.Sprintf("queue %q, partition %q", truncate(d.Queue, 64), truncate(d.Partition, 64))
	case d.Queue != "":
		return fmt.Sprintf("queue %q (each message's partition name)", truncate(d.Queue, 64))
	case d.Partition != "":
		return fmt.Sprintf("partition %q of each message's queue", truncate(d.Partition, 64))
	}
	return "each message's own partition"
}

// target is the partition a destination gives the copies of one
// partition's messages, with its queue's name.
type target struct {
	Partition
	Queue string
}

// destinations finds (or makes) the partition a destination gives the
// copies of each source partition, once a source partition per
// transaction, and notes the queues it gave (touched, to wake their
// waiting pops).
type destinations struct {
	d       Destination
	now     time.Time
	touched func(string)
	of      map[int64]target // by source partition id
	byID    map[int64]target // by target partition id
}

func newDestinations(d *Destination, now time.Time, touched func(string)) *destinations {
	if d == nil || d.Empty() {
		return nil
	}
	return &destinations{d: *d, now: now, touched: touched, of: map[int64]target{}, byID: map[int64]target{}}
}

// partitionFor returns the partition the copy of a message of source
// partition sourceID (of queue sourceQueueID) goes to, making it (and its
// queue) when missing.
func (ds *destinations) partitionFor(ctx context.Context, tx partitionQueueTx, sourceQueueID, sourceID int64) (target, error) {
	if t, ok := ds.of[sourceID]; ok {
		return t, nil
	}
	name := ds.d.Partition
	if name == "" {
		src, err := tx.PartitionByID(ctx, sourceID)
		if err != nil {
			return target{}, fmt.Errorf("replay destination: source partition: %w", err)
		}
		name = src.Name
	}
	var q Queue
	var err error
	if ds.d.Queue != "" {
		q, err = queueOrCreate(ctx, tx, ds.d.Queue, ds.now)
	} else {
		q, err = tx.QueueByID(ctx, sourceQueueID)
	}
	if err != nil {
		return target{}, fmt.Errorf("replay destination: queue: %w", err)
	}
	p, err := partitionOrCreate(ctx, tx, q, name, ds.now)
	if err != nil {
		return target{}, fmt.Errorf("replay destination: partition: %w", err)
	}
	t := target{Partition: p, Queue: q.Name}
	ds.of[sourceID], ds.byID[p.ID] = t, t
	if ds.touched != nil {
		ds.touched(q.Name)
	}
	return t, nil
}
