package broker

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// cache keeps the queues, partitions, groups and subscriptions that the
// hot paths look up on every push, pop and ack, so that a message costs
// a few statements rather than a dozen. Only what has committed is kept:
// entries met inside a write transaction are staged, and published once
// it has committed, unless the cache was emptied meanwhile. Anything that
// removes or changes a cached thing empties the cache once its
// transaction has committed, before any later write transaction begins
// (TxScope's End, in commit order); the later functions of its own
// transaction (Updates a store runs in one) look everything up in the store meanwhile.
type cache struct {
	mu         sync.RWMutex
	gen        uint64 // counts the times the cache was emptied
	queues     map[string]Queue
	queueIDs   map[int64]Queue
	partitions map[partitionKey]Partition
	byUUID     map[string]Partition
	byID       map[int64]Partition
	groups     map[string]int64
	subscribed map[[2]int64]bool
	// maintOff: maintenance mode was read off in both scopes (a pop
	// need not read it again until the cache is emptied).
	maintOff bool
	// unheld: the (queue, group) pairs no hold was found for (a pop of
	// one reads no hold until the cache is emptied: heldFor).
	unheld map[[2]int64]bool
}

type partitionKey struct {
	queueID int64
	name    string
}

// cacheLimit bounds every map: past it the cache starts over.
const cacheLimit = 100000

func newCache() *cache {
	c := &cache{}
	c.reset()
	return c
}

// invalidate empties the cache; what is staged before it is never
// published.
func (c *cache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset()
	c.gen++
}

func (c *cache) reset() {
	c.queues, c.queueIDs = map[string]Queue{}, map[int64]Queue{}
	c.partitions, c.byUUID, c.byID = map[partitionKey]Partition{}, map[string]Partition{}, map[int64]Partition{}
	c.groups, c.subscribed = map[string]int64{}, map[[2]int64]bool{}
	c.maintOff = false
	c.unheld = map[[2]int64]bool{}
}

// cacheTx looks things up in the cache before the store and stages what
// it finds for publishing after commit.
type cacheTx struct {
	Tx
	c   *cache
	st  *txState // the transaction's: cacheOff skips the cache
	gen uint64   // the cache's generation when the transaction began
	// staged entries, published by commit
	queues     []Queue
	partitions []Partition
	groups     map[string]int64
	subscribed [][2]int64
	maintOff   bool
	unheld     [][2]int64
}

func newCacheTx(tx Tx, c *cache, st *txState) *cacheTx {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return &cacheTx{Tx: tx, c: c, st: st, gen: c.gen}
}

// invalidate empties the cache once the transaction has committed, and
// makes the later functions of the transaction look everything up in the
// store.
func (t *cacheTx) invalidate() error {
	t.st.cacheOff = true
	return afterCommit(t.Tx, t.c.invalidate)
}

func (t *cacheTx) QueueByName(ctx context.Context, name string) (Queue, error) {
	q, ok := Queue{}, false
	if !t.st.cacheOff {
		t.c.mu.RLock()
		q, ok = t.c.queues[name]
		t.c.mu.RUnlock()
	}
	if ok {
		return q, nil
	}
	q, err := t.Tx.QueueByName(ctx, name)
	if err == nil {
		t.queues = append(t.queues, q)
	}
	return q, err
}

func (t *cacheTx) QueueByID(ctx context.Context, id int64) (Queue, error) {
	q, ok := Queue{}, false
	if !t.st.cacheOff {
		t.c.mu.RLock()
		q, ok = t.c.queueIDs[id]
		t.c.mu.RUnlock()
	}
	if ok {
		return q, nil
	}
	q, err := t.Tx.QueueByID(ctx, id)
	if err == nil {
		t.queues = append(t.queues, q)
	}
	return q, err
}

func (t *cacheTx) CreateQueue(ctx context.Context, q *Queue) error {
	if err := t.Tx.CreateQueue(ctx, q); err != nil {
		return err
	}
	t.queues = append(t.queues, *q)
	return nil
}

func (t *cacheTx) UpdateQueue(ctx context.Context, q Queue) error {
	if err := t.invalidate(); err != nil {
		return err
	}
	return t.Tx.UpdateQueue(ctx, q)
}

func (t *cacheTx) DeleteQueue(ctx context.Context, id int64) error {
	if err := t.invalidate(); err != nil {
		return err
	}
	return t.Tx.DeleteQueue(ctx, id)
}

func (t *cacheTx) PartitionByName(ctx context.Context, queueID int64, name string) (Partition, error) {
	p, ok := Partition{}, false
	if !t.st.cacheOff {
		t.c.mu.RLock()
		p, ok = t.c.partitions[partitionKey{queueID, name}]
		t.c.mu.RUnlock()
	}
	if ok {
		return p, nil
	}
	p, err := t.Tx.PartitionByName(ctx, queueID, name)
	if err == nil {
		t.partitions = append(t.partitions, p)
	}
	return p, err
}

func (t *cacheTx) PartitionByUUID(ctx context.Context, uuid string) (Partition, error) {
	p, ok := Partition{}, false
	if !t.st.cacheOff {
		t.c.mu.RLock()
		p, ok = t.c.byUUID[uuid]
		t.c.mu.RUnlock()
	}
	if ok {
		return p, nil
	}
	p, err := t.Tx.PartitionByUUID(ctx, uuid)
	if err == nil {
		t.partitions = append(t.partitions, p)
	}
	return p, err
}

