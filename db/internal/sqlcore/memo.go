package sqlcore

import "github.com/lazarus-dlq/lazarus/broker"

// Memo keeps, from one write transaction to the next on a store's one
// writer, the consumers the writer last saved and the messages its pops
// last read, so that an ack that follows a pop reads neither again: the
// consumer and its lease's messages were two of a lifecycle's nine
// statements and about 38k of its instructions (bench L1, callgrind).
//
// A Memo is only as good as what its store guarantees: it holds rows
// exactly as a read would return them, and the store empties it (Clear)
// whenever anything may have changed them that it did not see: any
// statement but those that leave them as they are (a read, a push's
// insert, the ready mark, the consumer save that refreshes it), a
// rollback, and any commit of another connection or process (the
// SQLite store compares the database's data version at each begin).
// Only the SQLite store has one; on PostgreSQL, where other processes
// write beside, Tx.memo is nil and every read goes to the database.
type Memo struct {
	consumers map[[2]int64]broker.Consumer
	// ranges are the partitions' ranges read, newest last: several, as
	// the groups of a queue pop the same partition at cursors of their
	// own; kept counts their messages.
	ranges map[int64][]memoRange
	kept   int
}

// MemoKeeps reports whether a statement of the writer leaves what a
// Memo keeps as it is: a read, the writer's BEGIN, COMMIT and sync
// pragmas, a push's insert (new seqs only), the ready mark (a column
// the memo does not keep), and the consumer save (which refreshes its
// entry itself). Every other statement, a rollback among them, empties
// the memo before it runs.
func MemoKeeps(query string) bool {
	switch query {
	case "BEGIN IMMEDIATE", "COMMIT", "PRAGMA synchronous=NORMAL", "PRAGMA synchronous=FULL",
		InsertMessageSQL, MarkReadySQL, MarkReadyManySQL, SaveConsumerSQL:
		return true
	}
	return len(query) > 7 && query[:7] == "SELECT "
}

// memoRange is every message of a partition with a seq in (after,
// last], in seq order, as MessageRange reads them (no payload).
type memoRange struct {
	after, last int64
	msgs        []broker.Message
}

// memoLimit bounds each of a Memo's maps (past it the map starts over),
// memoMessages the messages of one range kept, memoRanges the ranges
// kept of one partition (the oldest goes first), and memoKept the
// messages of all ranges (past it they start over).
const (
	memoLimit    = 1024
	memoMessages = 1000
	memoRanges   = 16
	memoKept     = 20_000
)

// NewMemo returns an empty Memo.
func NewMemo() *Memo {
	return &Memo{consumers: map[[2]int64]broker.Consumer{}, ranges: map[int64][]memoRange{}}
}

// Clear forgets everything kept.
func (m *Memo) Clear() {
	if m == nil {
		return
	}
	clear(m.consumers)
	clear(m.ranges)
	m.kept = 0
}

// consumer returns the consumer of a partition and group, if kept.
func (m *Memo) consumer(partitionID, groupID int64) (broker.Consumer, bool) {
	if m == nil {
		return broker.Consumer{}, false
	}
	c, ok := m.consumers[[2]int64{partitionID, groupID}]
	return c, ok
}

// saved keeps c as SaveConsumer has just written it to its one row: as
// Consumer would read it back (times to the millisecond). A consumer
// with acks waiting is not kept (they are read back from JSON), nor one
// whose queue is unknown (the save does not write queue_id).
func (m *Memo) saved(c *broker.Consumer) {
	if m == nil {
		return
	}
	key := [2]int64{c.PartitionID, c.GroupID}
	if len(c.Acks) > 0 || c.QueueID == 0 {
		delete(m.consumers, key)
		return
	}
	if len(m.consumers) >= memoLimit {
		clear(m.consumers)
	}
	k := *c
	k.Acks = nil
	k.LeaseUntil, k.LeasedAt, k.AvailableAt = FromMS(MS(c.LeaseUntil)), FromMS(MS(c.LeasedAt)), FromMS(MS(c.AvailableAt))
	m.consumers[key] = k
}

// forget drops the consumer of a partition and group.
func (m *Memo) forget(partitionID, groupID int64) {
	if m != nil {
		delete(m.consumers, [2]int64{partitionID, groupID})
	}
}

// read keeps what MessagesAfter read from after on: every message of
// the partition up to the last of msgs (later seqs may come since).
func (m *Memo) read(partitionID, after int64, msgs []broker.Message) {
	if m == nil || len(msgs) == 0 {
		return
	}
	rs := m.ranges[partitionID]
	if len(msgs) > memoMessages {
		m.drop(partitionID, rs)
		return
	}
	r := memoRange{after: after, last: msgs[len(msgs)-1].Seq, msgs: make([]broker.Message, len(msgs))}
	for i, x := range msgs {
		r.msgs[i] = broker.Message{PartitionID: partitionID, Seq: x.Seq, TransactionID: x.TransactionID, TraceID: x.TraceID, CreatedAt: x.CreatedAt}
	}
	// What r covers goes (a pop that read again from the same cursor),
	// and the oldest past memoRanges.
	kept := rs[:0]
	for _, o := range rs {
		if o.after >= r.after && o.last <= r.last {
			m.kept -= len(o.msgs)
			continue
		}
		kept = append(kept, o)
	}
	if len(kept) >= memoRanges {
		m.kept -= len(kept[0].msgs)
		kept = append(kept[:0], kept[1:]...)
	}
	clear(rs[len(kept):]) // the slots left behind hold no messages
	if (len(kept) == 0 && len(m.ranges) >= memoLimit) || m.kept+len(r.msgs) > memoKept {
		clear(m.ranges)
		m.kept, kept = 0, nil
	}
	m.ranges[partitionID] = append(kept, r)
	m.kept += len(r.msgs)
}

// drop forgets the ranges rs kept of a partition.
func (m *Memo) drop(partitionID int64, rs []memoRange) {
	for _, o := range rs {
		m.kept -= len(o.msgs)
	}
	delete(m.ranges, partitionID)
}

// messageRange returns MessageRange's answer from what was kept, if it
// covers (after, last].
func (m *Memo) messageRange(partitionID, after, last int64) ([]broker.Message, bool) {
	if m == nil {
		return nil, false
	}
	rs := m.ranges[partitionID]
	i := len(rs) - 1
	for i >= 0 && (after < rs[i].after || last > rs[i].last) {
		i--
	}
	if i < 0 {
		return nil, false
	}
	r := rs[i]
	var out []broker.Message
	for _, x := range r.msgs {
		if x.Seq > after && x.Seq <= last {
			out = append(out, x)
		}
	}
	return out, true
}
