package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// PushItem is one message to push.
type PushItem struct {
	Queue         string
	Partition     string // default DefaultPartition
	Payload       json.RawMessage
	TransactionID string // default: made by the server
	TraceID       string
	// PayloadChecked says the caller has already checked that Payload is
	// well-formed JSON (the HTTP layer's decoders do, as they read the
	// body): Push then does not check it again.
	PayloadChecked bool
}

// PushResult says what became of one PushItem.
type PushResult struct {
	Status        string // "queued" or "duplicate"
	MessageID     string
	TransactionID string
	PartitionID   string
	Queue         string
	Partition     string
}

// Push statuses.
const (
	StatusQueued    = "queued"
	StatusDuplicate = "duplicate"
)

// Push stores the items in one transaction, in order. An item whose
// transactionId its partition already has is reported as a duplicate and
// not stored again. Invalid items fail the whole call and store nothing.
func (b *Broker) Push(ctx context.Context, items []PushItem) ([]PushResult, error) {
	if err := validatePush(items); err != nil {
		return nil, err
	}
	b.noteTraffic()
	defer b.noteTraffic()
	var p *pushed
	// A push may run beside other writes: its partitions are locked as
	// their seqs are drawn (InsertMessages), and a queue or partition it
	// creates is a get-or-create that cannot race. A subscription, which
	// must reach every partition, is made only by a write alone.
	err := b.updateWith(ctx, b.hot(UpdateOptions{}), func(tx Tx, _ UpdateOptions, touched func(string)) error {
		var err error
		p, err = push(ctx, tx, b.now(), items)
		for _, it := range items {
			touched(it.Queue)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return p.results()
}

func validatePush(items []PushItem) error {
	if len(items) == 0 {
		return errorf(ErrInvalid, "items: at least one item is required")
	}
	if len(items) > MaxPushItems {
		return errorf(ErrInvalid, "items: at most %d items per push, got %d", MaxPushItems, len(items))
	}
	for i := range items {
		it := &items[i]
		if it.Partition == "" {
			it.Partition = DefaultPartition
		}
		if err := checkName("queue", it.Queue); err != nil {
			return errorf(ErrInvalid, "items[%d]: %s", i, err)
		}
		if err := checkName("partition", it.Partition); err != nil {
			return errorf(ErrInvalid, "items[%d]: %s", i, err)
		}
		if len(it.Payload) == 0 {
			return errorf(ErrInvalid, "items[%d]: payload is required (null is a valid payload)", i)
		}
		if !it.PayloadChecked && !json.Valid(it.Payload) {
			return errorf(ErrInvalid, "items[%d]: payload is not valid JSON", i)
		}
		if len(it.TransactionID) > MaxNameLength {
			return errorf(ErrInvalid, "items[%d]: transactionId is longer than %d bytes", i, MaxNameLength)
		}
		if len(it.TraceID) > MaxNameLength {
			return errorf(ErrInvalid, "items[%d]: traceId is longer than %d bytes", i, MaxNameLength)
		}
		// Ids are looked up and compared as they are: one that a store
		// cannot keep as text (PostgreSQL's holds no NUL) is refused on
		// every store, rather than kept changed.
		if !plainText(it.TransactionID) {
			return errorf(ErrInvalid, "items[%d]: transactionId must be UTF-8 text without NUL characters", i)
		}
		if !plainText(it.TraceID) {
			return errorf(ErrInvalid, "items[%d]: traceId must be UTF-8 text without NUL characters", i)
		}
	}
	return nil
}

// plainText reports whether s is UTF-8 with no NUL character.
func plainText(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// pushed is what push stored: read only once its write has committed
// (Tx.InsertMessagesLate), by results.
type pushed struct {
	items    []PushItem
	of       []Partition
	msgs     []Message
	inserted []bool
}

// push stores validated items inside tx: it looks up (or creates) the
// items' partitions in order, then inserts their messages in one call,
// whose answer is read once the write has committed (results).
func push(ctx context.Context, tx messagePartitionQueueTx, now time.Time, items []PushItem) (*pushed, error) {
	type key struct{ q, p string }
	parts := map[key]Partition{}
	p := &pushed{items: items, of: make([]Partition, len(items)), msgs: make([]Message, len(items)), inserted: make([]bool, len(items))}
	ptrs := make([]*Message, len(items))
	for i, it := range items {
		k := key{it.Queue, it.Partition}
		part, ok := parts[k]
		if !ok {
			q, err := queueOrCreate(ctx, tx, it.Queue, now)
			if err != nil {
				return nil, fmt.Errorf("push: queue: %w", err)
			}
			if part, err = partitionOrCreate(ctx, tx, q, it.Partition, now); err != nil {
				return nil, fmt.Errorf("push: partition: %w", err)
			}
			parts[k] = part
		}
		p.of[i] = part
		p.msgs[i] = Message{PartitionID: part.ID, TransactionID: it.TransactionID, Payload: it.Payload, TraceID: it.TraceID, CreatedAt: now}
		if p.msgs[i].TransactionID == "" {
			p.msgs[i].TransactionID = NewUUID(now)
		}
		ptrs[i] = &p.msgs[i]
	}
	if err := tx.InsertMessagesLate(ctx, ptrs, p.inserted); err != nil {
		return nil, fmt.Errorf("push: insert: %w", err)
	}
	return p, nil
}

// results answers a push whose write has committed.
func (p *pushed) results() ([]PushResult, error) {
	out := make([]PushResult, len(p.items))
	for i, it := range p.items {
		m := &p.msgs[i]
		if m.Seq == 0 {
			// The store said neither that it inserted the message nor
			// which one it duplicates (Tx.InsertMessagesLate): no id
			// to answer with.
			return nil, fmt.Errorf("push: the store gave no message for item %d (transactionId %q)", i, truncate(m.TransactionID, 64))
		}
		out[i] = PushResult{Status: StatusQueued, MessageID: m.ID(), TransactionID: m.TransactionID, PartitionID: p.of[i].UUID, Queue: it.Queue, Partition: it.Partition}
		if !p.inserted[i] {
			out[i].Status = StatusDuplicate
		}
	}
	return out, nil
}
