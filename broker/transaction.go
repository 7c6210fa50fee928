package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Operation is one step of a Transaction: an ack or a push.
type Operation struct {
	Type  string // "ack" or "push"
	Ack   Ack
	Items []PushItem
}

// OperationResult is the outcome of one Operation.
type OperationResult struct {
	Type string
	Ack  *AckResult
	Push []PushResult
}

// Transaction applies every operation in one transaction: all or nothing.
// An ack inside follows the same rules as outside and keeps its error text.
// An ack that would settle nothing because an earlier message of its lease
// failed (AckResult.Requeued) fails it too, with ErrConflict naming every
// such operation: its pushes must not be made without it.
//
// required are lease ids (Queen's requiredLeases): each one that is not
// empty must be a live lease when the transaction starts, or it changes
// nothing and fails with ErrConflict naming it (a shared lease, of a pop
// of several partitions, is live while one of them is still under it, and
// each of those counts as a lease below); at most MaxAcks of them,
// as each costs a few queries inside the writer. An ack that names no
// lease goes through the required lease that holds its partition (and
// group, when it names one), if exactly one does: Queen's clients send the
// lease there rather than in the ack, and no consumer group. When several
// do (an older Queen JS client sends no partitionId either), it goes
// through the one whose leased messages have its transactionId; if two
// have it, the transaction fails with ErrConflict naming it.
func (b *Broker) Transaction(ctx context.Context, ops []Operation, required ...string) ([]OperationResult, error) {
	if len(required) > MaxAcks {
		return nil, errorf(ErrInvalid, "requiredLeases: at most %d per transaction, got %d; nothing was done", MaxAcks, len(required))
	}
	for i, id := range required {
		if len(id) > MaxNameLength {
			return nil, errorf(ErrInvalid, "requiredLeases[%d]: a lease id is at most %d bytes", i, MaxNameLength)
		}
	}
	if len(ops) == 0 {
		return nil, errorf(ErrInvalid, "operations: at least one is required")
	}
	if len(ops) > MaxAcks {
		return nil, errorf(ErrInvalid, "operations: at most %d per transaction", MaxAcks)
	}
	for i := range ops {
		switch ops[i].Type {
		case "ack":
			if err := checkConsumerVersion(ops[i].Ack.ConsumerVersion); err != nil {
				return nil, errorf(ErrInvalid, "operations[%d]: %s; nothing was done", i, err)
			}
		case "push":
			if err := validatePush(ops[i].Items); err != nil {
				return nil, errorf(ErrInvalid, "operations[%d]: %s", i, err)
			}
		default:
			return nil, errorf(ErrInvalid, "operations[%d]: type must be ack or push, got %q", i, truncate(ops[i].Type, 32))
		}
	}
	var out []OperationResult
	var pushes []*pushed // the pushes' answers, read once committed
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		var requeued []string // the acks that settle nothing (AckResult.Requeued)
		leases, err := requiredLeases(ctx, tx, now, required)
		if err != nil {
			return err
		}
		out = make([]OperationResult, len(ops))
		pushes = make([]*pushed, len(ops))
		for i, op := range ops {
			out[i].Type = op.Type
			if op.Type == "push" {
				p, err := push(ctx, tx, now, op.Items)
				if err != nil {
					return err
				}
				for _, it := range op.Items {
					touched(it.Queue)
				}
				pushes[i] = p
				continue
			}
			a := op.Ack // a copy: fn may run again
			if a.LeaseID == "" {
				l, ok, err := leases.of(ctx, tx, a)
				if err != nil {
					var be *Error
					if errors.As(err, &be) {
						return &Error{Kind: be.Kind, Message: fmt.Sprintf("operations[%d]: %s", i, be.Message)}
					}
					return err
				}
				if ok {
					a.LeaseID = l.id
					if a.Group == "" {
						a.Group = l.group
					}
					if a.PartitionID == "" && IsSharedLease(l.id) {
						a.PartitionID = l.partition // found already: the id names no partition
					}
				}
			}
			k := newAcker(b, tx, now, touched, UpdateOptions{})
			res, err := k.ack(ctx, a)
			if err != nil {
				return err
			}
			if !res.Success {
				return &Error{Kind: res.kind, Message: fmt.Sprintf("operations[%d]: %s", i, res.Error)}
			}
			if res.Requeued {
				// It settles nothing: the transaction is not all done.
				requeued = append(requeued, fmt.Sprintf("operations[%d] (transactionId %q)", i, truncate(a.TransactionID, 64)))
				continue
			}
			if err := k.finish(ctx); err != nil {
				return err
			}
			out[i].Ack = &res
		}
		if len(requeued) > 0 {
			return errorf(ErrConflict, "%s: not settled: an earlier message of its lease failed, so it comes back after that one; "+
				"a transaction is all or nothing, and nothing was done", strings.Join(requeued, ", "))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, p := range pushes {
		if p == nil {
			continue
		}
		if out[i].Push, err = p.results(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// requiredLease is a live lease a transaction requires.
type requiredLease struct {
	id        string
	partition string // its partition's UUID
	group     string
	c         Consumer // as the transaction found it
}

// leaseSet is the required leases of a transaction.
type leaseSet struct {
	leases []requiredLease
}

// requiredLeases checks that every lease id given (empty ones aside) is a
// live lease at now, and returns them; the first that is not fails with
// ErrConflict.
func requiredLeases(ctx context.Context, tx consumerPartitionSubscriptionTx, now time.Time, ids []string) (*leaseSet, error) {
	out := &leaseSet{}
	seen := map[string]bool{}
	for i, id := range ids {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		var cs []Consumer
		if IsSharedLease(id) {
			// A pop of several partitions: each partition still under its
			// lease is a lease of the set, and the lease is live while one
			// is.
			all, err := tx.ConsumersBySharedLease(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("transaction: lease: %w", err)
			}
			for _, c := range all {
				if c.leaseLive(now) {
					cs = append(cs, c)
				}
			}
		} else {
			c, err := tx.ConsumerByLease(ctx, id)
			if err != nil && !isNotFound(err) {
				return nil, fmt.Errorf("transaction: lease: %w", err)
			}
			if err == nil && c.leaseLive(now) {
				cs = append(cs, c)
			}
		}
		if len(cs) == 0 {
			return nil, errorf(ErrConflict, "requiredLeases[%d]: lease %q is not live (it ran out, was settled, or never was); nothing was done", i, truncate(id, 64))
		}
		for _, c := range cs {
			p, err := tx.PartitionByID(ctx, c.PartitionID)
			if err != nil {
				return nil, fmt.Errorf("transaction: lease partition: %w", err)
			}
			g, err := tx.GroupName(ctx, c.GroupID)
			if err != nil {
				return nil, fmt.Errorf("transaction: lease group: %w", err)
			}
			out.leases = append(out.leases, requiredLease{id: id, partition: p.UUID, group: g, c: c})
		}
	}
	return out, nil
}

// of returns the one required lease that holds a's partition (any, when
// a names none) for a's group (any, when a names none). When more than one
// does, it is the one whose leased messages have a's transactionId; two
// of them having it is an ErrConflict, and so is none when a names no
// partition (nothing else could say where the message is).
func (s *leaseSet) of(ctx context.Context, tx MessageTx, a Ack) (requiredLease, bool, error) {
	var cand []int
	for i, l := range s.leases {
		if (a.PartitionID == "" || l.partition == a.PartitionID) && (a.Group == "" || l.group == a.Group) {
			cand = append(cand, i)
		}
	}
	switch {
	case len(cand) == 1:
		return s.leases[cand[0]], true, nil
	case len(cand) == 0 || a.TransactionID == "":
		return requiredLease{}, false, nil
	}
	// Which of them leased a message with a's transactionId: one index
	// probe a candidate (no message row is read).
	var holders []int
	for _, i := range cand {
		l := s.leases[i]
		seq, err := tx.MessageSeq(ctx, l.c.PartitionID, a.TransactionID)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return requiredLease{}, false, fmt.Errorf("transaction: leased message: %w", err)
		}
		if seq > l.c.Cursor && seq <= l.c.LeaseLast {
			holders = append(holders, i)
		}
	}
	switch len(holders) {
	case 1:
		return s.leases[holders[0]], true, nil
	case 0:
		if a.PartitionID != "" {
			return requiredLease{}, false, nil // the ack says where: its own refusal is clearer
		}
		return requiredLease{}, false, errorf(ErrConflict, "no lease of requiredLeases holds a message with transactionId %q (it ran out, was acknowledged, or never was leased); nothing was done",
			truncate(a.TransactionID, 64))
	}
	return requiredLease{}, false, errorf(ErrConflict, "transactionId %q is a message of more than one lease of requiredLeases (%q and %q): send its partitionId or leaseId to say which; nothing was done",
		truncate(a.TransactionID, 64), truncate(s.leases[holders[0]].id, 64), truncate(s.leases[holders[1]].id, 64))
}
