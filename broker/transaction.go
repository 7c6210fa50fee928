package broker

import (
	"context"
	"fmt"
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
func (b *Broker) Transaction(ctx context.Context, ops []Operation) ([]OperationResult, error) {
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
			k := newAcker(tx, now, touched)
			res, err := k.ack(ctx, op.Ack)
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
