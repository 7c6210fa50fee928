package broker

import (
	"context"
	"fmt"
	"time"
)

// Message states (MessageState.Status), as Queen's getMessage names them.
const (
	MessageDeadLetter = "dead_letter" // a group gave up on it: it has a dead letter
	MessageCompleted  = "completed"   // every group that reads its partition settled it
	MessageProcessing = "processing"  // a group holds it in a live lease
	MessagePending    = "pending"     // waiting for a group (or for its first reader)
)

// MessageState is a message named by its partition and transactionId,
// with where each group that reads its queue stands with it.
type MessageState struct {
	Message
	// Kept: the message itself is kept. False when retention removed it
	// and it is known from its dead letters, which keep its payload.
	Kept      bool
	Queue     Queue
	Partition Partition
	// DeadLetters are its dead letters, a group each (none: empty).
	DeadLetters []DeadLetter
	Groups      []GroupState // by name
}

// GroupState is where one consumer group stands with a message.
type GroupState struct {
	Name string
	// Consumed: the group's cursor is past it (settled: completed, dead-
	// lettered or dropped).
	Consumed bool
	// LeaseUntil is when the group's live lease on it ends; zero when
	// the group does not hold it.
	LeaseUntil time.Time
	DeadLetter bool // the group gave up on it: its dead letter is kept
}

// CompletedBy names the groups that completed the message: their cursor
// is past it and they keep no dead letter of it (one whose retention
// dropped it counts too: past it, nothing kept). A replay to every
// group would have them process it again. In the order of Groups.
func (s MessageState) CompletedBy() []string {
	var out []string
	for _, g := range s.Groups {
		if g.Consumed && !g.DeadLetter {
			out = append(out, g.Name)
		}
	}
	return out
}

// Status says where the message stands: a dead letter when any group
// keeps one of it, completed when every group that reads its queue has
// settled it, processing when one holds it, else pending.
func (s MessageState) Status() string {
	if len(s.DeadLetters) > 0 {
		return MessageDeadLetter
	}
	consumed, leased := 0, false
	for _, g := range s.Groups {
		if g.Consumed {
			consumed++
		}
		leased = leased || !g.LeaseUntil.IsZero()
	}
	switch {
	case len(s.Groups) > 0 && consumed == len(s.Groups):
		return MessageCompleted
	case leased:
		return MessageProcessing
	}
	return MessagePending
}

// MessageState reads the message of the partition (by its UUID) with the
// transactionId: the one kept, or, once retention removed it, the newest
// whose dead letters keep it; with its dead letters and where each group
// of its queue stands with it (ErrNotFound: none).
func (b *Broker) MessageState(ctx context.Context, partitionUUID, txid string) (MessageState, error) {
	var out MessageState
	err := b.store.View(ctx, func(tx Tx) error {
		now := b.now()
		p, err := tx.PartitionByUUID(ctx, partitionUUID)
		if isNotFound(err) {
			return errorf(ErrNotFound, "partition %q not found", truncate(partitionUUID, 64))
		}
		if err != nil {
			return err
		}
		q, err := tx.QueueByID(ctx, p.QueueID)
		if err != nil {
			return fmt.Errorf("queue: %w", err)
		}
		out = MessageState{Queue: q, Partition: p}
		m, err := tx.MessageByTransaction(ctx, p.ID, txid)
		switch {
		case err == nil:
			out.Message, out.Kept = m, true
		case isNotFound(err):
			dls, err := tx.ListDeadLetters(ctx, Filter{QueueID: p.QueueID, PartitionID: p.ID, TransactionID: txid}, Page{Limit: 1})
			if err != nil {
				return err
			}
			if len(dls) == 0 {
				return errorf(ErrNotFound, "message %q not found in partition %q", truncate(txid, 64), truncate(p.Name, 64))
			}
			d := dls[0]
			out.Message = Message{Seq: d.Seq, PartitionID: p.ID, TransactionID: d.TransactionID, Payload: d.Payload, TraceID: d.TraceID, CreatedAt: d.CreatedAt}
		default:
			return err
		}
		if out.DeadLetters, err = tx.DeadLettersOfMessage(ctx, out.Seq); err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		dead := map[string]bool{}
		for _, d := range out.DeadLetters {
			dead[d.Group] = true
		}
		names, err := tx.GroupNames(ctx, q.ID)
		if err != nil {
			return fmt.Errorf("groups: %w", err)
		}
		for _, name := range names {
			g := GroupState{Name: name, DeadLetter: dead[name]}
			gid, err := tx.GroupID(ctx, name, false)
			if err != nil {
				return fmt.Errorf("group: %w", err)
			}
			c, err := tx.Consumer(ctx, p.ID, gid)
			if err != nil && !isNotFound(err) {
				return fmt.Errorf("consumer: %w", err)
			}
			if err == nil {
				g.Consumed = c.Cursor >= out.Seq
				if c.LeaseID != "" && c.LeaseUntil.After(now) && c.Cursor < out.Seq && out.Seq <= c.LeaseLast {
					g.LeaseUntil = c.LeaseUntil
				}
			}
			out.Groups = append(out.Groups, g)
		}
		return nil
	})
	return out, err
}

// DeleteTransactionResult is what DeleteTransaction removed.
type DeleteTransactionResult struct {
	MessageID       string
	Deleted         int // dead letters
	RestorableUntil time.Time
}

// DeleteTransaction deletes the dead letters (every group's, or only
// group's) of the message named by its partition's UUID and its
// transactionId, as Delete does: restorable, audited. A message is
// shared by every group that reads its partition, and never deleted
// alone: one kept that never was a dead letter is ErrConflict, saying
// so, and nothing changes. One not known, or whose dead letters are gone
// (deleted, replayed or expired: a delete sent again), is ErrNotFound.
func (b *Broker) DeleteTransaction(ctx context.Context, partitionUUID, txid, group, actor string) (DeleteTransactionResult, error) {
	id, kept, err := b.transactionMessage(ctx, partitionUUID, txid)
	if err != nil {
		return DeleteTransactionResult{}, err
	}
	res := DeleteTransactionResult{MessageID: id}
	res.Deleted, res.RestorableUntil, err = b.deleteDeadLetters(ctx, id, group, actor)
	if isNotFound(err) && kept && group == "" {
		// Its dead letters are gone (a delete sent again, say): nothing
		// to delete, as for a message not known.
		h, herr := b.DeadLetterHistory(ctx, id, "")
		if herr != nil && !isNotFound(herr) {
			return res, herr
		}
		if f := h.Latest(); herr == nil && f != nil {
			how := f.How
			if f.How == FateExpired {
				how = "removed by its queue's dead-letter retention"
			}
			if f.Actor != "" {
				how += " by " + truncate(f.Actor, 64)
			}
			return res, errorf(ErrNotFound, "message %q of partition %s has no dead letter any more: the last was %s at %s; nothing was deleted",
				truncate(txid, 64), truncate(partitionUUID, 64), how, f.At.UTC().Format(time.RFC3339))
		}
		return res, errorf(ErrConflict, "message %q of partition %s is not a dead letter: a message is shared by every group that reads its partition, "+
			"and is not deleted alone (its queue's retention removes it); only dead letters are deleted here", truncate(txid, 64), truncate(partitionUUID, 64))
	}
	return res, err
}
