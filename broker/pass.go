package broker

import (
	"context"
	"fmt"
	"time"
)

// PassTx is what a pop needs to pass by the copies replayed to another
// consumer group (ReplayOwnGroup).
type PassTx interface {
	// CopyGroups returns, of the messages with the given seqs, those that
	// are copies replayed to one group only, each with that group's id
	// (replays.group_id > 0); copies for every group and messages that
	// are no copies are left out. It reads replays by its primary key,
	// writes nothing; none found is an empty map, not ErrNotFound.
	CopyGroups(ctx context.Context, seqs []int64) (map[int64]int64, error)
}

// ownGroupShape reports whether a transactionId has the shape of a copy
// replayed to one group: "dlq:" + the original's 36-character message id
// + ":" + the group. Only messages of that shape are looked up in replays
// by a pop (so that ordinary messages cost it nothing more); the replays
// row decides, not the text: a producer may push such a transactionId
// itself, and every group reads its message.
func ownGroupShape(txid string) bool {
	const n = len(ReplayPrefix) + 36
	return len(txid) > n+1 && txid[:len(ReplayPrefix)] == ReplayPrefix && txid[n] == ':'
}

// passLimit is how many messages a pop reads at a time while it passes
// by copies meant for other groups, when its batch is smaller.
const passLimit = 100

// passBudget bounds the copies for other groups one pop transaction
// passes by, over all the consumers it tries; maxPassRounds the
// consumers it tries. Past either, it ends (saving what it passed) and
// the pop runs another transaction, up to maxPassTx of them: the writer
// is not held by a long run of copies.
const (
	passBudget    = 1000
	maxPassRounds = 8
	maxPassTx     = 4
)

// passer reads what a consumer may be handed, passing by at its head the
// copies replayed to other groups. One lives for one pop transaction.
type passer struct {
	tx     messagePassTx
	gid    int64 // the popping group
	budget int   // copies it may still pass
}

// take returns the messages c's group may be handed now from its
// partition, up to batch, under the queue's delayedProcessing delay
// (only messages pushed delay ago or earlier, and none behind one that is
// not yet): first the due copies for other groups at the head are passed
// by (c's cursor moves past them; passed says so, and the caller must
// save c), then the due messages up to batch, stopping before the first
// copy for another group, so that a lease never holds a message its group
// may not settle. A retried message is never passed by: only a message
// delivered to the group can be its RetrySeq, and a copy for another
// group never is. When nothing is taken, wake is when the head becomes
// due under the delay (zero: only a push changes anything), and more is
// set when the pass stopped at its budget with copies still to pass.
//
// Only messages whose transactionId has the shape of an own-group copy
// are looked up in replays (CopyGroups), and only when there are some:
// a pop of ordinary messages runs the one MessagesAfter it always ran.
func (p *passer) take(ctx context.Context, c *Consumer, batch int, delay time.Duration, now time.Time) (msgs []Message, passed, more bool, wake time.Time, err error) {
	limit := batch
	for {
		read, err := p.tx.MessagesAfter(ctx, c.PartitionID, c.Cursor, limit)
		if err != nil {
			return nil, passed, false, time.Time{}, fmt.Errorf("messages: %w", err)
		}
		due := len(read)
		if delay > 0 {
			due = 0
			for due < len(read) && !read[due].CreatedAt.Add(delay).After(now) {
				due++
			}
		}
		ms := read[:due]
		var seqs []int64
		for _, m := range ms {
			if ownGroupShape(m.TransactionID) {
				seqs = append(seqs, m.Seq)
			}
		}
		var groups map[int64]int64
		if len(seqs) > 0 {
			if groups, err = p.tx.CopyGroups(ctx, seqs); err != nil {
				return nil, passed, false, time.Time{}, fmt.Errorf("copy groups: %w", err)
			}
		}
		forOther := func(m Message) bool {
			g, ok := groups[m.Seq]
			return ok && g != p.gid
		}
		i := 0
		for i < len(ms) && i < p.budget && forOther(ms[i]) {
			i++
		}
		if i > 0 {
			c.Cursor, p.budget, passed = ms[i-1].Seq, p.budget-i, true
		}
		rest := ms[i:]
		if len(rest) > 0 && !forOther(rest[0]) {
			n := 0
			for n < len(rest) && n < batch && !forOther(rest[n]) {
				n++
			}
			// Copies passed at the head leave less than the batch read:
			// when the rows ran out before the batch did, more may follow.
			// (Never without a pass: then limit >= batch.)
			if n == batch || n < len(rest) || due < len(read) || len(read) < limit {
				return rest[:n], passed, false, time.Time{}, nil
			}
			limit = max(batch, passLimit)
			continue
		}
		switch {
		case len(rest) > 0: // a copy for another group, past the budget
			return nil, passed, true, time.Time{}, nil
		case due < len(read): // the head is not due yet
			return nil, passed, false, read[due].CreatedAt.Add(delay), nil
		case len(read) < limit: // the end of the partition
			return nil, passed, false, time.Time{}, nil
		}
		limit = max(batch, passLimit)
	}
}
