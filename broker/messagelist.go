package broker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// MessageListTx is what listing messages needs from storage.
type MessageListTx interface {
	// RecentMessages returns up to p.Limit messages of a partition (every
	// partition when p.PartitionID is 0), newest first (by seq), pushed
	// in [p.From, p.To), without their payloads. It walks messages
	// backwards by messages_partition_seq (one partition) or by the
	// primary key (every partition), so it reads at most the messages it
	// returns plus those outside the time range on the way.
	RecentMessages(ctx context.Context, p RecentMessagesParams) ([]Message, error)
}

// RecentMessagesParams says which messages RecentMessages returns.
type RecentMessagesParams struct {
	PartitionID  int64 // 0: every partition
	FromMs, ToMs int64 // pushed at or after FromMs, before ToMs
	Limit        int
}

// Limits of ListMessages.
const (
	MessageListDefault   = 200
	MessageListMax       = 1000
	MessageListMaxOffset = 10000
)

// MessageListQuery selects messages for ListMessages. Zero fields select
// everything.
type MessageListQuery struct {
	Queue, Partition string
	Status           string // dead_letter, completed, processing, pending
	From, To         time.Time
	Limit, Offset    int
	// Scope is the queues the caller may see: the messages of the others
	// are as if absent (zero: every queue).
	Scope QueueScope
}

// ListMessages lists messages newest first, each with where it stands
// (MessageState, without its payload), Queen's message list. It reads
// the newest Offset+Limit messages the query's queue, partition and time
// select (a partition at a time, each as far as that: RecentMessages),
// then their groups' cursors and dead letters; Status filters among
// those. A queue or partition that does not exist lists nothing.
func (b *Broker) ListMessages(ctx context.Context, q MessageListQuery) ([]MessageState, error) {
	switch {
	case q.Limit == 0:
		q.Limit = MessageListDefault
	case q.Limit < 0 || q.Limit > MessageListMax:
		return nil, errorf(ErrInvalid, "limit must be 1 to %d", MessageListMax)
	}
	if q.Offset < 0 || q.Offset > MessageListMaxOffset {
		return nil, errorf(ErrInvalid, "offset must be 0 to %d", MessageListMaxOffset)
	}
	switch q.Status {
	case "", "dead_letter", "completed", "processing", "pending":
	default:
		return nil, errorf(ErrInvalid, "status must be dead_letter, completed, processing or pending")
	}
	if q.Queue != "" {
		if err := checkName("queue", q.Queue); err != nil {
			return nil, err
		}
	}
	if q.Partition != "" {
		if err := checkName("partition", q.Partition); err != nil {
			return nil, err
		}
	}
	p := RecentMessagesParams{FromMs: math.MinInt64, ToMs: math.MaxInt64, Limit: q.Offset + q.Limit}
	if !q.From.IsZero() {
		p.FromMs = q.From.UnixMilli()
	}
	if !q.To.IsZero() {
		p.ToMs = q.To.UnixMilli()
	}
	var out []MessageState
	err := b.store.View(ctx, func(tx Tx) error {
		out = nil
		now := b.now()
		var msgs []Message
		if q.Queue != "" && !q.Scope.Allows(q.Queue) {
			return nil // out of scope: as if absent
		}
		if q.Queue == "" && !q.Scope.All() {
			// Within a scope: the newest of each partition of each
			// queue it allows, merged, as for a named queue.
			if q.Partition != "" {
				return errorf(ErrInvalid, "partition needs a queue")
			}
			qs, err := tx.Queues(ctx)
			if err != nil {
				return err
			}
			for _, qu := range qs {
				if !q.Scope.Allows(qu.Name) {
					continue
				}
				parts, err := tx.PartitionList(ctx, qu.ID)
				if err != nil {
					return err
				}
				for _, pa := range parts {
					p.PartitionID = pa.ID
					ms, err := tx.RecentMessages(ctx, p)
					if err != nil {
						return err
					}
					msgs = append(msgs, ms...)
				}
			}
			slices.SortFunc(msgs, func(a, b Message) int { return int(b.Seq - a.Seq) })
			msgs = msgs[:min(len(msgs), p.Limit)]
		} else if q.Queue == "" {
			if q.Partition != "" {
				return errorf(ErrInvalid, "partition needs a queue")
			}
			var err error
			if msgs, err = tx.RecentMessages(ctx, p); err != nil {
				return err
			}
		} else {
			qu, err := tx.QueueByName(ctx, q.Queue)
			if isNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			var parts []Partition
			if q.Partition != "" {
				pa, err := tx.PartitionByName(ctx, qu.ID, q.Partition)
				if isNotFound(err) {
					return nil
				}
				if err != nil {
					return err
				}
				parts = []Partition{pa}
			} else if parts, err = tx.PartitionList(ctx, qu.ID); err != nil {
				return err
			}
			for _, pa := range parts {
				p.PartitionID = pa.ID
				ms, err := tx.RecentMessages(ctx, p)
				if err != nil {
					return err
				}
				msgs = append(msgs, ms...)
			}
			slices.SortFunc(msgs, func(a, b Message) int { return int(b.Seq - a.Seq) })
			msgs = msgs[:min(len(msgs), p.Limit)]
		}
		states, err := messageStates(ctx, tx, msgs, now)
		if err != nil {
			return err
		}
		if q.Status != "" {
			states = slices.DeleteFunc(states, func(s MessageState) bool { return s.Status() != q.Status })
		}
		if q.Offset < len(states) {
			out = states[q.Offset:min(len(states), q.Offset+q.Limit)]
		}
		return nil
	})
	return out, err
}