func (t *cacheTx) PartitionByID(ctx context.Context, id int64) (Partition, error) {
	p, ok := Partition{}, false
	if !t.st.cacheOff {
		t.c.mu.RLock()
		p, ok = t.c.byID[id]
		t.c.mu.RUnlock()
	}
	if ok {
		return p, nil
	}
	p, err := t.Tx.PartitionByID(ctx, id)
	if err == nil {
		t.partitions = append(t.partitions, p)
	}
	return p, err
}

func (t *cacheTx) CreatePartition(ctx context.Context, p *Partition) error {
	if err := t.Tx.CreatePartition(ctx, p); err != nil {
		return err
	}
	t.partitions = append(t.partitions, *p)
	return nil
}

func (t *cacheTx) GroupID(ctx context.Context, name string, create bool) (int64, error) {
	id, ok := int64(0), false
	if !t.st.cacheOff {
		t.c.mu.RLock()
		id, ok = t.c.groups[name]
		t.c.mu.RUnlock()
	}
	if ok {
		return id, nil
	}
	id, err := t.Tx.GroupID(ctx, name, create)
	if err == nil {
		if t.groups == nil {
			t.groups = map[string]int64{}
		}
		t.groups[name] = id
	}
	return id, err
}

func (t *cacheTx) Subscribed(ctx context.Context, queueID, groupID int64) (bool, error) {
	k := [2]int64{queueID, groupID}
	ok := false
	if !t.st.cacheOff {
		t.c.mu.RLock()
		ok = t.c.subscribed[k]
		t.c.mu.RUnlock()
	}
	if ok {
		return true, nil
	}
	ok, err := t.Tx.Subscribed(ctx, queueID, groupID)
	if err == nil && ok {
		t.subscribed = append(t.subscribed, k)
	}
	return ok, err
}

func (t *cacheTx) Subscribe(ctx context.Context, queueID, groupID int64, start Start, now time.Time) error {
	if err := t.Tx.Subscribe(ctx, queueID, groupID, start, now); err != nil {
		return err
	}
	t.subscribed = append(t.subscribed, [2]int64{queueID, groupID})
	return nil
}

// commit publishes what the transaction staged; call it only once the
// transaction has committed.
// staged reports whether the transaction has entries for the cache.
func (t *cacheTx) staged() bool {
	return len(t.queues) > 0 || len(t.partitions) > 0 || len(t.groups) > 0 || len(t.subscribed) > 0 || t.maintOff || len(t.unheld) > 0
}

func (t *cacheTx) commit() {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != t.gen {
		return // emptied since: what was staged may predate the change
	}
	if len(c.byID) > cacheLimit || len(c.groups) > cacheLimit || len(c.subscribed) > cacheLimit || len(c.unheld) > cacheLimit {
		c.reset()
	}
	for _, q := range t.queues {
		c.queues[q.Name], c.queueIDs[q.ID] = q, q
	}
	for _, p := range t.partitions {
		c.partitions[partitionKey{p.QueueID, p.Name}], c.byUUID[p.UUID], c.byID[p.ID] = p, p, p
	}
	for name, id := range t.groups {
		c.groups[name] = id
	}
	for _, k := range t.subscribed {
		c.subscribed[k] = true
	}
	if t.maintOff {
		c.maintOff = true
	}
	for _, k := range t.unheld {
		c.unheld[k] = true
	}
}

// deliveriesHeld reports whether maintenance mode holds deliveries: no
// statement when the cache knows both scopes off; else it reads the
// setting, and stages "off" for the cache when it is. A scope on is never
// cached: each pop reads it again, so that it ends at once when it is
// turned off, in this process or another.
func (t *cacheTx) deliveriesHeld(ctx context.Context) (bool, error) {
	if !t.st.cacheOff {
		t.c.mu.RLock()
		off := t.c.maintOff
		t.c.mu.RUnlock()
		if off {
			return false, nil
		}
	}
	m, err := readMaintenance(ctx, t.Tx)
	if err != nil {
		return false, err
	}
	if !m.Holds() {
		t.maintOff = true
	}
	return m.Holds(), nil
}

// heldFor returns what holds the pops of a (queue, group): no statement
// when the cache knows the pair unheld; else it reads the pair's holds
// (HoldsOf), and stages "unheld" for the cache when there are none. A
// held pair is never cached: each pop reads its holds again, so that a
// release is seen at once, in this process or another.
func (t *cacheTx) heldFor(ctx context.Context, queueID, groupID int64) (HoldSet, error) {
	k := [2]int64{queueID, groupID}
	if !t.st.cacheOff {
		t.c.mu.RLock()
		off := t.c.unheld[k]
		t.c.mu.RUnlock()
		if off {
			return HoldSet{}, nil
		}
	}
	hs, err := t.Tx.HoldsOf(ctx, queueID, groupID)
	if err != nil {
		return HoldSet{}, fmt.Errorf("holds: %w", err)
	}
	if len(hs) == 0 {
		t.unheld = append(t.unheld, k)
	}
	return HoldSet{Holds: hs}, nil
}
