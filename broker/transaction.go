package broker

import (
	"context"
	"fmt"
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
//
// required are lease ids (Queen's requiredLeases): each one that is not
// empty must be a live lease when the transaction starts, or it changes
// nothing and fails with ErrConflict naming it. An ack that names no lease
// goes through the required lease that holds its partition (and group,
// when it names one), if exactly one does: Queen's clients send the lease
// there rather than in the ack, and no consumer group.
func (b *Broker) Transaction(ctx context.Context, ops []Operation, required ...string) ([]OperationResult, error) {
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
		case "push":
			if err := validatePush(ops[i].Items); err != nil {
				return nil, errorf(ErrInvalid, "operations[%d]: %s", i, err)
			}
		default:
			return nil, errorf(ErrInvalid, "operations[%d]: type must be ack or push, got %q", i, truncate(ops[i].Type, 32))
		}
	}
	var out []OperationResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		leases, err := requiredLeases(ctx, tx, now, required)
		if err != nil {
			return err
		}
		out = make([]OperationResult, len(ops))
		for i, op := range ops {
			out[i].Type = op.Type
			if op.Type == "push" {
				res, err := push(ctx, tx, now, op.Items)
				if err != nil {
					return err
				}
				for _, it := range op.Items {
					touched(it.Queue)
				}
				out[i].Push = res
				continue
			}
			a := op.Ack // a copy: fn may run again
			if a.LeaseID == "" {
				if l, ok := leaseOf(leases, a); ok {
					a.LeaseID = l.id
					if a.Group == "" {
						a.Group = l.group
					}
				}
			}
			k := newAcker(tx, now, touched)
			res, err := k.ack(ctx, a)
			if err != nil {
				return err
			}
			if !res.Success {
				return &Error{Kind: res.kind, Message: fmt.Sprintf("operations[%d]: %s", i, res.Error)}
			}
			if err := k.finish(ctx); err != nil {
				return err
			}
			out[i].Ack = &res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// requiredLease is a live lease a transaction requires.
type requiredLease struct {
	id        string
	partition string // its partition's UUID
	group     string
}

// requiredLeases checks that every lease id given (empty ones aside) is a
// live lease at now, and returns them; the first that is not fails with
// ErrConflict.
func requiredLeases(ctx context.Context, tx Tx, now time.Time, ids []string) ([]requiredLease, error) {
	var out []requiredLease
	seen := map[string]bool{}
	for i, id := range ids {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		c, err := tx.ConsumerByLease(ctx, id)
		if isNotFound(err) || (err == nil && !c.leaseLive(now)) {
			return nil, errorf(ErrConflict, "requiredLeases[%d]: lease %q is not live (it ran out, was settled, or never was); nothing was done", i, truncate(id, 64))
		}
		if err != nil {
			return nil, fmt.Errorf("transaction: lease: %w", err)
		}
		p, err := tx.PartitionByID(ctx, c.PartitionID)
		if err != nil {
			return nil, fmt.Errorf("transaction: lease partition: %w", err)
		}
		g, err := tx.GroupName(ctx, c.GroupID)
		if err != nil {
			return nil, fmt.Errorf("transaction: lease group: %w", err)
		}
		out = append(out, requiredLease{id: id, partition: p.UUID, group: g})
	}
	return out, nil
}

// leaseOf returns the one required lease that holds a's partition (any,
// when a names none) for a's group (any, when a names none).
func leaseOf(leases []requiredLease, a Ack) (requiredLease, bool) {
	var found requiredLease
	n := 0
	for _, l := range leases {
		if (a.PartitionID == "" || l.partition == a.PartitionID) && (a.Group == "" || l.group == a.Group) {
			found = l
			n++
		}
	}
	return found, n == 1
}