// messageStatesTx is what the states of listed messages read: their
// queue, partitions, subscriptions, consumers and dead letters.
type messageStatesTx interface {
	ConsumerTx
	DeadLetterTx
	PartitionTx
	QueueTx
	SubscriptionTx
}

// messageStates says where each message stands, as MessageState does
// for one: its queue, partition, dead letters and each group's cursor.
func messageStates(ctx context.Context, tx messageStatesTx, msgs []Message, now time.Time) ([]MessageState, error) {
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seqs[i] = m.Seq
	}
	keys, err := tx.DeadLetterKeysOf(ctx, seqs)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	dead, deadOf := map[[2]int64]bool{}, map[int64][]DeadLetter{}
	for _, k := range keys {
		dead[[2]int64{k.Seq, k.GroupID}] = true
		deadOf[k.Seq] = append(deadOf[k.Seq], DeadLetter{ID: k.ID, Seq: k.Seq, GroupID: k.GroupID})
	}
	type group struct {
		id   int64
		name string
	}
	partitions, queues, groups := map[int64]Partition{}, map[int64]Queue{}, map[int64][]group{}
	consumers := map[[2]int64]*Consumer{}
	out := make([]MessageState, len(msgs))
	for i, m := range msgs {
		pa, ok := partitions[m.PartitionID]
		if !ok {
			if pa, err = tx.PartitionByID(ctx, m.PartitionID); err != nil {
				return nil, fmt.Errorf("partition: %w", err)
			}
			partitions[m.PartitionID] = pa
		}
		qu, ok := queues[pa.QueueID]
		if !ok {
			if qu, err = tx.QueueByID(ctx, pa.QueueID); err != nil {
				return nil, fmt.Errorf("queue: %w", err)
			}
			queues[pa.QueueID] = qu
			names, err := tx.GroupNames(ctx, qu.ID)
			if err != nil {
				return nil, fmt.Errorf("groups: %w", err)
			}
			for _, name := range names {
				id, err := tx.GroupID(ctx, name, false)
				if err != nil {
					return nil, fmt.Errorf("group: %w", err)
				}
				groups[qu.ID] = append(groups[qu.ID], group{id, name})
			}
		}
		s := MessageState{Message: m, Kept: true, Queue: qu, Partition: pa, DeadLetters: deadOf[m.Seq]}
		for _, g := range groups[qu.ID] {
			gs := GroupState{Name: g.name, DeadLetter: dead[[2]int64{m.Seq, g.id}]}
			key := [2]int64{pa.ID, g.id}
			c, ok := consumers[key]
			if !ok {
				cc, err := tx.Consumer(ctx, pa.ID, g.id)
				if err != nil && !isNotFound(err) {
					return nil, fmt.Errorf("consumer: %w", err)
				}
				if err == nil {
					c = &cc
				}
				consumers[key] = c
			}
			if c != nil {
				gs.Consumed = c.Cursor >= m.Seq
				if c.LeaseID != "" && c.LeaseUntil.After(now) && c.Cursor < m.Seq && m.Seq <= c.LeaseLast {
					gs.LeaseUntil = c.LeaseUntil
				}
			}
			s.Groups = append(s.Groups, gs)
		}
		out[i] = s
	}
	return out, nil
}
